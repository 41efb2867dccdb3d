"""Chapter 7: tiled attention, one block of keys at a time with an online softmax.

This module keeps its own attention arithmetic on purpose: the online softmax (a running
maximum and sum, rescaled as each tile is folded in) is the idea the chapter teaches here, and
it cannot be written as a call to the one-pass softmax of
:func:`attention_from_scratch.causal.attention`. It is checked against that function and
against ``scaled_dot_product_attention``.

Dimension names used here: ``b`` batch, ``h`` heads, ``t`` queries, ``s`` keys (``s >= t``
with a causal mask: the queries are the last ``t`` tokens), ``d_h`` size of one head, ``bq``
and ``bk`` the queries and keys of one tile.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ._checks import check_bool, check_head_inputs, check_padding_mask, check_positive_int


def _mask_tile(
    scores: torch.Tensor,
    row0: int,
    k0: int,
    causal: bool,
    key_padding_mask: torch.Tensor | None,
) -> torch.Tensor:
    """Hide the future and the padded keys in one tile of scores.

    ``scores`` is the ``(b, h, bq, bk)`` tile of the queries at positions
    ``row0, row0 + 1, ...`` against the keys ``k0, k0 + 1, ...``;
    ``key_padding_mask`` is ``(b, s)``, ``True`` at padding.
    """
    bq, bk = scores.shape[-2:]
    if causal and k0 + bk - 1 > row0:  # the tile crosses the diagonal
        rows = torch.arange(row0, row0 + bq, device=scores.device)
        cols = torch.arange(k0, k0 + bk, device=scores.device)
        future = cols > rows[:, None]  # (bq, bk)
        scores = scores.masked_fill(future, -math.inf)
    if key_padding_mask is not None:
        padded = key_padding_mask[:, None, None, k0 : k0 + bk]  # (b, 1, 1, bk)
        scores = scores.masked_fill(padded, -math.inf)
    return scores


def tiled_attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    block_size: int = 64,
    causal: bool = True,
    *,
    key_padding_mask: torch.Tensor | None = None,
    return_lse: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention one block at a time, with an online softmax.

    The FlashAttention idea in plain PyTorch: queries are taken ``block_size``
    at a time, and for each block the keys and values are visited
    ``block_size`` at a time. A running maximum ``m`` and a running sum ``l``
    of ``exp(score - m)`` per query let each new tile of scores be folded into
    the result, rescaling what came before by ``exp(m_old - m_new)``. The
    largest intermediate is one ``(b, h, block_size, block_size)`` tile, so
    **without gradients** the extra memory grows linearly with ``t``. Under
    autograd every tile's intermediates are saved for the backward pass,
    which makes the saved memory quadratic again; :class:`TiledAttention`
    saves only the output and ``m + log l`` per row and recomputes the tiles
    instead. Key blocks entirely in the future of a query block are skipped.
    The result equals ``torch.nn.functional.scaled_dot_product_attention`` to
    float tolerance; it is slower here (a Python loop), the fused kernels run
    the same loop in compiled code.

    A query that sees no key at all (every key up to it is padding) gets a
    zero output. While a row's maximum is still ``-inf`` the update subtracts
    0 instead, so no NaN appears (``exp(-inf - (-inf))`` would be one).

    Args:
        queries: ``(b, h, t, d_h)``.
        keys: ``(b, h, s, d_h)``.
        values: ``(b, h, s, d_h)``.
        block_size: tokens per block, for queries and for keys.
        causal: mask the future. Query ``i`` sits at position ``s - t + i``
            (the last ``t`` of the ``s`` tokens, as when decoding with a
            cache), so ``s >= t`` is required.
        key_padding_mask: ``(b, s)`` bool, ``True`` at keys to ignore
            (padding), or ``None``.
        return_lse: also return the log-sum-exp ``m + log l`` of each query's
            scaled scores (``-inf`` for a query that sees no key), what a
            backward pass needs.

    Returns:
        The context vectors, shape ``(b, h, t, d_h)``; with
        ``return_lse=True`` also the log-sum-exp, shape ``(b, h, t)``.

    Introduced in chapter 7.
    """
    queries, keys, values = check_head_inputs(queries, keys, values)
    block_size = check_positive_int("block_size", block_size)
    causal = check_bool("causal", causal)
    return_lse = check_bool("return_lse", return_lse)
    b, _, t, d_h = queries.shape
    s = keys.shape[2]
    if causal and s < t:
        raise ValueError(
            f"keys: expected at least as many keys as queries (s >= t = {t}) "
            f"when causal=True, got s={s}"
        )
    pad = key_padding_mask
    if pad is not None:
        pad = check_padding_mask(pad, b, s, queries.device)
    offset = s - t  # the position of query 0
    queries = queries * d_h**-0.5  # scaled first, as in MultiHeadAttention
    out = torch.empty_like(queries)  # (b, h, t, d_h)
    lse = queries.new_empty(queries.shape[:3])  # (b, h, t)
    for q0 in range(0, t, block_size):
        q1 = min(q0 + block_size, t)
        query_block = queries[:, :, q0:q1]  # (b, h, bq, d_h)
        m = torch.full_like(query_block[..., :1], -math.inf)  # (b, h, bq, 1)
        row_sum = torch.zeros_like(m)  # (b, h, bq, 1)
        acc = torch.zeros_like(query_block)  # (b, h, bq, d_h)
        # Keys from last_key on are in the future of every query here.
        last_key = offset + q1 if causal else s
        for k0 in range(0, last_key, block_size):
            k1 = min(k0 + block_size, last_key)
            key_block = keys[:, :, k0:k1]  # (b, h, bk, d_h)
            scores = query_block @ key_block.transpose(2, 3)  # (b, h, bq, bk)
            scores = _mask_tile(scores, offset + q0, k0, causal, pad)
            block_max = scores.amax(dim=-1, keepdim=True)  # (b, h, bq, 1)
            m_new = torch.maximum(m, block_max)  # (b, h, bq, 1)
            # While a row has seen no key, subtract 0: -inf - -inf is NaN.
            m_safe = m_new.masked_fill(m_new == -math.inf, 0.0)
            rescale = torch.exp(m - m_safe)  # (b, h, bq, 1); 0 at first
            p = torch.exp(scores - m_safe)  # (b, h, bq, bk)
            row_sum = row_sum * rescale + p.sum(dim=-1, keepdim=True)
            acc = acc * rescale + p @ values[:, :, k0:k1]  # (b, h, bq, d_h)
            m = m_new
        # row_sum >= 1 once a key is seen (its largest term is e^0); a row
        # that saw none has acc = 0 and gets 0, not 0 / 0.
        out[:, :, q0:q1] = acc / row_sum.clamp_min(1.0)  # (b, h, bq, d_h)
        lse[:, :, q0:q1] = (m + row_sum.log()).squeeze(-1)  # (b, h, bq)
    return (out, lse) if return_lse else out


class TiledAttention(torch.autograd.Function):
    """Tiled attention whose backward pass recomputes the tiles, as
    FlashAttention does.

    :func:`tiled_attention` under autograd saves every tile's intermediates
    for the backward pass: memory quadratic in ``t`` again. This function
    saves only the queries, keys and values, the output ``O`` and the
    log-sum-exp ``L = m + log l`` of each query row, all linear in ``t``. Its backward
    pass visits the same tiles again, recomputes the weights as
    ``P = exp(scores - L)`` and accumulates the gradients tile by tile:
    ``dV += P^T dO``, ``dP = dO V^T``, ``dS = P * (dP - D)`` with
    ``D = rowsum(dO * O)``, ``dQ += dS K / sqrt(d_h)``,
    ``dK += dS^T Q / sqrt(d_h)``.

    Call it as ``TiledAttention.apply(queries, keys, values, block_size,
    causal, key_padding_mask)``. Rows that see no key get a zero output and
    zero gradients.

    Args:
        args: the arguments of ``apply``, positional: ``queries``, ``keys``,
            ``values``, then optionally ``block_size``, ``causal`` and
            ``key_padding_mask``, as for :func:`tiled_attention`.
        kwargs: none; ``apply`` takes positional arguments only.

    Shape:
        - ``queries``: ``(b, h, t, d_h)``; ``keys``, ``values``:
          ``(b, h, s, d_h)``; ``key_padding_mask``: ``(b, s)`` or ``None``.
        - Output: ``(b, h, t, d_h)``.

    Introduced in chapter 7.
    """

    @staticmethod
    def forward(
        ctx: Any,
        queries: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        block_size: int = 64,
        causal: bool = True,
        key_padding_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        out, lse = tiled_attention(
            queries, keys, values, block_size, causal,
            key_padding_mask=key_padding_mask, return_lse=True,
        )  # fmt: skip
        # Linear in t: inputs, output, one number per row, no tile.
        ctx.save_for_backward(
            queries, keys, values, out, lse, key_padding_mask
        )  # fmt: skip
        ctx.block_size, ctx.causal = block_size, causal
        return out

    @staticmethod
    def backward(
        ctx: Any,
        grad_out: torch.Tensor,
    ) -> tuple[torch.Tensor | None, ...]:
        queries, keys, values, out, lse, pad = ctx.saved_tensors
        size, causal = ctx.block_size, ctx.causal
        t, s, d_h = queries.shape[2], keys.shape[2], queries.shape[3]
        offset, scale = s - t, d_h**-0.5
        # A row that saw no key has L = -inf; +inf makes its weights 0.
        lse = lse.masked_fill(lse == -math.inf, math.inf)[..., None]
        delta = (grad_out * out).sum(dim=-1, keepdim=True)  # (b, h, t, 1)
        # dQ, dK and dV of the formulas, accumulated tile by tile.
        dq, dk, dv = (torch.zeros_like(x) for x in (queries, keys, values))
        for q0 in range(0, t, size):
            q1 = min(q0 + size, t)
            query_block = queries[:, :, q0:q1] * scale  # (b, h, bq, d_h)
            do_block = grad_out[:, :, q0:q1]  # (b, h, bq, d_h)
            last_key = offset + q1 if causal else s
            for k0 in range(0, last_key, size):
                k1 = min(k0 + size, last_key)
                key_block = keys[:, :, k0:k1]  # (b, h, bk, d_h)
                value_block = values[:, :, k0:k1]  # (b, h, bk, d_h)
                scores = query_block @ key_block.mT  # (b, h, bq, bk)
                scores = _mask_tile(scores, offset + q0, k0, causal, pad)
                p = torch.exp(scores - lse[:, :, q0:q1])  # the weights again
                dv[:, :, k0:k1] += p.mT @ do_block  # (b, h, bk, d_h)
                dp = do_block @ value_block.mT  # (b, h, bq, bk)
                ds = p * (dp - delta[:, :, q0:q1])  # (b, h, bq, bk)
                dq[:, :, q0:q1] += ds @ key_block * scale  # (b, h, bq, d_h)
                dk[:, :, k0:k1] += ds.mT @ query_block  # (b, h, bk, d_h)
        return dq, dk, dv, None, None, None
