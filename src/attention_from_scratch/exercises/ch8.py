"""Self-checks of the exercises of chapter 8, "A fused attention kernel".

Each check launches the learner's Triton kernel as its exercise says (a grid of
``(cdiv(t, BLOCK), b * h)`` programs, blocks of 32 as on the page, contiguous float32 inputs)
on the page's example (100 queries, two heads of size 32, keys and values drawn from a fixed
seed), in the interpreter on a CPU or compiled on a GPU, and compares the output with the
package's :func:`~attention_from_scratch.attention` with the exercise's mask. The output starts
as NaN, with a sentinel after it, so that a kernel that writes nothing, or past its end, fails;
the keys and values a kernel must never load (padding, blocks outside every window) hold NaN,
which a load would spread. Where Triton cannot run, each check says so instead of failing.
Grading is not done here (see :mod:`._core`): the grader compiles each kernel for a GPU and
launches it on inputs of its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..causal import attention
from ._core import Exercise

BLOCK = 32  # queries and keys per block, as on the page
LOG2E = math.log2(math.e)  # qk_scale = LOG2E / sqrt(d): the kernels use exp2
SENTINEL = 1234.5  # what lies after each output, and must stay there
PAD = 4 * BLOCK * 32  # elements before and after each tensor


def triton_problem() -> str | None:
    """Why the learner's kernels cannot run here (no Triton, or no GPU and no interpreter),
    or None.

    Introduced in chapter 8.
    """
    from ..fused import triton_status  # Triton is imported on first use, as the package does

    status = triton_status()
    return None if status.available else f"Triton cannot run here: {status.reason}"


def _device() -> torch.device:
    from ..fused import triton_status

    return torch.device("cpu" if triton_status().interpreted else "cuda")


def _inside(x: torch.Tensor, fill: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` copied into the middle of a buffer of ``fill`` (-1 for integers): (the buffer,
    the copy)."""
    fill = fill if x.is_floating_point() else -1
    flat = torch.full((x.numel() + 2 * PAD,), fill, dtype=x.dtype, device=x.device)
    inner = flat[PAD : PAD + x.numel()]
    inner.copy_(x.reshape(-1))
    return flat, inner.view(x.shape)


def _launch(
    kernel: Any, t: int, b: int, h: int, tensors: Sequence[torch.Tensor], scalars: Sequence[Any]
) -> torch.Tensor:
    """Launch the kernel as the exercise says; return its output (after checking what lies
    after it). ``tensors`` are its inputs; the output, shaped like the first, comes next."""
    device = _device()
    args = [_inside(x.to(device), math.nan)[1] for x in tensors]
    flat, out = _inside(torch.full_like(args[0], math.nan), SENTINEL)
    d = tensors[0].shape[-1]
    grid = (math.ceil(t / BLOCK), b * h)
    kernel[grid](*args, out, *scalars, d**-0.5 * LOG2E, BLOCK=BLOCK, D=d)
    around = torch.cat([flat[:PAD], flat[PAD + out.numel() :]]).cpu()
    assert (around == SENTINEL).all(), (
        "the kernel wrote past its output tensor, into memory that is not its own"
    )
    return out.cpu()


def _same(got: torch.Tensor, expected: torch.Tensor, rows: slice = slice(None)) -> None:
    """The output (b, h, t, d) equals ``expected`` at these query rows (to TF32 rounding where
    the kernel ran compiled)."""
    got, expected = got[:, :, rows], expected[:, :, rows]
    assert not got.isnan().all(), "the kernel wrote no output: it is still the NaN it started as"
    # On a GPU, tl.dot without input_precision="ieee" rounds float32 inputs to TF32 (10 bits of
    # mantissa): differences of up to 1e-3 on these inputs. The interpreter ignores it.
    atol, rtol = (1e-5, 1e-4) if _device().type == "cpu" else (1e-2, 1e-2)
    wrong = got.isnan() | ~torch.isclose(got, expected, atol=atol, rtol=rtol)
    if wrong.any():
        b, h, row, _ = (int(i) for i in wrong.nonzero()[0])
        start = rows.start or 0
        value = "NaN" if got.isnan().any() else f"off by {(got - expected).abs().max():.2g}"
        raise AssertionError(f"query {start + row} of head {h}, batch {b}, is wrong: {value}")


def _example(*shape: int, seed: int = 8) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# The page's example: b = 1, two heads of size 32, 100 queries (three blocks and a part).
B, H, T, D = 1, 2, 100, 32
Q, K, V = (_example(B, H, T, D, seed=seed) for seed in (8, 9, 10))


def _windowed(window: int) -> torch.Tensor:
    query, key = torch.arange(T)[:, None], torch.arange(T)[None, :]
    hidden = (key > query) | (key <= query - window)  # (t, t): outside the window
    return attention(Q, K, V, hidden)[0]


sliding_window = Exercise("ch8-ex-sliding-window", chapter=8, unavailable=triton_problem)


@sliding_window.check(
    hint="Compare with attention and the window's mask row by row: query i sees keys "
    "i - window + 1 to i. A row that sees none of a block's keys must take nothing from it, "
    "and no NaN either: what does the online softmax subtract while a row's maximum is -inf?"
)
def the_pages_100_queries_with_windows_1_20_and_100(window_kernel: Callable[..., Any]) -> None:
    """the page's 100 queries with windows of 1, 20 and 100 keys"""
    for window in (1, 20, 100):
        got = _launch(window_kernel, T, B, H, (Q, K, V), (T, window))
        _same(got, _windowed(window))


@sliding_window.check(
    hint="For a block of queries, which key blocks hold a key that one of its rows sees? "
    "Start the loop over key blocks at the first of them, not at 0."
)
def skips_the_block_no_late_query_sees(window_kernel: Callable[..., Any]) -> None:
    """window 20: keys 0-31 hold NaN, which queries 64-99 never see and must never load"""
    poisoned_k, poisoned_v = K.clone(), V.clone()
    poisoned_k[:, :, :BLOCK] = poisoned_v[:, :, :BLOCK] = math.nan
    got = _launch(window_kernel, T, B, H, (Q, poisoned_k, poisoned_v), (T, 20))
    _same(got, _windowed(20), slice(2 * BLOCK, T))


key_lengths = Exercise("ch8-ex-key-lengths", chapter=8, unavailable=triton_problem)


def _lengths_case(lengths: list[int], lengths_kernel: Callable[..., Any]) -> None:
    b, s = len(lengths), T
    q = _example(b, H, 40, D, seed=11)
    k, v = _example(b, H, s, D, seed=12), _example(b, H, s, D, seed=13)
    padding = torch.arange(s)[None, :] >= torch.tensor(lengths)[:, None]  # (b, s)
    expected = attention(q, k, v, padding[:, None, None, :])[0]
    k[padding[:, None, :].expand(b, H, s)] = math.nan  # what lies past a length: never read
    v[padding[:, None, :].expand(b, H, s)] = math.nan
    n = torch.tensor(lengths, dtype=torch.int32)
    got = _launch(lengths_kernel, 40, b, H, (q, k, v, n), (H, 40, s))
    _same(got, expected)


@key_lengths.check(
    hint="Each program loads the length of its own batch element. Every key at or past it is "
    "padding that may hold anything, here NaN: neither load it nor count its score."
)
def lengths_of_100_37_and_64_keys(lengths_kernel: Callable[..., Any]) -> None:
    """40 queries, 100 keys of which 100, 37 and 64 are real, the padding NaN"""
    _lengths_case([100, 37, 64], lengths_kernel)


@key_lengths.check(
    hint="With one real key, every query's output is that key's value: does your loop reach "
    "the block that holds it, and does the mask keep every other key out?"
)
def a_single_real_key(lengths_kernel: Callable[..., Any]) -> None:
    """a batch element with one real key next to one with 33"""
    _lengths_case([1, 33], lengths_kernel)


grouped_heads = Exercise("ch8-ex-grouped-heads", chapter=8, unavailable=triton_problem)


def _grouped_case(h: int, h_kv: int, grouped_kernel: Callable[..., Any]) -> None:
    b, t, s = 2, 40, T
    q = _example(b, h, t, D, seed=14)
    k, v = _example(b, h_kv, s, D, seed=15), _example(b, h_kv, s, D, seed=16)
    group = h // h_kv
    expected = attention(q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1))[0]
    got = _launch(grouped_kernel, t, b, h, (q, k, v), (h, h_kv, t, s))
    _same(got, expected)


@grouped_heads.check(
    hint="Query head j of a batch element reads the key/value head of its group, as in "
    "chapter 7: where does that head start in k, whose batch elements hold h_kv heads?"
)
def four_query_heads_on_two_key_value_heads(grouped_kernel: Callable[..., Any]) -> None:
    """two batch elements, 4 query heads sharing 2 key/value heads"""
    _grouped_case(4, 2, grouped_kernel)


@grouped_heads.check(
    hint="At the two ends your head arithmetic must give what you know: every query head on "
    "key/value head 0 when there is one, and head j on head j when there are h."
)
def one_shared_head_and_one_head_each(grouped_kernel: Callable[..., Any]) -> None:
    """3 query heads on 1 key/value head (multi-query), and 2 on 2 (multi-head)"""
    _grouped_case(3, 1, grouped_kernel)
    _grouped_case(2, 2, grouped_kernel)
