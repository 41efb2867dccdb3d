"""The cost of writing a fused attention layer the straightforward way (chapter 7's table).

A causal multi-head attention layer that calls ``scaled_dot_product_attention`` can still
spend time outside the kernel. ``StraightforwardAttention`` is written the way a first version
usually is: three separate ``nn.Linear`` projections for queries, keys and values, three
reshapes to split the heads, and five checks of its input on every call. It is compared with
the lean reference of ``attention_paths.py`` (one packed query/key/value projection,
``scaled_dot_product_attention``, the output projection, nothing else), with the same weights,
forward and forward + backward, timed alternately in one process and printed as ratios.

Chapter 7 quotes these ratios as measured on an NVIDIA H100 (bfloat16 and float32, b=8,
t=1024, d=768, 12 heads). Run it on any machine; on the CPU only float32 is measured:

    python benchmarks/straightforward_layer.py [--repeats N] [--shape b t d h]
"""

from __future__ import annotations

import argparse
from contextlib import nullcontext
from functools import partial

import torch
import torch.nn.functional as F
from attention_paths import LeanReference, interleaved_best, one_thread
from torch import nn

from attention_from_scratch import pick_device


class StraightforwardAttention(nn.Module):
    """Causal multi-head attention on ``scaled_dot_product_attention``, written plainly."""

    def __init__(self, d_in: int, d_out: int, context_length: int, num_heads: int) -> None:
        super().__init__()
        self.d_in, self.d_out, self.num_heads = d_in, d_out, num_heads
        self.context_length = context_length
        self.W_query = nn.Linear(d_in, d_out, bias=False)
        self.W_key = nn.Linear(d_in, d_out, bias=False)
        self.W_value = nn.Linear(d_in, d_out, bias=False)
        self.out_proj = nn.Linear(d_out, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Five checks of the input, each a Python branch (and a few attribute reads).
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x: expected a torch.Tensor, got {type(x).__name__}")
        if x.dim() != 3:
            raise ValueError(f"x: expected shape (b, t, d_in), got {tuple(x.shape)}")
        if x.shape[-1] != self.d_in:
            raise ValueError(f"x: expected d_in={self.d_in}, got {x.shape[-1]}")
        if x.shape[1] > self.context_length:
            raise ValueError(f"x: expected t <= {self.context_length}, got {x.shape[1]}")
        if not x.is_floating_point():
            raise TypeError(f"x: expected a floating-point tensor, got {x.dtype}")
        b, t, _ = x.shape
        h, d_h = self.num_heads, self.d_out // self.num_heads
        # Three projections, three head splits.
        q = self.W_query(x).view(b, t, h, d_h).transpose(1, 2)  # (b, h, t, d_h)
        k = self.W_key(x).view(b, t, h, d_h).transpose(1, 2)  # (b, h, t, d_h)
        v = self.W_value(x).view(b, t, h, d_h).transpose(1, 2)  # (b, h, t, d_h)
        context = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (b, h, t, d_h)
        return self.out_proj(context.transpose(1, 2).reshape(b, t, self.d_out))  # (b, t, d_out)


def compare(
    shape: tuple[int, int, int, int],
    device: torch.device,
    dtype: torch.dtype,
    backward: bool,
    repeats: int,
    calls: int,
) -> float:
    """Print and return straightforward time / reference time for one setting."""
    b, t, d, h = shape
    torch.manual_seed(0)
    plain = StraightforwardAttention(d, d, t, h)
    lean = LeanReference(plain)  # copies the weights: the two compute the same function
    plain, lean = plain.to(device, dtype), lean.to(device, dtype)
    x = torch.randn(b, t, d, device=device, dtype=dtype, requires_grad=backward)
    with torch.no_grad():
        diff = (plain(x) - lean(x)).abs().max().item()

    def step(module: nn.Module) -> None:
        with torch.set_grad_enabled(backward):
            out = module(x)
            if backward:
                out.sum().backward()

    # One thread on the CPU, as attention_paths.py times small shapes: on a shared machine
    # the thread pool's hand-offs only add noise.
    with one_thread() if device.type == "cpu" else nullcontext():
        t_plain, t_lean = interleaved_best(
            partial(step, plain), partial(step, lean), device, repeats, calls
        )
    kind = "forward + backward" if backward else "forward"
    name = str(dtype).removeprefix("torch.")
    print(
        f"  {name:8} {kind:18}: straightforward {t_plain * 1e3:8.3f} ms, reference "
        f"{t_lean * 1e3:8.3f} ms, ratio {t_plain / t_lean:.2f}x (max |diff| {diff:.1e})"
    )
    return t_plain / t_lean


def enabled_backends() -> str:
    """Which scaled_dot_product_attention backends torch may pick here (it picks the first
    that accepts the inputs, in its own order of priority)."""
    flags = {
        "flash": torch.backends.cuda.flash_sdp_enabled(),
        "memory-efficient": torch.backends.cuda.mem_efficient_sdp_enabled(),
        "cudnn": torch.backends.cuda.cudnn_sdp_enabled(),
        "math": torch.backends.cuda.math_sdp_enabled(),
    }
    return ", ".join(name for name, on in flags.items() if on)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument(
        "--shape",
        type=int,
        nargs=4,
        metavar=("B", "T", "D", "H"),
        default=None,
        help="default: 8 1024 768 12 on CUDA, 1 8 64 4 on the CPU",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="tiny shape and few repeats: shows that the script runs (the test suite's mode)",
    )
    args = parser.parse_args()
    device = pick_device()
    if args.smoke:
        args.repeats, args.shape = 2, [1, 4, 16, 2]
    on_cuda = device.type == "cuda"
    shape = tuple(args.shape) if args.shape else ((8, 1024, 768, 12) if on_cuda else (1, 8, 64, 4))
    print(
        f"device: {device}, torch {torch.__version__}"
        + (f", CUDA {torch.version.cuda}, {torch.cuda.get_device_name(device)}" if on_cuda else "")
        + (f"; SDPA backends enabled: {enabled_backends()}" if on_cuda else "")
        + f"; b, t, d, h = {shape}; "
        "time / reference (1.00x = no overhead)"
    )
    dtypes = (torch.bfloat16, torch.float32) if on_cuda else (torch.float32,)
    calls = 10 if on_cuda else (2 if args.smoke else 100)
    for dtype in dtypes:
        for backward in (False, True):
            compare(shape, device, dtype, backward, args.repeats, calls)


if __name__ == "__main__":
    main()
