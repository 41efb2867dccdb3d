"""Implementations that must compute the same function agree on outputs and gradients.

Weights are copied from one implementation into the other; the outputs, the gradient with
respect to the input and the gradients with respect to every weight are then compared.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from helpers import FAST, forward_backward, randn
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

import attention_from_scratch as afs

DTYPES = [torch.float32, torch.float64]
TOL = {
    torch.float32: {"rtol": 1e-4, "atol": 1e-5},
    torch.float64: {"rtol": 1e-9, "atol": 1e-11},
}


def set_identity_out_proj(module: afs.MultiHeadAttention) -> None:
    with torch.no_grad():
        module.out_proj.weight.copy_(torch.eye(module.d_out))
        module.out_proj.bias.zero_()


def module_grads(module: nn.Module) -> dict[str, torch.Tensor]:
    grads = {}
    for name, param in module.named_parameters():
        assert param.grad is not None, f"{name} got no gradient"
        grads[name] = param.grad
    return grads


# ---------------------------------------------------------------------------------------------
# SelfAttentionV1 (x @ W) and SelfAttentionV2 (nn.Linear, x @ W.T)
# ---------------------------------------------------------------------------------------------


@FAST
@given(
    batch=st.one_of(st.none(), st.integers(1, 3)),
    t=st.integers(1, 7),
    d_in=st.integers(1, 5),
    d_out=st.integers(1, 5),
    seed=st.integers(0, 2**16),
    dtype=st.sampled_from(DTYPES),
)
def test_self_attention_v1_equals_v2_with_transposed_weights(
    batch: int | None, t: int, d_in: int, d_out: int, seed: int, dtype: torch.dtype
) -> None:
    torch.manual_seed(seed)
    v1 = afs.SelfAttentionV1(d_in, d_out).to(dtype)
    v2 = afs.SelfAttentionV2(d_in, d_out).to(dtype)
    with torch.no_grad():
        for name in ("W_query", "W_key", "W_value"):
            getattr(v2, name).weight.copy_(getattr(v1, name).T)
    shape = (t, d_in) if batch is None else (batch, t, d_in)
    x = randn(*shape, seed=seed, dtype=dtype)

    out1, grad1 = forward_backward(v1, x, seed)
    out2, grad2 = forward_backward(v2, x, seed)
    torch.testing.assert_close(out1, out2, **TOL[dtype])
    torch.testing.assert_close(grad1, grad2, **TOL[dtype])
    for name in ("W_query", "W_key", "W_value"):
        torch.testing.assert_close(
            getattr(v1, name).grad.T, getattr(v2, name).weight.grad, **TOL[dtype]
        )


def test_self_attention_v1_and_v2_disagree_without_the_transpose(toy_inputs: torch.Tensor) -> None:
    # The check above must be able to fail: copying W instead of W.T changes the result.
    torch.manual_seed(123)
    v1 = afs.SelfAttentionV1(3, 3)
    v2 = afs.SelfAttentionV2(3, 3)
    with torch.no_grad():
        for name in ("W_query", "W_key", "W_value"):
            getattr(v2, name).weight.copy_(getattr(v1, name))
    assert not torch.allclose(v1(toy_inputs), v2(toy_inputs), atol=1e-4)


# ---------------------------------------------------------------------------------------------
# MultiHeadAttentionWrapper (h separate heads) and MultiHeadAttention (one split projection)
# ---------------------------------------------------------------------------------------------


def wrapper_and_multi_head(
    d_in: int, head_size: int, num_heads: int, context_length: int, qkv_bias: bool
) -> tuple[afs.MultiHeadAttentionWrapper, afs.MultiHeadAttention]:
    wrapper = afs.MultiHeadAttentionWrapper(
        d_in, head_size, context_length, 0.0, num_heads, qkv_bias=qkv_bias
    )
    mha = afs.MultiHeadAttention(
        d_in, num_heads * head_size, context_length, 0.0, num_heads, qkv_bias=qkv_bias
    )
    with torch.no_grad():
        for name in ("W_query", "W_key", "W_value"):
            # Head i owns rows i * d_h to (i + 1) * d_h of the combined projection.
            layers = [getattr(head, name) for head in wrapper.heads]
            getattr(mha, name).weight.copy_(torch.cat([layer.weight for layer in layers]))
            if qkv_bias:
                getattr(mha, name).bias.copy_(torch.cat([layer.bias for layer in layers]))
    set_identity_out_proj(mha)
    return wrapper, mha


@FAST
@given(
    b=st.integers(1, 3),
    t=st.integers(1, 6),
    d_in=st.integers(1, 5),
    head_size=st.integers(1, 4),
    num_heads=st.integers(1, 4),
    qkv_bias=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_wrapper_equals_multi_head_attention_slices(
    b: int, t: int, d_in: int, head_size: int, num_heads: int, qkv_bias: bool, seed: int
) -> None:
    torch.manual_seed(seed)
    wrapper, mha = wrapper_and_multi_head(d_in, head_size, num_heads, 6, qkv_bias)
    x = randn(b, t, d_in, seed=seed)
    tol = TOL[torch.float32]

    out_w, grad_w = forward_backward(wrapper, x, seed)
    out_m, grad_m = forward_backward(mha, x, seed)
    assert out_w.shape == out_m.shape == (b, t, num_heads * head_size)
    torch.testing.assert_close(out_w, out_m, **tol)
    torch.testing.assert_close(grad_w, grad_m, **tol)
    for name in ("W_query", "W_key", "W_value"):
        for i, head in enumerate(wrapper.heads):
            rows = slice(i * head_size, (i + 1) * head_size)
            combined = getattr(mha, name)
            torch.testing.assert_close(
                combined.weight.grad[rows], getattr(head, name).weight.grad, **tol
            )
            if qkv_bias:
                torch.testing.assert_close(
                    combined.bias.grad[rows], getattr(head, name).bias.grad, **tol
                )

    with torch.no_grad():
        _, weights_w = wrapper(x, return_weights=True)
        _, weights_m = mha(x, return_weights=True)
    assert weights_w.shape == weights_m.shape == (b, num_heads, t, t)
    torch.testing.assert_close(weights_w, weights_m, **tol)


# ---------------------------------------------------------------------------------------------
# MultiHeadAttention: explicit path and fused (scaled_dot_product_attention) path
# ---------------------------------------------------------------------------------------------


@FAST
@given(
    b=st.integers(1, 3),
    t=st.integers(1, 8),
    d_in=st.integers(1, 6),
    head_size=st.integers(1, 4),
    num_heads=st.integers(1, 4),
    qkv_bias=st.booleans(),
    train=st.booleans(),
    seed=st.integers(0, 2**16),
    dtype=st.sampled_from(DTYPES),
)
def test_multi_head_attention_explicit_equals_fused(
    b: int,
    t: int,
    d_in: int,
    head_size: int,
    num_heads: int,
    qkv_bias: bool,
    train: bool,
    seed: int,
    dtype: torch.dtype,
) -> None:
    torch.manual_seed(seed)
    # In eval mode dropout is off whatever p is; in train mode p = 0 keeps the two comparable.
    dropout = 0.0 if train else 0.3
    explicit = afs.MultiHeadAttention(
        d_in, num_heads * head_size, 8, dropout, num_heads, qkv_bias=qkv_bias
    ).to(dtype)
    fused = copy.deepcopy(explicit)
    fused.fused = True
    explicit.train(train)
    fused.train(train)
    x = randn(b, t, d_in, seed=seed, dtype=dtype)

    out_e, grad_e = forward_backward(explicit, x, seed)
    out_f, grad_f = forward_backward(fused, x, seed)
    torch.testing.assert_close(out_e, out_f, **TOL[dtype])
    torch.testing.assert_close(grad_e, grad_f, **TOL[dtype])
    grads_f = module_grads(fused)
    for name, grad in module_grads(explicit).items():
        torch.testing.assert_close(grad, grads_f[name], **TOL[dtype])


# ---------------------------------------------------------------------------------------------
# The fused path never answers with old weights, and both paths trace and export
# ---------------------------------------------------------------------------------------------


def both_paths(seed: int = 8) -> tuple[afs.MultiHeadAttention, afs.MultiHeadAttention]:
    torch.manual_seed(seed)
    explicit = afs.MultiHeadAttention(4, 6, 6, 0.0, num_heads=3, qkv_bias=True)
    fused = copy.deepcopy(explicit)
    fused.fused = True
    return explicit, fused


def assert_paths_agree(
    explicit: afs.MultiHeadAttention, fused: afs.MultiHeadAttention, x: torch.Tensor
) -> None:
    """Under no_grad, where a cache of packed weights would be reused, and with autograd."""
    with torch.no_grad():
        torch.testing.assert_close(fused(x), explicit(x), **TOL[torch.float32])
    torch.testing.assert_close(fused(x), explicit(x), **TOL[torch.float32])


def change_through_data(module: nn.Module) -> None:
    # The hand-written SGD step of many tutorials: .data bypasses the version counter.
    module.W_query.weight.data.mul_(0)
    module.W_value.bias.data.add_(1)


def change_with_copy(module: nn.Module) -> None:
    with torch.no_grad():
        module.W_key.weight.copy_(torch.ones_like(module.W_key.weight))


def change_by_an_optimizer_step(module: nn.Module) -> None:
    module(randn(2, 5, 4, seed=3)).square().sum().backward()
    torch.optim.SGD(module.parameters(), lr=0.5).step()


def change_by_loading(module: nn.Module) -> None:
    torch.manual_seed(99)
    other = afs.MultiHeadAttention(4, 6, 6, 0.0, num_heads=3, qkv_bias=True)
    module.load_state_dict(other.state_dict())


def change_with_to(module: nn.Module) -> None:
    module.to(torch.float64).to(torch.float32)  # new storages, same values
    with torch.no_grad():
        module.out_proj.weight.mul_(-1)


@pytest.mark.parametrize(
    "change",
    [
        change_through_data,
        change_with_copy,
        change_by_an_optimizer_step,
        change_by_loading,
        change_with_to,
    ],
)
def test_fused_path_sees_every_weight_change(change: Callable[[nn.Module], None]) -> None:
    explicit, fused = both_paths()
    x = randn(2, 5, 4, seed=0)
    with torch.no_grad():
        before = fused(x)  # a cache of packed weights would be filled here
    change(explicit)
    change(fused)
    assert not torch.allclose(explicit(x), before)  # the change matters
    assert_paths_agree(explicit, fused, x)


def test_fused_path_after_zeroing_the_query_weights_through_data() -> None:
    # Zero queries give equal scores: every token averages the values it may see.
    _, fused = both_paths()
    x = randn(1, 4, 4, seed=1)
    with torch.no_grad():
        fused(x)
    fused.W_query.weight.data.mul_(0)
    fused.W_query.bias.data.mul_(0)
    with torch.no_grad():
        values = fused.W_value(x)  # (b, t, d_out)
        counts = torch.arange(1, 5).view(1, 4, 1)  # tokens visible to each query
        expected = fused.out_proj(values.cumsum(dim=1) / counts)  # (b, t, d_out)
        torch.testing.assert_close(fused(x), expected, **TOL[torch.float32])


@pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning", "ignore::DeprecationWarning")
@pytest.mark.parametrize("fused", [False, True], ids=["explicit", "fused"])
def test_both_paths_trace_with_torch_jit(fused: bool) -> None:
    explicit, fused_module = both_paths()
    module = (fused_module if fused else explicit).eval()
    x = randn(2, 5, 4, seed=0)
    with torch.no_grad():
        traced = torch.jit.trace(module, (x,), check_inputs=[(randn(2, 5, 4, seed=1),)])
        torch.testing.assert_close(traced(x), module(x), rtol=0, atol=0)
        module.W_value.weight.mul_(2)  # the traced graph reads the live parameters
        torch.testing.assert_close(traced(x), module(x), rtol=0, atol=0)


@pytest.mark.parametrize("fused", [False, True], ids=["explicit", "fused"])
def test_both_paths_export_with_torch_export(fused: bool) -> None:
    explicit, fused_module = both_paths()
    module = (fused_module if fused else explicit).eval()
    x = randn(2, 5, 4, seed=0)
    exported = torch.export.export(module, (x,))
    with torch.no_grad():
        torch.testing.assert_close(exported.module()(x), module(x), rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------
# MultiHeadAttention and torch.nn.MultiheadAttention
# ---------------------------------------------------------------------------------------------


def torch_copy_of(mha: afs.MultiHeadAttention) -> nn.MultiheadAttention:
    """An nn.MultiheadAttention holding the same weights as ``mha`` (d_in must equal d_out)."""
    reference = nn.MultiheadAttention(
        mha.d_out, mha.num_heads, dropout=0.0, bias=True, batch_first=True
    ).to(mha.out_proj.weight.dtype)
    layers = (mha.W_query, mha.W_key, mha.W_value)
    with torch.no_grad():
        reference.in_proj_weight.copy_(torch.cat([layer.weight for layer in layers]))
        if mha.W_query.bias is not None:
            reference.in_proj_bias.copy_(torch.cat([layer.bias for layer in layers]))
        else:
            reference.in_proj_bias.zero_()
        reference.out_proj.weight.copy_(mha.out_proj.weight)
        reference.out_proj.bias.copy_(mha.out_proj.bias)
    return reference


def additive_causal_mask(t: int, dtype: torch.dtype) -> torch.Tensor:
    """The float form of the causal mask: 0 where allowed, -inf above the diagonal."""
    return torch.zeros(t, t, dtype=dtype).masked_fill(afs.causal_mask(t), float("-inf"))


@pytest.mark.parametrize("mask_kind", ["bool", "float"])
@pytest.mark.parametrize("qkv_bias", [False, True])
@pytest.mark.parametrize(
    ("b", "t", "d_out", "num_heads", "seed"),
    [(1, 1, 4, 2, 0), (2, 5, 6, 3, 1), (3, 8, 8, 4, 2), (2, 7, 12, 1, 3)],
)
def test_multi_head_attention_equals_torch_multihead_attention(
    mask_kind: str, qkv_bias: bool, b: int, t: int, d_out: int, num_heads: int, seed: int
) -> None:
    torch.manual_seed(seed)
    ours = afs.MultiHeadAttention(d_out, d_out, 8, 0.0, num_heads, qkv_bias=qkv_bias)
    reference = torch_copy_of(ours)
    # nn.MultiheadAttention's boolean mask means "True = masked", like causal_mask.
    mask = afs.causal_mask(t) if mask_kind == "bool" else additive_causal_mask(t, torch.float32)
    x = randn(b, t, d_out, seed=seed)
    tol = TOL[torch.float32]

    out_ours, grad_ours = forward_backward(ours, x, seed)
    out_ref, grad_ref = forward_backward(
        lambda y: reference(y, y, y, attn_mask=mask, need_weights=False)[0], x, seed
    )
    torch.testing.assert_close(out_ours, out_ref, **tol)
    torch.testing.assert_close(grad_ours, grad_ref, **tol)
    in_proj_grad = torch.cat(
        [ours.W_query.weight.grad, ours.W_key.weight.grad, ours.W_value.weight.grad]
    )
    torch.testing.assert_close(in_proj_grad, reference.in_proj_weight.grad, **tol)
    if qkv_bias:
        in_bias_grad = torch.cat(
            [ours.W_query.bias.grad, ours.W_key.bias.grad, ours.W_value.bias.grad]
        )
        torch.testing.assert_close(in_bias_grad, reference.in_proj_bias.grad, **tol)
    torch.testing.assert_close(ours.out_proj.weight.grad, reference.out_proj.weight.grad, **tol)
    torch.testing.assert_close(ours.out_proj.bias.grad, reference.out_proj.bias.grad, **tol)


@pytest.mark.parametrize(("t", "d_out", "num_heads"), [(6, 4, 2), (8, 6, 3), (3, 8, 1)])
def test_average_attention_weights_match_torch_need_weights(
    t: int, d_out: int, num_heads: int
) -> None:
    torch.manual_seed(t)
    ours = afs.MultiHeadAttention(d_out, d_out, 8, 0.0, num_heads, qkv_bias=True)
    reference = torch_copy_of(ours)
    x = randn(2, t, d_out, seed=t)
    with torch.no_grad():
        out, weights = ours(x, return_weights=True)
        ref_out, ref_weights = reference(
            x, x, x, attn_mask=afs.causal_mask(t), need_weights=True, average_attn_weights=True
        )
    assert weights.shape == (2, num_heads, t, t)
    assert ref_weights.shape == (2, t, t)
    torch.testing.assert_close(out, ref_out, **TOL[torch.float32])
    torch.testing.assert_close(weights.mean(dim=1), ref_weights, **TOL[torch.float32])


def test_torch_multihead_attention_without_mask_differs() -> None:
    # Guard: the mask really matters in the comparison above.
    torch.manual_seed(0)
    ours = afs.MultiHeadAttention(4, 4, 6, 0.0, 2)
    reference = torch_copy_of(ours)
    x = randn(1, 6, 4, seed=0)
    with torch.no_grad():
        unmasked = reference(x, x, x, need_weights=False)[0]
        assert not torch.allclose(ours(x), unmasked, atol=1e-4)


@pytest.mark.parametrize(("b", "h", "t", "d"), [(1, 1, 1, 2), (2, 3, 5, 4), (1, 2, 9, 3)])
def test_sdpa_boolean_mask_means_allowed(b: int, h: int, t: int, d: int) -> None:
    # scaled_dot_product_attention's boolean mask is the opposite convention: True = may attend.
    q, k, v = (randn(b, h, t, d, seed=i) for i in range(3))
    allowed = ~afs.causal_mask(t)
    with_mask = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    causal = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(with_mask, causal, **TOL[torch.float32])
    scores = q @ k.transpose(-2, -1) / d**0.5  # (b, h, t, t)
    scores = scores.masked_fill(afs.causal_mask(t), float("-inf"))
    by_hand = torch.softmax(scores, dim=-1) @ v  # (b, h, t, d)
    torch.testing.assert_close(causal, by_hand, **TOL[torch.float32])
    if t > 1:
        # A common slip: passing causal_mask itself lets each query see only its future.
        wrong = F.scaled_dot_product_attention(q, k, v, attn_mask=afs.causal_mask(t))
        assert not torch.allclose(wrong, causal, atol=1e-4)


# ---------------------------------------------------------------------------------------------
# CausalAttention and a one-head MultiHeadAttention
# ---------------------------------------------------------------------------------------------


@FAST
@given(
    b=st.integers(1, 3),
    t=st.integers(1, 6),
    d_in=st.integers(1, 5),
    d_out=st.integers(1, 5),
    qkv_bias=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_causal_attention_equals_one_head_multi_head_attention(
    b: int, t: int, d_in: int, d_out: int, qkv_bias: bool, seed: int
) -> None:
    torch.manual_seed(seed)
    single = afs.CausalAttention(d_in, d_out, 6, 0.0, qkv_bias=qkv_bias)
    mha = afs.MultiHeadAttention(d_in, d_out, 6, 0.0, 1, qkv_bias=qkv_bias)
    missing, unexpected = mha.load_state_dict(single.state_dict(), strict=False)
    assert sorted(missing) == ["out_proj.bias", "out_proj.weight"]
    assert unexpected == []
    set_identity_out_proj(mha)
    x = randn(b, t, d_in, seed=seed)
    tol = TOL[torch.float32]

    out_s, grad_s = forward_backward(single, x, seed)
    out_m, grad_m = forward_backward(mha, x, seed)
    torch.testing.assert_close(out_s, out_m, **tol)
    torch.testing.assert_close(grad_s, grad_m, **tol)
    grads_m = module_grads(mha)
    for name, grad in module_grads(single).items():
        torch.testing.assert_close(grad, grads_m[name], **tol)
    with torch.no_grad():
        _, weights_s = single(x, return_weights=True)
        _, weights_m = mha(x, return_weights=True)
    torch.testing.assert_close(weights_s, weights_m[:, 0], **tol)


# ---------------------------------------------------------------------------------------------
# Simplified attention and softmax
# ---------------------------------------------------------------------------------------------


@FAST
@given(
    t=st.integers(1, 7),
    d=st.integers(1, 5),
    seed=st.integers(0, 2**16),
    dtype=st.sampled_from(DTYPES),
)
def test_simplified_attention_matrix_form_equals_loop(
    t: int, d: int, seed: int, dtype: torch.dtype
) -> None:
    x = randn(t, d, seed=seed, dtype=dtype)
    out_matrix, grad_matrix = forward_backward(afs.simplified_attention, x, seed)
    out_loop, grad_loop = forward_backward(afs.simplified_attention_loop, x, seed)
    torch.testing.assert_close(out_matrix, out_loop, **TOL[dtype])
    torch.testing.assert_close(grad_matrix, grad_loop, **TOL[dtype])
    _, weights_matrix = afs.simplified_attention(x, return_weights=True)
    _, weights_loop = afs.simplified_attention_loop(x, return_weights=True)
    torch.testing.assert_close(weights_matrix, weights_loop, **TOL[dtype])
    torch.testing.assert_close(weights_matrix.sum(dim=-1), torch.ones(t, dtype=dtype), **TOL[dtype])


@FAST
@given(b=st.integers(1, 4), t=st.integers(1, 6), d=st.integers(1, 4), seed=st.integers(0, 999))
def test_batched_simplified_attention_equals_one_sequence_at_a_time(
    b: int, t: int, d: int, seed: int
) -> None:
    x = randn(b, t, d, seed=seed)
    batched = afs.simplified_attention(x)
    for i in range(b):
        torch.testing.assert_close(batched[i], afs.simplified_attention(x[i]))


@FAST
@given(
    shape=st.lists(st.integers(1, 5), min_size=1, max_size=4),
    data=st.data(),
    scale=st.sampled_from([0.1, 1.0, 10.0]),
    seed=st.integers(0, 2**16),
)
def test_softmaxes_equal_torch_softmax(
    shape: list[int], data: st.DataObject, scale: float, seed: int
) -> None:
    dim = data.draw(st.integers(-len(shape), len(shape) - 1), label="dim")
    x = scale * randn(*shape, seed=seed)
    expected = torch.softmax(x, dim=dim)
    for softmax in (afs.softmax_naive, afs.softmax_stable):
        result = softmax(x, dim=dim)
        assert result.shape == x.shape
        torch.testing.assert_close(result, expected, **TOL[torch.float32])
        torch.testing.assert_close(
            result.sum(dim=dim), torch.ones_like(expected.sum(dim=dim)), **TOL[torch.float32]
        )


@pytest.mark.parametrize(
    "scores", [[1000.0, 1000.0, 999.0], [89.0, 0.0, -1.0], [-1000.0, -1001.0, -1002.0]]
)
def test_stable_softmax_stays_finite_where_naive_overflows(scores: list[float]) -> None:
    x = torch.tensor(scores)
    naive = afs.softmax_naive(x)
    stable = afs.softmax_stable(x)
    assert not torch.isfinite(naive).all()  # exp overflows to inf (or underflows to 0 / 0)
    assert torch.isfinite(stable).all()
    torch.testing.assert_close(stable, torch.softmax(x, dim=-1))
    torch.testing.assert_close(stable.sum(), torch.tensor(1.0))


def test_softmax_of_scores_1000_by_hand() -> None:
    stable = afs.softmax_stable(torch.tensor([1000.0, 1000.0]))
    torch.testing.assert_close(stable, torch.tensor([0.5, 0.5]))
    assert torch.isnan(afs.softmax_naive(torch.tensor([1000.0, 1000.0]))).all()


# ---------------------------------------------------------------------------------------------
# Dropout: train mode zeroes and rescales, eval mode is deterministic
# ---------------------------------------------------------------------------------------------


def causal_factory(dropout: float) -> nn.Module:
    return afs.CausalAttention(4, 3, 8, dropout)


def multi_head_factory(dropout: float) -> nn.Module:
    return afs.MultiHeadAttention(4, 6, 8, dropout, num_heads=2)


def wrapper_factory(dropout: float) -> nn.Module:
    return afs.MultiHeadAttentionWrapper(4, 3, 8, dropout, num_heads=2)


@pytest.mark.parametrize("factory", [causal_factory, multi_head_factory, wrapper_factory])
@pytest.mark.parametrize("p", [0.2, 0.5])
def test_dropout_zeroes_and_rescales_weights_in_train_mode(
    factory: Callable[[float], nn.Module], p: float
) -> None:
    torch.manual_seed(0)
    module = factory(p)
    x = randn(3, 8, 4, seed=0)
    module.eval()
    with torch.no_grad():
        out_eval, clean = module(x, return_weights=True)
    module.train()
    with torch.no_grad():
        out_train, dropped = module(x, return_weights=True)

    kept = dropped != 0
    # Every surviving weight is the clean weight scaled by 1 / (1 - p) ...
    torch.testing.assert_close(dropped[kept], clean[kept] / (1 - p))
    # ... and some weights that were not masked out were dropped.
    visible = clean > 0
    assert (visible & ~kept).any()
    assert (visible & kept).any()
    assert not torch.allclose(out_train, out_eval)
    # The masked future stays at zero whatever dropout does.
    future = afs.causal_mask(8).expand_as(dropped)
    assert torch.all(dropped[future] == 0)


@pytest.mark.parametrize("factory", [causal_factory, multi_head_factory, wrapper_factory])
def test_eval_mode_is_deterministic_and_ignores_dropout(
    factory: Callable[[float], nn.Module],
) -> None:
    torch.manual_seed(1)
    module = factory(0.5).eval()
    no_dropout = factory(0.0).eval()
    no_dropout.load_state_dict(module.state_dict())
    x = randn(2, 8, 4, seed=1)
    with torch.no_grad():
        first = module(x)
        second = module(x)
        reference = no_dropout(x)
    torch.testing.assert_close(first, second, rtol=0, atol=0)
    torch.testing.assert_close(first, reference, rtol=0, atol=0)


def test_fused_path_applies_dropout_only_in_train_mode() -> None:
    torch.manual_seed(2)
    module = afs.MultiHeadAttention(4, 6, 8, 0.5, num_heads=2, fused=True)
    x = randn(2, 8, 4, seed=2)
    with torch.no_grad():
        out_eval = module.eval()(x)
        module.fused = False
        out_explicit_eval = module(x)
        module.fused = True
        out_train = module.train()(x)
    torch.testing.assert_close(out_eval, out_explicit_eval, **TOL[torch.float32])
    assert not torch.allclose(out_train, out_eval, atol=1e-4)


def test_seeded_dropout_is_reproducible() -> None:
    torch.manual_seed(3)
    module = afs.CausalAttention(4, 3, 8, 0.5).train()
    x = randn(2, 8, 4, seed=3)
    torch.manual_seed(10)
    first = module(x)
    torch.manual_seed(10)
    second = module(x)
    torch.testing.assert_close(first, second, rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------
# Fewer tokens than context_length, and causality
# ---------------------------------------------------------------------------------------------


def fused_factory(dropout: float) -> nn.Module:
    return afs.MultiHeadAttention(4, 6, 8, dropout, num_heads=3, fused=True)


CAUSAL_FACTORIES = [causal_factory, multi_head_factory, fused_factory, wrapper_factory]


@pytest.mark.parametrize("factory", CAUSAL_FACTORIES)
@pytest.mark.parametrize("t", [1, 3, 7])
def test_short_inputs_equal_the_first_tokens_of_a_long_input(
    factory: Callable[[float], nn.Module], t: int
) -> None:
    torch.manual_seed(t)
    module = factory(0.0).eval()
    x = randn(2, 8, 4, seed=t)
    with torch.no_grad():
        full = module(x)
        short = module(x[:, :t])
    assert short.shape[:2] == (2, t)
    torch.testing.assert_close(short, full[:, :t], **TOL[torch.float32])


@pytest.mark.parametrize("factory", CAUSAL_FACTORIES)
def test_changing_later_tokens_leaves_earlier_outputs_alone(
    factory: Callable[[float], nn.Module],
) -> None:
    torch.manual_seed(5)
    module = factory(0.0).eval()
    x = randn(2, 8, 4, seed=5)
    changed = x.clone()
    changed[:, 5:] = randn(2, 3, 4, seed=6)
    with torch.no_grad():
        before = module(x)
        after = module(changed)
    torch.testing.assert_close(after[:, :5], before[:, :5], rtol=0, atol=1e-6)
    assert not torch.allclose(after[:, 5:], before[:, 5:], atol=1e-4)


@pytest.mark.parametrize("factory", CAUSAL_FACTORIES)
@pytest.mark.parametrize("i", [0, 3, 6])
def test_output_at_position_i_has_no_gradient_from_later_tokens(
    factory: Callable[[float], nn.Module], i: int
) -> None:
    torch.manual_seed(7)
    module = factory(0.0).eval()
    x = randn(2, 8, 4, seed=7).requires_grad_(True)
    module(x)[:, i].sum().backward()
    assert x.grad is not None
    assert torch.all(x.grad[:, i + 1 :] == 0)
    assert torch.any(x.grad[:, : i + 1] != 0)
