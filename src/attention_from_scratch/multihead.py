"""Chapter 4: several attention heads side by side.

Dimension names used here: ``b`` batch, ``t`` tokens, ``h`` heads, ``d_in`` input size,
``d_out`` output size, ``d_h = d_out // h`` size of one head.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ._checks import (
    check_bool,
    check_divisible,
    check_dropout,
    check_input,
    check_positive_int,
    check_return_weights,
    check_tensor,
)
from .causal import CausalAttention, causal_mask


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
        contexts = [out for out, _ in outputs]  # h times (b, t, d_out)
        context = torch.cat(contexts, dim=-1)  # (b, t, h * d_out)
        if not return_weights:
            return context
        weights = torch.stack([w for _, w in outputs], dim=1)  # (b, h, t, t)
        return context, weights


def pack_linear(
    layers: Sequence[nn.Linear],
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The weights and biases of several linear layers stacked into those of
    one layer, so that ``F.linear(x, *pack_linear(layers))`` equals
    ``torch.cat([layer(x) for layer in layers], dim=-1)`` in one matmul.

    The rows are in the order ``torch.nn.MultiheadAttention`` keeps in its
    ``in_proj_weight``, but stacked at every call, so the result always holds
    the layers' current weights, and autograd splits the gradient back to
    each layer. The stacking copies the weights: worth it when many tokens
    share the one matmul, not when one token is decoded at a time.

    Args:
        layers: ``nn.Linear`` layers that all read ``d_in`` numbers; all with
            a bias or all without.

    Returns:
        ``(weight, bias)``: ``(sum of out_features, d_in)`` and
        ``(sum of out_features,)``, or ``None`` for layers without a bias.

    Introduced in chapter 4.
    """
    weight = torch.cat([layer.weight for layer in layers])  # (d_out sum, d_in)
    bias = layers[0].bias
    if bias is not None:
        bias = torch.cat([layer.bias for layer in layers])  # (d_out sum,)
    return weight, bias


class MultiHeadAttention(nn.Module):
    """Causal multi-head attention computed for all heads at once.

    One projection of size ``d_out`` per role (query, key, value) is split
    into ``h`` heads of size ``d_h = d_out // h``; a single batched matmul
    scores every head; the heads are merged back and mixed by ``out_proj``.
    Layers are created in the order ``W_query``, ``W_key``, ``W_value``,
    ``out_proj``.

    ``forward`` runs two steps that a subclass may replace: :meth:`project`
    (the three projections as one matmul, :func:`pack_linear`, split into
    heads) and :meth:`attend` (scores, causal mask, softmax, dropout and the
    weighted sum of the values). Chapter 6 replaces ``project`` to rotate
    queries and keys; chapter 7's ``CachedAttention`` replaces ``forward`` to
    build padding masks and use a KV cache, and extends the two steps.
    ``attend`` has two paths that compute the same function:

    - explicit (``fused=False``, the default): the steps written out, as
      taught in the book (the queries are multiplied by ``1 / sqrt(d_h)``
      before ``q @ k.T``, which keeps float16 scores finite; chapter 7
      explains why);
    - fused (``fused=True``): ``torch.nn.functional.
      scaled_dot_product_attention``, which runs a fused kernel where one
      accepts the call (FlashAttention-style, holding one tile of the
      ``(t, t)`` matrix at a time) and otherwise a fallback that forms the
      matrix (chapter 7 measures both). It cannot return weights.

    ``fused`` is a plain attribute that may be switched at any time (a value
    that is not a bool is refused by the next ``forward``); ``context_length``
    is read-only, since the causal mask is built for it.

    Args:
        d_in: size of each input embedding.
        d_out: size of each output vector; must be a multiple of
            ``num_heads``.
        context_length: the largest number of tokens accepted.
        dropout: dropout probability on the attention weights during
            training, in [0, 1).
        num_heads: the number of heads ``h``.
        qkv_bias: add a learnable bias to the query, key and value
            projections.
        fused: use the fused kernel path.

    Shape:
        - Input: ``(b, t, d_in)`` with ``t <= context_length``.
        - Output: ``(b, t, d_out)``; with ``return_weights=True`` also the
          attention weights actually applied (after dropout), ``(b, h, t, t)``.

    Introduced in chapter 4.
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
        super().__init__()
        self.d_in = check_positive_int("d_in", d_in)
        self.d_out = check_positive_int("d_out", d_out)
        self.num_heads = check_positive_int("num_heads", num_heads)
        self.head_dim = check_divisible(d_out, num_heads)  # d_h
        self.fused = check_bool("fused", fused)
        check_bool("qkv_bias", qkv_bias)
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(check_dropout(dropout))
        context_length = check_positive_int("context_length", context_length)
        self._context_length = context_length
        mask = causal_mask(context_length)  # (context_length, context_length)
        self.register_buffer("mask", mask, persistent=False)

    @property
    def context_length(self) -> int:
        """The most tokens a sequence may have; read-only, since the causal
        mask is built for it."""
        return self._context_length

    def forward(
        self, x: torch.Tensor, return_weights: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        return_weights = check_return_weights(return_weights, self.fused)
        queries, keys, values = self.project(x)  # (b, h, t, d_h) each
        context, weights = self.attend(queries, keys, values)  # (b, h, t, d_h)
        b, t, _ = x.shape
        context = context.transpose(1, 2)  # (b, t, h, d_h)
        context = context.reshape(b, t, self.d_out)  # (b, t, d_out)
        out = self.out_proj(context)  # (b, t, d_out)
        return (out, weights) if return_weights else out

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Check ``x``, ``(b, t, d_in)``, and return its queries, keys and
        values split into heads, each ``(b, h, t, d_h)``."""
        # The three projections as one matmul: 3 d_out rows of weights.
        layers = (self.W_query, self.W_key, self.W_value)
        weight, bias = pack_linear(layers)  # (3 d_out, d_in), (3 d_out,)
        x = check_input(x, self.d_in, self.context_length, like=weight)
        b, t, _ = x.shape
        h, d_h = self.num_heads, self.head_dim
        qkv = F.linear(x, weight, bias)  # (b, t, 3 d_out)
        qkv = qkv.view(b, t, 3, h, d_h)  # (b, t, 3, h, d_h)
        qkv = qkv.permute(2, 0, 3, 1, 4)  # (3, b, h, t, d_h)
        return qkv.unbind(0)  # queries, keys, values: (b, h, t, d_h) each

    def attend(
        self, queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Causal attention of every head: the context vectors ``(b, h, t,
        d_h)`` and, on the explicit path, the weights ``(b, h, t, t)``
        (``None`` on the fused path)."""
        if self.fused:
            p = self.dropout.p if self.training else 0.0
            context = F.scaled_dot_product_attention(
                queries, keys, values, dropout_p=p, is_causal=True
            )  # (b, h, t, d_h)
            return context, None
        t = queries.shape[2]
        # Scaled before the product: float16 stays finite (chapter 7).
        queries = queries * self.head_dim**-0.5
        scores = queries @ keys.transpose(2, 3)  # (b, h, t, t)
        scores = scores.masked_fill(self.mask[:t, :t], float("-inf"))
        weights = self.dropout(torch.softmax(scores, dim=-1))  # (b, h, t, t)
        return weights @ values, weights  # (b, h, t, d_h), (b, h, t, t)

    def extra_repr(self) -> str:
        h, n = self.num_heads, self.context_length
        return f"num_heads={h}, context_length={n}, fused={self.fused}"


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

    def __init__(
        self,
        d_in: int,
        num_heads: int,
        qkv_bias: bool = False,
    ) -> None:
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
            "x",
            x,
            ranks=(3,),
            shape_names=("(b, t, d_in)",),
            last_dim=self.d_in,
            like=self,
        )
        return_weights = check_bool("return_weights", return_weights)
        b, t, d = x.shape
        h, scale = self.num_heads, d**0.25
        queries = self.W_query(x).view(b, t, h, d)  # (b, t, h, d_in)
        keys = self.W_key(x).view(b, t, h, d)  # (b, t, h, d_in)
        values = self.W_value(x).view(b, t, h, d)  # (b, t, h, d_in)
        queries = queries.transpose(1, 2) / scale  # (b, h, t, d_in)
        keys = keys.transpose(1, 2) / scale  # (b, h, t, d_in)
        values = values.transpose(1, 2)  # (b, h, t, d_in)
        scores = queries @ keys.transpose(2, 3)  # (b, h, t, t)
        weights = torch.softmax(scores, dim=-1)  # (b, h, t, t)
        context = (weights @ values).transpose(1, 2)  # (b, t, h, d_in)
        context = context.reshape(b, t, h * d)  # (b, t, h * d_in)
        out = self.unify_heads(context)  # (b, t, d_in)
        return (out, weights) if return_weights else out

    def extra_repr(self) -> str:
        return f"d_in={self.d_in}, num_heads={self.num_heads}"
