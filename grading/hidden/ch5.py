"""Hidden checks of chapter 5: loaded by the grader, never shipped to students."""

from __future__ import annotations

import torch

from attention_from_scratch.exercises import get_exercise

merge_reshape = get_exercise("ch5-ex-merge-reshape")


@merge_reshape.check(
    points=1,
    hint="`merge_heads_reshape` must also work for one head and one token.",
    hidden=True,
)
def merges_edge_shapes(merge_heads_reshape):
    x = torch.arange(6.0).view(2, 1, 1, 3)  # (b, h, t, d_h)
    assert torch.equal(merge_heads_reshape(x), x.view(2, 1, 3))
