"""Chapter 4: several attention heads side by side.

Dimension names used here: ``b`` batch, ``t`` tokens, ``h`` heads, ``d_in`` input size,
``d_out`` output size, ``d_h = d_out // h`` size of one head.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from ._checks import (
    check_bool,
    check_divisible,
    check_dropout,
    check_positive_int,
    check_tensor,
)
from .causal import CausalAttention, causal_mask
from .layout import merge_heads, split_heads

if TYPE_CHECKING:
    from .scale import KVCache


class MultiHeadAttentionWrapper(nn.Module):
    """Multi-head attention as a list of independent :class:`CausalAttention` heads.

    Each head has its own query, key and value weights and produces ``d_out`` numbers per
    token; the outputs are concatenated, so the result has ``num_heads * d_out`` features. The
    heads run one after another, which is easy to read and slow.

    Args:
        d_in: size of each input embedding.
        d_out: size of each head's output.
        context_length: the largest number of tokens accepted.
        dropout: dropout probability on each head's attention weights, in [0, 1).
        num_heads: the number of heads ``h``.
        qkv_bias: add a learnable bias to the projections.

    Shape:
        - Input: ``(b, t, d_in)``.
        - Output: ``(b, t, h * d_out)``; with ``return_weights=True`` also the attention
          weights of every head, stacked as ``(b, h, t, t)``.

    Introduced in chapter 4.
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        num_heads: int,
        qkv_bias: bool = False,
    ) -> None:
        super().__init__()
        self.num_heads = check_positive_int("num_heads", num_heads)
        self.heads = nn.ModuleList(
            CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)
            for _ in range(num_heads)
        )

    def forward(
        self, x: torch.Tensor, return_weights: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        return_weights = check_bool("return_weights", return_weights)
        outputs = [head(x, return_weights=True) for head in self.heads]
        context = torch.cat([out for out, _ in outputs], dim=-1)  # (b, t, h * d_out)
        if not return_weights:
            return context
        weights = torch.stack([w for _, w in outputs], dim=1)  # (b, h, t, t)
        return context, weights


class _HeadedAttention(nn.Module):
    """The machinery shared by :class:`MultiHeadAttention` and ``GroupedQueryAttention``.

    ``num_kv_heads`` key/value heads serve ``num_heads`` query heads; each key/value head is
    shared by ``g = num_heads // num_kv_heads`` consecutive query heads (the order of
    ``repeat_interleave``). With ``num_kv_heads == num_heads`` this is ordinary multi-head
    attention. Not public: see the two subclasses for the documentation.
    """

    mask: torch.Tensor

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        num_heads: int,
        num_kv_heads: int,
        qkv_bias: bool,
        fused: bool,
    ) -> None:
        super().__init__()
        self.d_in = check_positive_int("d_in", d_in)
        self.d_out = check_positive_int("d_out", d_out)
        self._context_length = check_positive_int("context_length", context_length)
        self.num_heads = check_positive_int("num_heads", num_heads)
        self.head_dim = check_divisible(d_out, num_heads)
        self.num_kv_heads = check_positive_int("num_kv_heads", num_kv_heads)
        if num_heads % num_kv_heads:
            raise ValueError(
                f"num_kv_heads: expected a divisor of num_heads={num_heads}, so that every "
                f"key/value head serves the same number of query heads, got {num_kv_heads}"
            )
        dropout = check_dropout(dropout)
        check_bool("qkv_bias", qkv_bias)
        self._fused = check_bool("fused", fused)
        kv_dim = self.num_kv_heads * self.head_dim
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, kv_dim, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, kv_dim, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", causal_mask(context_length), persistent=False)

    def forward(
        self,
        x: torch.Tensor,
        return_weights: bool = False,
        *,
        key_padding_mask: torch.Tensor | None = None,
        kv_cache: KVCache | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        # Every input is checked here, once; the steps below use unchecked views. The common
        # case is recognised with a few comparisons; anything else goes through the full
        # check, which raises the precise error.
        weight = self._modules["W_query"]._parameters["weight"]  # no __getattr__ detour
        if not (
            isinstance(x, torch.Tensor)
            and x.dim() == 3
            and x.shape[2] == self.d_in
            and 0 < x.shape[1] <= self._context_length
            and x.dtype == weight.dtype
            and x.device == weight.device
        ):
            check_tensor(
                "x",
                x,
                ranks=(3,),
                shape_names=("(b, t, d_in)",),
                last_dim=self.d_in,
                max_tokens=self.context_length,
                like=self,
            )
        if return_weights is not False:
            return_weights = check_bool("return_weights", return_weights)
            if self._fused and return_weights:
                raise ValueError(
                    "return_weights: expected False on the fused path, which never forms the "
                    "weight matrix, got True; set module.fused = False to get the weights"
                )
        b, t, _ = x.shape
        past = 0
        if kv_cache is not None:
            past = self._check_cache(kv_cache, x)
        if key_padding_mask is not None:
            key_padding_mask = self._check_padding(key_padding_mask, b, past + t, x.device)

        if self._fused and kv_cache is None and key_padding_mask is None:
            return self._fused_causal(x)  # the common case, kept as lean as possible

        h, h_kv, d_h = self.num_heads, self.num_kv_heads, self.head_dim
        queries = self.W_query(x).view(b, t, h, d_h).transpose(1, 2)  # (b, h, t, d_h)
        keys = self.W_key(x).view(b, t, h_kv, d_h).transpose(1, 2)  # (b, h_kv, t, d_h)
        values = self.W_value(x).view(b, t, h_kv, d_h).transpose(1, 2)  # (b, h_kv, t, d_h)
        if kv_cache is not None:
            kv_cache._check_dtype(keys.dtype)
            keys, values = kv_cache._append_unchecked(keys, values)  # (b, h_kv, s, d_h)
        s = past + t

        # True where attention is forbidden: the future (query i sits at position past + i)
        # and, with a padding mask, every padded key.
        forbidden = self.mask[past:s, :s]  # (t, s)
        empty_rows = None
        if key_padding_mask is not None:
            forbidden = forbidden | key_padding_mask[:, None, None, :]  # (b, 1, t, s)
            # A row with no visible key would be 0/0 = NaN. It is computed with every key
            # visible instead (finite values and gradients) and its output zeroed below.
            empty_rows = forbidden.all(dim=-1, keepdim=True)  # (b, 1, t, 1)
            forbidden = forbidden & ~empty_rows  # (b, 1, t, s)

        if self._fused:
            p = self.dropout.p if self.training else 0.0
            if kv_cache is not None and key_padding_mask is None and t == 1:
                attn_mask = None  # one new token sees every cached one
            else:
                attn_mask = ~forbidden  # SDPA's bool mask means "allowed"
            context = F.scaled_dot_product_attention(
                queries, keys, values, attn_mask=attn_mask, dropout_p=p, enable_gqa=h_kv != h
            )  # (b, h, t, d_h)
            weights = None
        else:
            group = h // h_kv
            # Scaled before the product, as libraries do: q @ k.T can overflow fp16 (max
            # 65504) before a later division would bring it back into range.
            queries = queries * d_h**-0.5
            # Query heads are grouped under their shared key/value head, and the key/value
            # heads broadcast over the group: no h-fold copy of the keys is kept (matmul may
            # still expand one for the duration of the product).
            q = queries.reshape(b, h_kv, group, t, d_h)  # (b, h_kv, g, t, d_h)
            scores = q @ keys.unsqueeze(2).transpose(3, 4)  # (b, h_kv, g, t, s)
            scores = scores.reshape(b, h, t, s)  # (b, h, t, s)
            weights = torch.softmax(scores.masked_fill(forbidden, float("-inf")), dim=-1)
            if empty_rows is not None:
                weights = weights.masked_fill(empty_rows, 0.0)  # (b, h, t, s)
            weights = self.dropout(weights)
            w = weights.view(b, h_kv, group, t, s)  # (b, h_kv, g, t, s)
            context = (w @ values.unsqueeze(2)).view(b, h, t, d_h)  # (b, h, t, d_h)
        out = self.out_proj(context.transpose(1, 2).reshape(b, t, self.d_out))  # (b, t, d_out)
        if empty_rows is not None:
            out = out.masked_fill(empty_rows.view(b, t, 1), 0.0)  # (b, t, d_out)
        return (out, weights) if return_weights else out

    def _fused_causal(self, x: torch.Tensor) -> torch.Tensor:
        """The fused path without cache or padding: one projection for q, k and v."""
        b, t, _ = x.shape
        h, h_kv, d_h = self.num_heads, self.num_kv_heads, self.head_dim
        weight, bias = self._packed_qkv()
        qkv = F.linear(x, weight, bias)  # (b, t, (h + 2 h_kv) d_h)
        p = self.dropout.p if self.training else 0.0
        if h_kv == h:
            qkv = qkv.view(b, t, 3, h, d_h).permute(2, 0, 3, 1, 4)  # (3, b, h, t, d_h)
            queries, keys, values = qkv.unbind(0)  # each (b, h, t, d_h)
            context = F.scaled_dot_product_attention(
                queries, keys, values, dropout_p=p, is_causal=True
            )  # (b, h, t, d_h)
        else:
            q, k, v = qkv.split((h * d_h, h_kv * d_h, h_kv * d_h), dim=-1)
            queries = q.view(b, t, h, d_h).transpose(1, 2)  # (b, h, t, d_h)
            keys = k.view(b, t, h_kv, d_h).transpose(1, 2)  # (b, h_kv, t, d_h)
            values = v.view(b, t, h_kv, d_h).transpose(1, 2)  # (b, h_kv, t, d_h)
            context = F.scaled_dot_product_attention(
                queries, keys, values, dropout_p=p, is_causal=True, enable_gqa=True
            )  # (b, h, t, d_h)
        return self.out_proj(context.transpose(1, 2).reshape(b, t, self.d_out))  # (b, t, d_out)

    def _packed_qkv(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``W_query``, ``W_key`` and ``W_value`` stacked into one weight (and bias).

        One matmul instead of three. Under autograd the concatenation is redone at every call
        (a small copy; autograd splits its gradient back to the three layers). Without
        gradients it is kept and reused until a weight changes: an optimizer step or
        ``load_state_dict`` bumps the tensors' version counters, ``.to()`` moves their data.
        """
        # Read through the parameter dictionaries: nn.Module's attribute lookup costs about a
        # microsecond each, which shows in a layer that takes tens of them on small inputs.
        modules = self._modules
        params = [modules[name]._parameters for name in ("W_query", "W_key", "W_value")]
        tensors = [p["weight"] for p in params]
        if params[0]["bias"] is not None:
            tensors += [p["bias"] for p in params]
        if torch.is_grad_enabled():
            weight = torch.cat(tensors[:3])  # ((h + 2 h_kv) d_h, d_in)
            return weight, (torch.cat(tensors[3:]) if len(tensors) > 3 else None)
        key = tuple((x.data_ptr(), x._version) for x in tensors)
        cached = self.__dict__.get("_packed")
        if cached is None or cached[0] != key:
            weight = torch.cat(tensors[:3])  # ((h + 2 h_kv) d_h, d_in)
            bias = torch.cat(tensors[3:]) if len(tensors) > 3 else None
            cached = (key, weight, bias)
            self.__dict__["_packed"] = cached
        return cached[1], cached[2]

    def _check_cache(self, kv_cache: object, x: torch.Tensor) -> int:
        """Check a cache against this layer and the new tokens; return the cached length."""
        from .scale import KVCache  # scale imports this module; imported here, not at the top

        if not isinstance(kv_cache, KVCache):
            raise TypeError(
                f"kv_cache: expected a KVCache (one per layer), got {type(kv_cache).__name__}"
            )
        b, t, _ = x.shape
        kv_cache._check_compatible(
            batch=b,
            num_kv_heads=self.num_kv_heads,
            head_dim=self.head_dim,
            device=x.device,
        )
        past = kv_cache.length
        if past + t > self.context_length:
            raise ValueError(
                f"kv_cache: expected at most context_length={self.context_length} tokens in "
                f"all, got {past} cached + {t} new = {past + t}; start a new KVCache or build "
                f"the module with a larger context_length"
            )
        return past

    @staticmethod
    def _check_padding(mask: object, b: int, s: int, device: torch.device) -> torch.Tensor:
        if not isinstance(mask, torch.Tensor):
            raise TypeError(
                f"key_padding_mask: expected a bool tensor of shape (b, s) = ({b}, {s}), "
                f"got {type(mask).__name__}"
            )
        if mask.dtype != torch.bool:
            raise TypeError(
                f"key_padding_mask: expected a bool tensor (True = padding), got {mask.dtype}; "
                f"build it with a comparison, e.g. token_ids == pad_id"
            )
        if tuple(mask.shape) != (b, s):
            raise ValueError(
                f"key_padding_mask: expected shape (b, s) = ({b}, {s}), one flag per key "
                f"(cached and new), got {tuple(mask.shape)}"
            )
        if mask.device != device:
            raise ValueError(
                f"key_padding_mask: expected a tensor on the input's device {device}, "
                f"got {mask.device}; move it with .to(device)"
            )
        return mask

    @property
    def fused(self) -> bool:
        """Whether ``forward`` calls ``scaled_dot_product_attention`` (True) or computes the
        weights explicitly (False); may be switched at any time, to a bool only."""
        return self._fused

    @fused.setter
    def fused(self, value: bool) -> None:
        # Checked here, at the assignment, not at the next forward pass far from the mistake.
        self._fused = check_bool("fused", value)

    @property
    def context_length(self) -> int:
        """The most tokens a sequence may have; fixed, since the causal mask is built for it."""
        return self._context_length

    @context_length.setter
    def context_length(self, value: int) -> None:
        raise AttributeError(
            f"context_length: expected to stay {self._context_length}, the size the causal "
            f"mask was built for, got an assignment of {value!r}; build a new module instead"
        )

    def extra_repr(self) -> str:
        kv = "" if self.num_kv_heads == self.num_heads else f"num_kv_heads={self.num_kv_heads}, "
        return (
            f"d_in={self.d_in}, d_out={self.d_out}, num_heads={self.num_heads}, {kv}"
            f"context_length={self.context_length}, fused={self.fused}"
        )


class MultiHeadAttention(_HeadedAttention):
    """Causal multi-head attention computed for all heads at once.

    One projection of size ``d_out`` per role (query, key, value) is split into ``h`` heads of
    size ``d_h = d_out // h``; a single batched matmul scores every head; the heads are merged
    back and mixed by ``out_proj``. Layers are created in the order ``W_query``, ``W_key``,
    ``W_value``, ``out_proj``.

    Two paths compute the same function:

    - explicit (``fused=False``, the default): the steps written out, as taught in the book
      (the queries are multiplied by ``1 / sqrt(d_h)`` before ``q @ k.T``, which keeps
      float16 scores finite; chapter 7 explains why);
    - fused (``fused=True``): ``torch.nn.functional.scaled_dot_product_attention``, which can
      use FlashAttention-style kernels and never stores the ``(t, t)`` weight matrix; the
      three projections run as one matmul. It cannot return weights.

    The attribute ``fused`` may be changed after construction; ``context_length`` may not.

    Padding (chapter 7): ``key_padding_mask`` of shape ``(b, s)`` is ``True`` at padded keys,
    the convention of ``torch.nn.MultiheadAttention``; it is combined with the causal mask. A
    query row that can see no key at all (a padded token before any real one) gets zero
    weights and a zero output row, never NaN.

    Decoding (chapter 7): with ``kv_cache=KVCache()``, the keys and values of ``x`` are
    appended to the cache and the new queries attend, causally, to every cached token, so
    feeding a sequence token by token gives the outputs of one full pass.

    Args:
        d_in: size of each input embedding.
        d_out: size of each output vector; must be a multiple of ``num_heads``.
        context_length: the largest number of tokens accepted (cached ones included).
        dropout: dropout probability on the attention weights during training, in [0, 1).
        num_heads: the number of heads ``h``.
        qkv_bias: add a learnable bias to the query, key and value projections.
        fused: use the fused kernel path.

    Shape:
        - Input: ``x`` ``(b, t, d_in)``; ``key_padding_mask`` ``(b, s)`` bool, where ``s`` is
          the number of keys: ``t``, or the cached tokens plus ``t`` with a cache;
          ``s <= context_length``.
        - Output: ``(b, t, d_out)``; with ``return_weights=True`` also the attention weights
          actually applied (after dropout), ``(b, h, t, s)``.

    Introduced in chapter 4; padding masks and the KV cache in chapter 7.
    """

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
        num_heads = check_positive_int("num_heads", num_heads)
        super().__init__(
            d_in, d_out, context_length, dropout, num_heads, num_heads, qkv_bias, fused
        )


class WideMultiHeadAttention(nn.Module):
    """Multi-head self-attention with "wide" heads, each as large as the input.

    Every head projects the ``d_in``-dimensional input to a full ``d_in``-dimensional query,
    key and value, so the projections have ``h * d_in`` outputs and a final ``unify_heads``
    layer maps the ``h * d_in`` concatenated features back to ``d_in``. Compared with
    :class:`MultiHeadAttention`, which splits ``d_out`` among the heads, this costs about
    ``h`` times the parameters and compute. Queries and keys are each divided by ``d_in**0.25``,
    which divides their dot product by ``sqrt(d_in)``, as usual. Nothing is masked.

    Args:
        d_in: size of each input embedding, and of each head.
        num_heads: the number of heads ``h``.
        qkv_bias: add a learnable bias to the projections.

    Shape:
        - Input: ``(b, t, d_in)``.
        - Output: ``(b, t, d_in)``; with ``return_weights=True`` also the attention weights,
          ``(b, h, t, t)``.

    Introduced in chapter 4.
    """

    def __init__(self, d_in: int, num_heads: int, qkv_bias: bool = False) -> None:
        super().__init__()
        self.d_in = check_positive_int("d_in", d_in)
        self.num_heads = check_positive_int("num_heads", num_heads)
        check_bool("qkv_bias", qkv_bias)
        wide = num_heads * d_in
        self.W_query = nn.Linear(d_in, wide, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, wide, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, wide, bias=qkv_bias)
        self.unify_heads = nn.Linear(wide, d_in)

    def forward(
        self, x: torch.Tensor, return_weights: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        x = check_tensor(
            "x", x, ranks=(3,), shape_names=("(b, t, d_in)",), last_dim=self.d_in, like=self
        )
        return_weights = check_bool("return_weights", return_weights)
        scale = self.d_in**0.25
        queries = split_heads(self.W_query(x), self.num_heads) / scale  # (b, h, t, d_in)
        keys = split_heads(self.W_key(x), self.num_heads) / scale  # (b, h, t, d_in)
        values = split_heads(self.W_value(x), self.num_heads)  # (b, h, t, d_in)
        scores = queries @ keys.transpose(2, 3)  # (b, h, t, t)
        weights = torch.softmax(scores, dim=-1)  # (b, h, t, t)
        context = weights @ values  # (b, h, t, d_in)
        out = self.unify_heads(merge_heads(context))  # (b, t, d_in)
        return (out, weights) if return_weights else out

    def extra_repr(self) -> str:
        return f"d_in={self.d_in}, num_heads={self.num_heads}"
