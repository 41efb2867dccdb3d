"""Checks for the exercises of chapter 3, "Causal attention and dropout".

Each auto-graded answer is a function that the checks call on inputs they draw themselves
(seeded, with sizes the chapter never prints); the expected values are computed here from
first principles, outside any learner code, and the calls the exercise asks the learner to
write are refused while the answer runs.
"""

from __future__ import annotations

import re
import types

import torch
import torch.nn.functional as F
from torch import nn

from ..causal import CausalAttention, attention, causal_mask
from ._core import Exercise
from ._shortcuts import ShortcutTaken, refusing, torch_attention


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _window_reference(t: int, window: int) -> torch.Tensor:
    """True where query i may not see key j: the future, and keys more than `window` back."""
    i = torch.arange(t).unsqueeze(1)  # (t, 1)
    j = torch.arange(t).unsqueeze(0)  # (1, t)
    return (j > i) | (j < i - window)  # (t, t)


def _masked_weights(scores: torch.Tensor, hide: torch.Tensor) -> torch.Tensor:
    """Softmax over the visible keys only; a row with no visible key is all zeros."""
    weights = torch.softmax(scores.masked_fill(hide, float("-inf")), dim=-1)
    return weights.nan_to_num(0.0)  # nan only in the rows with every key hidden


def _as_tensor(value: object, shape: tuple[int, ...]) -> torch.Tensor:
    # A plain tensor: a subclass could answer the check's own comparisons.
    assert type(value) is torch.Tensor, f"expected a torch.Tensor, got {type(value).__name__}"
    assert tuple(value.shape) == shape, f"expected shape {shape}, got {tuple(value.shape)}"
    return value.detach().cpu()


def _own_helpers() -> tuple[list[types.FunctionType], list[str]]:
    """This module's functions (its references among them), refused while an answer runs:
    by code object (the copy the grader loads) and by full name (the package's copy, which
    a notebook can import)."""
    functions = [
        value
        for value in globals().values()
        if isinstance(value, types.FunctionType) and value.__module__ == __name__
    ]
    return functions, [f"{__name__}.{f.__qualname__}" for f in functions]


def _refusing(*shortcuts, write: str):
    """``refusing`` the exercise's shortcuts and this module's own helpers."""
    functions, names = _own_helpers()
    return refusing(*shortcuts, *functions, write=write, named=names)


# ---------------------------------------------------------------------------- sliding window

sliding_window = Exercise("ch3-ex-sliding-window", chapter=3)

WINDOW_CASES = ((7, 2), (9, 3), (5, 1))

# The package's attention and torch's compute masked weights: with the identity as values
# (or keys) either would answer for the learner. torch's comes in by every entry point,
# ``torch.ops.aten.scaled_dot_product_attention`` and its kernels included.
ATTENTION_SHORTCUTS = (attention, *torch_attention())
WINDOW_SHORTCUTS = (causal_mask, CausalAttention, *ATTENTION_SHORTCUTS)


def _large_window_case(seed: int) -> tuple[int, int]:
    """A size no table of masks made in advance could hold: t in 100..399."""
    t, window = torch.randint(100, 400, (2,), generator=_generator(seed)).tolist()
    return t, window % (t - 3) + 2


def _call_window_mask(window_mask, t: int, window: int) -> torch.Tensor:
    assert callable(window_mask), "`window_mask` must be a function of (t, window)"
    with _refusing(*WINDOW_SHORTCUTS, write="the window mask"):
        mask = window_mask(t, window)
    return _as_tensor(mask, (t, t))


@sliding_window.check(
    points=2,
    hint="`window_mask(t, window)` must return a (t, t) bool tensor, True where query i "
    "may NOT see key j. Row i may see keys i - window to i: compare a column of query "
    "indices with a row of key indices, once for the future and once for the far past.",
)
def window_mask_any_size(window_mask):
    for t, window in (*WINDOW_CASES, _large_window_case(32)):
        mask = _call_window_mask(window_mask, t, window)
        expected = _window_reference(t, window)
        assert mask.dtype == torch.bool, f"expected a bool mask, got {mask.dtype}"
        if torch.equal(mask, ~expected):
            raise AssertionError("True must mean hidden: your mask is inverted")
        if torch.equal(mask, causal_mask(t)):
            raise AssertionError(
                f"t={t}, window={window}: this is the causal mask; the far past is not hidden"
            )
        assert torch.equal(mask, expected), f"wrong mask for t={t}, window={window}"


@sliding_window.check(
    points=2,
    hint="`window_attention(scores, window)` must return softmax weights of the same "
    "shape as `scores` (already scaled, any leading batch dimensions), each row summing "
    "to one over the keys its window lets it see and zero elsewhere. Hide before the "
    "softmax, not after it.",
)
def window_attention_any_size(window_attention):
    assert callable(window_attention), "`window_attention` must be a function"
    generator = _generator(31)
    for shape, window in (((2, 7, 7), 2), ((3, 5, 5), 1), ((1, 120, 120), 17)):
        scores = torch.randn(*shape, generator=generator) * 2
        t = shape[-1]
        given = scores.clone()
        with _refusing(*WINDOW_SHORTCUTS, write="the window mask"):
            weights = window_attention(given, window)
        weights = _as_tensor(weights, shape)
        expected = torch.softmax(
            scores.masked_fill(_window_reference(t, window), float("-inf")), dim=-1
        )
        assert torch.equal(given, scores), "`window_attention` changed its input in place"
        zeroed = torch.softmax(scores, dim=-1) * ~_window_reference(t, window)
        if torch.allclose(weights, zeroed, atol=1e-5):
            raise AssertionError("the hidden keys were zeroed after the softmax: rows sum < 1")
        assert torch.allclose(weights, expected, atol=1e-5), f"wrong weights, window={window}"


# ---------------------------------------------------------------------------- dropout order

dropout_order = Exercise(
    "ch3-ex-dropout-order",
    chapter=3,
    manual_points=1,
    rubric="Says dropout after the renormalisation keeps each weight's expected value; "
    "before it, the zeros stay but the scaling by 1 / (1 - p) cancels in the division, so "
    "the result is a random re-weighting of the surviving keys, and a row that loses every "
    "visible weight becomes 0 / 0 = nan.",
)


def _order_inputs(seed: int, b: int, t: int, p: float) -> tuple[torch.Tensor, torch.Tensor]:
    generator = _generator(seed)
    weights = torch.softmax(torch.randn(b, t, t, generator=generator), dim=-1)
    masked = weights * torch.tril(torch.ones(t, t))  # (b, t, t), way 1 before renormalising
    keep = (torch.rand(b, t, t, generator=generator) >= p).float() / (1 - p)
    keep[:, 1, :2] = 1 / (1 - p)  # row 1 keeps both visible weights in every sequence
    keep[:, 0, 0] = 1 / (1 - p)  # and row 0 its only one,
    keep[0, 0, 0] = 0.0  # except in the first sequence: 0 / 0 when dropping first
    return masked, keep


def _renormalise(weights: torch.Tensor) -> torch.Tensor:
    return weights / weights.sum(dim=-1, keepdim=True)


def _call_order(answer, masked: torch.Tensor, keep: torch.Tensor):
    with _refusing(write="the renormalising and the dropout"):
        return answer(masked.clone(), keep.clone())


@dropout_order.check(
    points=1,
    hint="`renormalise_then_drop(masked, keep)` gets way 1's zeroed weights (b, t, t) and "
    "dropout's multipliers `keep` (0 where dropped, 1 / (1 - p) where kept): divide each "
    "row by its own sum (mind the shape of that sum), then apply dropout.",
)
def renormalise_first(renormalise_then_drop):
    assert callable(renormalise_then_drop), "`renormalise_then_drop` must be a function"
    masked, keep = _order_inputs(5, b=3, t=7, p=0.25)
    out = _as_tensor(_call_order(renormalise_then_drop, masked, keep), (3, 7, 7))
    expected = _renormalise(masked) * keep
    if torch.allclose(out, _renormalise(masked * keep), atol=1e-5, equal_nan=True):
        raise AssertionError("this is the other order: dropout came before the renormalising")
    assert torch.allclose(out, expected, atol=1e-5), "wrong values"


@dropout_order.check(
    points=1,
    hint="`drop_then_renormalise(masked, keep)` applies dropout's multipliers first, then "
    "divides each row by its own sum (of the weights left after dropout).",
)
def drop_first(drop_then_renormalise):
    assert callable(drop_then_renormalise), "`drop_then_renormalise` must be a function"
    masked, keep = _order_inputs(6, b=2, t=8, p=0.4)
    out = _as_tensor(_call_order(drop_then_renormalise, masked, keep), (2, 8, 8))
    expected = _renormalise(masked * keep)
    if torch.allclose(out, _renormalise(masked) * keep, atol=1e-5, equal_nan=True):
        raise AssertionError("this is the other order: the renormalising came first")
    _assert_dropped_first(out, expected)


def _assert_dropped_first(out: torch.Tensor, expected: torch.Tensor, atol: float = 1e-5) -> None:
    """``out`` is ``expected``; a row that lost all its weight (0 / 0) may be nan or 0."""
    empty = expected.isnan()  # the rows whose every visible weight was dropped
    assert torch.allclose(out[~empty], expected[~empty], atol=atol), "wrong values"
    assert (out[empty].isnan() | (out[empty] == 0)).all(), (
        "a row whose every visible weight was dropped is 0 / 0: it must come out nan "
        "(or 0, if you guard the division), nothing else"
    )


# ---------------------------------------------------------------------------- all masked

all_masked = Exercise(
    "ch3-ex-all-masked",
    chapter=3,
    manual_points=1,
    rubric="Explains that a row of only -inf gives 0 / 0 (the stable softmax computes "
    "-inf - (-inf) = nan), that triu(..., diagonal=0) hides the first token's only key, and "
    "that causal_mask keeps the diagonal visible, so every row keeps a key.",
)


# A softmax that leaves out hidden keys (torch.masked's, the sparse one, torch's internal
# masked and "safe" ones) is what the exercise asks for; torch.softmax is allowed.
_ATEN_MASKED_SOFTMAXES = tuple(
    getattr(torch.ops.aten, name)
    for name in ("_masked_softmax", "_safe_softmax", "_sparse_softmax", "_sparse_log_softmax")
    if hasattr(torch.ops.aten, name)
)
MASKED_SOFTMAX_SHORTCUTS = (
    torch.masked.softmax,
    torch.masked.log_softmax,
    torch.sparse.softmax,
    torch.sparse.log_softmax,
    *(
        getattr(torch, name)
        for name in ("_masked_softmax", "_safe_softmax", "_sparse_softmax")
        if hasattr(torch, name)
    ),
    *_ATEN_MASKED_SOFTMAXES,
    *(getattr(op, name) for op in _ATEN_MASKED_SOFTMAXES for name in op.overloads()),
)


def _masked_softmax_inputs(seed: int, shape: tuple[int, ...], scale: float):
    generator = _generator(seed)
    scores = torch.randn(*shape, generator=generator) * scale
    hide = torch.rand(*shape, generator=generator) < 0.5
    hide[..., 0, :] = True  # a row with every key hidden
    hide[..., -1, :] = False  # and one with none hidden
    hide[..., 1, :] = True
    hide[..., 1, 2] = False  # one with a single visible key
    return scores, hide


def _check_masked_softmax(masked_softmax, shape, scale, seed) -> None:
    assert callable(masked_softmax), "`masked_softmax` must be a function of (scores, hide)"
    scores, hide = _masked_softmax_inputs(seed, shape, scale)
    with _refusing(*MASKED_SOFTMAX_SHORTCUTS, *ATTENTION_SHORTCUTS, write="the masked softmax"):
        out = masked_softmax(scores.clone(), hide.clone())
    out = _as_tensor(out, shape)
    expected = _masked_weights(scores, hide)
    assert not torch.isnan(out).any(), "a row with every key hidden must give zeros, not nan"
    if torch.allclose(out, torch.softmax(scores.masked_fill(hide, 0.0), dim=-1), atol=1e-5):
        raise AssertionError("the hidden scores were filled with 0, not -inf: e^0 = 1")
    assert torch.equal(out[..., 0, :], torch.zeros_like(out[..., 0, :])), (
        "a row with every key hidden must be all zeros"
    )
    assert torch.allclose(out, expected, atol=1e-5), "wrong weights in the rows with a key left"


@all_masked.check(
    points=2,
    hint="`masked_softmax(scores, hide)` must give the softmax over the keys that `hide` "
    "leaves visible (hide is True where a key is hidden), zeros where hidden, and a row of "
    "zeros, not nan, where every key of a row is hidden. Find those rows before dividing.",
)
def fully_masked_row_is_zero(masked_softmax):
    _check_masked_softmax(masked_softmax, (2, 5, 6), scale=1.0, seed=11)


# ---------------------------------------------------------------------------- dropout rate

dropout_rate = Exercise(
    "ch3-ex-dropout-rate",
    chapter=3,
    manual_points=1,
    rubric="Says the survivors are scaled by 1 / (1 - p) so that the expected value of every "
    "entry stays what it was; with p = 0.3 the survivors of a tensor of ones are 1.4286.",
)

_ATEN_DROPOUTS = (
    *(
        getattr(torch.ops.aten, name)
        for prefix in ("", "feature_", "alpha_", "feature_alpha_")
        for name in (f"{prefix}dropout", f"{prefix}dropout_")
    ),
    torch.ops.aten.native_dropout,
)

DROPOUT_SHORTCUTS = (
    nn.Dropout,
    F.dropout,
    F.dropout1d,
    F.dropout2d,
    F.dropout3d,
    F.alpha_dropout,
    F.feature_alpha_dropout,
    torch.dropout,
    torch.dropout_,
    torch.native_dropout,
    torch.feature_dropout,
    torch.feature_dropout_,
    torch.alpha_dropout,
    torch.alpha_dropout_,
    torch.feature_alpha_dropout,
    torch.feature_alpha_dropout_,
    # torch.ops.aten's dropout operators, each overload too (aten.dropout.default, ...)
    *_ATEN_DROPOUTS,
    *(getattr(op, name) for op in _ATEN_DROPOUTS for name in op.overloads()),
)


def _call_dropout(my_dropout, x: torch.Tensor, p: float, seed: int) -> torch.Tensor:
    assert callable(my_dropout), "`my_dropout` must be a function of (x, p, generator)"
    given, generator = x.clone(), _generator(seed)
    try:
        with _refusing(*DROPOUT_SHORTCUTS, write="dropout"):
            out = my_dropout(given, p, generator)
    except ShortcutTaken as error:  # name an aten operator as a learner would write it
        message = re.sub(r"torch\._ops\.aten\.\S*?(\w+)$", r"torch.ops.aten.\1", str(error))
        raise ShortcutTaken(message) from None
    out = _as_tensor(out, tuple(x.shape))
    assert torch.equal(given, x), "`my_dropout` changed its input in place"
    return out


@dropout_rate.check(
    points=2,
    hint="`my_dropout(x, p, generator)` must zero each entry with probability p, drawing "
    "its random numbers from `generator`, and scale every survivor so that the expected "
    "value of each entry is unchanged.",
)
def drops_and_scales(my_dropout):
    x = torch.rand(400, 250, generator=_generator(2)) + 0.5  # (400, 250), no zeros
    for p, seed in ((0.3, 1), (0.7, 2), (0.1, 3)):
        out = _call_dropout(my_dropout, x, p, seed)
        dropped = out == 0
        share = dropped.float().mean().item()
        if abs(share - (1 - p)) < 0.02 and abs(p - 0.5) > 0.1:
            raise AssertionError(f"p={p}: you dropped with probability 1 - p ({share:.3f})")
        assert abs(share - p) < 0.02, f"p={p}: {share:.3f} of the entries were dropped"
        kept = ~dropped
        if torch.allclose(out[kept], x[kept]):
            raise AssertionError(f"p={p}: the survivors are not scaled")
        assert torch.allclose(out[kept], x[kept] / (1 - p), rtol=1e-5), (
            f"p={p}: the survivors are scaled by the wrong factor"
        )
    first = _call_dropout(my_dropout, x, 0.5, seed=7)
    again = _call_dropout(my_dropout, x, 0.5, seed=7)
    other = _call_dropout(my_dropout, x, 0.5, seed=8)
    assert torch.equal(first, again) and not torch.equal(first, other), (
        "draw the random numbers from `generator`: the same generator seed must give the "
        "same pattern, another seed another one"
    )


# ---------------------------------------------------------------------------- causality test

causality = Exercise(
    "ch3-ex-causality-test",
    chapter=3,
    manual_points=1,
    rubric="Explains that no earlier token may attend to a later one, so editing the last "
    "token changes only its own row, and editing the first changes every row, since every "
    "token sees the first one (and the first token's own query, key and value change).",
)


class _CumulativeMean(nn.Module):
    """Causal without any attention: row i is the mean of tokens 0..i (or i..t-1)."""

    def __init__(self, reverse: bool = False) -> None:
        super().__init__()
        self.reverse = reverse

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.reverse:
            x = x.flip(1)
        counts = torch.arange(1, x.shape[1] + 1, dtype=x.dtype).view(1, -1, 1)
        out = x.cumsum(dim=1) / counts  # (b, t, d_in)
        return out.flip(1) if self.reverse else out


class _Lookahead(nn.Module):
    """A causal attention layer whose input mixes in the next token: its mask buffer is the
    causal one, yet row i depends on token i + 1."""

    def __init__(self, d_in: int, t: int, seed: int, leak: float) -> None:
        super().__init__()
        self.inner = _attention_with_mask(d_in, t, causal_mask(t), seed)
        self.register_buffer("mask", causal_mask(t))  # what the layer claims to hide
        self.leak = leak

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ahead = torch.zeros_like(x)
        ahead[:, :-1] = x[:, 1:]  # token i + 1 at row i
        return self.inner(x + self.leak * ahead)


def _attention_with_mask(d_in: int, t: int, hide: torch.Tensor, seed: int) -> nn.Module:
    """A CausalAttention whose mask buffer is replaced: `hide` True where forbidden."""
    torch.manual_seed(seed)
    module = CausalAttention(d_in, 4, context_length=t, dropout=0.0).eval()
    module.mask = hide.clone()
    return module


def _allowed_patterns(t: int) -> list[tuple[str, torch.Tensor]]:
    """(name, allowed) of each test module, in order: allowed[i, j] is True where output row
    i may depend on token j."""
    causal = ~causal_mask(t)
    one_ahead = ~torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=2)
    peek, late_peek = causal.clone(), causal.clone()
    peek[0, 1] = True  # one leak, invisible when only the last token is edited
    late_peek[t - 2, t - 1] = True  # one leak, seen only when the last token is edited
    return [
        ("a causal attention layer", causal),
        ("an attention layer with no mask", torch.ones(t, t, dtype=torch.bool)),
        ("a layer that sees one token ahead", one_ahead),
        ("a layer whose first token sees the second", peek),
        ("a layer whose second-to-last token sees the last", late_peek),
        ("a layer with a causal mask buffer whose input mixes in the next token", one_ahead),
        ("a causal running mean", causal),
        ("a running mean from the end", causal.T.clone()),
    ]


def _test_modules(t: int, d_in: int, leak: float = 1.0) -> list[nn.Module]:
    """The modules the checks test, in the order of `_allowed_patterns`; the patterns are
    looked up only after an answer has run."""
    patterns = [allowed for _, allowed in _allowed_patterns(t)]
    leaky = _attention_with_mask(d_in, t, ~patterns[2], seed=3)
    with torch.no_grad():
        leaky.W_value.weight.mul_(leak)
    return [
        _attention_with_mask(d_in, t, ~patterns[0], seed=1),
        _attention_with_mask(d_in, t, ~patterns[1], seed=2),
        leaky,
        _attention_with_mask(d_in, t, ~patterns[3], seed=4),
        _attention_with_mask(d_in, t, ~patterns[4], seed=5),
        _Lookahead(d_in, t, seed=6, leak=leak),
        _CumulativeMean(),
        _CumulativeMean(reverse=True),
    ]


def _expected_rows(allowed: torch.Tensor, position: int) -> list[int]:
    rows = allowed[:, position].clone()
    rows[position] = True
    return rows.nonzero().flatten().tolist()


def _check_changed_rows(changed_rows, b: int, t: int, d_in: int, seed: int, leak: float):
    assert callable(changed_rows), "`changed_rows` must be a function of (module, x, position)"
    x = torch.randn(b, t, d_in, generator=_generator(seed))
    for index, module in enumerate(_test_modules(t, d_in, leak)):
        for position in (0, t // 2, t - 1):
            given = x.clone()
            with _refusing(write="the test"):
                rows = changed_rows(module, given, position)
            assert torch.equal(given, x), "`changed_rows` must edit a copy of x, not x itself"
            assert isinstance(rows, (list, tuple)), f"expected a list, got {type(rows).__name__}"
            rows = [int(r) for r in rows]
            name, allowed = _allowed_patterns(t)[index]
            expected = _expected_rows(allowed, position)
            assert rows == expected, (
                f"{name}, t={t}, editing token {position}: expected the rows that change in "
                f"order, got {rows}"
            )


def _check_is_causal(is_causal, b: int, t: int, d_in: int, seed: int, leak: float):
    assert callable(is_causal), "`is_causal` must be a function of (module, x)"
    x = torch.randn(b, t, d_in, generator=_generator(seed))
    for index, module in enumerate(_test_modules(t, d_in, leak)):
        with _refusing(write="the test"):
            verdict = is_causal(module, x.clone())
        assert isinstance(verdict, bool), f"expected a bool, got {type(verdict).__name__}"
        name, allowed = _allowed_patterns(t)[index]
        truth = not bool(torch.triu(allowed, diagonal=1).any())
        assert verdict == truth, f"{name}: expected {truth}, got {verdict}"


@causality.check(
    points=1,
    hint="`changed_rows(module, x, position)` must edit token `position` of a copy of the "
    "batch x, (b, t, d_in), run the module on both, and return the sorted list of output "
    "rows (token positions) that differ in any sequence.",
)
def rows_that_change(changed_rows):
    _check_changed_rows(changed_rows, b=2, t=7, d_in=5, seed=21, leak=1.0)


@causality.check(
    points=1,
    hint="`is_causal(module, x)` must return True exactly when no output row depends on a "
    "later token: test every position, not just the first or the last one.",
)
def catches_a_leak(is_causal):
    _check_is_causal(is_causal, b=2, t=6, d_in=4, seed=22, leak=1.0)
