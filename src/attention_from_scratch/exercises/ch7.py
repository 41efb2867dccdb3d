"""Checks for the exercises of chapter 7, "Attention at scale".

Expected values are computed here from first principles (``torch.cat`` of what was appended,
positions counted from the first real token, the softmax written out with ``math.exp``, one
query head at a time with ``torch.softmax``), never from a learner's code or the package's.
"""

from __future__ import annotations

import math

import torch

from ._core import Exercise, answer_tensor

kv_cache = Exercise("ch7-ex-kv-cache", chapter=7)


def cache_length(cache: object) -> int:
    """A learner's cache length, whether ``length`` is a property or a method.

    Introduced in chapter 7.
    """
    length = cache.length  # type: ignore[attr-defined]
    length = length() if callable(length) else length
    assert isinstance(length, int) and not isinstance(length, bool)
    return length


def numbered_tokens(b: int, h_kv: int, s: int, d_h: int, start: float) -> torch.Tensor:
    """``(b, h_kv, s, d_h)`` keys or values whose every entry is a different number.

    Introduced in chapter 7.
    """
    count = b * h_kv * s * d_h
    return torch.arange(start, start + count).reshape(b, h_kv, s, d_h)  # (b, h_kv, s, d_h)


@kv_cache.check(
    points=1,
    hint="`PreallocatedKVCache(capacity).length` must be 0, then grow by the number of "
    "tokens each `append` adds: keys have shape (b, h_kv, s, d_h), so the tokens are counted "
    "on dimension 2.",
)
def counts_the_cached_tokens(PreallocatedKVCache):
    cache = PreallocatedKVCache(5)
    assert cache_length(cache) == 0
    cache.append(numbered_tokens(2, 3, 2, 4, 0), numbered_tokens(2, 3, 2, 4, 1000))
    assert cache_length(cache) == 2
    cache.append(numbered_tokens(2, 3, 1, 4, 100), numbered_tokens(2, 3, 1, 4, 2000))
    assert cache_length(cache) == 3


@kv_cache.check(
    points=2,
    hint="`append(keys, values)` must write the new tokens after the cached ones and return "
    "every key and value cached so far, the old tokens first; `read()` must return the same "
    "pair.",
)
def returns_every_token_in_order(PreallocatedKVCache):
    cache = PreallocatedKVCache(6)
    keys = [numbered_tokens(1, 2, s, 3, 100 * i) for i, s in enumerate((3, 1, 1))]
    values = [numbered_tokens(1, 2, s, 3, 5000 + 100 * i) for i, s in enumerate((3, 1, 1))]
    for i in range(3):
        all_keys, all_values = cache.append(keys[i], values[i])
        expected_keys = torch.cat(keys[: i + 1], dim=2)  # (1, 2, s, 3)
        expected_values = torch.cat(values[: i + 1], dim=2)  # (1, 2, s, 3)
        assert torch.equal(answer_tensor(all_keys, tuple(expected_keys.shape)), expected_keys)
        assert torch.equal(answer_tensor(all_values, tuple(expected_values.shape)), expected_values)
    read_keys, read_values = cache.read()
    assert torch.equal(answer_tensor(read_keys, (1, 2, 5, 3)), torch.cat(keys, dim=2))
    assert torch.equal(answer_tensor(read_values, (1, 2, 5, 3)), torch.cat(values, dim=2))


@kv_cache.check(
    points=1,
    hint="Allocate the (b, h_kv, capacity, d_h) buffers once, at the first `append`, and write "
    "into them: `read()` must return views of the same memory after every `append` (no "
    "torch.cat), and an `append` beyond the capacity must raise a ValueError.",
)
def writes_in_place_and_refuses_overflow(PreallocatedKVCache):
    cache = PreallocatedKVCache(3)
    cache.append(numbered_tokens(1, 1, 1, 2, 0), numbered_tokens(1, 1, 1, 2, 10))
    first_keys, first_values = cache.read()
    cache.append(numbered_tokens(1, 1, 2, 2, 20), numbered_tokens(1, 1, 2, 2, 30))
    keys, values = cache.read()
    assert isinstance(keys, torch.Tensor) and isinstance(first_keys, torch.Tensor)
    assert keys.data_ptr() == first_keys.data_ptr()
    assert values.data_ptr() == first_values.data_ptr()
    try:
        cache.append(numbered_tokens(1, 1, 1, 2, 40), numbered_tokens(1, 1, 1, 2, 50))
    except ValueError:
        pass
    else:
        raise AssertionError("a fourth token fitted into a capacity of 3")
    assert cache_length(cache) == 3


position_ids = Exercise("ch7-ex-position-ids", chapter=7)


def positions_by_counting(padding_mask: list[list[bool]]) -> torch.Tensor:
    """Position ids of a left-padded batch, counted token by token (the checks' reference).

    Introduced in chapter 7.
    """
    rows = []
    for row in padding_mask:
        seen, ids = 0, []
        for is_pad in row:
            ids.append(0 if is_pad else seen)
            seen += not is_pad
        rows.append(ids)
    return torch.tensor(rows)  # (b, t)


@position_ids.check(
    points=2,
    hint="`shifted_positions(padding_mask)` must return a (b, t) integer tensor: 0 at the "
    "padding, then 0, 1, 2, ... from each row's first real token (e.g. with a cumulative "
    "sum of the real tokens).",
)
def counts_from_the_first_real_token(shifted_positions):
    mask = [[True, True, False, False, False], [False] * 5, [True] * 4 + [False]]
    result = shifted_positions(torch.tensor(mask))
    result = answer_tensor(result, (3, 5))
    assert not result.is_floating_point() and result.dtype != torch.bool
    assert torch.equal(result.long(), positions_by_counting(mask))


online_softmax = Exercise("ch7-ex-online-softmax", chapter=7)


@online_softmax.check(
    points=2,
    hint="`online_softmax(scores, block_size)` must return a tensor equal to "
    "torch.softmax(scores, dim=0), for any block size.",
)
def equals_softmax(online_softmax):
    scores = torch.tensor([0.5, -1.0, 2.0, 0.0, 3.0, -2.0, 1.5], dtype=torch.float64)
    expected = torch.softmax(scores, dim=0)
    for block_size in (1, 2, 3, 7, 10):
        result = online_softmax(scores.clone(), block_size)
        assert isinstance(result, torch.Tensor) and result.shape == scores.shape
        torch.testing.assert_close(result.double(), expected, rtol=1e-6, atol=1e-9)


@online_softmax.check(
    points=1,
    hint="Subtract the running maximum before exp: scores around 1000 must give finite "
    "probabilities (exp(1000) overflows).",
)
def stays_finite_for_large_scores(online_softmax):
    scores = torch.tensor([1000.0, 999.0, 2.0, -5.0, 1001.0])
    result = online_softmax(scores.clone(), 2)
    assert torch.isfinite(result).all()
    denominator = 1 + math.exp(-1) + math.exp(-2) + math.exp(-999) + math.exp(-1006)
    torch.testing.assert_close(
        result[4].double(), torch.tensor(1 / denominator, dtype=torch.float64), rtol=1e-5, atol=0
    )


@online_softmax.check(
    points=1,
    hint="A first block of masked scores (-inf, as left padding gives) leaves the maximum at "
    "-inf, and exp(-inf - (-inf)) is NaN: subtract 0 instead while the maximum is -inf. "
    "[-inf, 1, 2] with block_size=1 must give [0, 0.2689, 0.7311].",
)
def survives_a_masked_first_block(online_softmax):
    scores = torch.tensor([float("-inf"), 1.0, 2.0])
    result = online_softmax(scores.clone(), 1)
    assert isinstance(result, torch.Tensor) and result.shape == (3,)
    assert not result.isnan().any()
    expected = [0.0, 1 / (1 + math.e), math.e / (1 + math.e)]
    torch.testing.assert_close(
        result.double(), torch.tensor(expected, dtype=torch.float64), rtol=1e-5, atol=1e-7
    )


group_heads = Exercise("ch7-ex-group-heads", chapter=7)


def grouped_by_heads(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal grouped-query attention, one query head at a time (the checks' reference).

    Query head ``i`` reads key/value head ``i // g``. Introduced in chapter 7.
    """
    h, t, d_h = q.shape[1], q.shape[2], q.shape[3]
    g = h // k.shape[1]
    future = torch.ones(t, t, dtype=torch.bool).triu(1)  # (t, t)
    heads = []
    for i in range(h):
        scores = q[:, i] @ k[:, i // g].transpose(1, 2) / math.sqrt(d_h)  # (b, t, t)
        weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
        heads.append(weights @ v[:, i // g])  # (b, t, d_h)
    return torch.stack(heads, dim=1)  # (b, h, t, d_h)


def grouped_inputs(
    b: int, h: int, h_kv: int, t: int, d_h: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random float64 queries ``(b, h, t, d_h)`` and keys, values ``(b, h_kv, t, d_h)``.

    Introduced in chapter 7.
    """
    generator = torch.Generator().manual_seed(7)
    q = torch.randn(b, h, t, d_h, generator=generator, dtype=torch.float64)
    k = torch.randn(b, h_kv, t, d_h, generator=generator, dtype=torch.float64)
    v = torch.randn(b, h_kv, t, d_h, generator=generator, dtype=torch.float64)
    return q, k, v


@group_heads.check(
    points=2,
    hint="`folded_attention(q, k, v)` must return (b, h, t, d_h) causal attention in which "
    "query head i reads key/value head i // g, g = h // h_kv: reshape the queries to "
    "(b, h_kv, g * t, d_h), where row r is query r % t, and mask key j for row r when "
    "j > r % t.",
)
def matches_one_head_at_a_time(folded_attention):
    for h_kv in (2, 1):
        q, k, v = grouped_inputs(1, 4, h_kv, 5, 3)
        result = answer_tensor(folded_attention(q, k, v), (1, 4, 5, 3))
        torch.testing.assert_close(result.double(), grouped_by_heads(q, k, v))


which_path = Exercise(
    "ch7-ex-which-path",
    chapter=7,
    manual_points=2,
    rubric="1 point: the explicit path forms (b, h, t, t) weights in every layer, quadratic "
    "in t (about 1 GB per head at 16 000 tokens in float32), and even one layer switched to "
    "the explicit path forms them for all its heads and rows. 1 point: a workable "
    "alternative that never forms a (t, t) matrix, e.g. keep the fused path and, under "
    "torch.no_grad(), recompute the weights of the heads and the few query rows to plot "
    "from that layer's queries and keys (a (rows, t) slice per head).",
)
