"""A made-up chapter 0 with three exercises, for the tests of the exercise machinery only.

It is not a chapter of the book: its self-checks are loaded by path (``load_check_file``),
its graded side is ``grading/ch0.py`` beside this file; neither is ever shipped.
"""

from __future__ import annotations

import torch

from attention_from_scratch.exercises import Exercise, answer_tensor

double = Exercise("ch0-ex-double", chapter=0)


@double.check(hint="`double(x)` must return a tensor of the shape of x.")
def keeps_the_shape(double):
    """`double` keeps the shape of its input"""
    answer_tensor(double(torch.tensor([1.0, 2.0, 3.0])), (3,))


@double.check(hint="`double(base)` must hold 2, 4 and 6: twice `base`.")
def doubles_the_page_example(double, base):
    """`double(base)` holds twice the values of `base`"""
    assert torch.equal(double(base), torch.tensor([2.0, 4.0, 6.0]))


total = Exercise("ch0-ex-total", chapter=0)


@total.check(hint="`total(base)` must be the sum of `base`, a float equal to 6.")
def total_of_the_page_example(total, base):
    assert float(total(base)) == 6.0


explain = Exercise("ch0-ex-explain", chapter=0)
