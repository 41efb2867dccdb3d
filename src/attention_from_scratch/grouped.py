"""Chapter 7: grouped-query attention, query heads sharing key/value heads.

Dimension names used here: ``b`` batch, ``t`` new tokens (queries), ``s`` key/value tokens
(cached ones included), ``h`` query heads, ``h_kv`` key/value heads, ``g = h // h_kv`` query
heads per key/value head, ``d_in`` input size, ``d_out`` output size, ``d_h = d_out // h``
size of one head.
"""

from __future__ import annotations

from ._checks import check_num_kv_heads
from .cached import CachedAttention
from .positions import RotaryMultiHeadAttention


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

    Only the size of ``W_key`` and ``W_value`` changes (:meth:`key_value_size`):
    the projections give ``h_kv`` heads, and chapter 4's
    :func:`~attention_from_scratch.head_attention`, which the cached layer
    calls with ``enable_gqa`` wherever keys have fewer heads than queries,
    shares each key/value head with its group (on the explicit path with a
    group axis that ``matmul`` broadcasts, expanding the keys ``g`` times;
    on the fused path ``scaled_dot_product_attention`` pairs the heads).
    ``forward`` takes the arguments of
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
        # Chapter 4's __init__ sizes W_key and W_value by key_value_size(),
        # which reads it: checked and set first (a plain int may precede
        # Module.__init__); chapter 4's AttentionConfig checks the rest.
        self.num_kv_heads = check_num_kv_heads(num_kv_heads, num_heads)
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

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, num_kv_heads={self.num_kv_heads}"


class RotaryGroupedQueryAttention(
    RotaryMultiHeadAttention,
    GroupedQueryAttention,
):
    """Grouped-query attention with rotary positions and a KV cache: the
    attention layer of Llama 2's 34B and 70B models and of every Llama 3
    model (Touvron et al., 2023; Grattafiori et al., 2024; Ainslie et al.,
    2023).

    Nothing is written here: the class takes chapter 6's rotation step
    (:class:`~attention_from_scratch.RotaryMultiHeadAttention` replaces
    ``project``, rotating queries and keys for their positions from
    ``offset`` on) and chapter 7's layer (the padding mask, the KV cache,
    whose new tokens start at ``offset = past``, and the shared key/value
    heads). Python's method resolution order puts the rotary class first:
    its ``project`` runs, and its ``super()`` calls pass through the
    grouped and cached layers to chapter 4's ``MultiHeadAttention``; its
    ``__init__`` passes ``num_kv_heads`` on to :class:`GroupedQueryAttention`
    the same way. Its arguments are :class:`GroupedQueryAttention`'s, then
    ``base`` and ``interleaved``; with ``num_kv_heads == num_heads`` and no
    cache it computes what ``RotaryMultiHeadAttention`` computes, and loads
    its state dict.

    Args:
        args: :class:`GroupedQueryAttention`'s, ``d_in, d_out, context_length,
            dropout, num_heads, num_kv_heads, qkv_bias``.
        base: the wavelength scale of the rotations.
        interleaved: the pairing convention of
            :class:`~attention_from_scratch.RotaryEmbedding`.
        kwargs: ``fused``.

    Shape:
        - Input: ``(b, t, d_in)``; ``key_padding_mask`` ``(b, s)``.
        - Output: ``(b, t, d_out)``; with ``return_weights=True`` also the
          weights, ``(b, h, t, s)``. The cache holds rotated keys,
          ``(b, h_kv, s, d_h)``.

    Introduced in chapter 7.
    """
