"""Hidden checks of chapter 3: loaded by the grader, never shipped to students."""

from __future__ import annotations

import torch

from attention_from_scratch.exercises import get_exercise

sliding_window = get_exercise("ch3-ex-sliding-window")


@sliding_window.check(
    points=1,
    hint="`sliding` must be zero exactly where `hide` is True.",
    hidden=True,
)
def zero_where_hidden(sliding, hide):
    assert isinstance(sliding, torch.Tensor) and sliding.shape == (6, 6)
    assert isinstance(hide, torch.Tensor) and hide.dtype == torch.bool
    assert torch.equal((sliding == 0).cpu(), hide.cpu())
