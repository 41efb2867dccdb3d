"""Chapter 7: grouped-query attention, query heads sharing key/value heads.

Dimension names used here: ``b`` batch, ``t`` new tokens (queries), ``s`` key/value tokens
(cached ones included), ``h`` query heads, ``h_kv`` key/value heads, ``g = h // h_kv`` query
heads per key/value head, ``d_in`` input size, ``d_out`` output size, ``d_h = d_out // h``
size of one head.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._checks import check_positive_int
from .cached import CachedAttention


class GroupedQueryAttention(CachedAttention):
    """Causal attention where groups of query heads share one key/value head.

    ``num_heads`` query heads, as in
    :class:`~attention_from_scratch.CachedAttention`, but only ``num_kv_heads``
    key and value heads: key/value head ``j`` serves query heads ``j * g`` to
    ``(j + 1) * g - 1`` with ``g = num_heads // num_kv_heads`` (the order of
    ``repeat_interleave``). ``W_key`` and ``W_value`` project to
    ``num_kv_heads * d_h`` numbers, so they and the KV cache shrink by
    ``num_heads / num_kv_heads``. ``num_kv_heads == 1`` is multi-query
    attention; ``num_kv_heads == num_heads`` is multi-head attention, and then
    the state dict of a :class:`~attention_from_scratch.MultiHeadAttention`
    loads as is (same layer names: ``W_query``, ``W_key``, ``W_value``,
    ``out_proj``).

    The explicit path gives the queries a group axis, ``(b, h_kv, g, t,
    d_h)``, and the keys and values one of size 1, ``(b, h_kv, 1, s, d_h)``,
    so that chapter 4's attention broadcasts each key/value head over its
    group (``matmul`` expands the keys ``g`` times to do it); the fused path
    lets ``scaled_dot_product_attention`` group the heads itself
    (``enable_gqa=True``). ``forward`` takes the arguments of
    :class:`~attention_from_scratch.CachedAttention` (``return_weights``,
    ``key_padding_mask``, ``kv_cache``), on both paths.

    Args:
        d_in: size of each input embedding.
        d_out: size of each output vector; must be a multiple of ``num_heads``.
        context_length: the largest number of tokens accepted, cached ones
            included.
        dropout: dropout probability on the attention weights during
            training, in [0, 1).
        num_heads: the number of query heads ``h``.
        num_kv_heads: the number of key/value heads ``h_kv``; must divide
            ``num_heads``.
        qkv_bias: add a learnable bias to the query, key and value
            projections.
        fused: use ``scaled_dot_product_attention``.

    Shape:
        - Input: ``(b, t, d_in)``; ``key_padding_mask`` ``(b, s)``.
        - Output: ``(b, t, d_out)``; with ``return_weights=True`` also the
          weights, ``(b, h, t, s)``. The cache holds ``(b, h_kv, s, d_h)``
          keys and values.

    Introduced in chapter 7.
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        num_heads: int,
        num_kv_heads: int,
        qkv_bias: bool = False,
        *,
        fused: bool = False,
    ) -> None:
        num_heads = check_positive_int("num_heads", num_heads)
        num_kv_heads = check_positive_int("num_kv_heads", num_kv_heads)
        if num_heads % num_kv_heads:
            raise ValueError(
                f"num_kv_heads: expected a divisor of num_heads={num_heads}, "
                f"so that every key/value head serves the same number of "
                f"query heads, got {num_kv_heads}"
            )
        # Chapter 4's __init__ sizes W_key and W_value by key_value_size(),
        # which reads it: set first (a plain int may precede Module.__init__).
        self.num_kv_heads = num_kv_heads
        super().__init__(
            d_in,
            d_out,
            context_length,
            dropout,
            num_heads,
            qkv_bias,
            fused=fused,
        )

    def key_value_size(self) -> int:
        """``h_kv`` heads of ``d_h`` numbers, not ``h``: ``W_key``,
        ``W_value`` and the cache shrink by ``h / h_kv``."""
        return self.num_kv_heads * self.head_dim

    def attend(
        self,
        queries: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        hidden: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """As :meth:`CachedAttention.attend
        <attention_from_scratch.CachedAttention.attend>`, with ``(b, h_kv, s,
        d_h)`` keys and values shared by groups of ``g`` query heads."""
        h, t = queries.shape[1], queries.shape[2]
        if self.fused:
            # The kernel pairs each query head with its key/value head.
            context = F.scaled_dot_product_attention(
                queries,
                keys,
                values,
                attn_mask=None if hidden is None else ~hidden,  # ~: allowed
                dropout_p=self.dropout.p if self.training else 0.0,
                is_causal=hidden is None and t > 1,
                enable_gqa=True,
            )  # (b, h, t, d_h)
            return context, None
        # A group axis: g query heads per key/value head. The keys' group
        # axis is a view, but the batched matmul broadcasts it: its product
        # holds g copies of the keys. This path shows the weights; the fused
        # one does without the copies.
        g = h // self.num_kv_heads
        groups = queries.unflatten(1, (-1, g))  # (b, h_kv, g, t, d_h)
        keys = keys.unsqueeze(2)  # (b, h_kv, 1, s, d_h)
        values = values.unsqueeze(2)  # (b, h_kv, 1, s, d_h)
        hidden = hidden.unsqueeze(-3)  # (1, t, s) or (b, 1, 1, t, s)
        context, weights = super().attend(groups, keys, values, hidden)
        # (b, h_kv, g, t, d_h) and (b, h_kv, g, t, s): the heads in order
        return context.flatten(1, 2), weights.flatten(1, 2)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, num_kv_heads={self.num_kv_heads}"
