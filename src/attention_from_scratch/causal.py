"""Chapter 3: hiding the future with a causal mask, dropout, and cross-attention.

:func:`attention` holds the arithmetic of attention (scale, scores, mask, softmax, dropout,
weighted sum) once; the written-out path of every attention module of this chapter and of
the later ones calls it. The fused paths of chapters 4 and 7 hand the same arithmetic to
``F.scaled_dot_product_attention``, and chapter 7's tiled attention computes it tile by tile.

Dimension names used here: ``b`` batch, ``t`` query tokens, ``s`` key/value tokens (``s = t``
in self-attention), ``d_in`` input size, ``d_out`` size of queries, keys, values and outputs,
``d_k`` size of a query or key, ``d_v`` size of a value.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ._checks import (
    check_attention_inputs,
    check_bool,
    check_device,
    check_dropout,
    check_positive_int,
    check_tensor,
)


def causal_mask(
    num_tokens: int,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Return the boolean mask that hides the future: ``True`` strictly above the diagonal.

    Entry ``(i, j)`` is ``True`` when token ``j`` comes after token ``i``, i.e. when query ``i``
    must not see key ``j``. It is ``torch.triu(ones, diagonal=1)``: ``diagonal=1`` keeps the
    diagonal visible, because a token may always attend to itself.

    Args:
        num_tokens: the number of tokens ``t``.
        device: where to build the mask (use the device of the scores it will mask): a
            ``torch.device``, a str such as ``"cuda"``, or ``None`` for torch's default
            device (the CPU unless ``torch.set_default_device`` chose another).

    Returns:
        A ``torch.bool`` tensor of shape ``(t, t)``.

    Introduced in chapter 3.
    """
    num_tokens = check_positive_int("num_tokens", num_tokens)
    device = check_device("device", device)
    ones = torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device)
    return torch.triu(ones, diagonal=1)  # (t, t)


def attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    dropout_p: float = 0.0,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention, written out; the written-out path of every attention
    module of the package calls it (the fused paths hand the same function to
    ``F.scaled_dot_product_attention``; chapter 7's tiled attention computes it tile by tile).

    The queries are multiplied by ``scale`` (``1 / sqrt(d_k)`` by default) before the product
    with the keys, which gives the scores of ``(q / sqrt(d_k)) . k`` and keeps them finite in
    float16 (chapter 7); the hidden scores are set to ``-inf``, a softmax over the keys gives
    the weights, dropout (if ``dropout_p > 0``) zeroes some of them and scales the rest by
    ``1 / (1 - p)``, and the weights mix the values.

    A row whose keys are all hidden has no softmax (``exp(-inf)`` sums to 0, and ``0 / 0``
    is NaN): its weights are set to zero, so its context vector is zero, as
    ``torch.nn.functional.scaled_dot_product_attention`` returns for such a row.

    Args:
        queries: ``(..., t, d_k)``.
        keys: ``(..., s, d_k)``; its leading dimensions broadcast with the queries' (grouped
            heads pass queries ``(b, g, r, t, d)`` and keys ``(b, g, 1, s, d)``).
        values: ``(..., s, d_v)``.
        mask: ``None``, or a bool tensor, ``True`` where a query must not see a key, that
            broadcasts to ``(..., t, s)``: a causal mask ``(t, t)``, a padding mask
            ``(b, 1, 1, s)``, one mask per sequence ``(b, t, s)``.
        dropout_p: the probability of zeroing a weight; the caller passes
            ``self.dropout.p if self.training else 0.0``, since a function has no mode of
            its own: it drops whatever it is asked to.
        scale: the factor of the queries, ``d_k ** -0.5`` when ``None``.

    Returns:
        ``(context, weights)``: ``(..., t, d_v)`` and the weights actually applied, after
        dropout, ``(..., t, s)``.

    Introduced in chapter 3.
    """
    dropout_p, scale = check_attention_inputs(
        queries,
        keys,
        values,
        mask,
        dropout_p,
        scale,
    )
    if scale is None:
        scale = queries.shape[-1] ** -0.5  # 1 / sqrt(d_k)
    # Scaled before the product: float16 scores stay finite (chapter 7).
    scores = (queries * scale) @ keys.transpose(-2, -1)  # (..., t, s)
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))  # (..., t, s)
    weights = torch.softmax(scores, dim=-1)  # (..., t, s)
    # Nothing reads the scores again (softmax's backward uses its output):
    # freeing them keeps two (t, s) matrices alive, not three (chapter 7).
    del scores
    if mask is not None:
        # A row with every key hidden is 0 / 0 = NaN: zero weights instead.
        no_key = mask.all(dim=-1, keepdim=True)  # (..., t, 1)
        weights = weights.masked_fill(no_key, 0.0)  # (..., t, s)
    if dropout_p > 0:
        weights = F.dropout(weights, dropout_p)  # (..., t, s)
    context = weights @ values  # (..., t, d_v)
    return context, weights


class CausalAttention(nn.Module):
    """Single-head self-attention in which each token sees only itself and earlier tokens.

    Three projections, then :func:`attention` with the causal mask: the scores above the
    diagonal are set to ``-inf`` before softmax, so their weights are exactly zero and every
    row still sums to one. Dropout is then applied to the weights during training. The mask
    is a non-persistent buffer: it follows the module across ``.to(device)`` but is not saved
    in the ``state_dict``, because it can always be rebuilt.

    Args:
        d_in: size of each input embedding.
        d_out: size of each query, key, value and output vector.
        context_length: the largest number of tokens the module accepts.
        dropout: probability of zeroing an attention weight during training, in [0, 1).
        qkv_bias: add a learnable bias to the query, key and value projections.

    Shape:
        - Input: ``(b, t, d_in)`` with ``t <= context_length``.
        - Output: ``(b, t, d_out)``; with ``return_weights=True`` also the attention weights
          actually applied (after dropout), ``(b, t, t)``.

    Introduced in chapter 3.
    """

    mask: torch.Tensor

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        qkv_bias: bool = False,
    ) -> None:
        super().__init__()
        self.d_in = check_positive_int("d_in", d_in)
        self.d_out = check_positive_int("d_out", d_out)
        context_length = check_positive_int("context_length", context_length)
        self.context_length = context_length
        dropout = check_dropout(dropout)
        check_bool("qkv_bias", qkv_bias)
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        # Holds the probability (and shows it in print(module)); forward passes
        # self.dropout.p to attention, whose F.dropout applies it.
        self.dropout = nn.Dropout(dropout)
        mask = causal_mask(context_length)  # (context_length, context_length)
        self.register_buffer("mask", mask, persistent=False)

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
        t = x.shape[1]
        queries = self.W_query(x)  # (b, t, d_out)
        keys = self.W_key(x)  # (b, t, d_out)
        values = self.W_value(x)  # (b, t, d_out)
        # Slice the stored mask: a shorter input needs its top-left corner.
        future = self.mask[:t, :t]  # (t, t)
        p = self.dropout.p if self.training else 0.0
        context, weights = attention(
            queries, keys, values, future, dropout_p=p
        )  # (b, t, d_out), (b, t, t)
        return (context, weights) if return_weights else context

    def extra_repr(self) -> str:
        sizes = f"d_in={self.d_in}, d_out={self.d_out}"
        return f"{sizes}, context_length={self.context_length}"


class CrossAttention(nn.Module):
    """Attention in which the queries come from one sequence and the keys and values from another.

    A decoder that translates English into French, say, lets each French token (a query) look
    at all English tokens (keys and values). Nothing is masked: the whole source is known.
    The projections differ from self-attention; the arithmetic is :func:`attention`'s.

    Args:
        d_in: size of each embedding of the query sequence ``x``.
        d_context: size of each embedding of the source sequence ``context``.
        d_out: size of each query, key, value and output vector.
        qkv_bias: add a learnable bias to the three projections.

    Shape:
        - Input: ``x`` of shape ``(b, t, d_in)`` and ``context`` of shape ``(b, s, d_context)``.
        - Output: ``(b, t, d_out)``; with ``return_weights=True`` also the attention weights,
          ``(b, t, s)``.

    Introduced in chapter 3.
    """

    def __init__(
        self,
        d_in: int,
        d_context: int,
        d_out: int,
        qkv_bias: bool = False,
    ) -> None:
        super().__init__()
        self.d_in = check_positive_int("d_in", d_in)
        self.d_context = check_positive_int("d_context", d_context)
        self.d_out = check_positive_int("d_out", d_out)
        check_bool("qkv_bias", qkv_bias)
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_context, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_context, d_out, bias=qkv_bias)

    def forward(
        self,
        x: torch.Tensor,
        context: torch.Tensor,
        return_weights: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        x = check_tensor(
            "x",
            x,
            ranks=(3,),
            shape_names=("(b, t, d_in)",),
            last_dim=self.d_in,
            like=self,
        )
        context = check_tensor(
            "context",
            context,
            ranks=(3,),
            shape_names=("(b, s, d_context)",),
            last_dim=self.d_context,
            last_dim_name="d_context",
            like=self,
        )
        if context.shape[0] != x.shape[0]:
            expected = f"the same batch size as x ({x.shape[0]})"
            got = context.shape[0]
            raise ValueError(f"context: expected {expected}, got {got}")
        return_weights = check_bool("return_weights", return_weights)
        queries = self.W_query(x)  # (b, t, d_out)
        keys = self.W_key(context)  # (b, s, d_out)
        values = self.W_value(context)  # (b, s, d_out)
        out, weights = attention(queries, keys, values)  # (b, t, d_out)
        return (out, weights) if return_weights else out

    def extra_repr(self) -> str:
        sizes = f"d_in={self.d_in}, d_context={self.d_context}"
        return f"{sizes}, d_out={self.d_out}"
