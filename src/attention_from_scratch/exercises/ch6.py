"""Self-checks of the exercises of chapter 6, "Attention that learns".

Each check tries the learner's answer on a small example (weights drawn from a fixed seed, the
page's models and held-out sequences, short sequences of token ids) and compares it with
numbers written out here or with a property every right answer has: converted weights give
the scores of the layer they came from, a model without positions changes its prediction
only where what a query sees changes, a model without positions cannot tell where the
sequences sit, a window of one token is always right. Grading is not done here: see
:mod:`._core`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import cast

import torch

from ..multihead import MultiHeadAttention
from ..positions import RotaryEmbedding
from ..tasks import IGNORE_INDEX
from ..training import TinyCausalModel, evaluate
from ._core import Exercise, answer_tensor


def _device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def _page_model(k_models: object, name: str) -> TinyCausalModel:
    """One of the page's trained models, ``k_models[name]``."""
    assert isinstance(k_models, dict) and name in k_models, "run the page's cells first"
    model: TinyCausalModel = k_models[name]  # the page fills k_models with its models
    return model


rotate_half = Exercise("ch6-ex-rotate-half", chapter=6)


def _weights(
    d_out: int, d_in: int, *, bias: bool, dtype: torch.dtype = torch.float32
) -> list[torch.Tensor]:
    """``[w_query, w_key]`` (and their biases), the same on every run."""
    generator = torch.Generator().manual_seed(6)
    weights = [torch.randn(d_out, d_in, generator=generator, dtype=dtype) for _ in range(2)]
    biases = [torch.randn(d_out, generator=generator, dtype=dtype) for _ in range(2 if bias else 0)]
    return weights + biases


def _scores(
    weights: list[torch.Tensor],
    num_heads: int,
    r: int,
    x: torch.Tensor,
    offset: int,
    *,
    interleaved: bool,
) -> torch.Tensor:
    """Every query with every key, ``(b, h, t, t)``, for query and key projections
    ``weights`` (and biases), each head's first ``r`` features turned in one convention."""
    rotary = RotaryEmbedding(r, interleaved=interleaved)
    b, t, _ = x.shape
    turned = []
    for role in range(2):
        y = x @ weights[role].T  # (b, t, d_out)
        if len(weights) == 4:
            y = y + weights[2 + role]
        y = y.view(b, t, num_heads, -1).transpose(1, 2)  # (b, h, t, d_h)
        turned.append(torch.cat([rotary(y[..., :r], offset), y[..., r:]], dim=-1))
    queries, keys = turned
    return queries @ keys.mT  # (b, h, t, t)


def _converted(
    to_rotate_half: Callable[..., object], weights: list[torch.Tensor], num_heads: int, r: int
) -> list[torch.Tensor]:
    converted = []
    for w in weights:
        got = to_rotate_half(w.clone(), num_heads, r)
        assert isinstance(got, torch.Tensor), f"expected a tensor, got {type(got).__name__}"
        converted.append(answer_tensor(got, tuple(w.shape)))
    return converted


@rotate_half.check(
    hint="A query's features are the rows of W_query, head after head, d_h rows each. Which "
    "features does each convention turn together, and by which angle? Move rows so that the "
    "rotate-half layer turns together what the interleaved layer did."
)
def every_feature_of_two_heads(to_rotate_half: Callable[..., object]) -> None:
    """r = d_h = 8: two heads' weights and biases give the interleaved layer's scores"""
    weights = _weights(16, 6, bias=True)
    x = torch.linspace(-1, 1, 30).reshape(1, 5, 6)  # (b, t, d_in)
    got = _scores(_converted(to_rotate_half, weights, 2, 8), 2, 8, x, 0, interleaved=False)
    expected = _scores(weights, 2, 8, x, 0, interleaved=True)
    assert torch.allclose(got, expected, atol=1e-4), (
        f"the scores differ by up to {(got - expected).abs().max():.3g}"
    )


@rotate_half.check(
    hint="Only the first r features of each head turn, as a head of size r would: the others "
    "carry no position, and the two layers treat them alike."
)
def a_quarter_of_each_head_from_position_100(to_rotate_half: Callable[..., object]) -> None:
    """r = 8 of d_h = 32 in two heads, at positions 100 to 104"""
    weights = _weights(64, 6, bias=False)
    x = torch.linspace(-1, 1, 30).reshape(1, 5, 6)
    got = _scores(_converted(to_rotate_half, weights, 2, 8), 2, 8, x, 100, interleaved=False)
    expected = _scores(weights, 2, 8, x, 100, interleaved=True)
    assert torch.allclose(got, expected, atol=1e-3), (
        f"the scores differ by up to {(got - expected).abs().max():.3g}"
    )


@rotate_half.check(
    hint="Return a new tensor of the dtype of `w`, and leave `w` as it is: index or copy, "
    "never write into it."
)
def a_float64_head_left_as_it_was(to_rotate_half: Callable[..., object]) -> None:
    """one float64 head: w and its bias unchanged, the converted ones float64"""
    weights = _weights(6, 4, bias=True, dtype=torch.float64)
    for w in weights:
        sent = w.clone()
        got = to_rotate_half(w, 1, 6)
        assert isinstance(got, torch.Tensor), f"expected a tensor, got {type(got).__name__}"
        assert got.dtype == torch.float64, f"expected float64 like w, got {got.dtype}"
        assert torch.equal(w, sent), "the call changed `w`"


extrapolate = Exercise("ch6-ex-extrapolate", chapter=6)


@extrapolate.check(
    hint="Average the right answers over the sequences, one position (column) at a time, "
    "counting only targets that are not IGNORE_INDEX; a position with none scored gets NaN."
)
def the_held_out_set_position_by_position(
    accuracy_by_position: Callable[..., object],
    k_models: object,
    x_test: torch.Tensor,
    y_test: torch.Tensor,
) -> None:
    """the model without positions on the held-out set: NaN at 0 to 2, evaluate's mean"""
    model = _page_model(k_models, "none")
    got = answer_tensor(accuracy_by_position(model, x_test, y_test, 0), (x_test.shape[1],))
    got = got.double()
    assert got[:3].isnan().all(), f"positions 0 to 2 have no target: got {got[:3].tolist()}"
    assert not got[3:].isnan().any(), "every position from 3 on has targets"
    # Every position from 3 on has as many targets: their mean is the overall accuracy.
    overall = evaluate(model, x_test, y_test)
    assert math.isclose(float(got[3:].mean()), overall, abs_tol=1e-6), (
        f"the mean of positions 3 to 31 is {float(got[3:].mean()):.4f}, evaluate gives "
        f"{overall:.4f}"
    )


@extrapolate.check(
    hint="Compare the most likely token (argmax of the logits) with each target; a target "
    "equal to IGNORE_INDEX is neither right nor wrong."
)
def right_at_even_positions_wrong_at_odd_ones(
    accuracy_by_position: Callable[..., object], k_models: object, x_test: torch.Tensor
) -> None:
    """targets that are the model's own predictions at even positions: 1, 0, 1, 0, ..."""
    model, inputs = _page_model(k_models, "learned"), x_test[:20]
    with torch.no_grad():
        predicted = model(inputs.to(_device(model))).argmax(dim=-1).cpu()  # (20, t)
    targets = (predicted + 1) % model.vocab_size  # wrong everywhere
    targets[:, 0::2] = predicted[:, 0::2]  # right at even positions
    targets[:, 0] = IGNORE_INDEX
    got = answer_tensor(accuracy_by_position(model, inputs, targets, 0), (inputs.shape[1],))
    expected = torch.tensor([1.0, 0.0]).repeat(inputs.shape[1] // 2)
    expected[0] = math.nan
    assert torch.allclose(got.double(), expected.double(), equal_nan=True), f"got {got.tolist()}"


@extrapolate.check(
    hint="The model's own forward pass puts the first token at position 0: run its steps "
    "yourself, and find where the positions enter."
)
def moved_to_positions_32_to_63(
    accuracy_by_position: Callable[..., object], k_models: object, x_test: torch.Tensor
) -> None:
    """the held-out set moved to positions 32 to 63: only the learned model's answers change"""
    inputs = x_test[:50]
    for name in ("learned", "none"):
        model = _page_model(k_models, name)
        with torch.no_grad():
            targets = model(inputs.to(_device(model))).argmax(dim=-1).cpu()  # (50, t)
        got = answer_tensor(accuracy_by_position(model, inputs, targets, 32), (inputs.shape[1],))
        if name == "learned":
            assert (got < 1).any(), "the learned model predicts as at positions 0 to 31"
        else:  # up to a near tie
            assert float(got.mean()) > 0.99, f"without positions, moving changes nothing: {got}"


ablate_induction = Exercise("ch6-ex-ablate-induction", chapter=6)


@ablate_induction.check(
    hint="Switch the head off before out_proj mixes the heads: a hook lets you change what "
    "a module receives. With one head, out_proj then adds only its bias."
)
def the_induction_head_switched_off(
    logits_without_head: Callable[..., object],
    induction_model: TinyCausalModel,
    x_test_ind: torch.Tensor,
) -> None:
    """layer 1's only head switched off on 8 held-out sequences leaves out_proj's bias"""
    model, tokens = induction_model, x_test_ind[:8].to(_device(induction_model))
    shape = (8, tokens.shape[1], model.vocab_size)
    got = answer_tensor(logits_without_head(model, tokens, 1, 0), shape)
    with torch.no_grad():
        after_layer_0, _ = model.blocks[0](model.embed(tokens))
        # Each block's attention is chapter 4's layer (nn.ModuleList forgets the type).
        bias = cast(MultiHeadAttention, model.blocks[1].attention).out_proj.bias
        expected = model.head(model.final_norm(after_layer_0 + bias)).cpu()
    assert torch.allclose(got, expected, atol=1e-4), "not the logits without layer 1's head"


@ablate_induction.check(
    hint="Remove every hook once the logits are computed (try/finally), and change no "
    "weight: the model must be as it was."
)
def the_model_is_unchanged_afterwards(
    logits_without_head: Callable[..., object],
    induction_model: TinyCausalModel,
    x_test_ind: torch.Tensor,
) -> None:
    """afterwards the model has no hooks left and gives its usual logits"""
    model, tokens = induction_model, x_test_ind[:8].to(_device(induction_model))
    with torch.no_grad():
        before = model(tokens)
    logits_without_head(model, tokens, 0, 0)
    hooks = [
        name
        for name, module in model.named_modules()
        if module._forward_hooks or module._forward_pre_hooks
    ]
    assert not hooks, f"hooks left on {hooks}"
    with torch.no_grad():
        assert torch.allclose(model(tokens), before, atol=1e-6), "the model's logits changed"


causal_bag = Exercise("ch6-ex-causal-bag", chapter=6)


def _swap(t: int, i: int, j: int) -> torch.Tensor:
    order = torch.arange(t)
    order[[i, j]] = order[[j, i]]
    return order


_EIGHT = [2, 0, 1, 1, 0, 2, 0, 1]


@causal_bag.check(
    hint="What is a query at position p, and what does it see, in the sequence and in "
    "tokens[order]? Which of those can a model without positions tell apart?"
)
def two_tokens_swapped_in_eight(positions_that_can_change: Callable[..., object]) -> None:
    """tokens 2 and 4 of eight swapped: with every earlier token in view and a window of 1"""
    tokens = torch.tensor(_EIGHT)
    for window, expected in ((None, [2, 3, 4]), (1, [2, 3, 4, 5])):
        got = answer_tensor(positions_that_can_change(tokens, _swap(8, 2, 4), window), (8,))
        assert got.dtype == torch.bool, f"expected a bool tensor, got {got.dtype}"
        where = got.nonzero().flatten().tolist()
        assert where == expected, f"window {window}: True at {where}"
    assert torch.equal(tokens, torch.tensor(_EIGHT)), "the call changed the tokens"


@causal_bag.check(
    hint="A model without positions can change its prediction only where your function "
    "says True; swapping two equal tokens changes nothing at all."
)
def the_page_model_without_positions(
    positions_that_can_change: Callable[..., object], k_models: object, x_test: torch.Tensor
) -> None:
    """x_test[0] reordered: k_models["none"] changes only where it says True"""
    tokens, t = x_test[0], x_test.shape[1]
    model = _page_model(k_models, "none")
    i, j = next((i, j) for i in range(t) for j in range(i + 1, t) if tokens[i] == tokens[j])
    got = answer_tensor(positions_that_can_change(tokens, _swap(t, i, j), None), (t,))
    assert not got.any(), f"equal tokens swapped: True at {got.nonzero().flatten().tolist()}"
    order = torch.roll(torch.arange(t), 1)  # the last token first
    got = answer_tensor(positions_that_can_change(tokens, order, None), (t,))
    with torch.no_grad():
        logits = model(torch.stack([tokens, tokens[order]]).to(_device(model))).cpu()
    changed = logits[0].argmax(dim=-1) != logits[1].argmax(dim=-1)  # (t,)
    changed &= (logits[0] - logits[1]).abs().amax(dim=-1) > 1e-4  # not float rounding
    missed = (changed & ~got).nonzero().flatten().tolist()
    assert not missed, f"the model's prediction changes at {missed}, where you say False"


why_order_blind = Exercise("ch6-ex-why-order-blind", chapter=6)

_TWO_ROWS = [[0, 1, 0, 2, 0, 1], [2, 2, 1, 0, 0, 0]]


def _counts(inputs: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Row i counts each token among tokens 0 to i - 1: ``(b, t + 1, vocab)``."""
    counts = torch.nn.functional.one_hot(inputs, vocab_size).cumsum(dim=1)  # (b, t, vocab)
    return torch.nn.functional.pad(counts, (0, 0, 1, 0))  # a row of zeros in front


@why_order_blind.check(
    hint="At position i the reader knows only the bag of the tokens in its window, which the "
    "cumulative counts hold: how? From the bag, its best guess and its chance are the page's "
    "order-blind ones. Average over the sequences."
)
def two_short_sequences(bound_by_position: Callable[..., object]) -> None:
    """two sequences of 6 tokens, k = 1: windows of 2 tokens and of all earlier tokens"""
    counts = _counts(torch.tensor(_TWO_ROWS), 3)
    for window, expected in ((2, [1, 0.75, 0.5, 0.5, 0.75]), (6, [1, 0.75, 2 / 3, 0.5, 0.5])):
        got = answer_tensor(bound_by_position(counts, 1, window), (5,))
        assert torch.allclose(got.double(), torch.tensor(expected, dtype=torch.float64)), (
            f"window {window}: got {got.tolist()}"
        )
    assert torch.equal(counts, _counts(torch.tensor(_TWO_ROWS), 3)), "the call changed counts"


@why_order_blind.check(
    hint="A window of one token sees one token, and the target is that token: the guess is "
    "always right. Return t - k numbers, one per scored position."
)
def a_window_of_one_token(bound_by_position: Callable[..., object], x_test: torch.Tensor) -> None:
    """a window of 1 token with k = 1 on the held-out set: 1 at every position"""
    got = answer_tensor(bound_by_position(_counts(x_test, 16), 1, 1), (x_test.shape[1] - 1,))
    assert torch.allclose(got.double(), torch.ones(x_test.shape[1] - 1, dtype=torch.float64))
