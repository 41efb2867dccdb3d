"""Chapter 7: padding masks, the KV cache, tiled attention and grouped-query attention.

Every feature is compared with PyTorch's own implementation (``nn.MultiheadAttention``,
``scaled_dot_product_attention`` with an explicit boolean mask, ``repeat_interleave``), on
outputs and gradients; misuse raises a clear error; the memory claims are measured.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from helpers import forward_backward, randn
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

import attention_from_scratch as afs

FAST = settings(max_examples=20, deadline=None)
TOL = {"rtol": 1e-4, "atol": 1e-5}


def qkv_grads(module: nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.grad.clone() for name, p in module.named_parameters() if p.grad is not None}


def torch_copy_of(mha: afs.MultiHeadAttention) -> nn.MultiheadAttention:
    """An nn.MultiheadAttention holding the same weights as ``mha`` (d_in must equal d_out)."""
    reference = nn.MultiheadAttention(mha.d_out, mha.num_heads, bias=True, batch_first=True)
    layers = (mha.W_query, mha.W_key, mha.W_value)
    with torch.no_grad():
        reference.in_proj_weight.copy_(torch.cat([layer.weight for layer in layers]))
        if mha.W_query.bias is not None:
            reference.in_proj_bias.copy_(torch.cat([layer.bias for layer in layers]))
        else:
            reference.in_proj_bias.zero_()
        reference.out_proj.load_state_dict(mha.out_proj.state_dict())
    return reference


def right_padding(lengths: list[int], t: int) -> torch.Tensor:
    """(b, t) bool, True after each sentence's length: sentences start at token 0."""
    return torch.arange(t)[None, :] >= torch.tensor(lengths)[:, None]


def left_padding(lengths: list[int], t: int) -> torch.Tensor:
    """(b, t) bool, True before each sentence: sentences end at the last token."""
    return torch.arange(t)[None, :] < (t - torch.tensor(lengths))[:, None]


def projections(
    module: nn.Module, x: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Queries (b, h, t, d_h) and keys, values (b, h_kv, t, d_h), computed here from weights."""
    b, t, _ = x.shape
    h, d_h = module.num_heads, module.head_dim
    h_kv = getattr(module, "num_kv_heads", h)
    q = F.linear(x, module.W_query.weight, module.W_query.bias)
    k = F.linear(x, module.W_key.weight, module.W_key.bias)
    v = F.linear(x, module.W_value.weight, module.W_value.bias)
    q = q.reshape(b, t, h, d_h).permute(0, 2, 1, 3)
    k = k.reshape(b, t, h_kv, d_h).permute(0, 2, 1, 3)
    v = v.reshape(b, t, h_kv, d_h).permute(0, 2, 1, 3)
    return q, k, v


def reference_forward(
    module: nn.Module, x: torch.Tensor, padding: torch.Tensor | None = None
) -> torch.Tensor:
    """SDPA with an explicit boolean mask (True = allowed), k/v heads repeat-interleaved."""
    b, t, _ = x.shape
    q, k, v = projections(module, x)
    group = module.num_heads // getattr(module, "num_kv_heads", module.num_heads)
    k = k.repeat_interleave(group, dim=1)  # (b, h, t, d_h)
    v = v.repeat_interleave(group, dim=1)
    allowed = torch.ones(t, t, dtype=torch.bool).tril()  # (t, t)
    if padding is not None:
        allowed = allowed & ~padding[:, None, None, :]  # (b, 1, t, t)
    context = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    return module.out_proj(context.transpose(1, 2).reshape(b, t, module.d_out))


# ---------------------------------------------------------------------------------------------
# Padding masks
# ---------------------------------------------------------------------------------------------


@FAST
@given(
    data=st.data(),
    b=st.integers(1, 3),
    t=st.integers(1, 7),
    num_heads=st.integers(1, 3),
    head_dim=st.integers(1, 3),
    qkv_bias=st.booleans(),
    fused=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_padding_mask_equals_torch_multihead_attention(
    data: st.DataObject,
    b: int,
    t: int,
    num_heads: int,
    head_dim: int,
    qkv_bias: bool,
    fused: bool,
    seed: int,
) -> None:
    lengths = data.draw(st.lists(st.integers(1, t), min_size=b, max_size=b))
    padding = right_padding(lengths, t)
    d = num_heads * head_dim
    torch.manual_seed(seed)
    ours = afs.CachedAttention(d, d, 8, 0.0, num_heads, qkv_bias=qkv_bias, fused=fused)
    reference = torch_copy_of(ours)
    x = randn(b, t, d, seed=seed)
    out, grad = forward_backward(lambda y: ours(y, key_padding_mask=padding), x, seed)
    out_ref, grad_ref = forward_backward(
        lambda y: reference(
            y, y, y, key_padding_mask=padding, attn_mask=afs.causal_mask(t), need_weights=False
        )[0],
        x,
        seed,
    )
    torch.testing.assert_close(out, out_ref, **TOL)
    torch.testing.assert_close(grad, grad_ref, **TOL)
    in_proj = torch.cat(
        [ours.W_query.weight.grad, ours.W_key.weight.grad, ours.W_value.weight.grad]
    )
    torch.testing.assert_close(in_proj, reference.in_proj_weight.grad, **TOL)
    torch.testing.assert_close(ours.out_proj.weight.grad, reference.out_proj.weight.grad, **TOL)


@FAST
@given(
    data=st.data(),
    b=st.integers(1, 3),
    t=st.integers(1, 6),
    num_heads=st.integers(1, 3),
    fused=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_any_padding_mask_equals_sdpa_with_the_combined_mask(
    data: st.DataObject, b: int, t: int, num_heads: int, fused: bool, seed: int
) -> None:
    flags = data.draw(st.lists(st.booleans(), min_size=b * t, max_size=b * t))
    padding = torch.tensor(flags).view(b, t)
    d = 2 * num_heads
    torch.manual_seed(seed)
    ours = afs.CachedAttention(d, d, 8, 0.0, num_heads, fused=fused)
    x = randn(b, t, d, seed=seed).requires_grad_(True)
    out = ours(x, key_padding_mask=padding)
    visible = (torch.ones(t, t, dtype=torch.bool).tril() & ~padding[:, None, :]).any(-1)  # (b, t)
    with torch.no_grad():
        expected = reference_forward(ours, x.detach(), padding)
    torch.testing.assert_close(out[visible], expected[visible], **TOL)
    # A query with no visible key gets zeros, not NaN, and gradients stay finite.
    assert torch.all(out[~visible] == 0)
    out.sum().backward()
    assert torch.isfinite(x.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in ours.parameters())


@pytest.mark.parametrize("fused", [False, True], ids=["explicit", "fused"])
@pytest.mark.parametrize("side", ["right", "left"])
def test_padded_positions_never_influence_real_ones(fused: bool, side: str) -> None:
    t, lengths = 6, [6, 3, 1]
    padding = (right_padding if side == "right" else left_padding)(lengths, t)
    real = ~padding  # (b, t)
    torch.manual_seed(0)
    module = afs.CachedAttention(4, 4, 8, 0.0, num_heads=2, fused=fused)
    x = randn(3, t, 4, seed=1)
    noisy = x.clone()
    noisy[padding] = randn(int(padding.sum()), 4, seed=2) * 100
    with torch.no_grad():
        out = module(x, key_padding_mask=padding)
        out_noisy = module(noisy, key_padding_mask=padding)
    torch.testing.assert_close(out[real], out_noisy[real], rtol=0, atol=1e-6)
    assert not torch.allclose(x[padding], noisy[padding])
    # No gradient flows from a real output to a padded input.
    leaf = x.clone().requires_grad_(True)
    module(leaf, key_padding_mask=padding)[real].sum().backward()
    assert torch.all(leaf.grad[padding] == 0)
    assert torch.any(leaf.grad[real] != 0)


@pytest.mark.parametrize("fused", [False, True], ids=["explicit", "fused"])
def test_a_query_with_no_visible_key_returns_zeros_not_nan(fused: bool) -> None:
    # Left padding: the padded first tokens of the short sentence see only padding.
    padding = left_padding([4, 2], 4)
    torch.manual_seed(1)
    module = afs.CachedAttention(4, 6, 8, 0.0, num_heads=3, qkv_bias=True, fused=fused)
    x = randn(2, 4, 4, seed=3).requires_grad_(True)
    out = module(x, key_padding_mask=padding)
    assert torch.all(out[1, :2] == 0)
    assert torch.all(out[0] != 0) and torch.all(out[1, 2:] != 0)
    out.square().sum().backward()
    assert torch.isfinite(x.grad).all()
    if not fused:
        _, weights = module(x, return_weights=True, key_padding_mask=padding)
        assert torch.all(weights[1, :, :2] == 0)
        torch.testing.assert_close(weights[1, :, 2:].sum(-1), torch.ones(3, 2))


def test_padding_mask_with_dropout_keeps_padded_keys_at_zero_weight() -> None:
    padding = right_padding([5, 2], 5)
    torch.manual_seed(2)
    module = afs.CachedAttention(4, 4, 8, 0.5, num_heads=2).train()
    _, weights = module(randn(2, 5, 4, seed=4), return_weights=True, key_padding_mask=padding)
    assert torch.all(weights[1, :, :, 2:] == 0)


# ---------------------------------------------------------------------------------------------
# Grouped-query attention
# ---------------------------------------------------------------------------------------------


@FAST
@given(
    b=st.integers(1, 2),
    t=st.integers(1, 6),
    num_kv_heads=st.integers(1, 3),
    group=st.integers(1, 3),
    head_dim=st.integers(1, 3),
    qkv_bias=st.booleans(),
    fused=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_grouped_query_attention_equals_repeat_interleave_reference(
    b: int,
    t: int,
    num_kv_heads: int,
    group: int,
    head_dim: int,
    qkv_bias: bool,
    fused: bool,
    seed: int,
) -> None:
    num_heads = num_kv_heads * group
    d = num_heads * head_dim
    torch.manual_seed(seed)
    gqa = afs.GroupedQueryAttention(
        3, d, 8, 0.0, num_heads, num_kv_heads, qkv_bias=qkv_bias, fused=fused
    )
    assert gqa.W_key.weight.shape == (num_kv_heads * head_dim, 3)
    x = randn(b, t, 3, seed=seed)
    out, grad = forward_backward(gqa, x, seed)
    grads = qkv_grads(gqa)
    gqa.zero_grad()
    out_ref, grad_ref = forward_backward(lambda y: reference_forward(gqa, y), x, seed)
    torch.testing.assert_close(out, out_ref, **TOL)
    torch.testing.assert_close(grad, grad_ref, **TOL)
    for name, value in qkv_grads(gqa).items():
        torch.testing.assert_close(grads[name], value, **TOL, msg=name)


@pytest.mark.parametrize("fused", [False, True], ids=["explicit", "fused"])
def test_grouped_query_attention_with_all_heads_loads_a_multi_head_state_dict(fused: bool) -> None:
    torch.manual_seed(3)
    mha = afs.MultiHeadAttention(5, 6, 8, 0.0, num_heads=3, qkv_bias=True, fused=fused)
    gqa = afs.GroupedQueryAttention(5, 6, 8, 0.0, 3, num_kv_heads=3, qkv_bias=True, fused=fused)
    assert list(gqa.state_dict()) == list(mha.state_dict())
    gqa.load_state_dict(mha.state_dict())
    cached = afs.CachedAttention(5, 6, 8, 0.0, num_heads=3, qkv_bias=True, fused=fused)
    cached.load_state_dict(mha.state_dict())
    x = randn(2, 7, 5, seed=5)
    padding = right_padding([7, 4], 7)
    # Chapter 4's class stacks the three projections into one matmul, which rounds
    # differently from chapter 7's three; chapter 7's two classes do the same operations.
    with torch.no_grad():
        torch.testing.assert_close(gqa(x), mha(x), **TOL)
        torch.testing.assert_close(cached(x), mha(x), **TOL)
        torch.testing.assert_close(gqa(x), cached(x), rtol=0, atol=0)
        torch.testing.assert_close(
            gqa(x, key_padding_mask=padding), cached(x, key_padding_mask=padding), rtol=0, atol=0
        )


def test_grouped_query_attention_builds_its_narrow_layers_once() -> None:
    """W_key and W_value are built once, narrow: the layer draws the same random numbers as
    four nn.Linear layers of its sizes made in order, and nothing else."""
    d_in, d_out, h, h_kv = 6, 8, 4, 2
    torch.manual_seed(3)
    layer = afs.GroupedQueryAttention(d_in, d_out, 5, 0.0, num_heads=h, num_kv_heads=h_kv)
    after_layer = torch.rand(1)
    torch.manual_seed(3)
    sizes = [(d_in, d_out), (d_in, d_out // h * h_kv), (d_in, d_out // h * h_kv)]
    expected = [nn.Linear(i, o, bias=False) for i, o in sizes]
    nn.Linear(d_out, d_out)  # out_proj
    assert torch.equal(torch.rand(1), after_layer)  # no layer built and thrown away
    got = [layer.W_query, layer.W_key, layer.W_value]
    for mine, reference in zip(got, expected, strict=True):
        assert torch.equal(mine.weight, reference.weight)


def test_grouped_query_attention_weights_rows_sum_to_one() -> None:
    torch.manual_seed(4)
    gqa = afs.GroupedQueryAttention(4, 8, 8, 0.0, num_heads=4, num_kv_heads=2)
    _, weights = gqa(randn(2, 5, 4, seed=6), return_weights=True)
    assert weights.shape == (2, 4, 5, 5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 5))
    assert torch.all(weights.masked_select(afs.causal_mask(5)) == 0)


# ---------------------------------------------------------------------------------------------
# KV cache
# ---------------------------------------------------------------------------------------------


def decode(
    module: nn.Module,
    x: torch.Tensor,
    chunks: list[int],
    padding: torch.Tensor | None = None,
) -> torch.Tensor:
    """Feed ``x`` through ``module`` in chunks of the given sizes, with one KV cache."""
    cache = afs.KVCache()
    outputs, start = [], 0
    for size in chunks:
        mask = None if padding is None else padding[:, : start + size]
        outputs.append(module(x[:, start : start + size], key_padding_mask=mask, kv_cache=cache))
        start += size
    assert cache.length == x.shape[1]
    return torch.cat(outputs, dim=1)


@FAST
@given(
    data=st.data(),
    b=st.integers(1, 2),
    t=st.integers(1, 7),
    num_kv_heads=st.integers(1, 2),
    group=st.integers(1, 2),
    qkv_bias=st.booleans(),
    fused=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_cached_decoding_equals_one_full_pass(
    data: st.DataObject,
    b: int,
    t: int,
    num_kv_heads: int,
    group: int,
    qkv_bias: bool,
    fused: bool,
    seed: int,
) -> None:
    chunks: list[int] = []
    while sum(chunks) < t:
        chunks.append(data.draw(st.integers(1, t - sum(chunks))))
    num_heads = num_kv_heads * group
    torch.manual_seed(seed)
    module = afs.GroupedQueryAttention(
        3, 2 * num_heads, 8, 0.0, num_heads, num_kv_heads, qkv_bias=qkv_bias, fused=fused
    )
    x = randn(b, t, 3, seed=seed)
    out_full, grad_full = forward_backward(module, x, seed)
    grads_full = qkv_grads(module)
    module.zero_grad()
    out_cached, grad_cached = forward_backward(lambda y: decode(module, y, chunks), x, seed)
    torch.testing.assert_close(out_cached, out_full, **TOL)
    torch.testing.assert_close(grad_cached, grad_full, **TOL)
    for name, value in qkv_grads(module).items():
        torch.testing.assert_close(value, grads_full[name], **TOL, msg=name)


@pytest.mark.parametrize("fused", [False, True], ids=["explicit", "fused"])
def test_token_by_token_decoding_with_padding_equals_a_full_pass(fused: bool) -> None:
    padding = left_padding([6, 3], 6)
    torch.manual_seed(5)
    module = afs.CachedAttention(4, 4, 8, 0.0, num_heads=2, fused=fused)
    x = randn(2, 6, 4, seed=7)
    with torch.no_grad():
        full = module(x, key_padding_mask=padding)
        cached = decode(module, x, [1] * 6, padding)
    torch.testing.assert_close(cached, full, **TOL)


@pytest.mark.parametrize("num_kv_heads", [2, 1], ids=["mha", "gqa"])
def test_decoding_one_token_passes_no_mask_so_the_flash_kernel_can_run(
    num_kv_heads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch.manual_seed(11)
    module = afs.GroupedQueryAttention(4, 4, 8, 0.0, 2, num_kv_heads, fused=True)
    x = randn(2, 6, 4, seed=12)
    with torch.no_grad():
        full = module(x)
    calls: list[dict] = []
    sdpa = F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return sdpa(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    with torch.no_grad():
        cached = decode(module, x, [3, 1, 1, 1])  # a prompt of 3, then 1 at a time
    torch.testing.assert_close(cached, full, **TOL)
    assert [c["is_causal"] for c in calls] == [True, False, False, False]
    assert all(c.get("attn_mask") is None for c in calls)
    # Two new tokens after cached ones still need the (t, s) causal rows.
    calls.clear()
    with torch.no_grad():
        decode(module, x[:, :5], [3, 2])
    assert calls[1]["is_causal"] is False and calls[1]["attn_mask"].shape == (2, 5)


def test_cached_weights_cover_every_cached_token() -> None:
    torch.manual_seed(6)
    module = afs.CachedAttention(4, 4, 8, 0.0, num_heads=2)
    cache = afs.KVCache()
    module(randn(1, 3, 4, seed=8), kv_cache=cache)
    _, weights = module(randn(1, 2, 4, seed=9), return_weights=True, kv_cache=cache)
    assert weights.shape == (1, 2, 2, 5)
    # The first new token (position 3) sees positions 0 to 3, not 4.
    assert torch.all(weights[0, :, 0, 4] == 0) and torch.all(weights[0, :, 0, :4] > 0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(1, 2, 2))


@pytest.mark.parametrize(("num_heads", "num_kv_heads"), [(4, 4), (4, 2), (4, 1), (6, 3)])
def test_cache_shrinks_by_heads_over_key_value_heads(num_heads: int, num_kv_heads: int) -> None:
    b, t, head_dim = 2, 5, 3
    module = afs.GroupedQueryAttention(4, num_heads * head_dim, 8, 0.0, num_heads, num_kv_heads)
    cache = afs.KVCache()
    assert cache.length == 0 and cache.nbytes == 0 and len(cache) == 0
    with torch.no_grad():
        module(randn(b, t, 4, seed=10), kv_cache=cache)
    assert cache.keys is not None and cache.values is not None
    assert cache.keys.shape == cache.values.shape == (b, num_kv_heads, t, head_dim)
    full_size = 2 * b * num_heads * t * head_dim * 4  # bytes of float32 keys and values
    assert cache.nbytes * num_heads // num_kv_heads == full_size
    cache.reset()
    assert cache.length == 0 and cache.keys is None


# ---------------------------------------------------------------------------------------------
# Misuse
# ---------------------------------------------------------------------------------------------


def small(fused: bool = False) -> afs.CachedAttention:
    torch.manual_seed(7)
    return afs.CachedAttention(4, 4, 6, 0.0, num_heads=2, fused=fused)


@pytest.mark.parametrize("fused", [False, True], ids=["explicit", "fused"])
def test_cache_overflow_past_context_length_is_refused_and_leaves_the_cache(
    fused: bool,
) -> None:
    module, cache = small(fused), afs.KVCache()
    module(randn(1, 4, 4, seed=0), kv_cache=cache)
    with pytest.raises(
        ValueError, match=r"kv_cache: expected at most context_length=6 .* 4 cached"
    ):
        module(randn(1, 3, 4, seed=1), kv_cache=cache)
    assert cache.length == 4
    module(randn(1, 2, 4, seed=1), kv_cache=cache)
    assert cache.length == 6


@pytest.mark.parametrize("fused", [False, True])
def test_cached_decoding_under_autocast_checks_the_dtype_of_the_cached_keys(
    fused: bool,
) -> None:
    # Under autocast the input stays float32 while the projected keys are bfloat16: the
    # cache must compare like with like, and decoding must equal one full pass.
    module = small()
    module.fused = fused
    x = randn(1, 4, 4, seed=3)
    cache = afs.KVCache()
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.no_grad():
        steps = torch.cat([module(x[:, i : i + 1], kv_cache=cache) for i in range(4)], dim=1)
        full = module(x)
    assert cache.keys is not None and cache.keys.dtype == torch.bfloat16
    assert torch.allclose(steps.float(), full.float(), atol=2e-2)


def test_cache_batch_dtype_device_and_layer_mismatches_are_refused() -> None:
    module, cache = small(), afs.KVCache()
    module(randn(2, 2, 4, seed=0), kv_cache=cache)
    with pytest.raises(ValueError, match=r"kv_cache: expected a batch of b=2 .* got b=3"):
        module(randn(3, 1, 4, seed=1), kv_cache=cache)
    double = copy.deepcopy(module).double()
    with pytest.raises(
        TypeError, match=r"kv_cache: expected dtype torch.float32 .*got torch.float64"
    ):
        double(randn(2, 1, 4, seed=1, dtype=torch.float64), kv_cache=cache)
    other = afs.CachedAttention(4, 6, 6, 0.0, num_heads=3)
    with pytest.raises(ValueError, match=r"kv_cache: expected keys with \(h_kv, d_h\) = \(2, 2\)"):
        other(randn(2, 1, 4, seed=1), kv_cache=cache)
    elsewhere = afs.KVCache()
    elsewhere.keys = torch.empty(2, 2, 1, 2, device="meta")
    elsewhere.values = torch.empty(2, 2, 1, 2, device="meta")
    with pytest.raises(ValueError, match=r"kv_cache: expected tokens on the cache's device meta"):
        module(randn(2, 1, 4, seed=1), kv_cache=elsewhere)
    with pytest.raises(TypeError, match=r"kv_cache: expected a KVCache .* got dict"):
        module(randn(2, 1, 4, seed=1), kv_cache={})
    assert cache.length == 2


@pytest.mark.parametrize(
    ("mask", "error", "message"),
    [
        ([[False, False]], TypeError, r"key_padding_mask: expected a bool tensor .* got list"),
        (
            torch.zeros(1, 2),
            TypeError,
            r"key_padding_mask: expected a bool tensor \(True = padding\), got torch.float32",
        ),
        (
            torch.zeros(1, 3, dtype=torch.bool),
            ValueError,
            r"key_padding_mask: expected shape \(b, s\) = \(1, 2\).* got \(1, 3\)",
        ),
        (
            torch.zeros(2, dtype=torch.bool),
            ValueError,
            r"key_padding_mask: expected shape \(b, s\) = \(1, 2\)",
        ),
        (
            torch.zeros(1, 2, dtype=torch.bool, device="meta"),
            ValueError,
            r"key_padding_mask: expected a tensor on the input's device cpu, got meta",
        ),
    ],
    ids=["list", "float", "wrong-length", "no-batch", "device"],
)
@pytest.mark.parametrize("fused", [False, True], ids=["explicit", "fused"])
def test_bad_padding_masks_are_refused(
    mask: object, error: type[Exception], message: str, fused: bool
) -> None:
    with pytest.raises(error, match=message):
        small(fused)(randn(1, 2, 4, seed=0), key_padding_mask=mask)


def test_padding_mask_with_a_cache_covers_cached_and_new_tokens() -> None:
    module, cache = small(), afs.KVCache()
    module(randn(1, 3, 4, seed=0), kv_cache=cache)
    with pytest.raises(ValueError, match=r"expected shape \(b, s\) = \(1, 4\), one flag per key"):
        module(
            randn(1, 1, 4, seed=1),
            kv_cache=cache,
            key_padding_mask=torch.zeros(1, 1, dtype=torch.bool),
        )


def test_grouped_query_attention_arguments_are_checked() -> None:
    with pytest.raises(
        ValueError, match=r"num_kv_heads: expected a divisor of num_heads=4, .* got 3"
    ):
        afs.GroupedQueryAttention(4, 8, 6, 0.0, num_heads=4, num_kv_heads=3)
    with pytest.raises(ValueError, match=r"num_kv_heads: expected a positive int, got 0"):
        afs.GroupedQueryAttention(4, 8, 6, 0.0, num_heads=4, num_kv_heads=0)
    with pytest.raises(TypeError, match=r"num_kv_heads: expected a positive int, got float"):
        afs.GroupedQueryAttention(4, 8, 6, 0.0, num_heads=4, num_kv_heads=2.0)
    gqa = afs.GroupedQueryAttention(4, 8, 6, 0.0, num_heads=4, num_kv_heads=2, fused=True)
    with pytest.raises(ValueError, match=r"return_weights: expected False on the fused path"):
        gqa(randn(1, 2, 4, seed=0), return_weights=True)
    gqa.fused = "no"
    with pytest.raises(TypeError, match=r"fused: expected a bool, got str 'no'"):
        gqa(randn(1, 2, 4, seed=0))
    with pytest.raises(AttributeError, match=r"'context_length' .* has no setter"):
        gqa.context_length = 7
    assert gqa.context_length == 6


def test_input_checks_still_name_the_problem_on_the_fast_path() -> None:
    module = small(fused=True)
    with pytest.raises(ValueError, match=r"x: expected at most context_length=6 tokens, got 7"):
        module(randn(1, 7, 4, seed=0))
    with pytest.raises(TypeError, match=r"x: expected dtype torch.float32 .* got torch.float64"):
        module(randn(1, 2, 4, seed=0, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"x: expected the last dimension to be d_in=4"):
        module(randn(1, 2, 5, seed=0))
    with pytest.raises(TypeError, match=r"x: expected a torch.Tensor .* got list"):
        module([[1.0]])


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        (
            ((1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4)),
            {},
            TypeError,
            r"queries: expected a torch.Tensor",
        ),
        (
            ((1, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4)),
            {},
            ValueError,
            r"queries: expected a tensor of shape",
        ),
        (
            ((1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 2, 4)),
            {},
            ValueError,
            r"values: expected the shape of the keys",
        ),
        (
            ((1, 2, 3, 4), (1, 3, 3, 4), (1, 3, 3, 4)),
            {},
            ValueError,
            r"keys: expected \(b, h, s, d_h\) .* like the queries",
        ),
        (
            ((1, 2, 3, 4), (1, 2, 2, 4), (1, 2, 2, 4)),
            {},
            ValueError,
            r"\(s >= t = 3\) when causal=True, got s=2",
        ),
        (((1, 2, 3, 4),) * 3, {"block_size": 0}, ValueError, r"block_size: expected a positive"),
        (((1, 2, 3, 4),) * 3, {"causal": "yes"}, TypeError, r"causal: expected a bool"),
    ],
    ids=["not-tensor", "rank", "kv-shapes", "heads", "causal-s-lt-t", "block", "causal-type"],
)
def test_tiled_attention_refuses_bad_inputs(
    args: tuple, kwargs: dict, error: type[Exception], message: str
) -> None:
    tensors = [
        torch.zeros(shape) if isinstance(shape, tuple) and len(shape) in (3, 4) else shape
        for shape in args
    ]
    if message.startswith("queries: expected a torch.Tensor"):
        tensors[0] = [0.0]
    with pytest.raises(error, match=message):
        afs.tiled_attention(*tensors, **kwargs)


def test_tiled_attention_refuses_mixed_dtypes() -> None:
    q = torch.zeros(1, 1, 2, 2)
    with pytest.raises(ValueError, match=r"keys: expected torch.float32 on cpu like the queries"):
        afs.tiled_attention(q, q.double(), q.double())


# ---------------------------------------------------------------------------------------------
# Tiled attention
# ---------------------------------------------------------------------------------------------


@FAST
@given(
    b=st.integers(1, 2),
    h=st.integers(1, 2),
    t=st.integers(1, 20),
    extra=st.integers(0, 6),
    d=st.integers(1, 8),
    block_size=st.integers(1, 9),
    causal=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_tiled_attention_equals_sdpa(
    b: int, h: int, t: int, extra: int, d: int, block_size: int, causal: bool, seed: int
) -> None:
    s = t + extra
    q = randn(b, h, t, d, seed=seed).requires_grad_(True)
    k = randn(b, h, s, d, seed=seed + 1).requires_grad_(True)
    v = randn(b, h, s, d, seed=seed + 2).requires_grad_(True)
    # Query i sits at position s - t + i: the last t of s tokens.
    allowed = torch.ones(t, s, dtype=torch.bool).tril(diagonal=s - t) if causal else None
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    probe = randn(b, h, t, d, seed=seed + 3)
    expected_grads = torch.autograd.grad((expected * probe).sum(), (q, k, v))
    result = afs.tiled_attention(q, k, v, block_size=block_size, causal=causal)
    grads = torch.autograd.grad((result * probe).sum(), (q, k, v))
    torch.testing.assert_close(result, expected, **TOL)
    for grad, expected_grad in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(grad, expected_grad, **TOL)


def test_tiled_attention_stays_finite_for_huge_scores() -> None:
    # Scores of several thousand: exp would overflow without the running maximum.
    q = torch.full((1, 1, 8, 4), 40.0)
    k = torch.full((1, 1, 8, 4), 40.0)
    v = randn(1, 1, 8, 4, seed=0)
    result = afs.tiled_attention(q, k, v, block_size=3)
    torch.testing.assert_close(result, F.scaled_dot_product_attention(q, k, v, is_causal=True))


class LargestTensor(TorchDispatchMode):
    """Records the largest number of elements of any tensor an operation produces."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for x in tree_flatten(out)[0]:
            if isinstance(x, torch.Tensor):
                self.largest = max(self.largest, x.numel())
        return out


def test_tiled_attention_never_forms_the_t_by_t_matrix() -> None:
    b, h, t, d, block = 1, 2, 256, 8, 32
    q, k, v = (randn(b, h, t, d, seed=i) for i in range(3))
    with torch.no_grad(), LargestTensor() as mode:
        afs.tiled_attention(q, k, v, block_size=block)
    assert mode.largest == b * h * t * d  # the output, larger than any (block, block) tile
    with torch.no_grad(), LargestTensor() as explicit:
        (q @ k.transpose(2, 3)).softmax(-1) @ v
    assert explicit.largest == b * h * t * t


def test_tiled_attention_peak_memory_grows_linearly_with_t() -> None:
    def peaks(t: int) -> tuple[int, int]:
        q, k, v = (randn(1, 2, t, 16, seed=i) for i in range(3))
        mask = afs.causal_mask(t)

        def explicit() -> torch.Tensor:
            scores = (q @ k.transpose(2, 3)).masked_fill(mask, float("-inf"))
            return scores.softmax(-1) @ v

        with torch.no_grad():
            return (
                afs.measure_peak_memory(lambda: afs.tiled_attention(q, k, v, block_size=32)),
                afs.measure_peak_memory(explicit),
            )

    (tiled_1, explicit_1), (tiled_2, explicit_2), (tiled_4, explicit_4) = map(
        peaks, (128, 256, 512)
    )
    # Linear: going from 2t to 4t adds twice what going from t to 2t added (a tile's buffers
    # are a constant on top)...
    assert 1.9 < (tiled_4 - tiled_2) / (tiled_2 - tiled_1) < 2.1
    # ...quadratic for the explicit path, whose (t, t) scores dominate: four times as much.
    assert 3.8 < (explicit_4 - explicit_2) / (explicit_2 - explicit_1) < 4.2
    assert explicit_4 >= 2 * 512 * 512 * 4  # the (t, t) scores of both heads, in bytes
    assert tiled_4 < explicit_4 / 10


def test_measure_peak_memory_counts_live_tensors_once() -> None:
    def two_then_one() -> torch.Tensor:
        a = torch.zeros(1000)  # 4000 bytes
        view = a[:500]  # shares a's storage
        b = torch.ones(1000)
        del a, view
        return b + 1  # b is alive, a is gone

    assert afs.measure_peak_memory(two_then_one) == 8000


def test_measure_peak_memory_counts_views_of_earlier_tensors_as_nothing() -> None:
    k = torch.zeros(4, 8, 16)  # 2048 bytes that exist before the call
    assert afs.measure_peak_memory(lambda: k.transpose(-2, -1)) == 0
    assert afs.measure_peak_memory(lambda: k[:, :2].unsqueeze(0)) == 0  # a view of a view
    assert afs.measure_peak_memory(lambda: k.add_(1)) == 0  # in place: no new storage
    assert afs.measure_peak_memory(lambda: k.transpose(-2, -1).contiguous()) == 2048
    assert afs.measure_peak_memory(lambda: torch.cat([k, k])) == 4096


def test_measure_peak_memory_says_what_is_missing_if_torch_moves_its_dispatch_mode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from attention_from_scratch import memory

    monkeypatch.setattr(memory, "TorchDispatchMode", object)
    with pytest.raises(RuntimeError, match=r"TorchDispatchMode .* measure on CUDA"):
        afs.measure_peak_memory(lambda: torch.zeros(10))


# ---------------------------------------------------------------------------------------------
# Precision and the packed weights of the fused path
# ---------------------------------------------------------------------------------------------


def test_explicit_path_in_float16_stays_finite_like_the_fused_path() -> None:
    # q . k reaches 64 * 40 * 40 = 102400 > 65504, the largest float16; q . k / sqrt(64)
    # = 12800 does not. Scaling the queries first keeps every intermediate in range.
    d = 64
    module = afs.MultiHeadAttention(d, d, 4, 0.0, num_heads=1)
    with torch.no_grad():
        for layer in (module.W_query, module.W_key, module.W_value, module.out_proj):
            layer.weight.copy_(torch.eye(d))
        module.out_proj.bias.zero_()
    with torch.no_grad():
        # Values ignore the only feature that differs between tokens, so every value vector
        # is the same and the exact output is known whatever the weights are.
        module.W_value.weight[0, 0] = 0.0
    x = torch.full((1, 4, d), 40.0)
    x[0, :, 0] = torch.arange(4.0)
    expected = torch.full((1, 4, d), 40.0)
    expected[..., 0] = 0.0
    half = copy.deepcopy(module).half()
    with torch.no_grad():
        explicit = half(x.half())
        half.fused = True
        fused = half(x.half())
        unscaled = x.half() @ x.half().transpose(1, 2)  # the product the old order formed
    assert torch.isinf(unscaled).all()
    assert torch.isfinite(fused).all() and torch.isfinite(explicit).all()
    torch.testing.assert_close(explicit.float(), expected, rtol=0, atol=0)
    torch.testing.assert_close(fused.float(), expected, rtol=0, atol=0)


def test_fused_path_sees_weight_changes_made_without_autograd() -> None:
    torch.manual_seed(8)
    fused = afs.MultiHeadAttention(4, 4, 6, 0.0, num_heads=2, qkv_bias=True, fused=True)
    x = randn(1, 5, 4, seed=0)
    with torch.no_grad():
        before = fused(x)
        fused.W_value.weight.mul_(2)  # an in-place update, as an optimizer step makes
        fused.W_key.bias.add_(1)
        after = fused(x)
        other = afs.MultiHeadAttention(4, 4, 6, 0.0, num_heads=2, qkv_bias=True)
        fused.load_state_dict(other.state_dict())
        loaded = fused(x)
        fused.fused = False
        explicit_loaded = fused(x)
    assert not torch.allclose(before, after)
    torch.testing.assert_close(loaded, other(x).detach(), **TOL)
    torch.testing.assert_close(loaded, explicit_loaded, **TOL)


def test_fused_path_trains_every_projection() -> None:
    torch.manual_seed(9)
    fused = afs.MultiHeadAttention(4, 4, 6, 0.0, num_heads=2, qkv_bias=True, fused=True)
    optimizer = torch.optim.SGD(fused.parameters(), lr=0.1)
    x = randn(2, 5, 4, seed=1)
    before = copy.deepcopy(fused.state_dict())
    fused(x).square().sum().backward()
    optimizer.step()
    for name, value in fused.state_dict().items():
        assert not torch.equal(value, before[name]), name


# --- the KV cache in a whole model (chapter 6's TinyCausalModel) and greedy generation ---


def tiny_model(seed: int = 0, **kwargs: object) -> afs.CachedCausalModel:
    torch.manual_seed(seed)
    options = {"num_layers": 2, "num_heads": 2, **kwargs}
    return afs.CachedCausalModel(11, 16, 12, **options).eval()


def test_cached_model_is_chapter_6_model_with_the_same_weights_and_logits() -> None:
    torch.manual_seed(5)
    plain = afs.TinyCausalModel(11, 16, 12, num_layers=2, num_heads=2, mlp=True).eval()
    torch.manual_seed(5)
    cached = afs.CachedCausalModel(11, 16, 12, num_layers=2, num_heads=2, mlp=True).eval()
    assert isinstance(cached, afs.TinyCausalModel)
    assert all(
        isinstance(layer, afs.CachedAttention)
        for layer in (block.attention for block in cached.blocks)
    )
    assert not any(
        isinstance(layer, afs.CachedAttention)
        for layer in (block.attention for block in plain.blocks)
    )
    for (name, value), (other, expected) in zip(
        cached.state_dict().items(), plain.state_dict().items(), strict=True
    ):
        assert name == other and torch.equal(value, expected), name  # same draws, same order
    tokens = torch.randint(0, 11, (2, 9), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        torch.testing.assert_close(cached(tokens), plain(tokens), rtol=0, atol=0)


def test_generate_with_a_cache_needs_the_cached_model() -> None:
    torch.manual_seed(0)
    plain = afs.TinyCausalModel(11, 16, 12, num_layers=2, num_heads=2)
    prompt = torch.zeros(1, 3, dtype=torch.long)
    tokens, _ = afs.generate(plain, prompt, 2, use_cache=False)
    assert tokens.shape == (1, 5)
    with pytest.raises(
        TypeError, match=r"model: expected a CachedCausalModel .* got TinyCausalModel"
    ):
        afs.generate(plain, prompt, 2)


@FAST
@given(
    positions=st.sampled_from(["none", "learned", "sinusoidal"]),
    extras=st.booleans(),
    chunks=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    seed=st.integers(0, 2**16),
)
def test_model_with_caches_equals_one_full_pass(
    positions: str, extras: bool, chunks: list[int], seed: int
) -> None:
    model = tiny_model(seed, positions=positions, mlp=extras, layer_norm=extras)
    tokens = torch.randint(0, 11, (2, sum(chunks)), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        full = model(tokens)  # (b, t, vocab)
        caches = [afs.KVCache() for _ in range(2)]
        parts, start = [], 0
        for size in chunks:  # the prompt in pieces, as a decoder feeds it
            parts.append(model(tokens[:, start : start + size], kv_caches=caches))
            start += size
    assert all(cache.length == tokens.shape[1] for cache in caches)
    torch.testing.assert_close(torch.cat(parts, dim=1), full, **TOL)


def test_model_weights_with_a_cache_cover_every_cached_key() -> None:
    model = tiny_model()
    tokens = torch.randint(0, 11, (1, 7), generator=torch.Generator().manual_seed(1))
    caches = [afs.KVCache(), afs.KVCache()]
    with torch.no_grad():
        _, full_weights = model(tokens, return_weights=True)
        model(tokens[:, :5], kv_caches=caches)
        _, weights = model(tokens[:, 5:], return_weights=True, kv_caches=caches)
    assert [w.shape for w in weights] == [(1, 2, 2, 7)] * 2  # (b, h, t, s + t)
    for cached, full in zip(weights, full_weights, strict=True):
        torch.testing.assert_close(cached, full[:, :, 5:], **TOL)


@pytest.mark.parametrize(
    ("caches", "error", "match"),
    [
        (lambda: afs.KVCache(), TypeError, "expected a list of 2 KVCache"),
        (lambda: [afs.KVCache(), "cache"], TypeError, "expected a list of 2 KVCache"),
        (lambda: [afs.KVCache()], ValueError, r"one KVCache per layer \(2\), got 1"),
        (lambda: [afs.KVCache()] * 3, ValueError, r"one KVCache per layer \(2\), got 3"),
    ],
)
def test_model_refuses_caches_that_do_not_fit(caches, error, match: str) -> None:
    with pytest.raises(error, match=match):
        tiny_model()(torch.zeros(1, 3, dtype=torch.long), kv_caches=caches())


def test_model_refuses_caches_of_different_lengths_and_a_full_context() -> None:
    model = tiny_model()
    caches = [afs.KVCache(), afs.KVCache()]
    with torch.no_grad():
        model(torch.zeros(1, 10, dtype=torch.long), kv_caches=caches)
        with pytest.raises(ValueError, match=r"context_length=12 tokens, got 10 cached \+ 3"):
            model(torch.zeros(1, 3, dtype=torch.long), kv_caches=caches)
        caches[1].reset()
        with pytest.raises(ValueError, match=r"same tokens, got lengths \[0, 10\]"):
            model(torch.zeros(1, 1, dtype=torch.long), kv_caches=caches)


@pytest.mark.parametrize("use_cache", [False, True])
def test_generate_picks_the_argmax_of_a_full_pass_at_every_step(use_cache: bool) -> None:
    model = tiny_model(3, positions="sinusoidal", mlp=True, layer_norm=True)
    prompt = torch.randint(0, 11, (3, 4), generator=torch.Generator().manual_seed(4))
    tokens, logits = afs.generate(model, prompt, 9, use_cache=use_cache)
    assert tokens.shape == (3, 13) and logits.shape == (3, 9, 11)
    assert torch.equal(tokens[:, :4], prompt)
    with torch.no_grad():
        for step in range(9):  # reference: the whole sequence so far, no cache
            expected = model(tokens[:, : 4 + step])[:, -1]  # (b, vocab)
            torch.testing.assert_close(logits[:, step], expected, **TOL)
            assert torch.equal(tokens[:, 4 + step], expected.argmax(dim=-1))


def test_generate_restores_training_mode_and_fills_the_context() -> None:
    model = tiny_model(dropout=0.5).train()
    tokens, _ = afs.generate(model, torch.zeros(2, 1, dtype=torch.long), 12)
    assert model.training and tokens.shape == (2, 13)  # 12 tokens fed, 1 more predicted
    again, _ = afs.generate(model, torch.zeros(2, 1, dtype=torch.long), 12)
    assert torch.equal(tokens, again)  # eval mode inside: no dropout


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda m, p: afs.generate(nn.Linear(2, 2), p, 1),
            TypeError,
            "TinyCausalModel, got Linear",
        ),
        (lambda m, p: afs.generate(m, p.float(), 1), TypeError, "prompt: expected an integer"),
        (
            lambda m, p: afs.generate(m, p[0], 1),
            ValueError,
            r"prompt: expected a tensor of shape \(b, t\)",
        ),
        (lambda m, p: afs.generate(m, p, 0), ValueError, "new_tokens"),
        (lambda m, p: afs.generate(m, p, 2.0), TypeError, "new_tokens"),
        (lambda m, p: afs.generate(m, p, 11), ValueError, r"got 3 \+ 11 - 1 = 13; generate fewer"),
        (lambda m, p: afs.generate(m, p, 1, use_cache="yes"), TypeError, "use_cache"),
    ],
)
def test_generate_names_bad_arguments(call, error, match: str) -> None:
    with pytest.raises(error, match=match):
        call(tiny_model(), torch.zeros(1, 3, dtype=torch.long))


@pytest.mark.parametrize("num_kv_heads", [4, 2], ids=["cached", "grouped"])
def test_new_queries_after_cached_keys_see_the_keys_up_to_their_own_position(
    num_kv_heads: int,
) -> None:
    # Three new queries after four cached keys: query i sits at position 4 + i, on both paths
    # (the fused kernel's own causal mask would align it with key i).
    torch.manual_seed(0)
    module = afs.GroupedQueryAttention(8, 8, 8, 0.0, 4, num_kv_heads)
    q = torch.randn(1, 4, 3, 2)
    k, v = torch.randn(2, 1, num_kv_heads, 7, 2).unbind(0)
    hidden, empty = module.hidden_keys(4, 3)
    assert empty is None
    explicit, weights = module.attend(q, k, v, hidden)
    assert weights is not None
    future = torch.ones(3, 7, dtype=torch.bool).triu(5)  # query i sees keys 0 .. 4 + i
    assert torch.equal(weights == 0, future.expand_as(weights))
    module.fused = True
    fused, _ = module.attend(q, k, v, module.hidden_keys(4, 3)[0])
    torch.testing.assert_close(fused, explicit, **TOL)
