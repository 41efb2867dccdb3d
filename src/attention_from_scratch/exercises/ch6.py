"""Checks for the exercises of chapter 6, "Attention that learns".

Each auto-graded answer is a function that the checks call on inputs and models they build
themselves (seeded, with sizes the chapter never prints): small untrained models and
hand-made modules whose answers are known, never the learner's trained models. Expected
values are computed here from the formulas or from first principles, outside any learner
code; the package's rotation, and the page's interleaved ``rotate``, are refused while
``rotate_half`` runs, and so are the checks'
own references while any answer runs. The inputs are drawn again from their seeds after the
answer returned, and only then is the expectation computed: an answer cannot read it from the
check's frame, nor change what the check compares it with.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..positions import (
    RotaryEmbedding,
    RotaryMultiHeadAttention,
    SinusoidalPositions,
    sinusoidal_positions,
)
from ..tasks import IGNORE_INDEX
from ..training import TinyCausalModel
from ._core import Exercise
from ._shortcuts import call_refusing


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _answer(
    function: Callable[..., Any],
    what: str,
    *args: Any,
    write: str,
    refused: tuple = (),
    named: tuple[str, ...] = (),
) -> Any:
    """Call a learner's function with the checks' own references (and ``refused``, and the
    functions ``named``) refused, and no torch mode on before or after: a mode or a tensor
    subclass could answer the check's comparisons."""
    assert callable(function), f"`{what}` must be a function"
    return call_refusing(
        function, *args, shortcuts=(*_references(), *refused), write=write, named=named
    )


def _as_tensor(value: object, shape: tuple[int, ...]) -> torch.Tensor:
    assert isinstance(value, torch.Tensor), f"expected a tensor, got {type(value).__name__}"
    # A plain tensor: a subclass could answer the check's own comparisons.
    assert type(value) is torch.Tensor, (
        f"expected a plain torch.Tensor, got the subclass {type(value).__name__}"
    )
    assert tuple(value.shape) == shape, f"expected shape {shape}, got {tuple(value.shape)}"
    return value.detach().cpu()


def _as_float(value: object, name: str) -> float:
    if type(value) is torch.Tensor and value.numel() == 1:
        value = value.item()
    # A plain number: a subclass could redefine the arithmetic of the comparisons.
    assert type(value) in (int, float), f"{name} must return a number, got {type(value).__name__}"
    assert math.isfinite(value), f"{name} returned {value}"
    return float(value)


# ------------------------------------------------------------------------------ rotate half


def rotated_half_by_formula(
    x: torch.Tensor, offset: int, sign: float = 1.0, exponent: float = 2.0
) -> torch.Tensor:
    """``x``, ``(..., t, d_h)``, rotated in the rotate-half convention, pair by pair with
    ``math.cos`` and ``math.sin``: features ``i`` and ``i + d_h / 2`` of the vector at
    position ``offset + row`` turn by ``sign * p * theta_i`` (the reference of the checks),
    ``theta_i = 10000**(-exponent * i / d_h)``; the default ``exponent=2`` is the right one.

    Introduced in chapter 6.
    """
    x = x.detach().double()
    t, d_h = x.shape[-2], x.shape[-1]
    half = d_h // 2
    out = torch.empty_like(x)
    for row in range(t):
        p = offset + row
        for i in range(half):
            angle = sign * p * 10000 ** (-exponent * i / d_h)
            cos, sin = math.cos(angle), math.sin(angle)
            a, b = x[..., row, i], x[..., row, i + half]
            out[..., row, i] = a * cos - b * sin
            out[..., row, i + half] = a * sin + b * cos
    return out


def _interleaved_by_formula(x: torch.Tensor, offset: int) -> torch.Tensor:
    """The interleaved convention: pairs ``(2i, 2i + 1)`` (a common mistake to recognise)."""
    d_h = x.shape[-1]
    order = torch.cat([torch.arange(0, d_h, 2), torch.arange(1, d_h, 2)])
    back = torch.argsort(order)
    return rotated_half_by_formula(x[..., order], offset)[..., back]


# The package's rotations, and its sinusoidal table (the same angles p * theta_i).
ROTARY_SHORTCUTS = (
    RotaryEmbedding,
    RotaryMultiHeadAttention,
    SinusoidalPositions,
    sinusoidal_positions,
)
#: The page's own interleaved ``rotate``, defined in the notebook: rotate-half is that
#: rotation between two permutations of the features, which the page also shows.
PAGE_ROTATIONS = ("__main__.rotate",)


def call_rotate_half(
    rotate_half, draw: Callable[[], torch.Tensor], offset: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the learner's ``rotate_half`` on ``x = draw()`` with the package's rotations and
    the page's ``rotate`` refused; fail if it changed ``x`` in place. Return its output and
    ``x`` drawn again (what the check compares with)."""
    x = draw()
    out = _answer(
        rotate_half,
        "rotate_half",
        x,
        offset,
        write="the rotate-half rotation",
        refused=ROTARY_SHORTCUTS,
        named=PAGE_ROTATIONS,
    )
    fresh = draw()
    assert torch.equal(x, fresh), "rotate_half changed its input in place"
    return _as_tensor(out, tuple(fresh.shape)), fresh


def compare_rotation(out: torch.Tensor, x: torch.Tensor, offset: int, atol: float) -> None:
    """Fail with the name of the mistake when ``out`` is not ``x`` rotated from ``offset``."""
    expected = rotated_half_by_formula(x, offset)
    out = out.double()
    if torch.allclose(out, expected, atol=atol):
        return
    if torch.allclose(out, _interleaved_by_formula(x, offset), atol=atol):
        raise AssertionError(
            "this is the interleaved convention, pairs (2i, 2i + 1); rotate-half pairs "
            "feature i with feature i + d_h / 2"
        )
    if offset and torch.allclose(out, rotated_half_by_formula(x, 0), atol=atol):
        raise AssertionError("positions must start at `offset`, not at 0")
    if torch.allclose(out, rotated_half_by_formula(x, offset, sign=-1.0), atol=atol):
        raise AssertionError("each pair turns the wrong way: (a cos - b sin, a sin + b cos)")
    if torch.allclose(out, rotated_half_by_formula(x, offset, exponent=1.0), atol=atol):
        raise AssertionError(
            "wrong frequencies theta_i: the exponent counts features, two per pair, over d_h"
        )
    raise AssertionError(f"wrong rotation for x of shape {tuple(x.shape)}, offset={offset}")


rotate_half = Exercise("ch6-ex-rotate-half", chapter=6)


@rotate_half.check(
    points=2,
    hint="Rotate-half pairs feature i with feature i + d_h / 2 (the two halves, not "
    "neighbours); each pair turns by its own angle, which grows with the position counted "
    "from `offset`. Build the angles from the exercise's formula: the package's rotary and "
    "sinusoidal code, and the page's `rotate`, are switched off.",
)
def rotates_features_i_and_i_plus_half(rotate_half):
    out, x = call_rotate_half(
        rotate_half, lambda: torch.randn(3, 5, 6, generator=_generator(61)), 11
    )
    assert out.dtype == torch.float32, f"expected float32 as x, got {out.dtype}"
    compare_rotation(out, x, 11, atol=1e-5)


@rotate_half.check(
    points=1,
    hint="Read t and d_h from the last two axes of x, so that any head size and any number "
    "of leading axes work: (t, d_h) as well as (b, h, t, d_h).",
)
def any_head_size(rotate_half):
    for shape, offset in (((7, 10), 0), ((2, 2, 3, 4), 2)):

        def draw(shape=shape):
            return torch.randn(*shape, generator=_generator(62), dtype=torch.float64)

        out, x = call_rotate_half(rotate_half, draw, offset)
        compare_rotation(out, x, offset, atol=1e-9)


# ------------------------------------------------------------------------------ extrapolate


class _TokenPlusPosition(nn.Module):
    """A hand-made model that predicts ``(token + position) % vocab`` at every position (the
    checks' model): like the chapter's models, its answers depend on where a token sits."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.vocab = vocab
        self.anchor = nn.Parameter(torch.zeros(()))  # so that the model has a device

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        position = torch.arange(tokens.shape[-1], device=tokens.device)  # (t,)
        predicted = (tokens + position) % self.vocab  # (b, t)
        return F.one_hot(predicted, self.vocab).float() + self.anchor


def accuracy_case(seed: int, b: int, t: int, vocab: int, start: int):
    """A model, inputs and targets for ``accuracy_from``, and the expected accuracies: the
    right one, one that also counts positions before ``start``, one that also counts the
    ``IGNORE_INDEX`` targets as wrong, and one from the model run on the inputs sliced from
    ``start`` (which moves every token to another position)."""
    g = _generator(seed)
    inputs = torch.randint(0, vocab, (b, t), generator=g)
    right = (inputs + torch.arange(t)) % vocab  # what the model predicts
    wrong = (right + torch.randint(1, vocab, (b, t), generator=g)) % vocab
    correct = torch.rand(b, t, generator=g) < torch.where(torch.arange(t) < start, 0.1, 0.7)
    targets = torch.where(correct, right, wrong)
    ignored = torch.rand(b, t, generator=g) < 0.2
    targets[ignored] = IGNORE_INDEX
    scored = ~ignored
    late = torch.arange(t) >= start
    right_late = int((correct & scored & late).sum())
    expected = right_late / int((scored & late).sum())
    everywhere = int((correct & scored).sum()) / int(scored.sum())
    with_ignored = right_late / (b * int(late.sum()))
    moved = (inputs[:, start:] + torch.arange(t - start)) % vocab  # sliced, then run
    sliced = int(((moved == targets[:, start:]) & scored[:, start:]).sum()) / int(
        scored[:, start:].sum()
    )
    expected_values = (expected, everywhere, with_ignored, sliced)
    return _TokenPlusPosition(vocab), inputs, targets, expected_values


def accuracy_from_answer(accuracy_from, model, inputs, targets, start) -> float:
    value = _answer(
        accuracy_from,
        "accuracy_from",
        model,
        inputs,
        targets,
        start,
        write="the accuracy from `start`",
    )
    return _as_float(value, "accuracy_from")


def check_accuracy_from(accuracy_from, seed: int, b: int, t: int, vocab: int, start: int):
    model, inputs, given, _ = accuracy_case(seed, b, t, vocab, start)
    value = accuracy_from_answer(accuracy_from, model, inputs, given, start)
    # Drawn again now that the answer returned: nothing it could reach is compared with.
    _, _, targets, (expected, everywhere, with_ignored, sliced) = accuracy_case(
        seed, b, t, vocab, start
    )
    assert torch.equal(given, targets), (
        "accuracy_from changed the targets it was given: clone them before marking positions"
    )
    if start and abs(value - everywhere) < 1e-9 and abs(expected - everywhere) > 1e-6:
        raise AssertionError(f"positions before start={start} were counted")
    if abs(value - with_ignored) < 1e-9 and abs(expected - with_ignored) > 1e-6:
        raise AssertionError("targets equal to IGNORE_INDEX were counted as wrong answers")
    if abs(value - sliced) < 1e-9 and abs(expected - sliced) > 1e-6:
        raise AssertionError(
            "the model was run on the inputs sliced from `start`: slicing moves every token "
            "to another position, and the model's answers depend on position; run it on the "
            "whole sequence and choose which positions count"
        )
    assert abs(value - expected) < 1e-9, f"wrong accuracy for t={t}, start={start}: got {value:.4f}"


extrapolate = Exercise(
    "ch6-ex-extrapolate",
    chapter=6,
    manual_points=1,
    rubric="Predicts, before measuring, that the learned table fails beyond position 31 "
    "(its rows 32..63 were never trained: near chance), that the sinusoidal model does "
    "better than chance but far worse than on seen positions (its inputs there are new), "
    "and that the rotary model keeps most of its accuracy (it sees only distances, and "
    "three back looks the same everywhere), with a reason for each.",
)


@extrapolate.check(
    points=2,
    hint="Only positions `start` and later count, and of those only targets that are not "
    "IGNORE_INDEX; the model still reads the whole sequence, and the caller's targets stay "
    "as they were.",
)
def counts_positions_from_start(accuracy_from):
    check_accuracy_from(accuracy_from, seed=63, b=40, t=24, vocab=7, start=9)


# ------------------------------------------------------------------------- ablate induction


def _small_model(seed: int, num_layers: int, num_heads: int, positions: str) -> nn.Module:
    torch.manual_seed(seed)  # checks run inside fork_rng: the notebook's seed is kept
    model = TinyCausalModel(
        11,
        d_model=12,
        context_length=9,
        num_layers=num_layers,
        num_heads=num_heads,
        positions=positions,
    )
    return model.eval()


@torch.no_grad()
def logits_by_hand(model: nn.Module, tokens: torch.Tensor, layer: int, head: int, how: str):
    """The model's logits with one head switched off, computed block by block (the checks'
    reference): ``how="head"`` zeroes the head's ``d_h`` context features before
    ``out_proj``; ``"layer"`` zeroes the layer's whole output and ``"after"`` zeroes the
    head's slice of the output after ``out_proj`` (two mistakes to recognise)."""
    x = model.embed(tokens)  # (b, t, d)
    for i, block in enumerate(model.blocks):
        attention = block.attention
        queries, keys, values = attention.project(x)  # (b, h, t, d_h) each
        context, _ = attention.attend(queries, keys, values)  # (b, h, t, d_h)
        if i == layer and how == "head":
            context[:, head] = 0.0
        b, t, _ = x.shape
        out = attention.out_proj(context.transpose(1, 2).reshape(b, t, -1))  # (b, t, d)
        if i == layer and how == "layer":
            out = torch.zeros_like(out)
        if i == layer and how == "after":
            d_h = attention.head_dim
            out[..., head * d_h : (head + 1) * d_h] = 0.0
        x = x + out
    return model.head(x)  # (b, t, vocab)


def check_head_ablation(logits_without_head, seed, num_layers, num_heads, positions, layer, head):
    model = _small_model(seed, num_layers, num_heads, positions)
    tokens = torch.randint(0, 11, (4, 9), generator=_generator(seed))
    out = _answer(
        logits_without_head,
        "logits_without_head",
        model,
        tokens,
        layer,
        head,
        write="the switched-off head",
    )
    out = _as_tensor(out, (4, 9, 11)).float()
    # Built again now that the answer returned: the reference is nothing it could reach.
    reference = _small_model(seed, num_layers, num_heads, positions)
    tokens = torch.randint(0, 11, (4, 9), generator=_generator(seed))
    expected = logits_by_hand(reference, tokens, layer, head, "head")
    with torch.no_grad():
        before = reference(tokens)
    weights = reference.state_dict()
    changed = [name for name, w in model.state_dict().items() if not torch.equal(w, weights[name])]
    assert not changed, (
        f"the model's weights are changed afterwards ({', '.join(changed[:2])}): switching a "
        "head off must leave every weight as it was"
    )
    with torch.no_grad():
        after = model(tokens)
    assert torch.allclose(after, before), (
        "the model is changed afterwards: remove every hook once the logits are computed"
    )
    if torch.allclose(out, logits_by_hand(reference, tokens, layer, head, "layer"), atol=1e-5):
        raise AssertionError(
            "the whole layer is switched off; switch off one head, before out_proj mixes the heads"
        )
    if torch.allclose(out, logits_by_hand(reference, tokens, layer, head, "after"), atol=1e-5):
        raise AssertionError(
            "features of the layer's output were zeroed after out_proj, which mixes the "
            "heads; a head's own features exist only before it"
        )
    if torch.allclose(out, before, atol=1e-5):
        raise AssertionError("these are the logits of the intact model")
    assert torch.allclose(out, expected, atol=1e-5), (
        f"wrong logits with head {head} of layer {layer} switched off"
    )


ablate_induction = Exercise(
    "ch6-ex-ablate-induction",
    chapter=6,
    manual_points=1,
    rubric="Predicts, before measuring, that the two-layer model without its induction head "
    "does worse than the one-layer model (near chance): layer 0 was trained to collect the "
    "previous token for layer 1, not to predict; a layer trained as part of a circuit does "
    "not do the circuit's job alone.",
)


@ablate_induction.check(
    points=2,
    hint="A head's output exists on its own only before out_proj mixes the heads: switch it "
    "off there, for this one call, and leave the model as you found it.",
)
def switches_off_one_head(logits_without_head):
    check_head_ablation(logits_without_head, 64, 2, 3, "learned", layer=1, head=2)


# ------------------------------------------------------------------------------ causal bag


@torch.no_grad()
def changes_by_hand(model: nn.Module, tokens: torch.Tensor, i: int, j: int) -> torch.Tensor:
    """Where the model's predicted token changes when tokens i and j are swapped, (t,)."""
    order = list(range(tokens.shape[0]))
    order[i], order[j] = order[j], order[i]
    pair = torch.stack([tokens, tokens[order]])  # (2, t)
    predictions = model(pair).argmax(dim=-1)  # (2, t)
    return predictions[0] != predictions[1]


def _sharp_model(seed: int, positions: str, sharpness: float) -> nn.Module:
    """A one-layer model whose predictions flip more often: sharper logits, and attention
    ``sharpness`` times sharper (so that positions between and after the swapped tokens
    change too)."""
    model = _small_model(seed, 1, 2, positions)
    with torch.no_grad():
        model.head.weight *= 20
        for block in model.blocks:
            attention = block.attention
            attention.W_query.weight *= sharpness
            attention.W_key.weight *= sharpness
    return model


def check_prediction_changes(
    prediction_changes,
    seed: int,
    positions: str,
    i: int,
    j: int,
    sharpness: float = 3.0,
    t: int = 9,
):
    model = _sharp_model(seed, positions, sharpness)
    given = torch.randint(0, 11, (t,), generator=_generator(seed))
    out = _answer(
        prediction_changes,
        "prediction_changes",
        model,
        given,
        i,
        j,
        write="the changed predictions",
    )
    # Drawn again now that the answer returned: nothing it could reach is compared with.
    tokens = torch.randint(0, 11, (t,), generator=_generator(seed))
    expected = changes_by_hand(_sharp_model(seed, positions, sharpness), tokens, i, j)
    assert torch.equal(given, tokens), "prediction_changes changed the tokens it was given"
    out = _as_tensor(out, (t,))
    assert out.dtype == torch.bool, f"expected a bool tensor, got {out.dtype}"
    if torch.equal(out, ~expected):
        raise AssertionError("True must mean that the prediction changes")
    assert torch.equal(out, expected), (
        f"wrong positions for tokens {i} and {j} swapped (a {positions!r} model): got "
        f"{out.nonzero().flatten().tolist()}"
    )


causal_bag = Exercise(
    "ch6-ex-causal-bag",
    chapter=6,
    manual_points=1,
    rubric="Predicts, before running, that without positions only the swapped positions "
    "can change (later queries see the same bag with the same own token), and that the "
    "model with learned positions changes its answers three places after the swapped "
    "tokens, where the copied token moved.",
)


@causal_bag.check(
    points=2,
    hint="A prediction is the most likely next token, not the logits; compare the "
    "predictions for the sequence and for a copy with the two tokens swapped, at every "
    "position.",
)
def finds_the_changed_predictions(prediction_changes):
    check_prediction_changes(prediction_changes, 62, "learned", i=2, j=6)
    check_prediction_changes(prediction_changes, 62, "none", i=1, j=5)


# ------------------------------------------------------------------------ why order-blind


def order_blind_by_position(inputs: torch.Tensor, vocab_size: int, k: int) -> torch.Tensor:
    """The best order-blind guess's accuracy at each position ``i = k..t-1``, averaged over
    the sequences: the count of the most frequent of tokens ``0..i-1``, divided by ``i``
    (the reference of the checks).

    Introduced in chapter 6.
    """
    counts = F.one_hot(inputs, vocab_size).cumsum(dim=1)  # (b, t, vocab)
    best = counts[:, k - 1 : -1].max(dim=-1).values.double()  # (b, t - k)
    seen = torch.arange(k, inputs.shape[1], dtype=torch.float64)  # (t - k,): i tokens
    return (best / seen).mean(dim=0)  # (t - k,)


def check_bound_by_position(bound_by_position, seed: int, b: int, t: int, vocab: int, k: int):
    def draw() -> torch.Tensor:
        g = _generator(seed)
        weights = torch.rand(vocab, generator=g) + 0.2  # tokens not equally frequent
        return torch.multinomial(weights, b * t, replacement=True, generator=g).view(b, t)

    out = _answer(
        bound_by_position, "bound_by_position", draw(), vocab, k, write="the order-blind bound"
    )
    out = _as_tensor(out, (t - k,)).double()
    inputs = draw()  # drawn again now that the answer returned
    expected = order_blind_by_position(inputs, vocab, k)
    counts = F.one_hot(inputs, vocab).cumsum(dim=1)  # (b, t, vocab)
    with_own = (counts[:, k:].max(dim=-1).values / torch.arange(k + 1, t + 1)).mean(dim=0)
    if torch.allclose(out, with_own.double(), atol=1e-6):
        raise AssertionError(
            "the guess at position i may use tokens 0..i-1 only (i tokens), not its own"
        )
    assert torch.allclose(out, expected, atol=1e-6), f"wrong bounds for t={t}, vocab={vocab}, k={k}"


why_order_blind = Exercise(
    "ch6-ex-why-order-blind",
    chapter=6,
    manual_points=1,
    rubric="Predicts that the bound falls with the length, towards 1/16: the guess is the "
    "most frequent of the i earlier tokens, right with probability count / i, and in a long "
    "sequence all 16 tokens occur about equally often, so the most frequent one's share of "
    "the bag approaches 1/16.",
)


@why_order_blind.check(
    points=2,
    hint="At position i the order-blind guess knows only the bag of the tokens before it, "
    "not their order: which token should it guess, and how often is that guess right? One "
    "number per scored position i = k, ..., t - 1, averaged over the sequences.",
)
def bound_at_every_position(bound_by_position):
    check_bound_by_position(bound_by_position, seed=67, b=50, t=30, vocab=5, k=2)


def _references() -> tuple[Callable[..., Any] | type, ...]:
    """What no answer may call: the checks' own references (the functions themselves, not
    the ``torch.no_grad`` wrapper that every decorated function shares, ``evaluate``'s too)."""
    references = (
        rotated_half_by_formula,
        _interleaved_by_formula,
        accuracy_case,
        logits_by_hand,
        changes_by_hand,
        order_blind_by_position,
    )
    return tuple(inspect.unwrap(reference) for reference in references)
