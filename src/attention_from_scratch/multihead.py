"""Chapter 4: several attention heads side by side.

Dimension names used here: ``b`` batch, ``t`` tokens, ``h`` heads, ``d_in`` input size,
``d_out`` output size, ``d_h = d_out // h`` size of one head.
"""

from __future__ import annotations

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


class MultiHeadAttention(nn.Module):
    """Causal multi-head attention computed for all heads at once.

    One projection of size ``d_out`` per role (query, key, value) is split into ``h`` heads of
    size ``d_h = d_out // h``; a single batched matmul scores every head; the heads are merged
    back and mixed by ``out_proj``. Layers are created in the order ``W_query``, ``W_key``,
    ``W_value``, ``out_proj``.

    Two paths compute the same function:

    - explicit (``fused=False``, the default): the steps written out, as taught in the book;
    - fused (``fused=True``): ``torch.nn.functional.scaled_dot_product_attention`` with
      ``is_causal=True``, which can use FlashAttention-style kernels and never stores the
      ``(t, t)`` weight matrix. It cannot return weights.

    The attribute ``fused`` may be changed after construction.

    Args:
        d_in: size of each input embedding.
        d_out: size of each output vector; must be a multiple of ``num_heads``.
        context_length: the largest number of tokens accepted.
        dropout: dropout probability on the attention weights during training, in [0, 1).
        num_heads: the number of heads ``h``.
        qkv_bias: add a learnable bias to the query, key and value projections.
        fused: use the fused kernel path.

    Shape:
        - Input: ``(b, t, d_in)`` with ``t <= context_length``.
        - Output: ``(b, t, d_out)``; with ``return_weights=True`` also the attention weights
          actually applied (after dropout), ``(b, h, t, t)``.

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
        self._context_length = check_positive_int("context_length", context_length)
        self.num_heads = check_positive_int("num_heads", num_heads)
        self.head_dim = check_divisible(d_out, num_heads)
        dropout = check_dropout(dropout)
        check_bool("qkv_bias", qkv_bias)
        self._fused = check_bool("fused", fused)
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", causal_mask(context_length), persistent=False)

    def forward(
        self, x: torch.Tensor, return_weights: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        x = check_tensor(
            "x",
            x,
            ranks=(3,),
            shape_names=("(b, t, d_in)",),
            last_dim=self.d_in,
            max_tokens=self.context_length,
            like=self,
        )
        return_weights = check_bool("return_weights", return_weights)
        if self.fused and return_weights:
            raise ValueError(
                "return_weights: expected False on the fused path, which never forms the "
                "weight matrix, got True; set module.fused = False to get the weights"
            )
        num_tokens = x.shape[1]
        queries = split_heads(self.W_query(x), self.num_heads)  # (b, h, t, d_h)
        keys = split_heads(self.W_key(x), self.num_heads)  # (b, h, t, d_h)
        values = split_heads(self.W_value(x), self.num_heads)  # (b, h, t, d_h)

        if self.fused:
            p = self.dropout.p if self.training else 0.0
            context = F.scaled_dot_product_attention(
                queries, keys, values, dropout_p=p, is_causal=True
            )  # (b, h, t, d_h)
            return self.out_proj(merge_heads(context))  # (b, t, d_out)

        scores = queries @ keys.transpose(2, 3)  # (b, h, t, t)
        scores = scores.masked_fill(self.mask[:num_tokens, :num_tokens], float("-inf"))
        weights = torch.softmax(scores / self.head_dim**0.5, dim=-1)  # (b, h, t, t)
        weights = self.dropout(weights)
        context = weights @ values  # (b, h, t, d_h)
        out = self.out_proj(merge_heads(context))  # (b, t, d_out)
        return (out, weights) if return_weights else out

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
        return (
            f"d_in={self.d_in}, d_out={self.d_out}, num_heads={self.num_heads}, "
            f"context_length={self.context_length}, fused={self.fused}"
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
