"""Self-checks of the exercises of chapter 6, "Attention that learns".

Each check tries the learner's answer on the page's example (a head of ones, the page's
models and held-out sequences, two short sequences of token ids) and compares it with numbers
written out here or with a property every right answer has: position 0 turns nothing, a model
without positions cannot change its prediction where it sees the same bag of tokens or when
the sequences move, a window of one token is always right. Grading is not done here: see
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


@rotate_half.check(
    hint="Only features 0 to r - 1 turn: pair i is features (i, i + r / 2), and theta_i is "
    "that of a head of size r. Positions count from `offset`; features r and beyond stay."
)
def four_of_six_features_from_position_3(rotate_half: Callable[..., object]) -> None:
    """a head of six ones at positions 3 and 4, its first r = 4 features rotated"""
    got = answer_tensor(rotate_half(torch.ones(2, 6), 3, 4), (2, 6))
    # theta_0 = 1 and theta_1 = 0.01: (cos - sin, sin + cos) of 3, 0.03, 4 and 0.04.
    expected = torch.tensor(
        [
            [-1.1311, 0.9696, -0.8489, 1.0295, 1.0, 1.0],
            [0.1032, 0.9592, -1.4104, 1.0392, 1.0, 1.0],
        ]
    )
    assert torch.allclose(got, expected, atol=1e-4), f"got {got.tolist()}"


@rotate_half.check(
    hint="With r = d_h every feature turns, in the rotate-half convention of the page. Read t "
    "and d_h from the last two axes, and keep the dtype of x."
)
def all_features_of_a_float64_batch(rotate_half: Callable[..., object]) -> None:
    """r = d_h = 8 on a (2, 5, 8) float64 batch from position 7 is RotaryEmbedding's"""
    x = torch.linspace(-1, 1, 80, dtype=torch.float64).reshape(2, 5, 8)
    got = rotate_half(x, 7, 8)
    assert isinstance(got, torch.Tensor), f"expected a tensor, got {type(got).__name__}"
    assert got.dtype == torch.float64, f"expected float64 like x, got {got.dtype}"
    expected = RotaryEmbedding(8, interleaved=False)(x, offset=7)
    assert torch.allclose(answer_tensor(got, (2, 5, 8)), expected, atol=1e-9)


@rotate_half.check(
    hint="With a (b,) offset, sequence n counts its positions from offset[n], whatever the "
    "others do: a table of positions, one row per sequence. A position below 0 is a "
    "rotation by a negative angle; position 0 turns nothing."
)
def a_left_padded_batch(rotate_half: Callable[..., object]) -> None:
    """two sequences of three vectors of six ones from positions 3 and -2 (two pads), r = 4"""
    x = torch.ones(2, 3, 6)  # (b, t, d_h)
    offset = torch.tensor([3, -2])
    got = answer_tensor(rotate_half(x, offset, 4), (2, 3, 6))
    assert torch.equal(offset, torch.tensor([3, -2])), "the call changed `offset`"
    alone = answer_tensor(rotate_half(x[0], 3, 4), (3, 6))
    assert torch.allclose(got[0], alone, atol=1e-6), "sequence 0 is not as from position 3"
    assert torch.allclose(got[1, 2], x[1, 2]), f"position 0 turns nothing, got {got[1, 2]}"
    # Position -1: (cos + sin, cos - sin) of 1 and of 0.01.
    expected = torch.tensor([1.3818, 1.00995, -0.3012, 0.98995, 1.0, 1.0])
    assert torch.allclose(got[1, 1], expected, atol=1e-4), f"position -1: got {got[1, 1]}"


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
    "yourself and give the offset to where positions enter. A model without positions "
    "cannot tell where the sequences sit."
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
    hint="Set the head's d_h context features to zero before out_proj mixes the heads (a "
    "forward pre-hook on out_proj): with one head, out_proj then adds only its bias."
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


@causal_bag.check(
    hint="Compare the predicted tokens (argmax) for tokens and for tokens[order]. Without "
    "positions, a query that sees the same bag and keeps its own token cannot change."
)
def nothing_changes_outside_the_swap_without_positions(
    prediction_changes: Callable[..., object], k_models: object, x_test: torch.Tensor
) -> None:
    """tokens 3 and 4 of x_test[0] swapped: the model without positions keeps 0-2 and 5-31"""
    tokens = x_test[0].clone()
    got = answer_tensor(
        prediction_changes(_page_model(k_models, "none"), tokens, _swap(32, 3, 4)), (32,)
    )
    assert got.dtype == torch.bool, f"expected a bool tensor, got {got.dtype}"
    assert torch.equal(tokens, x_test[0]), "the call changed the tokens it was given"
    outside = [*range(3), *range(5, 32)]
    assert not got[outside].any(), f"changes at {got.nonzero().flatten().tolist()}"


@causal_bag.check(
    hint="A reordering that leaves the sequence as it was changes no prediction, whatever "
    "the model: reorder with tokens[order]."
)
def the_same_sequence_changes_nothing(
    prediction_changes: Callable[..., object], k_models: object, x_test: torch.Tensor
) -> None:
    """the identity order, and a swap of two equal tokens of x_test[0]: no change"""
    tokens = x_test[0]
    # 32 tokens of 16 kinds: some token occurs twice.
    i, j = next((i, j) for i in range(32) for j in range(i + 1, 32) if tokens[i] == tokens[j])
    for order in (torch.arange(32), _swap(32, i, j)):
        got = answer_tensor(
            prediction_changes(_page_model(k_models, "learned"), tokens, order), (32,)
        )
        assert not got.any(), f"changes at {got.nonzero().flatten().tolist()}"


why_order_blind = Exercise("ch6-ex-why-order-blind", chapter=6)

_TWO_ROWS = [[0, 1, 0, 2, 0, 1], [2, 2, 1, 0, 0, 0]]


def _counts(inputs: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Row i counts each token among tokens 0 to i - 1: ``(b, t + 1, vocab)``."""
    counts = torch.nn.functional.one_hot(inputs, vocab_size).cumsum(dim=1)  # (b, t, vocab)
    return torch.nn.functional.pad(counts, (0, 0, 1, 0))  # a row of zeros in front


@why_order_blind.check(
    hint="At position i the reader knows only how often each token occurs among the "
    "min(i, window) tokens before i, which two rows of the counts tell: its best guess is "
    "the most frequent, right with probability count / size. Average over the sequences."
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
