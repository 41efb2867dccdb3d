"""Checks for the exercises of chapter 3, "Causal attention and dropout".

Expected values are computed here from first principles and the chapter's seeds, never from a
learner's code.
"""

from __future__ import annotations

import torch
from torch import nn

from ._core import Exercise, answer_tensor


def _dropout_pattern() -> torch.Tensor:
    """The chapter's seed-123 dropout of a (6, 6) block of ones: 0 dropped, 2 kept."""
    torch.manual_seed(123)
    return nn.Dropout(0.5)(torch.ones(6, 6))


sliding_window = Exercise("ch3-ex-sliding-window", chapter=3)


@sliding_window.check(
    points=1,
    hint="`hide` must be a (6, 6) bool mask, True where attention is forbidden: the future "
    "(j > i) and keys more than two tokens back (j < i - 2).",
)
def window_mask(hide):
    i = torch.arange(6).unsqueeze(1)  # (t, 1)
    j = torch.arange(6).unsqueeze(0)  # (1, t)
    expected = (j > i) | (j < i - 2)  # (t, t)
    mask = answer_tensor(hide, (6, 6))
    assert mask.dtype == torch.bool and torch.equal(mask, expected)


@sliding_window.check(
    points=1,
    hint="`sliding` must be the (6, 6) weights: every row sums to one and row i has "
    "min(i + 1, 3) non-zero weights.",
)
def window_weights(sliding):
    weights = answer_tensor(sliding, (6, 6)).float()
    assert torch.allclose(weights.sum(dim=-1), torch.ones(6), atol=1e-5)
    assert (weights > 0).sum(dim=-1).tolist() == [1, 2, 3, 3, 3, 3]


dropout_order = Exercise(
    "ch3-ex-dropout-order",
    chapter=3,
    manual_points=1,
    rubric="Says dropout after the renormalisation keeps each weight's expected value; "
    "before it, the zeros stay but the scaling by 2 cancels, so the result is a "
    "re-weighting, and a row can lose every visible weight (0 / 0 = nan).",
)


@dropout_order.check(
    points=1,
    hint="`after` must be the renormalised causal weights times the seed-123 dropout "
    "pattern: zero exactly where dropout or the mask put a zero. `before` keeps those zeros, "
    "has rows that sum to one, and row 1, which loses every visible weight, is nan.",
)
def dropout_both_orders(before, after):
    causal_zero = torch.triu(torch.ones(6, 6, dtype=torch.bool), diagonal=1)
    expected_zero = causal_zero | (_dropout_pattern() == 0)
    weights = answer_tensor(after, (6, 6)).float()
    assert torch.equal(weights == 0, expected_zero)
    # Dropping first and renormalising keeps the zeros; row 1 is 0 / 0.
    renormalised = answer_tensor(before, (6, 6)).float()
    assert torch.isnan(renormalised[1]).all()
    others = torch.tensor([0, 2, 3, 4, 5])
    kept_rows = renormalised[others]
    assert torch.equal(kept_rows == 0, expected_zero[others])
    assert torch.allclose(kept_rows.sum(dim=-1), torch.ones(5), atol=1e-5)


all_masked = Exercise(
    "ch3-ex-all-masked",
    chapter=3,
    manual_points=1,
    rubric="Explains 0/0 (or -inf - (-inf)) gives nan, and that causal_mask keeps the "
    "diagonal visible, so every row keeps a key.",
)


@all_masked.check(
    points=1,
    hint="`bad` must be the (6, 6) weights with the mask built with diagonal=0: its first "
    "row is all nan, its other rows are finite.",
)
def first_row_is_nan(bad):
    weights = answer_tensor(bad, (6, 6)).float()
    assert torch.isnan(weights[0]).all() and torch.isfinite(weights[1:]).all()


dropout_rate = Exercise(
    "ch3-ex-dropout-rate",
    chapter=3,
    manual_points=1,
    rubric="Says the survivors are scaled by 1 / (1 - p) = 1.4286 so that the expected "
    "value of every entry stays 1.",
)


@dropout_rate.check(
    points=1,
    hint="`fraction` must be the share of zeros in nn.Dropout(0.3) of a (1000, 1000) "
    "tensor of ones: a float near 0.3.",
)
def zero_fraction(fraction):
    assert isinstance(fraction, float) and abs(fraction - 0.3) < 0.005


causality = Exercise(
    "ch3-ex-causality-test",
    chapter=3,
    manual_points=1,
    rubric="Explains that no earlier token may attend to a later one, so editing the last "
    "token changes only its own row, and every token sees the first one.",
)


@causality.check(
    points=2,
    hint="`changed_rows` must map each edited position to the rows that change: "
    "{5: [5], 0: [0, 1, 2, 3, 4, 5]}.",
)
def rows_that_change(changed_rows):
    assert isinstance(changed_rows, dict)
    assert {k: list(v) for k, v in changed_rows.items()} == {5: [5], 0: [0, 1, 2, 3, 4, 5]}
