"""Chapter 4: several attention heads side by side.

Dimension names used here: ``b`` batch, ``t`` tokens, ``h`` heads, ``d_in`` input size,
``d_out`` output size, ``d_h = d_out // h`` size of one head.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ._checks import (
    check_attention_inputs,
    check_bool,
    check_divisible,
    check_dropout,
    check_input,
    check_positive_int,
    check_return_weights,
    check_tensor,
)
from .causal import CausalAttention, attention


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


def _rank(x: object) -> int:
    """The number of dimensions of a tensor; 0 for anything else."""
    return x.dim() if isinstance(x, torch.Tensor) else 0


def head_attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    fused: bool = False,
    enable_gqa: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Attention of every head, on one of two paths that compute the same function.

    - explicit (``fused=False``): chapter 3's :func:`~attention_from_scratch.attention`,
      which forms the ``(..., t, s)`` weights and returns them;
    - fused (``fused=True``): ``torch.nn.functional.scaled_dot_product_attention``, which
      runs a fused kernel where one accepts the call (FlashAttention-style, holding one tile
      of the weights at a time) and otherwise a fallback that forms them (chapter 7
      measures both). It returns no weights.

    Both scale by ``1 / sqrt(d_h)``. A query that sees no key gets a zero
    context vector from the explicit path, by construction; the fused path
    returns what SDPA returns for such a row (zeros on the CPU in the PyTorch
    versions chapter 4 runs on; not promised everywhere, so give every query
    a key).

    The explicit path leaves the checks to :func:`attention`; the fused path
    checks the arguments with ``check_attention_inputs`` before SDPA, whose
    errors do not name them.

    Args:
        queries: ``(..., t, d_h)``, e.g. ``(b, h, t, d_h)``.
        keys: ``(..., s, d_h)``; leading dimensions broadcast with the queries'.
        values: ``(..., s, d_h)``.
        mask: ``None`` or a bool tensor, ``True`` = hidden, that broadcasts to
            ``(..., t, s)`` (``torch.nn.MultiheadAttention``'s convention; the fused path
            inverts it for ``scaled_dot_product_attention``, whose ``True`` means
            allowed).
        dropout_p: the probability of zeroing a weight; pass 0.0 outside training.
        is_causal: hide the future: query ``i`` sees keys ``0, ..., i`` (the top-left
            alignment of ``scaled_dot_product_attention``); not with a ``mask``.
        fused: take the fused path.
        enable_gqa: the keys and values have ``h_kv`` heads (dimension -3), a divisor of
            the queries' ``h``, and key/value head ``j`` serves query heads ``j g`` to
            ``(j + 1) g - 1``, ``g = h / h_kv`` (chapter 7's grouped-query attention; the
            name and the order are those of ``scaled_dot_product_attention``).

    Returns:
        ``(context, weights)``: ``(..., t, d_h)`` and ``(..., t, s)``, or ``None`` for the
        weights on the fused path.

    Introduced in chapter 4.
    """
    is_causal = check_bool("is_causal", is_causal)
    fused = check_bool("fused", fused)
    enable_gqa = check_bool("enable_gqa", enable_gqa)
    if is_causal and mask is not None:
        raise ValueError(
            "mask: expected None with is_causal=True, which builds the "
            "causal mask, got a tensor; pass the causal mask combined with "
            "yours (mask | future)"
        )
    if not fused:
        # attention checks every argument itself: no check here. The causal
        # mask needs only the two token counts; where they cannot be read,
        # attention refuses the tensors anyway.
        if is_causal and min(_rank(queries), _rank(keys)) >= 2:
            t, s = queries.shape[-2], keys.shape[-2]
            ones = torch.ones(t, s, dtype=torch.bool, device=queries.device)
            mask = ones.triu(1)  # (t, s): key j > query i is hidden
        if enable_gqa:  # chapter 7's heads that share keys and values
            return grouped_attention(queries, keys, values, mask, dropout_p)
        return attention(queries, keys, values, mask, dropout_p=dropout_p)
    # SDPA's own errors would not name our arguments: check them first (on the
    # grouped views, whose leading dimensions must broadcast like any others).
    checked = (queries, keys, values, mask)
    if enable_gqa:
        checked = _grouped(queries, keys, values, mask)
    dropout_p, _ = check_attention_inputs(*checked, dropout_p)
    allowed = None
    if mask is not None:  # ~: True = allowed, at least (t, s) for SDPA
        t, s = queries.shape[-2], keys.shape[-2]
        allowed = (~mask).broadcast_to(*mask.shape[:-2], t, s)
    # SDPA pairs key/value head j with query heads j g, ..., (j + 1) g - 1
    extra = {"enable_gqa": True} if enable_gqa else {}
    context = F.scaled_dot_product_attention(
        queries,
        keys,
        values,
        attn_mask=allowed,
        dropout_p=dropout_p,
        is_causal=is_causal,
        **extra,
    )  # (..., t, d_h)
    return context, None


def grouped_attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of query heads that share key/value heads, on the explicit path.

    Key/value head ``j`` serves query heads ``j g`` to ``(j + 1) g - 1``, ``g = h / h_kv``:
    the result equals :func:`attention` on keys and values repeated ``g`` times per head
    (``repeat_interleave`` on dimension -3). The repeat is a broadcast over a group axis, so
    no copy is kept, but ``matmul`` still expands the keys and values ``g`` times inside
    each of its two batched products (chapter 7 measures it; its folded form avoids it).

    Args:
        queries: ``(..., h, t, d_h)``.
        keys: ``(..., h_kv, s, d_h)``, ``h_kv`` a divisor of ``h``.
        values: ``(..., h_kv, s, d_h)``.
        mask: ``None`` or a bool tensor, ``True`` = hidden, that broadcasts to
            ``(..., h, t, s)``.
        dropout_p: the probability of zeroing a weight.

    Returns:
        ``(context, weights)``: ``(..., h, t, d_h)`` and ``(..., h, t, s)``.

    Introduced in chapter 7; :func:`head_attention` calls it with ``enable_gqa``.
    """
    groups, keys, values, mask = _grouped(queries, keys, values, mask)
    # attention's matmuls broadcast the size-1 axis of keys and values over
    # the g heads of each group, expanding them to g copies for the product
    context, weights = attention(
        groups, keys, values, mask, dropout_p=dropout_p
    )  # (..., h_kv, g, t, d_h) and (..., h_kv, g, t, s)
    # (..., h, t, d_h) and (..., h, t, s): the heads back in order
    return context.flatten(-4, -3), weights.flatten(-4, -3)


def _grouped(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Queries with a group axis, ``(..., h_kv, g, t, d_h)``, and keys, values and a mask with
    one of size 1, so that each key/value head broadcasts over its group of query heads."""
    shape = ("(..., h, t, d_h)",)
    queries = check_tensor("queries", queries, ranks=range(3, 64), shape_names=shape)
    keys = check_tensor("keys", keys, ranks=range(3, 64), shape_names=("(..., h_kv, s, d_h)",))
    values = check_tensor(
        "values", values, ranks=range(3, 64), shape_names=("(..., h_kv, s, d_h)",)
    )
    h, h_kv = queries.shape[-3], keys.shape[-3]
    if h % h_kv or values.shape[-3] != h_kv:
        raise ValueError(
            f"keys: expected key and value heads h_kv dividing the queries' h={h} with "
            f"enable_gqa=True, got keys {tuple(keys.shape)} and values {tuple(values.shape)}"
        )
    groups = queries.unflatten(-3, (h_kv, h // h_kv))  # (..., h_kv, g, t, d_h)
    if mask is not None and mask.dim() >= 3:
        mask = mask.unsqueeze(-3)  # (..., 1, 1, t, s): the same for every head
    return groups, keys.unsqueeze(-3), values.unsqueeze(-3), mask  # (..., h_kv, 1, s, d_h)


@dataclass(frozen=True)
class AttentionConfig:
    """The arguments of :class:`MultiHeadAttention`, checked once, when the layer is built.

    The settings sit in one dataclass, as nanoGPT's ``GPTConfig`` carries a model's; unlike
    that plain dataclass, which checks nothing (nanoGPT asserts ``n_embd % n_head == 0`` in
    its attention layer), this one is frozen and checks every value. The layer's constructor
    builds one from its arguments, and :meth:`__post_init__` checks them all, so that the
    layer's own code builds layers and holds no checks. Each error names the argument and
    reads "expected X, got Y". The values kept are the checked ones (a dropout of ``0``
    becomes ``0.0``, NumPy's ``bool_`` a ``bool``), and the layer reads its sizes from them.
    Chapters 6 and 7's layers pass their arguments on to chapter 4's constructor, so the same
    config checks theirs.

    Args:
        d_in: size of each input embedding, a positive int.
        d_out: size of each output vector, a positive multiple of ``num_heads``.
        context_length: the largest number of tokens accepted, a positive int.
        dropout: dropout probability on the attention weights, in [0, 1).
        num_heads: the number of heads ``h``, a positive int.
        qkv_bias: add a learnable bias to the query, key and value projections.
        fused: start on the fused kernel path (the layer's ``fused`` attribute may be
            switched later).

    Introduced in chapter 4.
    """

    d_in: int
    d_out: int
    context_length: int
    dropout: float = 0.0
    num_heads: int = 1
    qkv_bias: bool = False
    fused: bool = False

    def __post_init__(self) -> None:
        check_positive_int("d_in", self.d_in)
        check_positive_int("d_out", self.d_out)
        check_positive_int("num_heads", self.num_heads)
        check_divisible(self.d_out, self.num_heads)
        # Frozen: the checked values are stored through object.__setattr__.
        checked = {
            "fused": check_bool("fused", self.fused),
            "qkv_bias": check_bool("qkv_bias", self.qkv_bias),
            "dropout": check_dropout(self.dropout),
        }
        for name, value in checked.items():
            object.__setattr__(self, name, value)
        check_positive_int("context_length", self.context_length)

    @property
    def head_dim(self) -> int:
        """The size of one head, ``d_h = d_out // num_heads``."""
        return self.d_out // self.num_heads


class MultiHeadAttention(nn.Module):
    """Causal multi-head attention computed for all heads at once.

    One projection of size ``d_out`` per role (query, key, value) is split
    into ``h`` heads of size ``d_h = d_out // h``; :func:`head_attention` computes
    every head's attention in batched matmuls; the heads are merged back and
    mixed by ``out_proj``. Layers are created in the order ``W_query``,
    ``W_key``, ``W_value``, ``out_proj``.

    The constructor's arguments are checked once, by the
    :class:`AttentionConfig` it builds from them (kept as ``config``).
    ``forward`` checks its input once, then runs two steps that a subclass
    may replace: :meth:`project` (the three projections, split into heads)
    and :meth:`attend` (:func:`head_attention` with the causal mask and this
    module's dropout and path). Chapter 6 replaces ``project`` to rotate
    queries and keys by their positions (``offset`` on); chapter 7 adds
    padding masks and a KV cache, and heads that share keys and values.

    ``fused`` picks the path of :func:`head_attention`: the steps written out
    (``False``, the default, as taught in the book) or
    ``scaled_dot_product_attention`` (``True``), which cannot return the
    weights. It is a plain attribute that may be switched at any time (a
    value that is not a bool is refused by the next ``forward``);
    ``context_length`` is read-only, the longest input accepted
    (:func:`head_attention` builds the causal mask of each call itself; chapter 7's
    cached layer keeps one for the longest input, as a buffer).

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
        config = AttentionConfig(
            d_in, d_out, context_length, dropout, num_heads, qkv_bias, fused
        )  # checks every argument
        self.config = config
        # From here on, only the checked values.
        self.d_in, self.d_out = config.d_in, config.d_out
        self.num_heads, self.head_dim = config.num_heads, config.head_dim
        self.fused = config.fused  # may be switched later: forward checks it
        bias = config.qkv_bias
        self.W_query = nn.Linear(self.d_in, self.d_out, bias=bias)
        d_kv = self.key_value_size()  # d_out; less where heads share (ch. 7)
        self.W_key = nn.Linear(self.d_in, d_kv, bias=bias)
        self.W_value = nn.Linear(self.d_in, d_kv, bias=bias)
        self.out_proj = nn.Linear(self.d_out, self.d_out)
        self.dropout = nn.Dropout(config.dropout)

    def key_value_size(self) -> int:
        """The size of the keys and values of all heads: ``d_out``, one
        ``d_h`` per head. Chapter 7's ``GroupedQueryAttention``, whose query
        heads share key/value heads, returns less."""
        return self.d_out

    @property
    def context_length(self) -> int:
        """The most tokens a sequence may have; read-only, since subclasses
        build buffers for it (chapter 7's causal mask)."""
        return self.config.context_length

    def forward(
        self, x: torch.Tensor, return_weights: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor | None]:
        x = check_input(x, self.d_in, self.context_length, like=self)
        return_weights = check_return_weights(return_weights, self.fused)
        b, t, _ = x.shape
        queries, keys, values = self.project(x)  # (b, h, t, d_h) each
        context, weights = self.attend(queries, keys, values)  # (b, h, t, d_h)
        context = context.transpose(1, 2)  # (b, t, h, d_h)
        context = context.reshape(b, t, self.d_out)  # (b, t, d_out)
        out = self.out_proj(context)  # (b, t, d_out)
        return (out, weights) if return_weights else out

    def project(
        self, x: torch.Tensor, offset: int = 0
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The queries, keys and values of ``x``, ``(b, t, d_in)``, split
        into heads: each ``(b, h, t, d_h)``. ``offset``, the position of the
        first token, is for layers that give the heads positions (chapter
        6's rotary layer); this one gives none."""
        b, t, _ = x.shape
        heads = (b, t, -1, self.head_dim)  # -1: h (fewer key heads in ch. 7)
        queries = self.W_query(x).view(heads)  # (b, t, h, d_h)
        keys = self.W_key(x).view(heads)  # (b, t, h, d_h)
        values = self.W_value(x).view(heads)  # (b, t, h, d_h)
        # The heads in front of the tokens: one (t, d_h) problem per head.
        return (
            queries.transpose(1, 2),  # (b, h, t, d_h)
            keys.transpose(1, 2),  # (b, h, t, d_h)
            values.transpose(1, 2),  # (b, h, t, d_h)
        )

    def attend(
        self, queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Causal attention of every head, :func:`head_attention` on this
        module's path: the context ``(b, h, t, d_h)`` and the weights ``(b, h,
        t, t)``, or ``None`` on the fused path."""
        p = self.dropout.p if self.training else 0.0
        return head_attention(
            queries,
            keys,
            values,
            dropout_p=p,
            is_causal=True,
            fused=self.fused,
        )

    def extra_repr(self) -> str:
        h, n = self.num_heads, self.context_length
        return f"num_heads={h}, context_length={n}, fused={self.fused}"


class WideMultiHeadAttention(nn.Module):
    """Multi-head self-attention with "wide" heads, each as large as the input.

    Every head projects the ``d_in``-dimensional input to a full ``d_in``-dimensional query,
    key and value, so the projections have ``h * d_in`` outputs and a final ``unify_heads``
    layer (``unifyheads`` in Bloem's code) maps the ``h * d_in`` concatenated features back
    to ``d_in``. Compared with
    :class:`MultiHeadAttention`, which splits ``d_out`` among the heads, this costs about
    ``h`` times the parameters and compute. The attention of every head is chapter 3's
    :func:`~attention_from_scratch.attention`, scaled by ``1 / sqrt(d_in)``. Nothing is
    masked.

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
        x = check_input(x, self.d_in, like=self)  # any number of tokens
        return_weights = check_bool("return_weights", return_weights)
        b, t, d = x.shape
        h = self.num_heads
        queries = self.W_query(x).view(b, t, h, d)  # (b, t, h, d_in)
        keys = self.W_key(x).view(b, t, h, d)  # (b, t, h, d_in)
        values = self.W_value(x).view(b, t, h, d)  # (b, t, h, d_in)
        context, weights = attention(
            queries.transpose(1, 2),  # (b, h, t, d_in)
            keys.transpose(1, 2),  # (b, h, t, d_in)
            values.transpose(1, 2),  # (b, h, t, d_in)
        )  # (b, h, t, d_in), (b, h, t, t)
        context = context.transpose(1, 2)  # (b, t, h, d_in)
        context = context.reshape(b, t, h * d)  # (b, t, h * d_in)
        out = self.unify_heads(context)  # (b, t, d_in)
        return (out, weights) if return_weights else out

    def extra_repr(self) -> str:
        return f"d_in={self.d_in}, num_heads={self.num_heads}"
