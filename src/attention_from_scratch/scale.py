"""Chapter 7: attention at scale: padding, the KV cache, tiling, shared heads.

Every class here extends a class of an earlier chapter: :class:`CachedAttention`
is chapter 4's :class:`~attention_from_scratch.MultiHeadAttention` with a
padding mask and a KV cache, :class:`GroupedQueryAttention` shares its
key/value heads among groups of query heads, and :class:`CachedCausalModel` is
chapter 6's :class:`~attention_from_scratch.TinyCausalModel` built from
:class:`CachedAttention` layers, so that :func:`generate` can decode with one
cache per layer.

Dimension names used here: ``b`` batch, ``t`` new tokens (queries), ``s``
key/value tokens (cached ones included), ``h`` query heads, ``h_kv`` key/value
heads, ``g = h // h_kv`` query heads per key/value head, ``d_in`` input size,
``d_out`` output size, ``d_h = d_out // h`` size of one head, ``n`` generated
tokens, ``vocab`` vocabulary size.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ._checks import (
    check_bool,
    check_input,
    check_positive_int,
    check_return_weights,
)
from .multihead import MultiHeadAttention
from .training import TinyCausalModel, _check_tokens

try:  # the one private torch module the package uses; see measure_peak_memory
    from torch.utils._python_dispatch import TorchDispatchMode as _TorchDispatchMode
except ImportError:  # pragma: no cover - a torch release that moved it
    _TorchDispatchMode = object  # measure_peak_memory then refuses to count on the CPU


class KVCache:
    """The keys and values of every token one attention layer has seen so far.

    During generation each new token needs the keys and values of all earlier
    tokens. They do not change once computed (causal attention never lets an
    early token see a later one), so a layer stores them here instead of
    projecting the whole prefix again at every step. Pass one cache per layer
    to ``forward(x, kv_cache=cache)`` of a :class:`CachedAttention`; the layer
    appends the new keys and values and attends to all of them.

    The cache grows by concatenation, which keeps it usable under autograd;
    serving systems preallocate (or page) the memory instead. Its size is
    ``2 * b * h_kv * s * d_h`` numbers per layer, so
    :class:`GroupedQueryAttention` with fewer key/value heads shrinks it by
    ``h / h_kv``.

    Shape:
        - ``keys``, ``values``: ``(b, h_kv, s, d_h)``, or ``None`` while empty.

    Introduced in chapter 7.
    """

    def __init__(self) -> None:
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None

    @property
    def length(self) -> int:
        """The number of cached tokens ``s`` (0 while empty)."""
        return 0 if self.keys is None else self.keys.shape[2]

    def __len__(self) -> int:
        return self.length

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached keys and values."""
        if self.keys is None or self.values is None:
            return 0
        return self.keys.nbytes + self.values.nbytes

    def reset(self) -> None:
        """Forget every cached token, e.g. before generating a new sequence."""
        self.keys = None
        self.values = None

    def append(
        self,
        keys: torch.Tensor,
        values: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Append new keys and values and return all of them.

        Args:
            keys: the new tokens' keys, ``(b, h_kv, t, d_h)``.
            values: their values, same shape.

        Returns:
            ``(keys, values)`` of every cached token, ``(b, h_kv, s, d_h)``.
        """
        if self.keys is None or self.values is None:
            self.keys, self.values = keys, values
        else:
            self._check_like_cached(keys)
            keys = torch.cat((self.keys, keys), dim=2)  # (b, h_kv, s, d_h)
            values = torch.cat((self.values, values), dim=2)  # same shape
            self.keys, self.values = keys, values
        return self.keys, self.values

    def _check_like_cached(self, keys: torch.Tensor) -> None:
        """Raise, naming the difference, if ``keys`` cannot join the cache."""
        cached = self.keys
        if cached is None:
            return
        b, h_kv, _, d_h = cached.shape
        if keys.shape[0] != b:
            raise ValueError(
                f"kv_cache: expected a batch of b={b} sequences, the size "
                f"already cached, got b={keys.shape[0]}; use one KVCache per "
                f"batch (or reset it)"
            )
        if (keys.shape[1], keys.shape[3]) != (h_kv, d_h):
            raise ValueError(
                f"kv_cache: expected keys with (h_kv, d_h) = ({h_kv}, {d_h}) "
                f"like those cached, got ({keys.shape[1]}, {keys.shape[3]}); "
                f"use one KVCache per layer"
            )
        if keys.device != cached.device:
            raise ValueError(
                f"kv_cache: expected tokens on the cache's device "
                f"{cached.device}, got {keys.device}; reset the cache or move "
                f"the input"
            )
        # Compared on the projected keys, not on the layer's input: under
        # torch.autocast the two differ.
        if keys.dtype != cached.dtype:
            raise TypeError(
                f"kv_cache: expected dtype {cached.dtype} like the cached "
                f"keys, got {keys.dtype}; reset the cache or convert the input"
            )

    def __repr__(self) -> str:
        if self.keys is None:
            return "KVCache(empty)"
        b, h_kv, s, d_h = self.keys.shape
        sizes = f"b={b}, h_kv={h_kv}, s={s}, d_h={d_h}"
        return f"KVCache({sizes}, dtype={self.keys.dtype})"


def _check_padding_mask(
    mask: object,
    b: int,
    s: int,
    device: torch.device,
) -> torch.Tensor:
    """Return ``mask`` if it is a ``(b, s)`` bool tensor on ``device``."""
    if not isinstance(mask, torch.Tensor):
        raise TypeError(
            f"key_padding_mask: expected a bool tensor of shape (b, s) = "
            f"({b}, {s}), got {type(mask).__name__}"
        )
    if mask.dtype != torch.bool:
        raise TypeError(
            f"key_padding_mask: expected a bool tensor (True = padding), got "
            f"{mask.dtype}; build it with a comparison, e.g. token_ids == pad_id"
        )
    if tuple(mask.shape) != (b, s):
        raise ValueError(
            f"key_padding_mask: expected shape (b, s) = ({b}, {s}), one flag "
            f"per key (cached and new), got {tuple(mask.shape)}"
        )
    if mask.device != device:
        raise ValueError(
            f"key_padding_mask: expected a tensor on the input's device "
            f"{device}, got {mask.device}; move it with .to(device)"
        )
    return mask


class CachedAttention(MultiHeadAttention):
    """Chapter 4's :class:`~attention_from_scratch.MultiHeadAttention` with a
    padding mask and a KV cache.

    Same constructor, same layers and state-dict names, same outputs when
    ``forward`` gets neither of the two new arguments:

    - ``key_padding_mask``, ``(b, s)`` bool, ``True`` at padded keys (the
      convention of ``torch.nn.MultiheadAttention``), is combined with the
      causal mask. A query that can see no key at all (a padded token before
      any real one) gets zero weights and a zero output row, never NaN.
    - ``kv_cache``, a :class:`KVCache`: the keys and values of ``x`` are
      appended to it and the new queries attend, causally, to every cached
      token, so feeding a sequence piece by piece gives the outputs of one
      full pass.

    Both work on both paths. On the fused path a padding mask, or the
    causal rows of several new tokens after cached ones, becomes a boolean
    ``attn_mask`` of ``scaled_dot_product_attention``; the causal mask alone
    is the kernel's ``is_causal``, and one new token needs no mask at all.

    ``project`` runs three separate projections rather than chapter 4's one
    stacked matmul: decoding one token at a time, stacking the weights at
    every call would copy them all to multiply them by a single token.

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

    def forward(
        self,
        x: torch.Tensor,
        return_weights: bool = False,
        *,
        key_padding_mask: torch.Tensor | None = None,
        kv_cache: KVCache | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        return_weights = check_return_weights(return_weights, self.fused)
        queries, keys, values = self.project(x)  # (b, h or h_kv, t, d_h)
        b, t, _ = x.shape
        past = 0 if kv_cache is None else self._cached_tokens(kv_cache, t)
        s = past + t  # keys: the cached tokens and the new ones
        if key_padding_mask is not None:
            _check_padding_mask(key_padding_mask, b, s, x.device)
        if kv_cache is not None:
            keys, values = kv_cache.append(keys, values)  # (b, h_kv, s, d_h)

        # hidden: True where a query may not look. None leaves the causal
        # rows to attend, which knows them without a mask tensor where it can.
        hidden, empty = None, None
        if key_padding_mask is not None:
            # The future of query i, which sits at position past + i, and
            # every padded key.
            future = self.mask[past:s, :s]  # (t, s)
            padded = key_padding_mask[:, None, None, :]  # (b, 1, 1, s)
            hidden = future | padded  # (b, 1, t, s)
            # A row with no visible key would be 0/0 = NaN. It is computed
            # with every key visible instead (finite values and gradients),
            # and its output is zeroed below.
            empty = hidden.all(dim=-1, keepdim=True)  # (b, 1, t, 1)
            hidden = hidden & ~empty  # (b, 1, t, s)
        context, weights = self.attend(queries, keys, values, hidden)

        context = context.transpose(1, 2)  # (b, t, h, d_h)
        out = self.out_proj(context.reshape(b, t, self.d_out))  # (b, t, d_out)
        if empty is not None:
            out = out.masked_fill(empty.view(b, t, 1), 0.0)  # (b, t, d_out)
            if weights is not None:
                weights = weights.masked_fill(empty, 0.0)  # (b, h, t, s)
        return (out, weights) if return_weights else out

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Queries ``(b, h, t, d_h)``, keys and values ``(b, h_kv, t, d_h)``:
        each projection split into as many heads of ``d_h`` numbers as its
        layer has outputs for (``h_kv = h`` here, fewer in
        :class:`GroupedQueryAttention`)."""
        weight = self.W_query.weight  # fixes the expected dtype and device
        x = check_input(x, self.d_in, self.context_length, like=weight)
        b, t, _ = x.shape
        heads = (b, t, -1, self.head_dim)  # -1: h or h_kv heads
        queries = self.W_query(x).view(heads).transpose(1, 2)  # (b, h, t, d_h)
        keys = self.W_key(x).view(heads).transpose(1, 2)  # (b, h_kv, t, d_h)
        values = self.W_value(x).view(heads)  # (b, t, h_kv, d_h)
        return queries, keys, values.transpose(1, 2)  # (b, h_kv, t, d_h)

    def attend(
        self,
        queries: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        hidden: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Chapter 4's step with any mask, and keys from a cache.

        Args:
            queries: ``(b, h, t, d_h)``.
            keys: ``(b, h_kv, s, d_h)``, with ``h_kv = h`` here (fewer in
                :class:`GroupedQueryAttention`, which the fused kernel
                broadcasts).
            values: ``(b, h_kv, s, d_h)``.
            hidden: ``True`` where a query must not see a key, ``(t, s)`` or
                ``(b, 1, t, s)``. ``None`` means the causal mask alone, query
                ``i`` at position ``s - t + i``: chapter 4's step when
                ``s == t`` (the fused kernels' ``is_causal``, no mask tensor),
                no mask at all for a single query (``t == 1``, the newest
                token, which sees every key), and the ``(t, s)`` causal rows
                otherwise.

        Returns:
            ``(context, weights)``: ``(b, h, t, d_h)`` and ``(b, h, t, s)``,
            or ``None`` for the weights on the fused path.
        """
        t, s = queries.shape[2], keys.shape[2]
        grouped = keys.shape[1] != queries.shape[1]
        if hidden is None and t == s and not grouped:
            return super().attend(queries, keys, values)
        if hidden is None and (not self.fused or 1 < t < s):
            # The causal rows: query i sits at position s - t + i (SDPA's
            # is_causal would align it with key i).
            hidden = self.mask[s - t : s, :s]  # (t, s)
        if self.fused:
            p = self.dropout.p if self.training else 0.0
            context = F.scaled_dot_product_attention(
                queries,
                keys,
                values,
                attn_mask=None if hidden is None else ~hidden,  # ~: allowed
                dropout_p=p,
                # With t = 1 no key is in the future (and SDPA's causal mask
                # would align it with key 0, not with the newest key).
                is_causal=hidden is None and t > 1,
                enable_gqa=grouped,
            )  # (b, h, t, d_h)
            return context, None
        queries = queries * self.head_dim**-0.5  # scaled first
        scores = queries @ keys.transpose(2, 3)  # (b, h, t, s)
        scores = scores.masked_fill(hidden, float("-inf"))  # (b, h, t, s)
        weights = self.dropout(torch.softmax(scores, dim=-1))  # (b, h, t, s)
        return weights @ values, weights  # (b, h, t, d_h), (b, h, t, s)

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


class GroupedQueryAttention(CachedAttention):
    """Causal attention where groups of query heads share one key/value head.

    ``num_heads`` query heads, as in :class:`CachedAttention`, but only
    ``num_kv_heads`` key and value heads: key/value head ``j`` serves query
    heads ``j * g`` to ``(j + 1) * g - 1`` with ``g = num_heads //
    num_kv_heads`` (the order of ``repeat_interleave``). ``W_key`` and
    ``W_value`` project to ``num_kv_heads * d_h`` numbers, so they and the KV
    cache shrink by ``num_heads / num_kv_heads``. ``num_kv_heads == 1`` is
    multi-query attention; ``num_kv_heads == num_heads`` is multi-head
    attention, and then the state dict of a
    :class:`~attention_from_scratch.MultiHeadAttention` loads as is (same
    layer names: ``W_query``, ``W_key``, ``W_value``, ``out_proj``).

    ``forward`` takes the arguments of :class:`CachedAttention`
    (``return_weights``, ``key_padding_mask``, ``kv_cache``), on both paths.

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
        super().__init__(
            d_in,
            d_out,
            context_length,
            dropout,
            num_heads,
            qkv_bias,
            fused=fused,
        )
        self.num_kv_heads = check_positive_int("num_kv_heads", num_kv_heads)
        if num_heads % num_kv_heads:
            raise ValueError(
                f"num_kv_heads: expected a divisor of num_heads={num_heads}, "
                f"so that every key/value head serves the same number of "
                f"query heads, got {num_kv_heads}"
            )
        # Narrower keys and values: h_kv heads of d_h numbers instead of h.
        kv_dim = num_kv_heads * self.head_dim
        self.W_key = nn.Linear(d_in, kv_dim, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, kv_dim, bias=qkv_bias)

    def attend(
        self,
        queries: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        hidden: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """As :meth:`CachedAttention.attend`, with ``(b, h_kv, s, d_h)`` keys
        and values shared by groups of ``g`` query heads."""
        if self.fused:  # scaled_dot_product_attention(..., enable_gqa=True)
            return super().attend(queries, keys, values, hidden)
        b, h, t, d_h = queries.shape
        h_kv, s = self.num_kv_heads, keys.shape[2]
        if hidden is None:
            hidden = self.mask[s - t : s, :s]  # (t, s)
        # The query heads are grouped under their key/value head, and each
        # key/value head broadcasts over its group: the keys are never copied
        # h / h_kv times (matmul may still expand them for the product).
        queries = queries * d_h**-0.5  # scaled first
        g = h // h_kv  # query heads per key/value head
        queries = queries.reshape(b, h_kv, g, t, d_h)  # (b, h_kv, g, t, d_h)
        keys = keys.unsqueeze(2)  # (b, h_kv, 1, s, d_h)
        scores = queries @ keys.transpose(3, 4)  # (b, h_kv, g, t, s)
        hidden = hidden.unsqueeze(-3)  # (1, t, s) or (b, 1, 1, t, s)
        scores = scores.masked_fill(hidden, float("-inf"))
        weights = torch.softmax(scores, dim=-1)  # (b, h_kv, g, t, s)
        weights = self.dropout(weights)  # (b, h_kv, g, t, s)
        context = weights @ values.unsqueeze(2)  # (b, h_kv, g, t, d_h)
        return context.view(b, h, t, d_h), weights.view(b, h, t, s)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, num_kv_heads={self.num_kv_heads}"


def _check_4d(name: str, x: object, shape: str) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor of shape {shape}, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name}: expected a floating-point tensor, got {x.dtype}")
    if x.dim() != 4:
        raise ValueError(f"{name}: expected a tensor of shape {shape}, got shape {tuple(x.shape)}")
    return x


def _check_qkv(q: object, k: object, v: object) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    q = _check_4d("q", q, "(b, h, t, d_h)")
    k = _check_4d("k", k, "(b, h, s, d_h)")
    v = _check_4d("v", v, "(b, h, s, d_h)")
    if k.shape != v.shape:
        raise ValueError(f"v: expected the shape of k {tuple(k.shape)}, got {tuple(v.shape)}")
    if q.shape[:2] != k.shape[:2] or q.shape[3] != k.shape[3]:
        raise ValueError(
            f"k: expected (b, h, s, d_h) with b, h, d_h = {q.shape[0]}, {q.shape[1]}, "
            f"{q.shape[3]} like q, got shape {tuple(k.shape)}"
        )
    for name, x in (("k", k), ("v", v)):
        if x.device != q.device or x.dtype != q.dtype:
            raise ValueError(
                f"{name}: expected {q.dtype} on {q.device} like q, got {x.dtype} on {x.device}"
            )
    if q.shape[2] == 0 or k.shape[2] == 0:
        raise ValueError(
            f"q, k: expected at least one token each, got t={q.shape[2]}, s={k.shape[2]}"
        )
    return q, k, v


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
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
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
        q: queries, shape ``(b, h, t, d_h)``.
        k: keys, shape ``(b, h, s, d_h)``.
        v: values, shape ``(b, h, s, d_h)``.
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
    q, k, v = _check_qkv(q, k, v)
    block_size = check_positive_int("block_size", block_size)
    causal = check_bool("causal", causal)
    return_lse = check_bool("return_lse", return_lse)
    b, _, t, d_h = q.shape
    s = k.shape[2]
    if causal and s < t:
        raise ValueError(
            f"k: expected at least as many keys as queries (s >= t = {t}) "
            f"when causal=True, got s={s}"
        )
    pad = key_padding_mask
    if pad is not None:
        pad = _check_padding_mask(pad, b, s, q.device)
    offset = s - t  # the position of query 0
    q = q * d_h**-0.5  # scaled first, as in MultiHeadAttention
    out = torch.empty_like(q)  # (b, h, t, d_h)
    lse = q.new_empty(q.shape[:3])  # (b, h, t)
    for q0 in range(0, t, block_size):
        q1 = min(q0 + block_size, t)
        q_blk = q[:, :, q0:q1]  # (b, h, bq, d_h)
        m = torch.full_like(q_blk[..., :1], -math.inf)  # (b, h, bq, 1)
        row_sum = torch.zeros_like(m)  # (b, h, bq, 1)
        acc = torch.zeros_like(q_blk)  # (b, h, bq, d_h)
        # Keys from last_key on are in the future of every query here.
        last_key = offset + q1 if causal else s
        for k0 in range(0, last_key, block_size):
            k1 = min(k0 + block_size, last_key)
            scores = q_blk @ k[:, :, k0:k1].transpose(2, 3)  # (b, h, bq, bk)
            scores = _mask_tile(scores, offset + q0, k0, causal, pad)
            block_max = scores.amax(dim=-1, keepdim=True)  # (b, h, bq, 1)
            m_new = torch.maximum(m, block_max)  # (b, h, bq, 1)
            # While a row has seen no key, subtract 0: -inf - -inf is NaN.
            m_safe = m_new.masked_fill(m_new == -math.inf, 0.0)
            rescale = torch.exp(m - m_safe)  # (b, h, bq, 1); 0 at first
            p = torch.exp(scores - m_safe)  # (b, h, bq, bk)
            row_sum = row_sum * rescale + p.sum(dim=-1, keepdim=True)
            acc = acc * rescale + p @ v[:, :, k0:k1]  # (b, h, bq, d_h)
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
    saves only ``q``, ``k``, ``v``, the output ``O`` and the log-sum-exp
    ``L = m + log l`` of each query row, all linear in ``t``. Its backward
    pass visits the same tiles again, recomputes the weights as
    ``P = exp(scores - L)`` and accumulates the gradients tile by tile:
    ``dV += P^T dO``, ``dP = dO V^T``, ``dS = P * (dP - D)`` with
    ``D = rowsum(dO * O)``, ``dQ += dS K / sqrt(d_h)``,
    ``dK += dS^T Q / sqrt(d_h)``.

    Call it as ``TiledAttention.apply(q, k, v, block_size, causal,
    key_padding_mask)``. Rows that see no key get a zero output and zero
    gradients.

    Args:
        args: the arguments of ``apply``, positional: ``q``, ``k``, ``v``,
            then optionally ``block_size``, ``causal`` and
            ``key_padding_mask``, as for :func:`tiled_attention`.
        kwargs: none; ``apply`` takes positional arguments only.

    Shape:
        - ``q``: ``(b, h, t, d_h)``; ``k``, ``v``: ``(b, h, s, d_h)``;
          ``key_padding_mask``: ``(b, s)`` or ``None``.
        - Output: ``(b, h, t, d_h)``.

    Introduced in chapter 7.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        block_size: int = 64,
        causal: bool = True,
        key_padding_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        out, lse = tiled_attention(
            q, k, v, block_size, causal,
            key_padding_mask=key_padding_mask, return_lse=True,
        )  # fmt: skip
        # Linear in t: inputs, output, one number per row, no tile.
        ctx.save_for_backward(q, k, v, out, lse, key_padding_mask)
        ctx.block_size, ctx.causal = block_size, causal
        return out

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: Any,
        grad_out: torch.Tensor,
    ) -> tuple[torch.Tensor | None, ...]:
        q, k, v, out, lse, pad = ctx.saved_tensors
        size, causal = ctx.block_size, ctx.causal
        t, s, d_h = q.shape[2], k.shape[2], q.shape[3]
        offset, scale = s - t, d_h**-0.5
        # A row that saw no key has L = -inf; +inf makes its weights 0.
        lse = lse.masked_fill(lse == -math.inf, math.inf)[..., None]
        delta = (grad_out * out).sum(dim=-1, keepdim=True)  # (b, h, t, 1)
        dq, dk, dv = (torch.zeros_like(x) for x in (q, k, v))
        for q0 in range(0, t, size):
            q1 = min(q0 + size, t)
            q_blk = q[:, :, q0:q1] * scale  # (b, h, bq, d_h)
            do_blk = grad_out[:, :, q0:q1]  # (b, h, bq, d_h)
            last_key = offset + q1 if causal else s
            for k0 in range(0, last_key, size):
                k1 = min(k0 + size, last_key)
                k_blk, v_blk = k[:, :, k0:k1], v[:, :, k0:k1]
                scores = q_blk @ k_blk.transpose(2, 3)  # (b, h, bq, bk)
                scores = _mask_tile(scores, offset + q0, k0, causal, pad)
                p = torch.exp(scores - lse[:, :, q0:q1])  # the weights again
                dv[:, :, k0:k1] += p.mT @ do_blk  # (b, h, bk, d_h)
                dp = do_blk @ v_blk.transpose(2, 3)  # (b, h, bq, bk)
                ds = p * (dp - delta[:, :, q0:q1])  # (b, h, bq, bk)
                dq[:, :, q0:q1] += ds @ k_blk * scale  # (b, h, bq, d_h)
                dk[:, :, k0:k1] += ds.mT @ q_blk  # (b, h, bk, d_h)
        return dq, dk, dv, None, None, None


def measure_peak_memory(
    fn: Callable[[], object],
    device: torch.device | str = "cpu",
) -> int:
    """The most bytes of tensor memory that ``fn()`` holds at once, beyond
    what existed before.

    On CUDA this is ``torch.cuda.max_memory_allocated`` minus the memory
    allocated before the call. On the CPU torch keeps no such counter, and
    its public profiler (``torch.profiler.profile(profile_memory=True)``)
    records the memory of each operation only as a net change once it ends,
    so it cannot say when the tensors of a computation are alive at the same
    time. Here every storage that an operation allocates during the call is
    counted while a Python object still refers to it (a view of a tensor
    that existed before the call, such as ``k.transpose(-2, -1)``, counts
    nothing), through a
    ``TorchDispatchMode`` (``torch.utils._python_dispatch``, the one private
    torch module the package uses, imported in one place; if a torch release
    moves it, this function raises a ``RuntimeError`` saying so). This is exact
    and repeatable for code written with tensor operations; scratch buffers
    that a single fused kernel uses internally are not visible this way (they
    are small for the CPU kernels of ``scaled_dot_product_attention``). Run
    ``fn`` under ``torch.no_grad()`` to leave autograd's saved tensors out.

    Args:
        fn: the computation to measure, called once with no arguments.
        device: where ``fn`` computes; ``"cuda"`` switches to the CUDA
            allocator's counters.

    Returns:
        The peak number of extra bytes.

    Introduced in chapter 7.
    """
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    if _TorchDispatchMode is object:  # pragma: no cover - depends on torch
        raise RuntimeError(
            "measure_peak_memory: expected torch.utils._python_dispatch."
            f"TorchDispatchMode to count CPU tensors, which torch "
            f"{torch.__version__} does not have; measure on CUDA "
            "(device='cuda'), or use a torch release that has it (2.5 to 2.13)"
        )
    with _LiveTensors() as live:
        fn()
    return live.peak


class _LiveTensors(_TorchDispatchMode):
    """Bytes of the storages that operations create and that are still alive."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: dict[int, int] = {}  # storage address -> live tensors using it
        self.sizes: dict[int, int] = {}
        self.current = 0
        self.peak = 0

    def _release(self, key: int) -> None:
        self.refs[key] -= 1
        if self.refs[key] == 0:
            del self.refs[key]
            self.current -= self.sizes.pop(key)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        # Storages the operation read: an output sharing one of them is a
        # view (or an in-place result) of its input, not new memory. If that
        # input existed before the call, its storage is not counted at all.
        inputs = {
            x.untyped_storage().data_ptr()
            for x in _tensors((*args, *kwargs.values()))
            if x.device.type != "meta"
        }
        for x in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(x, torch.Tensor) and x.device.type != "meta":
                storage = x.untyped_storage()
                key = storage.data_ptr()
                if key in inputs and key not in self.refs:
                    continue  # a view of memory that existed before the call
                if key not in self.refs:
                    # A view shares its base's storage, so it adds nothing.
                    self.refs[key] = 0
                    self.sizes[key] = storage.nbytes()
                    self.current += storage.nbytes()
                    self.peak = max(self.peak, self.current)
                self.refs[key] += 1
                weakref.finalize(x, self._release, key)
        return out


def _tensors(items: Sequence[object]) -> list[torch.Tensor]:
    """The tensors among ``items``, looking one level into lists and tuples
    (how operations receive a list of tensors, e.g. ``torch.cat``)."""
    found = []
    for item in items:
        if isinstance(item, torch.Tensor):
            found.append(item)
        elif isinstance(item, (list, tuple)):
            found.extend(x for x in item if isinstance(x, torch.Tensor))
    return found


class CachedCausalModel(TinyCausalModel):
    """Chapter 6's :class:`~attention_from_scratch.TinyCausalModel`, built
    from :class:`CachedAttention` layers, with one KV cache per layer.

    The constructor, the layers, their state-dict names and the random
    numbers they draw are those of ``TinyCausalModel``, so a trained
    ``TinyCausalModel``'s state dict loads as is, and ``forward(tokens)``
    without caches gives the same logits.

    Args (as for :class:`~attention_from_scratch.TinyCausalModel`):
        vocab_size: the number of token ids, ``vocab``.
        d_model: the model size ``d``.
        context_length: the longest sequence accepted, cached tokens included.
        num_layers: the number of blocks.
        num_heads: heads per attention layer.
        positions: ``"none"``, ``"learned"`` or ``"sinusoidal"``.
        mlp: add a two-layer perceptron to every block.
        layer_norm: use pre-norm LayerNorms.
        dropout: dropout on the attention weights during training.

    Shape:
        - Input: ``(b, t)`` token ids; with ``kv_caches``, the tokens after
          the ``s`` cached ones, ``s + t <= context_length``.
        - Output: ``(b, t, vocab)`` logits; with ``return_weights=True`` also
          every layer's weights, ``(b, h, t, s + t)``.

    Introduced in chapter 7.
    """

    attention_class = CachedAttention

    def forward(
        self,
        tokens: torch.Tensor,
        return_weights: bool = False,
        *,
        kv_caches: Sequence[KVCache] | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, list[torch.Tensor]]:
        """Next-token logits for every position of ``tokens``.

        Args:
            tokens: ``(b, t)`` token ids.
            return_weights: also return every layer's attention weights
                (explicit path).
            kv_caches: one :class:`KVCache` per layer. ``tokens`` are then
                the tokens after the ``s`` cached ones: their positions start
                at ``s``, each layer appends their keys and values to its
                cache, and the weights are ``(b, h, t, s + t)``.

        Returns:
            ``(b, t, vocab)`` logits, and with ``return_weights=True`` the
            list of weights.
        """
        if kv_caches is None:
            return super().forward(tokens, return_weights)
        tokens = _check_tokens("tokens", tokens)
        return_weights = check_bool("return_weights", return_weights)
        past = self._cached_tokens(kv_caches, tokens.shape[1])
        x = self.embed(tokens, offset=past)  # (b, t, d), positions past on
        all_weights = []
        for i, cache in enumerate(kv_caches):
            x, weights = self.block(i, x, return_weights, kv_cache=cache)
            all_weights.append(weights)  # (b, h, t, past + t) or None
        logits = self.head(self.final_norm(x))  # (b, t, vocab)
        return (logits, all_weights) if return_weights else logits

    def _cached_tokens(self, kv_caches: object, t: int) -> int:
        """The number of cached tokens, after checking there is one cache per
        layer, all of the same length, with room for ``t`` more tokens."""
        layers = len(self.attention)
        if not isinstance(kv_caches, Sequence) or not all(
            isinstance(cache, KVCache) for cache in kv_caches
        ):
            raise TypeError(
                f"kv_caches: expected a list of {layers} KVCache objects, one "
                f"per layer, got {type(kv_caches).__name__}"
            )
        if len(kv_caches) != layers:
            count = len(kv_caches)
            message = f"expected one KVCache per layer ({layers}), got {count}"
            raise ValueError(f"kv_caches: {message}")
        lengths = [cache.length for cache in kv_caches]
        if len(set(lengths)) != 1:
            raise ValueError(
                f"kv_caches: expected caches holding the same tokens, got "
                f"lengths {sorted(lengths)}; reset them all"
            )
        if lengths[0] + t > self.context_length:
            raise ValueError(
                "tokens: expected at most context_length="
                f"{self.context_length} tokens, got {lengths[0]} cached + {t}"
            )
        return lengths[0]


@torch.no_grad()
def generate(
    model: TinyCausalModel,
    prompt: torch.Tensor,
    new_tokens: int,
    *,
    use_cache: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy decoding: append the most likely next token ``new_tokens`` times.

    Without a cache every step runs the model on the whole sequence so far,
    and the cost of a step grows with its length. With ``use_cache=True`` the
    first step runs on the prompt and fills one :class:`KVCache` per layer;
    every later step runs on the one token just generated, whose query
    attends to the cached keys and values. Both give the same tokens.

    Args:
        model: a :class:`CachedCausalModel`, or for ``use_cache=False`` any
            :class:`~attention_from_scratch.TinyCausalModel` (chapter 6); used
            in ``eval`` mode for the call and restored afterwards.
        prompt: ``(b, t)`` token ids on the model's device.
        new_tokens: how many tokens to generate, ``n >= 1``; ``t + n - 1``
            must not exceed the model's ``context_length`` (the last token is
            never fed back).
        use_cache: decode with a KV cache.

    Returns:
        ``(tokens, logits)``: the ``(b, t + n)`` prompt followed by the
        generated tokens, and the ``(b, n, vocab)`` logits each generated
        token was chosen from.

    Introduced in chapter 7.
    """
    if not isinstance(model, TinyCausalModel):
        kind = type(model).__name__
        raise TypeError(f"model: expected a TinyCausalModel, got {kind}")
    prompt = _check_tokens("prompt", prompt)
    new_tokens = check_positive_int("new_tokens", new_tokens)
    use_cache = check_bool("use_cache", use_cache)
    if use_cache and not isinstance(model, CachedCausalModel):
        raise TypeError(
            f"model: expected a CachedCausalModel for use_cache=True, got "
            f"{type(model).__name__}; build a CachedCausalModel with the same "
            "arguments and load this model's state_dict into it"
        )
    longest = prompt.shape[1] + new_tokens - 1
    if longest > model.context_length:
        raise ValueError(
            f"new_tokens: expected prompt length + new_tokens - 1 <= "
            f"context_length={model.context_length}, got {prompt.shape[1]} + "
            f"{new_tokens} - 1 = {longest}; generate fewer tokens or use a "
            "shorter prompt"
        )
    was_training = model.training
    model.eval()
    try:
        caches = [KVCache() for _ in model.attention] if use_cache else None
        tokens, step_input, all_logits = prompt, prompt, []
        for _ in range(new_tokens):
            if caches is None:
                logits = model(step_input)[:, -1]  # (b, vocab)
            else:
                logits = model(step_input, kv_caches=caches)[:, -1]
            next_token = logits.argmax(dim=-1, keepdim=True)  # (b, 1)
            tokens = torch.cat([tokens, next_token], dim=1)  # (b, t + 1)
            all_logits.append(logits)
            # With a cache only the new token goes in; without, all of them.
            step_input = next_token if use_cache else tokens
    finally:
        model.train(was_training)
    return tokens, torch.stack(all_logits, dim=1)  # (b, t + n), (b, n, vocab)
