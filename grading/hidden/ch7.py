"""Hidden checks of chapter 7: loaded by the grader, never shipped to students."""

from __future__ import annotations

import torch

from attention_from_scratch.exercises import answer_tensor, get_exercise
from attention_from_scratch.exercises.ch7 import (
    cache_length,
    grouped_by_heads,
    grouped_inputs,
    numbered_tokens,
    positions_by_counting,
)

kv_cache = get_exercise("ch7-ex-kv-cache")


@kv_cache.check(
    points=1,
    hint="Two `PreallocatedKVCache` objects must not share their tokens: create the storage "
    "in `__init__` or at the first `append`, not as a class attribute.",
    hidden=True,
)
def caches_are_independent(PreallocatedKVCache):
    first, second = PreallocatedKVCache(4), PreallocatedKVCache(2)
    first.append(numbered_tokens(1, 1, 4, 2, 0), numbered_tokens(1, 1, 4, 2, 50))
    second.append(numbered_tokens(1, 1, 1, 2, 9), numbered_tokens(1, 1, 1, 2, 90))
    assert cache_length(first) == 4 and cache_length(second) == 1
    keys, values = second.read()
    assert torch.equal(answer_tensor(keys, (1, 1, 1, 2)), numbered_tokens(1, 1, 1, 2, 9))
    assert torch.equal(answer_tensor(values, (1, 1, 1, 2)), numbered_tokens(1, 1, 1, 2, 90))


position_ids = get_exercise("ch7-ex-position-ids")


@position_ids.check(
    points=1,
    hint="`shifted_positions` must work for any batch: a row of padding only gives zeros, "
    "and a long row counts up to its number of real tokens minus one.",
    hidden=True,
)
def other_batches(shifted_positions):
    mask = [[True] * 3, [True] + [False] * 2, [False] * 3]
    result = answer_tensor(shifted_positions(torch.tensor(mask)), (3, 3))
    assert torch.equal(result.long(), positions_by_counting(mask))
    long_mask = [[True] * 7 + [False] * 13]
    result = answer_tensor(shifted_positions(torch.tensor(long_mask)), (1, 20))
    assert torch.equal(result.long(), positions_by_counting(long_mask))


online_softmax = get_exercise("ch7-ex-online-softmax")


@online_softmax.check(
    points=1,
    hint="`online_softmax` must give zero to -inf scores (masked keys) wherever they are, "
    "and handle a last block shorter than block_size.",
    hidden=True,
)
def handles_masked_scores_and_a_short_last_block(online_softmax):
    scores = torch.tensor([float("-inf"), float("-inf"), 3.0, float("-inf"), -1.0, 0.0])
    expected = torch.softmax(scores, dim=0)
    for block_size in (1, 2, 4):
        result = online_softmax(scores.clone(), block_size)
        torch.testing.assert_close(result.float(), expected, rtol=1e-5, atol=1e-7)


group_heads = get_exercise("ch7-ex-group-heads")


@group_heads.check(
    points=1,
    hint="`folded_attention` must work for a batch of 2, 6 query heads in 3 groups, and "
    "for h_kv = h (ordinary multi-head attention).",
    hidden=True,
)
def other_groupings(folded_attention):
    for h_kv in (3, 6):
        q, k, v = grouped_inputs(2, 6, h_kv, 7, 4)
        result = answer_tensor(folded_attention(q, k, v), (2, 6, 7, 4))
        torch.testing.assert_close(result.double(), grouped_by_heads(q, k, v))
