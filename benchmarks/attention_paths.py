"""Side-by-side comparisons, measured in one run on one machine, printed as ratios.

1. Chapter 1: simplified attention as Python loops vs one matrix product.
2. Chapter 4: MultiHeadAttention's explicit path vs its fused path
   (torch.nn.functional.scaled_dot_product_attention), forward + backward: time, and on CUDA
   the peak memory.
3. Chapter 7: MultiHeadAttention's fused path vs a lean reference (one packed qkv
   nn.Linear, scaled_dot_product_attention, out_proj, nothing else), forward and forward +
   backward, on the CPU at a small size (b=1, t=8, d=64) and at the benchmark shape (b=8,
   t=1024, d=768, h=12) in float32; on CUDA also bfloat16. A ratio of 1.00x means no
   overhead. Ours runs its three projection layers and checks its input and the attention
   inputs at every call; the reference runs one packed layer and checks nothing.
4. Chapter 7: peak memory of the explicit, tiled and fused attention paths against t.

Absolute times depend on the machine and on what else it is doing; the ratios, measured
alternately in the same process (the best of interleaved repetitions: on a shared machine the
fastest run is the one least disturbed by other processes, as Python's timeit advises), are
what to compare.
Run: python benchmarks/attention_paths.py [--quick]
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from attention_from_scratch import (
    MultiHeadAttention,
    head_attention,
    measure_peak_memory,
    pick_device,
    simplified_attention,
    simplified_attention_loop,
    tiled_attention,
)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def interleaved_best(
    first: Callable[[], object],
    second: Callable[[], object],
    device: torch.device,
    repeats: int,
    calls: int = 1,
) -> tuple[float, float]:
    """Best seconds per call of each function over ``repeats`` blocks of ``calls`` calls,
    timed alternately so that drifts affect both."""
    for _ in range(2):  # warm-up: allocator caches, kernel selection
        first(), second()
    times: tuple[list[float], list[float]] = ([], [])
    with timeit_conditions():
        for i in range(repeats):
            # Alternate which goes first, so neither always follows the other.
            order = ((first, times[0]), (second, times[1]))
            for fn, bucket in order if i % 2 == 0 else order[::-1]:
                _sync(device)
                start = time.perf_counter()
                for _ in range(calls):
                    fn()
                _sync(device)
                bucket.append((time.perf_counter() - start) / calls)
    return min(times[0]), min(times[1])


@contextmanager
def timeit_conditions() -> Iterator[None]:
    """The garbage collector off, as timeit does: a collection landing in one block would be
    timed as part of whichever function happened to run."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextmanager
def one_thread() -> Iterator[None]:
    """Run on one thread: a small product has nothing to share out, and on a busy machine the
    thread pool's hand-offs only add noise (tenfold, or milliseconds)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class LeanReference(nn.Module):
    """The least a causal multi-head attention layer can do: one packed projection."""

    def __init__(self, module: MultiHeadAttention) -> None:
        super().__init__()
        self.num_heads, self.d_out = module.num_heads, module.d_out
        self.qkv = nn.Linear(module.d_in, 3 * module.d_out, bias=False)
        self.proj = nn.Linear(module.d_out, module.d_out)
        with torch.no_grad():
            self.qkv.weight.copy_(
                torch.cat((module.W_query.weight, module.W_key.weight, module.W_value.weight))
            )
            self.proj.load_state_dict(module.out_proj.state_dict())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        h, d_h = self.num_heads, self.d_out // self.num_heads
        qkv = self.qkv(x).view(b, t, 3, h, d_h).permute(2, 0, 3, 1, 4)  # (3, b, h, t, d_h)
        q, k, v = qkv.unbind(0)  # each (b, h, t, d_h)
        context = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (b, h, t, d_h)
        return self.proj(context.transpose(1, 2).reshape(b, t, self.d_out))  # (b, t, d_out)


def compare_with_reference(
    label: str,
    shape: tuple[int, int, int, int],
    device: torch.device,
    dtype: torch.dtype,
    repeats: int,
    calls: int,
    backward: bool,
) -> None:
    b, t, d, h = shape
    torch.manual_seed(0)
    ours = MultiHeadAttention(d, d, t, 0.0, num_heads=h, fused=True)
    lean = LeanReference(ours)
    ours, lean = ours.to(device, dtype), lean.to(device, dtype)
    x = torch.randn(b, t, d, device=device, dtype=dtype, requires_grad=backward)
    with torch.no_grad():
        diff = (ours(x) - lean(x)).abs().max().item()

    # Forward alone is inference, so both modules run in eval mode there (ours then skips
    # looking up its dropout probability); forward + backward is training.
    ours.train(backward)
    lean.train(backward)

    def run(module: nn.Module) -> Callable[[], None]:
        if backward:
            return lambda: module(x).sum().backward()

        def forward() -> None:
            with torch.no_grad():
                module(x)

        return forward

    t_ours, t_lean = interleaved_best(run(ours), run(lean), device, repeats, calls)
    kind = "fwd+bwd" if backward else "fwd"
    print(
        f"  {label} {kind}: fused {t_ours * 1e3:.3f} ms, reference {t_lean * 1e3:.3f} ms, "
        f"fused/reference = {t_ours / t_lean:.2f}x (max |diff| {diff:.1e})"
    )


def explicit_causal(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor
) -> torch.Tensor:
    """The package's explicit path (head_attention, fused=False, which calls chapter 3's
    attention): the (t, t) scores and weights exist in memory."""
    context, _ = head_attention(queries, keys, values, is_causal=True)  # (b, h, t, d_h)
    return context


def memory_against_length(device: torch.device, lengths: tuple[int, ...]) -> None:
    b, h, d_h = 1, 4, 32
    paths: tuple[Callable[..., torch.Tensor], ...] = (
        explicit_causal,
        partial(tiled_attention, block_size=64),
        partial(F.scaled_dot_product_attention, is_causal=True),
    )
    print(f"chapter 7, peak extra memory (b={b} h={h} d_h={d_h}, causal), in KiB:")
    for t in lengths:
        q, k, v = (torch.randn(b, h, t, d_h, device=device) for _ in range(3))
        with torch.no_grad():
            peaks = [measure_peak_memory(partial(fn, q, k, v), device) / 2**10 for fn in paths]
        print(
            f"  t={t:5d}: explicit {peaks[0]:8.0f}, tiled {peaks[1]:6.0f}, fused "
            f"{peaks[2]:5.0f}; explicit/tiled = {peaks[0] / peaks[1]:.1f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--quick", action="store_true", help="skip the benchmark shape on the CPU (slow there)"
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="tiny shapes and few repeats: shows that the script runs (the test suite's mode)",
    )
    args = parser.parse_args()
    if args.smoke:
        args.repeats, args.quick = 2, True
    device = pick_device()
    torch.manual_seed(0)
    print(f"device: {device}, torch {torch.__version__}, {torch.get_num_threads()} threads")

    inputs = torch.rand(8 if args.smoke else 48, 16)  # (t, d): small enough for the loops
    with one_thread():
        loop, matrix = interleaved_best(
            lambda: simplified_attention_loop(inputs),
            lambda: simplified_attention(inputs),
            torch.device("cpu"),
            args.repeats,
        )
    print(
        f"chapter 1, t={inputs.shape[0]}, d=16: loop {loop * 1e3:.1f} ms, "
        f"matrix {matrix * 1e3:.3f} ms, loop/matrix = {loop / matrix:.0f}x"
    )

    b, t, d, h = (8, 1024, 512, 8) if device.type == "cuda" else (4, 256, 128, 8)
    if args.smoke:
        b, t, d, h = 1, 16, 32, 4
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
    t_explicit, t_fused = interleaved_best(step(explicit), step(fused), device, args.repeats)
    print(
        f"chapter 4, b={b} t={t} d_out={d} h={h}, forward+backward: explicit "
        f"{t_explicit * 1e3:.1f} ms, fused {t_fused * 1e3:.1f} ms, "
        f"explicit/fused = {t_explicit / t_fused:.2f}x (outputs equal: {same})"
    )
    weights_bytes = b * h * t * t * x.element_size()
    print(f"  the explicit path stores (b, h, t, t) weights: {weights_bytes / 2**20:.0f} MiB")
    if device.type == "cuda":
        m_explicit = measure_peak_memory(step(explicit), device)
        m_fused = measure_peak_memory(step(fused), device)
        print(
            f"  peak extra CUDA memory: explicit {m_explicit / 2**20:.0f} MiB, fused "
            f"{m_fused / 2**20:.0f} MiB, explicit/fused = {m_explicit / m_fused:.1f}x"
        )

    print(
        "chapter 7, fused path vs lean reference (target: <= 1.05x on the CPU at b=8 t=1024 "
        "d=768; the small size shows the cost of each call's checks and layers):"
    )
    cpu = torch.device("cpu")
    small = (1, 8, 64, 4)
    big = (8, 1024, 768, 12)
    with one_thread():  # at 1 x 8 x 64 a matmul has nothing to split among threads
        for backward in (False, True):
            compare_with_reference(
                "CPU fp32 b=1 t=8 d=64 (1 thread)",
                small,
                cpu,
                torch.float32,
                2 if args.smoke else 201,
                20,
                backward,
            )
    if not args.quick:
        for backward, repeats in ((False, 7), (True, 5)):
            compare_with_reference(
                f"CPU fp32 b=8 t=1024 d=768 ({torch.get_num_threads()} threads)",
                big,
                cpu,
                torch.float32,
                repeats,
                1,
                backward,
            )
    memory_against_length(cpu, (64, 128) if args.smoke else (256, 512, 1024, 2048))
    if device.type == "cuda" and not args.smoke:
        memory_against_length(device, (1024, 2048, 4096, 8192))


if __name__ == "__main__":
    main()
