"""Hidden checks of the made-up chapter 0 (tests only): loaded by the grader, not by check()."""

from __future__ import annotations

import torch

from attention_from_scratch.exercises import get_exercise

double = get_exercise("ch0-ex-double")


@double.check(points=1, hint="`doubled` must be a float tensor.", hidden=True)
def doubled_dtype(doubled):
    assert doubled.dtype == torch.float32
