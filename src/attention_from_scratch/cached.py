"""Chapter 7: multi-head attention with a padding mask and a KV cache.

Dimension names used here: ``b`` batch, ``t`` new tokens (queries), ``s`` key/value tokens
(cached ones included), ``h`` query heads, ``h_kv`` key/value heads (``h`` here, fewer in
:class:`~attention_from_scratch.GroupedQueryAttention`), ``d_in`` input size, ``d_out``
output size, ``d_h = d_out // h`` size of one head.
"""

from __future__ import annotations

import torch

from ._checks import check_input, check_padding_mask, check_return_weights
from .causal import causal_mask
from .kv_cache import KVCache
from .multihead import MultiHeadAttention, head_attention


class CachedAttention(MultiHeadAttention):
    """Chapter 4's :class:`~attention_from_scratch.MultiHeadAttention` with a
    padding mask and a KV cache.

    Same constructor, same layers and state-dict names, same outputs when
    ``forward`` gets neither of the two new arguments:

    - ``key_padding_mask``, ``(b, s)`` bool, ``True`` at padded keys (the
      convention of ``torch.nn.MultiheadAttention``), is combined with the
      causal mask. A query that can see no key at all (a padded token before
      any real one) gets zero weights and a zero output row, never NaN.
    - ``kv_cache``, a :class:`~attention_from_scratch.KVCache`: the keys and
      values of ``x`` are appended to it and the new queries attend, causally,
      to every cached token, so feeding a sequence piece by piece gives the
      outputs of one full pass.

    The layer only builds masks: the attention itself is chapter 4's
    :func:`~attention_from_scratch.head_attention`, on both paths. On the
    fused path the causal mask alone is the kernel's ``is_causal`` and one new
    token needs no mask at all; a padding mask, or the causal rows of several
    new tokens after cached ones, becomes a boolean ``attn_mask``.

    Args:
        d_in: size of each input embedding.
        d_out: size of each output vector; must be a multiple of ``num_heads``.
        context_length: the largest number of tokens accepted, cached ones
            included.
        dropout: dropout probability on the attention weights during
            training, in [0, 1).
        num_heads: the number of heads ``h``.
        qkv_bias: add a learnable bias to the query, key and value
            projections.
        fused: use ``scaled_dot_product_attention``.

    Shape:
        - Input: ``x`` ``(b, t, d_in)``; ``key_padding_mask`` ``(b, s)``,
          where ``s`` is ``t``, or the cached tokens plus ``t`` with a cache;
          ``s <= context_length``.
        - Output: ``(b, t, d_out)``; with ``return_weights=True`` also the
          weights actually applied, ``(b, h, t, s)``.

    Introduced in chapter 7.
    """

    mask: torch.Tensor

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        num_heads: int,
        qkv_bias: bool = False,
        *,
        fused: bool = False,
    ) -> None:
        super().__init__(
            d_in,
            d_out,
            context_length,
            dropout,
            num_heads,
            qkv_bias,
            fused=fused,
        )
        # The causal mask of the longest input, context_length on each side,
        # built once: the new queries after cached keys read their rows of it.
        # Not persistent, so it is not saved with the weights and the state
        # dict is chapter 4's.
        mask = causal_mask(self.context_length)  # (context_length,) * 2
        self.register_buffer("mask", mask, persistent=False)

    def forward(
        self,
        x: torch.Tensor,
        return_weights: bool = False,
        *,
        key_padding_mask: torch.Tensor | None = None,
        kv_cache: KVCache | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor | None]:
        return_weights = check_return_weights(return_weights, self.fused)
        x = check_input(x, self.d_in, self.context_length, like=self)
        b, t, _ = x.shape
        past = 0 if kv_cache is None else self._cached_tokens(kv_cache, t)
        s = past + t  # keys: the cached tokens and the new ones
        if key_padding_mask is not None:
            check_padding_mask(key_padding_mask, b, s, x.device)
        # The new tokens sit at positions past, past + 1, ...: a layer that
        # gives the heads positions (chapter 6's rotary) rotates by them.
        queries, keys, values = self.project(x, past)  # (b, h or h_kv, t, d_h)
        if kv_cache is not None:
            keys, values = kv_cache.append(keys, values)  # (b, h_kv, s, d_h)
        hidden, empty = self.hidden_keys(past, t, key_padding_mask)
        context, weights = self.attend(queries, keys, values, hidden)

        context = context.transpose(1, 2)  # (b, t, h, d_h)
        out = self.out_proj(context.reshape(b, t, self.d_out))  # (b, t, d_out)
        if empty is not None:
            out = out.masked_fill(empty.view(b, t, 1), 0.0)  # (b, t, d_out)
            if weights is not None:
                weights = weights.masked_fill(empty, 0.0)  # (b, h, t, s)
        return (out, weights) if return_weights else out

    def hidden_keys(
        self,
        past: int,
        t: int,
        key_padding_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The mask of the ``t`` new queries after ``past`` cached tokens.

        Returns:
            ``(hidden, empty)``. ``hidden`` is ``True`` where a query may not
            see a key: ``(t, s)``, or ``(b, 1, t, s)`` with a padding mask,
            or ``None`` where the fused kernel needs no mask tensor. ``empty``
            is ``(b, 1, t, 1)``, ``True`` at the queries that see no key at
            all, or ``None`` without a padding mask.
        """
        s = past + t
        # New query i sits at position past + i: row past + i of the mask.
        future = self.mask[past:s, :s]  # (t, s)
        if key_padding_mask is None:
            # The fused kernel's is_causal is the mask of t == s; a single
            # new token, the newest, sees every key.
            if self.fused and (t == s or t == 1):
                return None, None
            return future, None
        padded = key_padding_mask[:, None, None, :]  # (b, 1, 1, s)
        hidden = future | padded  # (b, 1, t, s)
        # A row with no visible key has no softmax, and what SDPA returns for
        # it depends on the release. It is computed with every key visible
        # instead (finite on both paths), and forward zeroes its output,
        # where out_proj's bias would otherwise appear.
        empty = hidden.all(dim=-1, keepdim=True)  # (b, 1, t, 1)
        return hidden & ~empty, empty  # (b, 1, t, s), (b, 1, t, 1)

    def attend(  # type: ignore[override]  # its forward passes the mask
        self,
        queries: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        hidden: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Chapter 4's :func:`~attention_from_scratch.head_attention` with
        the mask of :meth:`hidden_keys` and this layer's dropout and path.
        ``hidden=None`` means the causal mask of ``t == s`` queries (the fused
        kernel's ``is_causal``, which aligns query ``i`` with key ``i``), or
        no mask for a single query. Keys and values with fewer heads than the
        queries (:class:`~attention_from_scratch.GroupedQueryAttention`) are
        shared by groups of query heads.

        Returns:
            ``(context, weights)``: ``(b, h, t, d_h)`` and ``(b, h, t, s)``,
            or ``None`` for the weights on the fused path.
        """
        t = queries.shape[-2]
        return head_attention(
            queries,
            keys,
            values,
            hidden,
            dropout_p=self.dropout.p if self.training else 0.0,
            is_causal=hidden is None and t > 1,
            fused=self.fused,
            enable_gqa=keys.shape[1] != queries.shape[1],  # h_kv < h
        )

    def _cached_tokens(self, kv_cache: object, t: int) -> int:
        """The number of cached tokens, after checking the cache has room."""
        if not isinstance(kv_cache, KVCache):
            kind = type(kv_cache).__name__
            message = f"expected a KVCache (one per layer), got {kind}"
            raise TypeError(f"kv_cache: {message}")
        past = kv_cache.length
        if past + t > self.context_length:
            raise ValueError(
                f"kv_cache: expected at most context_length="
                f"{self.context_length} tokens in all, got {past} cached "
                f"+ {t} new = {past + t}; start a new KVCache or build the "
                f"module with a larger context_length"
            )
        return past
