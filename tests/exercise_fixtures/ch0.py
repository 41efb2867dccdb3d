"""A made-up chapter 0 with two exercises, for the tests of the exercise machinery only.

It is not a chapter of the book: it is loaded by path (``load_check_file``), never shipped.
"""

from __future__ import annotations

import torch

from attention_from_scratch.exercises import Exercise

double = Exercise("ch0-ex-double", chapter=0)


@double.check(points=1, hint="`doubled` must be a tensor of shape (3,).")
def doubled_shape(doubled):
    assert isinstance(doubled, torch.Tensor) and doubled.shape == (3,)


@double.check(points=2, hint="`doubled` must hold 2, 4 and 6: twice `base`.")
def doubled_values(doubled):
    """`doubled` holds twice the values of `base`"""
    assert torch.equal(doubled, torch.tensor([2.0, 4.0, 6.0]))


total = Exercise("ch0-ex-total", chapter=0)


@total.check(points=1, hint="`total` must be the sum of `base`, a float equal to 6.")
def total_value(total):
    assert float(total) == 6.0


explain = Exercise(
    "ch0-ex-explain",
    chapter=0,
    manual_points=2,
    rubric="Says that doubling every entry doubles the sum.",
)
