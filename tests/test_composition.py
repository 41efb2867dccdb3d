"""Positions, grouped heads and a KV cache combine, as in Llama-style models: any combination of
chapter 6's positions and chapter 7's key/value heads decodes with a cache exactly as it runs
without one, on both paths, and each layer computes what its steps written out by hand
compute."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import attention_from_scratch as afs

POSITIONS = ["none", "learned", "sinusoidal", "rotary"]


def model(
    positions: str, num_heads: int, num_kv_heads: int | None, seed: int = 0
) -> afs.CachedCausalModel:
    torch.manual_seed(seed)
    return afs.CachedCausalModel(
        11,
        4 * num_heads,
        context_length=16,
        num_layers=2,
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        positions=positions,
    ).eval()


@settings(max_examples=40, deadline=None)
@given(
    positions=st.sampled_from(POSITIONS),
    heads=st.sampled_from([(4, 4), (4, 2), (4, 1), (2, 2), (2, 1)]),
    fused=st.booleans(),
    cuts=st.lists(st.integers(1, 13), max_size=3, unique=True),
    seed=st.integers(0, 10_000),
)
def test_decoding_with_a_cache_gives_the_logits_of_one_pass(
    positions: str, heads: tuple[int, int], fused: bool, cuts: list[int], seed: int
) -> None:
    num_heads, num_kv_heads = heads
    m = model(positions, num_heads, num_kv_heads, seed)
    for block in m.blocks:
        block.attention.fused = fused
    tokens = torch.randint(11, (2, 14), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        full = m(tokens)
        caches = [afs.KVCache() for _ in m.blocks]
        edges = [0, *sorted(cuts), 14]
        pieces = [
            m(tokens[:, a:b], kv_caches=caches) for a, b in itertools.pairwise(edges) if b > a
        ]
    assert torch.allclose(torch.cat(pieces, dim=1), full, atol=1e-5)
    assert all(cache.length == 14 for cache in caches)
    # The cache holds h_kv heads of keys: grouped heads shrink it.
    assert caches[0].keys.shape[1] == num_kv_heads


@pytest.mark.parametrize("positions", POSITIONS)
def test_generating_with_a_cache_gives_the_tokens_of_generating_without(positions: str) -> None:
    m = model(positions, 4, 2, seed=3)
    prompt = torch.randint(11, (3, 5), generator=torch.Generator().manual_seed(3))
    cached, cached_logits = afs.generate(m, prompt, 8, use_cache=True)
    uncached, uncached_logits = afs.generate(m, prompt, 8, use_cache=False)
    assert torch.allclose(cached_logits, uncached_logits, atol=1e-5)
    # The same tokens, except where rounding could swap two almost equal logits (random
    # weights make near-ties; a trained model has none, chapter 7 shows).
    differ = (cached != uncached).nonzero()
    if len(differ):
        row, column = differ[0].tolist()
        top2 = uncached_logits[row, column - prompt.shape[1]].topk(2).values
        assert float(top2[0] - top2[1]) < 1e-4


@pytest.mark.parametrize("positions", POSITIONS)
def test_a_trained_chapter_6_model_loads_into_chapter_7s_and_computes_the_same(
    positions: str,
) -> None:
    torch.manual_seed(5)
    tiny = afs.TinyCausalModel(11, 8, 16, num_layers=2, num_heads=2, positions=positions)
    torch.manual_seed(5)  # the same draws: the same weights, before any loading
    cached = afs.CachedCausalModel(11, 8, 16, num_layers=2, num_heads=2, positions=positions)
    assert all(
        torch.equal(a, b)
        for a, b in zip(tiny.state_dict().values(), cached.state_dict().values(), strict=True)
    )
    cached.load_state_dict(tiny.state_dict())  # strict: the same names and shapes
    tokens = torch.randint(11, (2, 9))
    assert torch.equal(cached(tokens), tiny(tokens))


def by_hand(layer: afs.RotaryGroupedQueryAttention, x: torch.Tensor) -> torch.Tensor:
    """Llama's attention written out: rotate queries and keys, repeat each key/value head for
    its group, causal softmax attention, merge, output projection."""
    b, t, _ = x.shape
    h, h_kv, d_h = layer.num_heads, layer.num_kv_heads, layer.head_dim
    queries = layer.W_query(x).view(b, t, h, d_h).transpose(1, 2)
    keys = layer.W_key(x).view(b, t, h_kv, d_h).transpose(1, 2)
    values = layer.W_value(x).view(b, t, h_kv, d_h).transpose(1, 2)
    queries, keys = layer.rope(queries), layer.rope(keys)
    keys = keys.repeat_interleave(h // h_kv, dim=1)  # (b, h, t, d_h)
    values = values.repeat_interleave(h // h_kv, dim=1)
    context = F.scaled_dot_product_attention(queries, keys, values, is_causal=True)
    return layer.out_proj(context.transpose(1, 2).reshape(b, t, h * d_h))


@pytest.mark.parametrize("num_kv_heads", [1, 2, 4])
@pytest.mark.parametrize("fused", [False, True])
def test_the_rotary_grouped_layer_is_llamas_attention_written_out(
    num_kv_heads: int, fused: bool
) -> None:
    torch.manual_seed(2)
    layer = afs.RotaryGroupedQueryAttention(6, 16, 12, 0.0, 4, num_kv_heads, fused=fused)
    x = torch.randn(2, 9, 6)
    with torch.no_grad():
        assert torch.allclose(layer(x), by_hand(layer, x), atol=1e-5)


def test_the_rotary_grouped_layer_with_as_many_key_heads_is_chapter_6s_rotary_layer() -> None:
    torch.manual_seed(4)
    rotary = afs.RotaryMultiHeadAttention(6, 8, 12, 0.0, 2)
    grouped = afs.RotaryGroupedQueryAttention(6, 8, 12, 0.0, 2, 2)
    grouped.load_state_dict(rotary.state_dict())
    x = torch.randn(3, 7, 6)
    with torch.no_grad():
        assert torch.allclose(grouped(x), rotary(x), atol=1e-6)


def test_a_grouped_layer_checks_its_key_heads_once_by_name() -> None:
    with pytest.raises(ValueError, match="num_kv_heads: expected a divisor of num_heads=4"):
        afs.RotaryGroupedQueryAttention(6, 8, 12, 0.0, 4, 3)
    with pytest.raises(ValueError, match="num_kv_heads"):
        afs.CachedCausalModel(11, 8, 16, num_heads=2, num_kv_heads=0)
