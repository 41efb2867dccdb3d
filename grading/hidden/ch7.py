"""Hidden checks of chapter 7: loaded by the grader, never shipped to students."""

from __future__ import annotations

import torch

from attention_from_scratch.exercises import get_exercise
from attention_from_scratch.exercises.ch7 import (
    cache_length,
    compare_grouped,
    compare_positions,
    compare_running_state,
    fold_blocks,
    in_buffers,
    no_concatenation,
    padded_on_both_sides,
    plain_tensor,
    random_tokens,
)

kv_cache = get_exercise("ch7-ex-kv-cache")


@kv_cache.check(
    points=1,
    hint="Two caches must not share their tokens, and a cache keeps the dtype of what it "
    "is given: where is the storage created, and from what?",
    hidden=True,
)
def caches_are_independent_and_keep_the_dtype(PreallocatedKVCache):
    generator = torch.Generator().manual_seed(81)
    keys = random_tokens(generator, 1, 2, 4, 2, dtype=torch.float16)
    small = random_tokens(generator, 1, 2, 1, 2, dtype=torch.float16)
    with no_concatenation():
        first, second = PreallocatedKVCache(4), PreallocatedKVCache(2)
        first.append(keys, keys + 1)
        second.append(small, small - 1)
        assert cache_length(first) == 4 and cache_length(second) == 1
        in_buffers(first, 4)
        in_buffers(second, 2)
        read_keys, read_values = second.read()
    assert isinstance(read_keys, torch.Tensor) and read_keys.dtype == torch.float16, (
        "the cache changed the dtype of the keys"
    )
    assert torch.equal(plain_tensor(read_keys, (1, 2, 1, 2)), small)
    assert torch.equal(plain_tensor(read_values, (1, 2, 1, 2)), small - 1)


position_ids = get_exercise("ch7-ex-position-ids")


@position_ids.check(
    points=1,
    hint="`shifted_positions` must work for any batch: a row of padding only, a row "
    "without padding, one token, and long rows.",
    hidden=True,
)
def other_batches(shifted_positions):
    compare_positions(shifted_positions, [[True] * 3, [True, False, False], [False] * 3])
    compare_positions(shifted_positions, [[False]])
    generator = torch.Generator().manual_seed(82)
    compare_positions(shifted_positions, padded_on_both_sides(generator, 16, 200))


online_softmax = get_exercise("ch7-ex-online-softmax")


@online_softmax.check(
    points=1,
    hint="A row whose keys are all masked must end with m = -inf and ell = 0, never NaN; "
    "the update must also work in float32, with blocks of one score.",
    hidden=True,
)
def handles_fully_masked_rows_and_float32(online_update):
    inf = float("inf")
    scores = torch.tensor(
        [[-inf, -inf, -inf, -inf], [2.0, -inf, 0.5, 1.0], [9.0, 8.0, 7.0, 6.0], [1, 3, 4, 6]]
    )
    compare_running_state(online_update, scores, 1)
    m, ell = fold_blocks(online_update, scores, 3)[-1]
    assert m.dtype == torch.float32 and ell.dtype == torch.float32, "float32 in, float32 out"
    assert m[0] == -inf and ell[0] == 0, "a fully masked row must end with m = -inf, ell = 0"


group_heads = get_exercise("ch7-ex-group-heads")


@group_heads.check(
    points=1,
    hint="`folded_attention` must work for a batch of 2, 6 query heads in 3 groups, in "
    "float32, and for h_kv = h (ordinary multi-head attention).",
    hidden=True,
)
def other_groupings(folded_attention):
    compare_grouped(folded_attention, (2, 6, 3, 7, 4), seed=83, dtype=torch.float32)
    compare_grouped(folded_attention, (2, 6, 6, 5, 4), seed=84, dtype=torch.float64)
