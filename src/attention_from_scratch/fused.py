"""Chapter 8: a fused attention kernel, FlashAttention-2 written in Triton.

Chapter 7's :func:`~attention_from_scratch.tiled.tiled_attention` runs the online softmax as a
Python loop over tiles; here the same loop runs inside one GPU kernel. Each *program* (one
instance of the kernel, run in parallel with the others) takes one block of queries, loads
blocks of keys and values from memory, folds them into a running maximum, sum and output held
in registers, and writes the output once: the ``(t, s)`` weights never exist in memory.

- :func:`softmax` runs the warm-up kernel: one program per row of a matrix.
- :func:`flash_attention` runs the forward kernel and, under autograd, the backward kernels
  (:class:`FlashAttention`), which recompute the weights from the saved log-sum-exp.
- :func:`triton_status` says whether Triton can run here, and whether it runs compiled (on a
  GPU) or in its interpreter (on a CPU, with ``TRITON_INTERPRET=1`` set before this module is
  imported, as it decorates its kernels then).

Triton is optional (Linux x86-64 wheels only): without it this module still imports, and
running a kernel raises an error that says so. Dimension names: ``b`` batch, ``h`` heads,
``t`` queries, ``s`` keys, ``d_h`` size of one head; a *block* is ``BLOCK`` rows.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from ._checks import check_bool, check_head_inputs

try:
    import triton
    import triton.language as tl
except ImportError:  # no wheel for this platform (macOS, Windows): the kernels cannot run
    triton = None
# Read when the kernels below are decorated, as triton.jit reads it: later changes are ignored.
_INTERPRETED = triton is not None and os.environ.get("TRITON_INTERPRET") == "1"

__all__ = ["BLOCK", "FlashAttention", "TritonStatus", "flash_attention", "softmax", "triton_status"]

#: Queries and keys per block. Equal sizes let the causal loop split the key blocks into the
#: ones wholly in the past (no mask) and the one block on the diagonal (masked).
BLOCK = 32
_HEAD_SIZES = (16, 32, 64, 128)  # tl.dot needs >= 16, tl.arange a power of two
_LOG2E = 1.4426950408889634  # exp(x) = exp2(x * log2(e)); an NVIDIA GPU's exponential is exp2


def _jit(fn: Any) -> Any:
    """``triton.jit`` where Triton is installed; elsewhere the plain function, never run."""
    return fn if triton is None else triton.jit(fn)


class TritonStatus(NamedTuple):
    """Whether Triton can run here (what :func:`triton_status` returns).

    Attributes:
        available: the kernels of this module can run.
        interpreted: they run in Triton's interpreter (plain Python and NumPy on the CPU),
            not compiled for a GPU.
        reason: one sentence for the reader.
    """

    available: bool
    interpreted: bool
    reason: str


def triton_status() -> TritonStatus:
    """Say whether Triton can run here, and how.

    Triton compiles kernels for NVIDIA (and AMD) GPUs. Without one, its interpreter runs the
    same kernels on the CPU, one program after another: correct to rounding, and slow. The
    interpreter is chosen by ``TRITON_INTERPRET=1`` in the environment when ``triton.jit``
    decorates a kernel; this module decorates its kernels when it is first imported.

    Returns:
        A :class:`TritonStatus`.

    Introduced in chapter 8.
    """
    if triton is None:
        return TritonStatus(False, False, "Triton is not installed (it has no wheel here).")
    if _INTERPRETED:
        return TritonStatus(True, True, "Triton runs its interpreter on the CPU.")
    if torch.cuda.is_available():
        return TritonStatus(True, False, f"Triton compiles for {torch.cuda.get_device_name()}.")
    return TritonStatus(
        False,
        False,
        f"Triton needs a GPU, or TRITON_INTERPRET=1 set before {__name__} is first imported.",
    )


def _require_triton(x: torch.Tensor, name: str) -> TritonStatus:
    status = triton_status()
    if not status.available:
        raise RuntimeError(f"{name}: cannot run a Triton kernel here: {status.reason}")
    if not status.interpreted and x.device.type != "cuda":
        raise ValueError(
            f"{name}: expected a CUDA tensor (Triton compiles for the GPU), got a tensor on "
            f"{x.device}; on a CPU set TRITON_INTERPRET=1 before importing {__name__}"
        )
    return status


# ---- the warm-up: a row-wise softmax ------------------------------------------------------


@_jit
def _softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK_COLS: tl.constexpr):  # type: ignore[no-untyped-def]
    row = tl.program_id(0)  # one program per row
    cols = tl.arange(0, BLOCK_COLS)  # a power of two >= n_cols
    inside = cols < n_cols  # the mask: the lanes past the row's end
    x = tl.load(x_ptr + row * n_cols + cols, mask=inside, other=-float("inf"))
    x = x.to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))  # chapter 1's stable softmax
    y = e / tl.sum(e, axis=0)
    tl.store(out_ptr + row * n_cols + cols, y.to(out_ptr.dtype.element_ty), mask=inside)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension of a matrix, one Triton program per row.

    Args:
        x: a floating-point tensor of shape ``(rows, cols)``.

    Returns:
        A tensor like ``x`` whose rows sum to one.

    Introduced in chapter 8.
    """
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        got = x.dtype if isinstance(x, torch.Tensor) else type(x).__name__
        raise TypeError(f"x: expected a floating-point torch.Tensor, got {got}")
    if x.dim() != 2 or 0 in x.shape:
        raise ValueError(f"x: expected a non-empty (rows, cols) matrix, got {tuple(x.shape)}")
    _require_triton(x, "x")
    x = x.contiguous()
    out = torch.empty_like(x)  # (rows, cols)
    block = triton.next_power_of_2(x.shape[1])
    _softmax_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK_COLS=block)
    return out


# ---- FlashAttention-2: the forward pass ---------------------------------------------------


@_jit
def _key_range(  # type: ignore[no-untyped-def]
    q0, s, MASKED: tl.constexpr, CAUSAL: tl.constexpr, BLOCK: tl.constexpr
):  # fmt: skip
    # The key blocks k0 in range(lo, hi, BLOCK) that the query block at q0
    # folds in: the ones that need no mask, or (MASKED) the ones that do.
    if CAUSAL:  # wholly in the past; then the one on the diagonal
        split, end = q0, tl.minimum(q0 + BLOCK, s)
    else:  # every whole block; then the ragged last one, if any
        split, end = (s // BLOCK) * BLOCK, s
    lo = split if MASKED else 0
    hi = end if MASKED else split
    return lo, hi


@_jit
def _forward_tiles(  # type: ignore[no-untyped-def]
    acc, row_sum, m, q, k_ptr, v_ptr, rows, q0, s, qk_scale,
    MASKED: tl.constexpr, CAUSAL: tl.constexpr,
    BLOCK: tl.constexpr, D: tl.constexpr,
):  # fmt: skip
    # Chapter 7's inner loop: fold key blocks into the running state.
    lo, hi = _key_range(q0, s, MASKED, CAUSAL, BLOCK)
    for k0 in range(lo, hi, BLOCK):
        cols = k0 + tl.arange(0, BLOCK)
        at = cols[:, None] * D + tl.arange(0, D)[None, :]  # (bk, d_h)
        if MASKED:  # past the end, or on the diagonal
            k = tl.load(k_ptr + at, mask=cols[:, None] < s, other=0)
            v = tl.load(v_ptr + at, mask=cols[:, None] < s, other=0)
        else:  # wholly inside, and in the past: no mask at all
            k = tl.load(k_ptr + at)
            v = tl.load(v_ptr + at)
        scores = tl.dot(q, tl.trans(k), input_precision="ieee")  # (bq, bk)
        scores *= qk_scale  # chapter 7's S, times log2(e)
        if MASKED:
            keep = cols[None, :] < s
            if CAUSAL:
                keep = keep & (cols[None, :] <= rows[:, None])
            scores = tl.where(keep, scores, -float("inf"))
        m_new = tl.maximum(m, tl.max(scores, axis=1))
        rescale = tl.exp2(m - m_new)  # 0 on the first block
        p = tl.exp2(scores - m_new[:, None])
        row_sum = row_sum * rescale + tl.sum(p, axis=1)
        pv = tl.dot(p.to(v.dtype), v, input_precision="ieee")  # (bq, d_h)
        acc = acc * rescale[:, None] + pv
        m = m_new
    return acc, row_sum, m


@_jit
def _forward_kernel(  # type: ignore[no-untyped-def]
    q_ptr, k_ptr, v_ptr, out_ptr, lse_ptr, t, s, qk_scale,
    CAUSAL: tl.constexpr, BLOCK: tl.constexpr, D: tl.constexpr,
):  # fmt: skip
    q0 = tl.program_id(0) * BLOCK  # this program's query block
    bh = tl.program_id(1)  # and its (batch, head) pair
    rows = q0 + tl.arange(0, BLOCK)
    q_at = bh * t * D + rows[:, None] * D + tl.arange(0, D)[None, :]
    q = tl.load(q_ptr + q_at, mask=rows[:, None] < t, other=0)
    acc = tl.zeros((BLOCK, D), dtype=tl.float32)
    row_sum = tl.zeros((BLOCK,), dtype=tl.float32)
    m = tl.full((BLOCK,), -float("inf"), dtype=tl.float32)
    k_ptr += bh * s * D  # this head's keys and values
    v_ptr += bh * s * D
    acc, row_sum, m = _forward_tiles(
        acc, row_sum, m, q, k_ptr, v_ptr, rows, q0, s, qk_scale,
        False, CAUSAL, BLOCK, D,
    )  # fmt: skip
    acc, row_sum, m = _forward_tiles(
        acc, row_sum, m, q, k_ptr, v_ptr, rows, q0, s, qk_scale,
        True, CAUSAL, BLOCK, D,
    )  # fmt: skip
    # Every row saw a key: row_sum >= 1. The log-sum-exp is kept in base 2,
    # as the backward kernels use it.
    tl.store(lse_ptr + bh * t + rows, m + tl.log2(row_sum), mask=rows < t)
    out = (acc / row_sum[:, None]).to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + q_at, out, mask=rows[:, None] < t)


# ---- the backward pass --------------------------------------------------------------------


@_jit
def _backward_dkdv_kernel(  # type: ignore[no-untyped-def]
    q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr,
    t, s, qk_scale, scale,
    CAUSAL: tl.constexpr, BLOCK: tl.constexpr, D: tl.constexpr,
):  # fmt: skip
    # One key block per program: dV = P^T dO and dK = dS^T Q, summed over
    # the query blocks that see it.
    k0 = tl.program_id(0) * BLOCK
    bh = tl.program_id(1)
    cols = k0 + tl.arange(0, BLOCK)
    dims = tl.arange(0, D)
    kv_at = bh * s * D + cols[:, None] * D + dims[None, :]
    k = tl.load(k_ptr + kv_at, mask=cols[:, None] < s, other=0)
    v = tl.load(v_ptr + kv_at, mask=cols[:, None] < s, other=0)
    dk = tl.zeros((BLOCK, D), dtype=tl.float32)
    dv = tl.zeros((BLOCK, D), dtype=tl.float32)
    # Padded rows load zeros: their dO is 0, and so is all they add.
    for q0 in range(k0 if CAUSAL else 0, t, BLOCK):
        rows = q0 + tl.arange(0, BLOCK)
        q_at = bh * t * D + rows[:, None] * D + dims[None, :]
        q = tl.load(q_ptr + q_at, mask=rows[:, None] < t, other=0)
        do = tl.load(do_ptr + q_at, mask=rows[:, None] < t, other=0)
        lse = tl.load(lse_ptr + bh * t + rows, mask=rows < t, other=0)
        delta = tl.load(delta_ptr + bh * t + rows, mask=rows < t, other=0)
        scores_t = tl.dot(k, tl.trans(q), input_precision="ieee")  # (bk, bq)
        p_t = tl.exp2(scores_t * qk_scale - lse[None, :])  # the weights
        keep = cols[:, None] < s
        if CAUSAL:
            keep = keep & (cols[:, None] <= rows[None, :])
        p_t = tl.where(keep, p_t, 0.0)
        dv += tl.dot(p_t.to(do.dtype), do, input_precision="ieee")  # (bk, d_h)
        dp_t = tl.dot(v, tl.trans(do), input_precision="ieee")  # (bk, bq)
        ds_t = p_t * (dp_t - delta[None, :])
        dk += tl.dot(ds_t.to(q.dtype), q, input_precision="ieee")  # (bk, d_h)
    dk = (dk * scale).to(dk_ptr.dtype.element_ty)
    tl.store(dk_ptr + kv_at, dk, mask=cols[:, None] < s)
    dv = dv.to(dv_ptr.dtype.element_ty)
    tl.store(dv_ptr + kv_at, dv, mask=cols[:, None] < s)


@_jit
def _backward_dq_kernel(  # type: ignore[no-untyped-def]
    q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr,
    t, s, qk_scale, scale,
    CAUSAL: tl.constexpr, BLOCK: tl.constexpr, D: tl.constexpr,
):  # fmt: skip
    # One query block per program: dQ = dS K, summed over key blocks.
    q0 = tl.program_id(0) * BLOCK
    bh = tl.program_id(1)
    rows = q0 + tl.arange(0, BLOCK)
    dims = tl.arange(0, D)
    q_at = bh * t * D + rows[:, None] * D + dims[None, :]
    q = tl.load(q_ptr + q_at, mask=rows[:, None] < t, other=0)
    do = tl.load(do_ptr + q_at, mask=rows[:, None] < t, other=0)
    lse = tl.load(lse_ptr + bh * t + rows, mask=rows < t, other=0)
    delta = tl.load(delta_ptr + bh * t + rows, mask=rows < t, other=0)
    dq = tl.zeros((BLOCK, D), dtype=tl.float32)
    for k0 in range(0, tl.minimum(q0 + BLOCK, s) if CAUSAL else s, BLOCK):
        cols = k0 + tl.arange(0, BLOCK)
        kv_at = bh * s * D + cols[:, None] * D + dims[None, :]
        k = tl.load(k_ptr + kv_at, mask=cols[:, None] < s, other=0)
        v = tl.load(v_ptr + kv_at, mask=cols[:, None] < s, other=0)
        scores = tl.dot(q, tl.trans(k), input_precision="ieee")  # (bq, bk)
        p = tl.exp2(scores * qk_scale - lse[:, None])  # the weights
        keep = cols[None, :] < s
        if CAUSAL:
            keep = keep & (cols[None, :] <= rows[:, None])
        p = tl.where(keep, p, 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision="ieee")  # (bq, bk)
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k, input_precision="ieee")  # (bq, d_h)
    dq = (dq * scale).to(dq_ptr.dtype.element_ty)
    tl.store(dq_ptr + q_at, dq, mask=rows[:, None] < t)


# ---- the autograd Function and the public function ----------------------------------------


def _forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    out: torch.Tensor,
    lse: torch.Tensor,
) -> None:
    """Launch the forward kernel on contiguous inputs, writing into ``out`` and ``lse`` (the
    log-sum-exp of each query's scaled scores, in base 2: chapter 7's ``L`` times log2(e))."""
    b, h, t, d_h = q.shape
    s = k.shape[2]
    grid = (triton.cdiv(t, BLOCK), b * h)  # (query blocks, heads)
    _forward_kernel[grid](
        q, k, v, out, lse, t, s, d_h**-0.5 * _LOG2E, CAUSAL=causal, BLOCK=BLOCK, D=d_h
    )


def _backward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    grad_out: torch.Tensor,
    causal: bool,
    dq: torch.Tensor,
    dk: torch.Tensor,
    dv: torch.Tensor,
) -> None:
    """Launch the backward kernels on contiguous tensors, writing into ``dq``, ``dk``, ``dv``."""
    b, h, t, d_h = q.shape
    s = k.shape[2]
    # delta = rowsum(dO * O), one number per query: chapter 7's D (here D is the head size).
    delta = (grad_out.float() * out.float()).sum(dim=-1)  # (b, h, t)
    scale = d_h**-0.5
    _backward_dkdv_kernel[(triton.cdiv(s, BLOCK), b * h)](
        q, k, v, grad_out, lse, delta, dk, dv, t, s, scale * _LOG2E, scale,
        CAUSAL=causal, BLOCK=BLOCK, D=d_h,
    )  # fmt: skip
    _backward_dq_kernel[(triton.cdiv(t, BLOCK), b * h)](
        q, k, v, grad_out, lse, delta, dq, t, s, scale * _LOG2E, scale,
        CAUSAL=causal, BLOCK=BLOCK, D=d_h,
    )  # fmt: skip


class FlashAttention(torch.autograd.Function):
    """FlashAttention-2 as an autograd Function: Triton kernels forward and backward.

    The forward pass saves the inputs, the output and one log-sum-exp per query (linear in
    ``t``, as chapter 7's ``TiledAttention``), kept in base 2 (``L`` times log2(e)) because
    the kernels compute with ``exp2``; the backward pass recomputes the weights from it.
    ``dK`` and ``dV`` are summed per key block by one kernel; ``dQ`` per query block by a
    second one, which recomputes the weights once more instead of adding partial sums into
    ``dQ`` from every key block with ``tl.atomic_add``, as FlashAttention-2 does: each program
    then writes only its own rows, so the result is the same on every run (atomic additions
    land in any order, and floating-point addition is not associative) and no float32 buffer
    is needed.

    Call it as ``FlashAttention.apply(queries, keys, values, is_causal)`` on checked,
    contiguous inputs; :func:`flash_attention` checks them.

    Args:
        args: ``queries``, ``keys``, ``values`` and ``is_causal``, positional.
        kwargs: none.

    Shape:
        - ``queries``: ``(b, h, t, d_h)``; ``keys``, ``values``: ``(b, h, s, d_h)``.
        - Output: ``(b, h, t, d_h)``.

    Introduced in chapter 8.
    """

    @staticmethod
    def forward(
        ctx: Any,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        causal: bool,
    ) -> torch.Tensor:
        out = torch.empty_like(q)  # (b, h, t, d_h)
        lse = q.new_empty(q.shape[:3], dtype=torch.float32)  # (b, h, t)
        _forward(q, k, v, causal, out, lse)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal = causal
        return out

    @staticmethod
    def backward(
        ctx: Any,
        grad_out: torch.Tensor,
    ) -> tuple[torch.Tensor | None, ...]:
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = (torch.empty_like(x) for x in (q, k, v))
        grad_out = grad_out.contiguous()
        _backward(q, k, v, out, lse, grad_out, ctx.causal, dq, dk, dv)
        return dq, dk, dv, None


_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _check_inputs(
    queries: object, keys: object, values: object, is_causal: object
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, bool]:
    """Chapter 7's checks of the shapes, dtypes and devices, then what the kernels need."""
    q, k, v = check_head_inputs(queries, keys, values)
    if q.dtype not in _DTYPES:
        raise TypeError(f"queries: expected float16, bfloat16, float32 or float64, got {q.dtype}")
    if q.shape[0] == 0 or q.shape[1] == 0:
        raise ValueError(f"queries: expected b, h >= 1, got shape {tuple(q.shape)}")
    if q.shape[3] not in _HEAD_SIZES:
        raise ValueError(f"queries: expected d_h in {_HEAD_SIZES}, got d_h={q.shape[3]}")
    is_causal = check_bool("is_causal", is_causal)
    if is_causal and k.shape[2] != q.shape[2]:
        raise ValueError(
            f"keys: expected as many keys as queries with is_causal=True, "
            f"got s={k.shape[2]}, t={q.shape[2]}"
        )
    interpreted = _require_triton(q, "queries").interpreted
    if q.dtype == torch.float64 and not interpreted:
        raise TypeError("queries: expected float16, bfloat16 or float32 on a GPU, got float64")
    if q.dtype == torch.bfloat16 and interpreted:
        # The interpreter does not support bfloat16 arithmetic: it computes on the raw bits.
        raise TypeError("queries: expected float16 or float32 in the interpreter, got bfloat16")
    return q.contiguous(), k.contiguous(), v.contiguous(), is_causal


def flash_attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    *,
    is_causal: bool = False,
) -> torch.Tensor:
    """Scaled dot-product attention in one Triton kernel, forward and backward.

    The function of :func:`~attention_from_scratch.attention` (scale ``1 / sqrt(d_h)``, no
    dropout), computed as FlashAttention-2 does: a program per block of ``BLOCK`` queries
    and head visits the keys and values block by block with an online softmax, skipping the
    blocks in the future when causal. Gradients flow through :class:`FlashAttention`. The
    products run in full float32 precision on a GPU too (``input_precision="ieee"``), not
    in its default TF32.

    Args:
        queries: ``(b, h, t, d_h)``, float16 or float32 (bfloat16 on a GPU only; float64 in
            the interpreter only, for ``torch.autograd.gradcheck``); ``d_h`` one of 16, 32,
            64, 128.
        keys: ``(b, h, s, d_h)``, same dtype and device.
        values: ``(b, h, s, d_h)``.
        is_causal: query ``i`` sees keys ``0, ..., i`` only; needs ``s == t``.

    Returns:
        The context vectors, ``(b, h, t, d_h)``, of the queries' dtype.

    Introduced in chapter 8.
    """
    q, k, v, is_causal = _check_inputs(queries, keys, values, is_causal)
    # torch types Function.apply without annotations: say what it returns.
    apply: Callable[..., torch.Tensor] = FlashAttention.apply
    return apply(q, k, v, is_causal)
