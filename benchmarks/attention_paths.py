"""Side-by-side comparisons, measured in one run on one machine, printed as ratios.

1. Chapter 1: simplified attention as Python loops vs one matrix product.
2. Chapter 4: MultiHeadAttention's explicit path vs its fused path
   (torch.nn.functional.scaled_dot_product_attention), forward + backward: time, and on CUDA
   the peak memory.

Absolute times depend on the machine and on what else it is doing; the ratios, measured
alternately in the same process, are what to compare. Run: python benchmarks/attention_paths.py
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from attention_from_scratch import (
    MultiHeadAttention,
    pick_device,
    simplified_attention,
    simplified_attention_loop,
)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def interleaved_medians(
    first: Callable[[], object], second: Callable[[], object], device: torch.device, repeats: int
) -> tuple[float, float]:
    """Median seconds of each function, timed alternately so drifts affect both alike."""
    first(), second()  # warm-up
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        for fn, bucket in ((first, times[0]), (second, times[1])):
            _sync(device)
            start = time.perf_counter()
            fn()
            _sync(device)
            bucket.append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def peak_cuda_bytes(fn: Callable[[], object], device: torch.device) -> int:
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    fn()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    device = pick_device()
    torch.manual_seed(0)
    print(f"device: {device}, torch {torch.__version__}")

    inputs = torch.rand(48, 16)  # (t, d): small enough for the loops
    loop, matrix = interleaved_medians(
        lambda: simplified_attention_loop(inputs),
        lambda: simplified_attention(inputs),
        torch.device("cpu"),
        args.repeats,
    )
    print(
        f"chapter 1, t=48, d=16: loop {loop * 1e3:.1f} ms, matrix {matrix * 1e3:.3f} ms, "
        f"loop/matrix = {loop / matrix:.0f}x"
    )

    b, t, d, h = (8, 1024, 512, 8) if device.type == "cuda" else (4, 256, 128, 8)
    explicit = MultiHeadAttention(d, d, t, dropout=0.0, num_heads=h).to(device)
    fused = MultiHeadAttention(d, d, t, dropout=0.0, num_heads=h, fused=True).to(device)
    fused.load_state_dict(explicit.state_dict())
    x = torch.randn(b, t, d, device=device, requires_grad=True)

    def step(module: MultiHeadAttention) -> Callable[[], None]:
        def run() -> None:
            module(x).sum().backward()

        return run

    with torch.no_grad():
        same = torch.allclose(explicit(x), fused(x), atol=1e-4, rtol=1e-4)
    t_explicit, t_fused = interleaved_medians(step(explicit), step(fused), device, args.repeats)
    print(
        f"chapter 4, b={b} t={t} d_out={d} h={h}, forward+backward: explicit "
        f"{t_explicit * 1e3:.1f} ms, fused {t_fused * 1e3:.1f} ms, "
        f"explicit/fused = {t_explicit / t_fused:.2f}x (outputs equal: {same})"
    )
    weights_bytes = b * h * t * t * x.element_size()
    print(f"  the explicit path stores (b, h, t, t) weights: {weights_bytes / 2**20:.0f} MiB")
    if device.type == "cuda":
        m_explicit = peak_cuda_bytes(step(explicit), device)
        m_fused = peak_cuda_bytes(step(fused), device)
        print(
            f"  peak extra CUDA memory: explicit {m_explicit / 2**20:.0f} MiB, fused "
            f"{m_fused / 2**20:.0f} MiB, explicit/fused = {m_explicit / m_fused:.1f}x"
        )


if __name__ == "__main__":
    main()
