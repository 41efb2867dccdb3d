"""Hidden checks of chapter 7: loaded by the grader, never shipped to students."""

from __future__ import annotations

import torch

from attention_from_scratch.exercises import get_exercise

online_softmax = get_exercise("ch7-ex-online-softmax")


@online_softmax.check(
    points=1,
    hint="`online_softmax` must give zero to -inf scores (masked keys) and handle a last "
    "block shorter than block_size.",
    hidden=True,
)
def handles_masked_scores_and_a_short_last_block(online_softmax):
    scores = torch.tensor([3.0, float("-inf"), -1.0, float("-inf"), 0.0])
    expected = torch.softmax(scores, dim=0)
    for block_size in (1, 3, 4):
        result = online_softmax(scores.clone(), block_size)
        torch.testing.assert_close(result.float(), expected, rtol=1e-5, atol=1e-7)


padding_mask = get_exercise("ch7-ex-padding-mask")


@padding_mask.check(
    points=1,
    hint="Every query row of `combined_mask` must keep key 0 visible: right padding never "
    "hides the first token, and the causal mask never hides it.",
    hidden=True,
)
def first_key_always_visible(combined_mask):
    assert isinstance(combined_mask, torch.Tensor) and combined_mask.dtype == torch.bool
    assert not combined_mask[..., 0].any()
    # The diagonal is hidden exactly where the key is padding: rows 1..4 of sentence 2.
    diagonal = combined_mask.diagonal(dim1=1, dim2=2)  # (b, t)
    assert diagonal.sum().item() == 2 + 4
