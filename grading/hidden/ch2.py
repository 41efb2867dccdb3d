"""Hidden checks of chapter 2: loaded by the grader, never shipped to students."""

from __future__ import annotations

import torch

from attention_from_scratch.exercises import get_exercise

sigma = get_exercise("ch2-ex-sigma")


@sigma.check(
    points=1,
    hint="Dividing `dots` by sqrt(64) must leave a variance near sigma**4 = 16.",
    hidden=True,
)
def scaled_variance(dots):
    assert isinstance(dots, torch.Tensor) and dots.shape == (20000,)
    assert abs((dots / 8).var().item() - 16) < 0.06 * 16
