"""Chapter 8's Triton kernel against PyTorch's attention paths, timed on a GPU.

For each length t, head size d_h, dtype and mask it times, forward and forward + backward:

- ``sdpa``: ``F.scaled_dot_product_attention`` as PyTorch dispatches it, and each backend it
  has (``flash``, ``efficient``, ``cudnn``) forced in turn, where it accepts the call;
- ``explicit``: the package's written-out path (``head_attention(fused=False)``), the
  ``(t, t)`` weights in memory (left out where they would not fit);
- ``fused``: the package's fused path (``head_attention(fused=True)``, SDPA behind checks);
- ``tiled``: chapter 7's ``tiled_attention``, the same loop in Python (forward only: its
  autograd keeps every tile);
- ``triton``: ``flash_attention``, chapter 8's kernels.

It prints the time, the throughput (TFLOP/s, counting the two matrix products of the forward
as 4 b h t s d_h, halved when causal, and the backward as 2.5 times the forward, as the
FlashAttention papers do) and each path's throughput as a fraction of SDPA's, all measured in
the same run, with the GPU, driver, torch, CUDA and Triton versions.

Without a CUDA GPU it says so and exits with status 0: the interpreter that runs the kernels
on a CPU measures Python, not a kernel. ``--smoke`` runs one tiny case there anyway, to check
the script itself; its times are not speeds.

Run: python benchmarks/fused_attention.py [--lengths 1024 4096 16384] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable

import torch

PATHS = ("sdpa", "flash", "efficient", "cudnn", "explicit", "fused", "tiled", "triton")
TOKENS = 64 * 4096  # b * h * t, kept constant: the batch shrinks as t grows


def versions() -> str:
    import triton

    lines = [f"torch {torch.__version__}, Triton {triton.__version__}"]
    if torch.cuda.is_available():
        driver = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        lines.insert(0, f"GPU: {torch.cuda.get_device_name()}, driver {driver or 'unknown'}")
        lines.append(f"CUDA {torch.version.cuda}")
    return "; ".join(lines)


def seconds(fn: Callable[[], object], repeats: int, cuda: bool) -> float:
    """The median time of one call, after a warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def attention_paths(causal: bool) -> dict[str, Callable[..., torch.Tensor]]:
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from attention_from_scratch import head_attention, tiled_attention
    from attention_from_scratch.fused import flash_attention

    def sdpa_with(backend: SDPBackend | None) -> Callable[..., torch.Tensor]:
        def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            if backend is None:
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        return run

    return {
        "sdpa": sdpa_with(None),
        "flash": sdpa_with(SDPBackend.FLASH_ATTENTION),
        "efficient": sdpa_with(SDPBackend.EFFICIENT_ATTENTION),
        "cudnn": sdpa_with(SDPBackend.CUDNN_ATTENTION),
        "explicit": lambda q, k, v: head_attention(q, k, v, is_causal=causal)[0],
        "fused": lambda q, k, v: head_attention(q, k, v, is_causal=causal, fused=True)[0],
        "tiled": lambda q, k, v: tiled_attention(q, k, v, block_size=128, causal=causal),
        "triton": lambda q, k, v: flash_attention(q, k, v, is_causal=causal),
    }


def measure(t: int, d_h: int, dtype: torch.dtype, causal: bool, args: argparse.Namespace) -> None:
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    h = args.heads
    b = max(1, args.tokens // (h * t))
    gen = torch.Generator(device=device).manual_seed(0)
    q, k, v = (
        torch.randn(b, h, t, d_h, generator=gen, device=device, dtype=dtype) for _ in range(3)
    )
    grad = torch.randn_like(q)
    forward_flops = 4 * b * h * t * t * d_h * (0.5 if causal else 1.0)
    mask = "causal" if causal else "full"
    print(f"\nt={t} d_h={d_h} {str(dtype).removeprefix('torch.')} {mask} (b={b}, h={h}):")
    paths = attention_paths(causal)
    expected = paths["sdpa"](q, k, v).float()
    results: dict[str, tuple[float, float | None]] = {}
    for name in args.paths:
        fn = paths[name]
        weights_bytes = b * h * t * t * q.element_size() * 3  # scores, weights, their grad
        if name == "explicit" and cuda and weights_bytes > args.max_weights_gib * 2**30:
            print(f"  {name:9}: left out, its (t, t) weights need {weights_bytes / 2**30:.0f} GiB")
            continue
        try:
            out = fn(q, k, v)
        except RuntimeError as error:  # an SDPA backend that refuses these inputs
            print(f"  {name:9}: not available here ({str(error).splitlines()[0][:50]})")
            continue
        diff = (out.float() - expected).abs().max().item()
        forward = seconds(lambda fn=fn: fn(q, k, v), args.repeats, cuda)
        both = None
        if name != "tiled":
            inputs = [x.detach().requires_grad_() for x in (q, k, v)]
            both = seconds(
                lambda fn=fn, inputs=inputs: fn(*inputs).backward(grad), args.repeats, cuda
            )
        results[name] = (forward, both)
        line = f"  {name:9}: fwd {forward * 1e3:8.3f} ms {forward_flops / forward / 1e12:6.1f} TF/s"
        if both is not None:
            line += f", fwd+bwd {both * 1e3:8.3f} ms {3.5 * forward_flops / both / 1e12:6.1f} TF/s"
        print(f"{line} (max |diff| {diff:.1e})")
    if "sdpa" in results:
        sdpa_fwd, sdpa_both = results["sdpa"]
        for name, (forward, both) in results.items():
            if name != "sdpa":
                ratio = f"  {name}/sdpa throughput: fwd {sdpa_fwd / forward:.2f}x"
                if both is not None and sdpa_both is not None:
                    ratio += f", fwd+bwd {sdpa_both / both:.2f}x"
                print(ratio)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096, 8192, 16384])
    parser.add_argument("--head-sizes", type=int, nargs="+", default=[64, 128])
    parser.add_argument("--dtypes", nargs="+", default=["float16", "bfloat16"])
    parser.add_argument("--masks", nargs="+", default=["causal", "full"])
    parser.add_argument("--paths", nargs="+", default=list(PATHS), choices=PATHS)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=TOKENS, help="b * h * t")
    parser.add_argument("--max-weights-gib", type=float, default=16.0)
    parser.add_argument(
        "--smoke", action="store_true", help="one tiny case, in the interpreter without a GPU"
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.lengths, args.head_sizes, args.dtypes = [40], [16], ["float32"]
        args.repeats, args.tokens, args.heads = 1, 40, 1
        args.paths = ["sdpa", "explicit", "fused", "tiled", "triton"]
    if not torch.cuda.is_available():
        if not args.smoke:
            print("This benchmark needs an NVIDIA GPU with CUDA; none is visible, nothing run.")
            return 0
        # Read by triton.jit as it decorates kernels, which the paths import later.
        os.environ["TRITON_INTERPRET"] = "1"
        print("No GPU: the kernels run in Triton's interpreter; these times are not speeds.")
    print(versions())
    for dtype_name in args.dtypes:
        for d_h in args.head_sizes:
            for mask in args.masks:
                for t in args.lengths:
                    measure(t, d_h, getattr(torch, dtype_name), mask == "causal", args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
