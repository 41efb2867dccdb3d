"""Devices and dtypes: the same weights give the same results on the CPU, CUDA and MPS.

The CUDA and MPS tests are skipped, with a reason, on machines without such a device; the CPU
tests (device choice, float64) run everywhere.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch
from helpers import randn
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

import attention_from_scratch as afs

needs_cuda = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU; none is visible"
)
_mps = getattr(torch.backends, "mps", None)
needs_mps = pytest.mark.skipif(
    _mps is None or not _mps.is_available(), reason="needs Apple MPS; it is not available here"
)


# Each case: a factory for the module, and the shapes of its inputs (CrossAttention takes two).
MODULE_CASES: dict[str, tuple[Callable[[], nn.Module], list[tuple[int, ...]]]] = {
    "SelfAttentionV1": (lambda: afs.SelfAttentionV1(5, 4), [(2, 6, 5)]),
    "SelfAttentionV1-unbatched": (lambda: afs.SelfAttentionV1(5, 4), [(6, 5)]),
    "SelfAttentionV2": (lambda: afs.SelfAttentionV2(5, 4, qkv_bias=True), [(2, 6, 5)]),
    "CausalAttention": (lambda: afs.CausalAttention(5, 4, 8, 0.0, qkv_bias=True), [(2, 6, 5)]),
    "CrossAttention": (lambda: afs.CrossAttention(5, 3, 4), [(2, 6, 5), (2, 7, 3)]),
    "MultiHeadAttentionWrapper": (
        lambda: afs.MultiHeadAttentionWrapper(5, 3, 8, 0.0, num_heads=2),
        [(2, 6, 5)],
    ),
    "MultiHeadAttention": (
        lambda: afs.MultiHeadAttention(5, 6, 8, 0.0, num_heads=3, qkv_bias=True),
        [(2, 8, 5)],
    ),
    "MultiHeadAttention-fused": (
        lambda: afs.MultiHeadAttention(5, 6, 8, 0.0, num_heads=3, fused=True),
        [(2, 8, 5)],
    ),
    "WideMultiHeadAttention": (lambda: afs.WideMultiHeadAttention(5, num_heads=2), [(2, 6, 5)]),
    "GroupedQueryAttention": (
        lambda: afs.GroupedQueryAttention(5, 8, 8, 0.0, num_heads=4, num_kv_heads=2, qkv_bias=True),
        [(2, 8, 5)],
    ),
    "GroupedQueryAttention-fused": (
        lambda: afs.GroupedQueryAttention(5, 8, 8, 0.0, num_heads=4, num_kv_heads=1, fused=True),
        [(2, 8, 5)],
    ),
    "RotaryMultiHeadAttention": (
        lambda: afs.RotaryMultiHeadAttention(5, 8, 8, 0.0, num_heads=2, qkv_bias=True),
        [(2, 8, 5)],
    ),
    "RotaryGroupedQueryAttention": (
        lambda: afs.RotaryGroupedQueryAttention(5, 8, 8, 0.0, num_heads=4, num_kv_heads=2),
        [(2, 8, 5)],
    ),
}
ROTARY_CASES = [case for case in MODULE_CASES if case.startswith("Rotary")]
CASE_IDS = list(MODULE_CASES)


def build(case: str, seed: int = 0) -> tuple[nn.Module, list[torch.Tensor]]:
    factory, shapes = MODULE_CASES[case]
    torch.manual_seed(seed)
    module = factory().eval()
    inputs = [randn(*shape, seed=seed + i) for i, shape in enumerate(shapes)]
    return module, inputs


def copy_to(
    module: nn.Module, case: str, device: str | torch.device, dtype: torch.dtype | None = None
) -> nn.Module:
    """A fresh module of the same kind holding ``module``'s weights, moved to ``device``."""
    factory, _ = MODULE_CASES[case]
    other = factory().eval()
    other.load_state_dict(module.state_dict())
    return other.to(device=device, dtype=dtype)


def forward_backward(
    module: nn.Module, inputs: list[torch.Tensor], device: str | torch.device, dtype: torch.dtype
) -> tuple[torch.Tensor, list[torch.Tensor], dict[str, torch.Tensor]]:
    """Output, input gradients and parameter gradients, all returned on the CPU in float32."""
    leaves = [x.detach().to(device, dtype).requires_grad_(True) for x in inputs]
    out = module(*leaves)
    assert out.device.type == torch.device(device).type
    assert out.dtype == dtype
    probe = randn(*out.shape, seed=99).to(device, dtype)
    (out * probe).sum().backward()
    grads = [x.grad.float().cpu() for x in leaves]
    param_grads = {name: p.grad.float().cpu() for name, p in module.named_parameters()}
    return out.detach().float().cpu(), grads, param_grads


def assert_same_results(
    first: tuple[torch.Tensor, list[torch.Tensor], dict[str, torch.Tensor]],
    second: tuple[torch.Tensor, list[torch.Tensor], dict[str, torch.Tensor]],
    rtol: float,
    atol: float,
) -> None:
    out1, grads1, params1 = first
    out2, grads2, params2 = second
    torch.testing.assert_close(out1, out2, rtol=rtol, atol=atol)
    assert len(grads1) == len(grads2)
    for g1, g2 in zip(grads1, grads2, strict=True):
        torch.testing.assert_close(g1, g2, rtol=rtol, atol=atol)
    assert params1.keys() == params2.keys()
    for name, grad in params1.items():
        torch.testing.assert_close(grad, params2[name], rtol=rtol, atol=atol, msg=name)


# ---------------------------------------------------------------------------------------------
# CPU tests: run everywhere
# ---------------------------------------------------------------------------------------------


def test_pick_device_matches_what_is_available() -> None:
    device = afs.pick_device()
    assert isinstance(device, torch.device)
    assert device.type in {"cuda", "mps", "cpu"}
    if torch.cuda.is_available():
        assert device.type == "cuda"
    elif _mps is not None and _mps.is_available():
        assert device.type == "mps"
    else:
        assert device == torch.device("cpu")


@pytest.mark.parametrize(
    ("cuda", "mps", "expected"),
    [
        (True, True, "cuda"),
        (True, False, "cuda"),
        (False, True, "mps"),
        (False, False, "cpu"),
    ],
)
def test_pick_device_prefers_cuda_then_mps_then_cpu(
    monkeypatch: pytest.MonkeyPatch, cuda: bool, mps: bool, expected: str
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
    assert afs.pick_device() == torch.device(expected)


def test_pick_device_without_an_mps_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    # Older or stripped-down torch builds have no torch.backends.mps at all.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delattr(torch.backends, "mps")
    assert afs.pick_device() == torch.device("cpu")


@pytest.mark.parametrize("case", CASE_IDS)
def test_double_precision_matches_single_precision(case: str) -> None:
    module, inputs = build(case, seed=1)
    double = copy_to(module, case, "cpu", torch.float64)
    assert all(p.dtype == torch.float64 for p in double.parameters())
    single = forward_backward(module, inputs, "cpu", torch.float32)
    result = forward_backward(double, inputs, "cpu", torch.float64)
    assert_same_results(result, single, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", ["CausalAttention", "GroupedQueryAttention"])
def test_mask_buffer_follows_the_module_but_keeps_its_dtype(case: str) -> None:
    module, _ = build(case)
    assert module.mask.dtype == torch.bool
    assert module.mask.device.type == "cpu"
    # The mask is rebuilt by the constructor, so it is not saved with the weights.
    assert "mask" not in module.state_dict()
    module.double()
    assert module.mask.dtype == torch.bool
    # A meta-device move shows that the buffer travels with .to(device) without a GPU.
    module.to("meta")
    assert module.mask.device.type == "meta"
    assert module.W_query.weight.device.type == "meta"


class NoFloat64OffTheCpu(TorchFunctionMode):
    """Refuses, like Apple's MPS, any float64 tensor on a device other than the CPU."""

    def __torch_function__(
        self,
        func: Callable[..., object],
        types: object,
        args: tuple[object, ...] = (),
        kwargs: dict[str, object] | None = None,
    ) -> object:
        result = func(*args, **(kwargs or {}))
        for leaf in tree_leaves(result):
            if not isinstance(leaf, torch.Tensor) or leaf.dtype != torch.float64:
                continue
            if leaf.device.type != "cpu":
                raise TypeError(f"a float64 tensor on {leaf.device}, which has no float64")
        return result


@pytest.mark.parametrize("case", ROTARY_CASES)
def test_rotary_layers_run_on_a_device_without_float64(case: str) -> None:
    # The meta device stands in for MPS; the mode refuses float64 there, as MPS does.
    module, inputs = build(case)
    with NoFloat64OffTheCpu(), torch.no_grad():
        module.to("meta")
        out = module(*[x.to("meta") for x in inputs])
    assert out.device.type == "meta" and out.dtype == torch.float32


def test_toy_sentence_and_causal_mask_take_a_device_and_dtype() -> None:
    _, inputs = afs.toy_sentence(device="cpu", dtype=torch.float64)
    assert inputs.dtype == torch.float64
    assert inputs.device.type == "cpu"
    mask = afs.causal_mask(4, device=torch.device("meta"))
    assert mask.device.type == "meta"
    assert mask.dtype == torch.bool


# ---------------------------------------------------------------------------------------------
# CUDA tests
# ---------------------------------------------------------------------------------------------


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("case", CASE_IDS)
def test_cuda_matches_cpu(case: str) -> None:
    module, inputs = build(case, seed=2)
    on_gpu = copy_to(module, case, "cuda")
    assert all(p.device.type == "cuda" for p in on_gpu.parameters())
    cpu_result = forward_backward(module, inputs, "cpu", torch.float32)
    gpu_result = forward_backward(on_gpu, inputs, "cuda", torch.float32)
    assert_same_results(gpu_result, cpu_result, rtol=1e-4, atol=1e-4)


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("case", ["CausalAttention", "GroupedQueryAttention"])
def test_mask_buffer_moves_to_cuda(case: str) -> None:
    module, inputs = build(case)
    module.to("cuda")
    assert module.mask.device.type == "cuda"
    assert module.mask.dtype == torch.bool
    _, weights = module(inputs[0].cuda(), return_weights=True)
    assert weights.device.type == "cuda"
    future = afs.causal_mask(inputs[0].shape[1], device="cuda")
    assert future.device.type == "cuda"
    assert torch.all(weights.masked_select(future) == 0)


@pytest.mark.cuda
@needs_cuda
def test_cuda_module_rejects_a_cpu_input() -> None:
    module = afs.CausalAttention(5, 4, 8, 0.0).to("cuda")
    with pytest.raises(ValueError, match=r"x: expected a tensor on the module's device cuda"):
        module(torch.rand(1, 6, 5))


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize(
    ("dtype", "tol"), [(torch.float16, 1e-2), (torch.bfloat16, 5e-2)], ids=["float16", "bfloat16"]
)
@pytest.mark.parametrize("case", CASE_IDS)
def test_half_precision_on_cuda_is_close_to_float32(
    case: str, dtype: torch.dtype, tol: float
) -> None:
    module, inputs = build(case, seed=3)
    full = copy_to(module, case, "cuda")
    half = copy_to(module, case, "cuda", dtype)
    with torch.no_grad():
        expected = full(*[x.cuda() for x in inputs])
        result = half(*[x.to("cuda", dtype) for x in inputs])
    assert result.dtype == dtype
    assert torch.isfinite(result).all()
    torch.testing.assert_close(result.float(), expected, rtol=tol, atol=tol)


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("train", [False, True], ids=["eval", "train-p0"])
def test_fused_path_on_cuda_matches_explicit(train: bool) -> None:
    torch.manual_seed(4)
    explicit = afs.MultiHeadAttention(32, 64, 16, 0.0, num_heads=4).to("cuda")
    fused = copy.deepcopy(explicit)
    fused.fused = True
    explicit.train(train)
    fused.train(train)
    x = randn(3, 16, 32, seed=4)
    result_e = forward_backward(explicit, [x], "cuda", torch.float32)
    result_f = forward_backward(fused, [x], "cuda", torch.float32)
    assert_same_results(result_f, result_e, rtol=1e-4, atol=1e-4)


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize(
    ("dtype", "tol"), [(torch.float16, 1e-2), (torch.bfloat16, 5e-2)], ids=["float16", "bfloat16"]
)
def test_fused_path_on_cuda_matches_explicit_in_half_precision(
    dtype: torch.dtype, tol: float
) -> None:
    torch.manual_seed(5)
    explicit = afs.MultiHeadAttention(32, 64, 16, 0.0, num_heads=4).to("cuda", dtype).eval()
    fused = copy.deepcopy(explicit)
    fused.fused = True
    x = randn(3, 16, 32, seed=5).to("cuda", dtype)
    with torch.no_grad():
        out_e = explicit(x)
        out_f = fused(x)
    assert out_f.dtype == dtype
    torch.testing.assert_close(out_f.float(), out_e.float(), rtol=tol, atol=tol)


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("fused", [False, True], ids=["explicit", "fused"])
def test_padding_and_cached_decoding_on_cuda_match_the_cpu(fused: bool) -> None:
    torch.manual_seed(6)
    module = afs.GroupedQueryAttention(8, 16, 16, 0.0, 4, num_kv_heads=2, fused=fused).eval()
    x = randn(2, 10, 8, seed=6)
    padding = torch.arange(10)[None, :] < torch.tensor([[0], [4]])  # left padding
    on_gpu = copy.deepcopy(module).to("cuda")
    with torch.no_grad():
        expected = module(x, key_padding_mask=padding)
        full = on_gpu(x.cuda(), key_padding_mask=padding.cuda())
        cache = afs.KVCache()
        steps = [
            on_gpu(
                x[:, i : i + 1].cuda(), key_padding_mask=padding[:, : i + 1].cuda(), kv_cache=cache
            )
            for i in range(10)
        ]
    assert cache.keys is not None and cache.keys.device.type == "cuda"
    assert torch.isfinite(full).all()
    torch.testing.assert_close(full.cpu(), expected, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(torch.cat(steps, dim=1).cpu(), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.cuda
@needs_cuda
def test_cache_on_cuda_refuses_a_cpu_input() -> None:
    module = afs.CachedAttention(4, 4, 8, 0.0, num_heads=2)
    cache = afs.KVCache()
    with torch.no_grad():
        copy.deepcopy(module).cuda()(torch.rand(1, 2, 4, device="cuda"), kv_cache=cache)
        with pytest.raises(ValueError, match=r"kv_cache: expected tokens on the cache's device"):
            module(torch.rand(1, 1, 4), kv_cache=cache)


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_tiled_attention_on_cuda_matches_sdpa(dtype: torch.dtype) -> None:
    q, k, v = (randn(2, 3, 100, 16, seed=i).to("cuda", dtype) for i in range(3))
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    result = afs.tiled_attention(q, k, v, block_size=32)
    tol = 1e-4 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(result.float(), expected.float(), rtol=tol, atol=tol)


@pytest.mark.cuda
@needs_cuda
def test_tiled_attention_peak_cuda_memory_grows_linearly() -> None:
    def peak(t: int) -> int:
        q, k, v = (torch.randn(1, 4, t, 64, device="cuda") for _ in range(3))
        with torch.no_grad():
            return afs.measure_peak_memory(
                lambda: afs.tiled_attention(q, k, v, block_size=128), "cuda"
            )

    small, large = peak(2048), peak(4096)
    # The (t, t) scores would take 4 * t * t * 4 bytes: 64 MiB at t = 4096.
    assert large < 4 * 4096 * 4096 * 4 / 8
    assert large < 2.5 * small


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_padding_in_half_precision_on_cuda_stays_finite(dtype: torch.dtype) -> None:
    torch.manual_seed(7)
    explicit = afs.CachedAttention(32, 64, 16, 0.0, num_heads=4).to("cuda", dtype).eval()
    fused = copy.deepcopy(explicit)
    fused.fused = True
    x = randn(3, 16, 32, seed=7).to("cuda", dtype)
    padding = torch.arange(16, device="cuda")[None, :] < torch.tensor(
        [[0], [5], [15]], device="cuda"
    )
    with torch.no_grad():
        out_e = explicit(x, key_padding_mask=padding)
        out_f = fused(x, key_padding_mask=padding)
    assert torch.isfinite(out_e).all() and torch.isfinite(out_f).all()
    torch.testing.assert_close(out_f.float(), out_e.float(), rtol=5e-2, atol=5e-2)


# ---------------------------------------------------------------------------------------------
# MPS test
# ---------------------------------------------------------------------------------------------


@needs_mps
@pytest.mark.parametrize("case", CASE_IDS)
def test_mps_matches_cpu(case: str) -> None:
    module, inputs = build(case, seed=5)
    on_mps = copy_to(module, case, "mps")
    cpu_result = forward_backward(module, inputs, "cpu", torch.float32)
    mps_result = forward_backward(on_mps, inputs, "mps", torch.float32)
    assert_same_results(mps_result, cpu_result, rtol=1e-3, atol=1e-4)
