"""Checks for the exercises of chapter 6, "Attention that learns".

Expected values are computed here from the formulas with ``math.sin`` and ``math.cos``, from
which tokens each causal query can see, or by measuring the chapter's trained models with the
package's ``evaluate`` on data generated here; never from a learner's code.
"""

from __future__ import annotations

import math

import torch

from ..training import IGNORE_INDEX, evaluate, induction_task, k_back_task
from ._core import Exercise, answer_module, answer_tensor


def rotated_half_by_formula(x: list[float], p: int) -> torch.Tensor:
    """A vector rotated for position ``p`` in the rotate-half convention, pair by pair:
    features ``i`` and ``i + d_h / 2`` turn by ``p * theta_i`` (the reference of the checks).

    Introduced in chapter 6.
    """
    d_h = len(x)
    half = d_h // 2
    out = [0.0] * d_h
    for i in range(half):
        angle = p * 10000 ** (-2 * i / d_h)
        a, b = x[i], x[i + half]
        out[i] = a * math.cos(angle) - b * math.sin(angle)
        out[i + half] = a * math.sin(angle) + b * math.cos(angle)
    return torch.tensor(out, dtype=torch.float64)  # (d_h,)


rotate_half = Exercise("ch6-ex-rotate-half", chapter=6)

_VECTOR = [0.5, -1.0, 2.0, 0.25, -0.75, 1.5, 1.0, -2.0]


@rotate_half.check(
    points=1,
    hint="`rotate_half(x)` must return a float tensor of the shape of x, (..., t, d_h).",
)
def keeps_the_shape(rotate_half):
    x = torch.tensor([_VECTOR, _VECTOR[::-1], _VECTOR])  # (t, d_h) = (3, 8)
    out = answer_tensor(rotate_half(x), (3, 8))
    assert out.is_floating_point()


@rotate_half.check(
    points=2,
    hint="Pair i is features (i, i + d_h / 2), turned by p * theta_i with "
    "theta_i = 10000**(-2i / d_h) and p = offset + the row's index: "
    "(a cos - b sin, a sin + b cos).",
)
def rotates_features_i_and_i_plus_half(rotate_half):
    x = torch.tensor([_VECTOR] * 3)  # (t, d_h): the same vector at three positions
    out = answer_tensor(rotate_half(x, 5), (3, 8)).double()
    for row, p in enumerate((5, 6, 7)):
        assert torch.allclose(out[row], rotated_half_by_formula(_VECTOR, p), atol=1e-5)


@rotate_half.check(
    points=1,
    hint="`rotate_half` must be a function that reads t and d_h from the shape of x, so that "
    "it works for any head size and leading axes, e.g. (b, h, t, d_h) = (2, 2, 3, 4).",
)
def any_head_size(rotate_half):
    torch.manual_seed(0)
    x = torch.randn(2, 2, 3, 4, dtype=torch.float64)  # (b, h, t, d_h): another head size
    out = answer_tensor(rotate_half(x, 2), (2, 2, 3, 4)).double()
    for p in range(3):
        assert torch.allclose(out[1, 0, p], rotated_half_by_formula(x[1, 0, p].tolist(), 2 + p))


extrapolate = Exercise("ch6-ex-extrapolate", chapter=6)
_KINDS = ("learned", "sinusoidal", "rotary")


def _far_accuracy(model: torch.nn.Module) -> float:
    """The accuracy of a three-places-back model on positions 32..63 of 64-token sequences."""
    inputs, targets = k_back_task(1000, 64, 16, 3, seed=3)
    targets[:, :32] = IGNORE_INDEX
    return evaluate(model, inputs, targets)


@extrapolate.check(
    points=1,
    hint='`far_accuracies` must be a dict with the keys "learned", "sinusoidal" and '
    '"rotary", each an accuracy between 0 and 1.',
)
def three_accuracies(far_accuracies):
    assert isinstance(far_accuracies, dict) and set(far_accuracies) == set(_KINDS)
    for value in far_accuracies.values():
        assert isinstance(value, (int, float)) and 0.0 <= value <= 1.0


@extrapolate.check(
    points=2,
    hint="Make 1000 sequences of 64 tokens with k_back_task(..., seed=3), set the targets of "
    "positions 0 to 31 to IGNORE_INDEX, and `evaluate` each model of `k_models` on them.",
)
def measured_on_the_new_positions(far_accuracies, k_models):
    assert isinstance(far_accuracies, dict) and isinstance(k_models, dict)
    assert all(isinstance(far_accuracies.get(kind), (int, float)) for kind in _KINDS)
    for kind in _KINDS:
        expected = _far_accuracy(answer_module(k_models[kind]))
        assert abs(float(far_accuracies[kind]) - expected) < 0.02


ablate_induction = Exercise("ch6-ex-ablate-induction", chapter=6)


def held_out_induction() -> tuple[torch.Tensor, torch.Tensor]:
    """The chapter's held-out induction sequences: seed 2, without those of the training set.

    Introduced in chapter 6.
    """
    x_train, _ = induction_task(4000, 20, 16, min_period=3, max_period=10, seed=1)
    inputs, targets = induction_task(1000, 20, 16, min_period=3, max_period=10, seed=2)
    seen = {tuple(row) for row in x_train.tolist()}
    new = torch.tensor([tuple(row) not in seen for row in inputs.tolist()])  # (b,)
    return inputs[new], targets[new]


@ablate_induction.check(
    points=2,
    hint="Zero the output of `induction_model.attention[1]` with a forward hook (as "
    "`accuracy_without` does) and `evaluate` the model on `x_test_ind` and `y_test_ind`.",
)
def accuracy_without_layer_1(without_induction_head, induction_model):
    assert isinstance(without_induction_head, (int, float))
    model = answer_module(induction_model)
    hook = model.attention[1].register_forward_hook(lambda m, a, out: torch.zeros_like(out))
    expected = evaluate(model, *held_out_induction())
    hook.remove()
    assert abs(float(without_induction_head) - expected) < 0.01


causal_bag = Exercise("ch6-ex-causal-bag", chapter=6)
_SWAP = [0, 1, 2, 4, 3, *range(5, 32)]  # tokens 3 and 4 swapped


def _prediction_changes(model: torch.nn.Module) -> torch.Tensor:
    """Where a three-places-back model's predicted token changes when tokens 3 and 4 of the
    first held-out sequence (seed 2) are swapped, ``(32,)`` bool."""
    inputs, _ = k_back_task(1000, 32, 16, 3, seed=2)
    pair = torch.stack([inputs[0], inputs[0, _SWAP]])  # (2, t)
    with torch.no_grad():
        predictions = model(pair).argmax(dim=-1)  # (2, t)
    return predictions[0] != predictions[1]


@causal_bag.check(
    points=1,
    hint='`changed` must be a dict with the keys "none" and "learned", each a (32,) bool '
    "tensor, True where the predicted token changes.",
)
def two_masks(changed):
    assert isinstance(changed, dict) and set(changed) == {"none", "learned"}
    for value in changed.values():
        assert answer_tensor(value, (32,)).dtype == torch.bool


@causal_bag.check(
    points=2,
    hint="Swap tokens 3 and 4 of x_test[0] (the three-places-back task), run both sequences "
    "through k_models[name] and compare the argmax of the logits position by position.",
)
def measured_on_both_models(changed, k_models):
    assert isinstance(changed, dict) and isinstance(k_models, dict)
    for name in ("none", "learned"):
        expected = _prediction_changes(answer_module(k_models[name]))
        assert answer_tensor(changed[name], (32,)).tolist() == expected.tolist()


why_order_blind = Exercise("ch6-ex-why-order-blind", chapter=6)
_LONG = (128, 512)


def order_blind_bound(inputs: torch.Tensor, vocab_size: int, k: int) -> float:
    """The accuracy of guessing, at every position ``i >= k``, the most frequent of tokens
    ``0..i-1``, averaged over the outcomes (the reference of the checks).

    Introduced in chapter 6.

    Args:
        inputs: token ids, ``(b, t)``, from :func:`k_back_task`.
        vocab_size: the number of token ids.
        k: how many places back the answer lies; positions ``0..k-1`` are not scored.

    Returns:
        The accuracy, between 0 and 1.
    """
    counts = torch.nn.functional.one_hot(inputs, vocab_size).cumsum(dim=1)  # (b, t, vocab)
    best = counts[:, k - 1 : -1].max(dim=-1).values.double()  # (b, t - k)
    seen = torch.arange(k, inputs.shape[1], dtype=torch.float64)  # (t - k,): i tokens
    return float((best / seen).mean())


@why_order_blind.check(
    points=1,
    hint="`bounds` must be a dict with the keys 128 and 512, each an accuracy between 0 and 1.",
)
def two_bounds(bounds):
    assert isinstance(bounds, dict) and set(bounds) == set(_LONG)
    for value in bounds.values():
        assert isinstance(value, (int, float)) and 0.0 <= value <= 1.0


@why_order_blind.check(
    points=2,
    hint="Make 1000 sequences of t tokens with k_back_task(1000, t, VOCAB, K, seed=2) and "
    "pass them to order_blind_accuracy, for t = 128 and t = 512.",
)
def measured_at_both_lengths(bounds):
    assert isinstance(bounds, dict)
    for t in _LONG:
        inputs, _ = k_back_task(1000, t, 16, 3, seed=2)
        expected = order_blind_bound(inputs, 16, 3)
        assert abs(float(bounds[t]) - expected) < 0.002
