"""Chapter 6: telling attention where each token is.

Attention by itself is permutation-equivariant: shuffle the tokens and the outputs shuffle with
them. This module holds the three usual ways to add position information: a learned table of
position vectors, the fixed sinusoidal encoding of Vaswani et al. (2017), and rotary
embeddings (Su et al., 2021), which rotate queries and keys instead of changing the inputs.

Dimension names used here: ``b`` batch, ``t`` tokens, ``h`` heads, ``d`` size of a position
vector (the model size), ``d_h`` size of one head.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from ._checks import (
    check_bool,
    check_positive_int,
    check_tensor,
)
from .multihead import MultiHeadAttention


def _check_base(base: object) -> float:
    if isinstance(base, bool) or not isinstance(base, (int, float)):
        raise TypeError(f"base: expected a float greater than 1, got {type(base).__name__}")
    if not math.isfinite(base) or base <= 1.0:
        raise ValueError(f"base: expected a float greater than 1, got {base}")
    return float(base)


def _check_offset(offset: object) -> int:
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise TypeError(f"offset: expected an int >= 0, got {type(offset).__name__} {offset!r}")
    if offset < 0:
        raise ValueError(f"offset: expected an int >= 0, got {offset}")
    return offset


def _check_span(
    x: object, offset: object, d: int, context_length: int
) -> tuple[torch.Tensor, int, int]:
    """Check the embeddings ``(b, t, d)`` and the first position; return them and the end."""
    x = check_tensor(
        "x",
        x,
        ranks=(3,),
        shape_names=("(b, t, d)",),
        last_dim=d,
        last_dim_name="d",
    )
    offset = _check_offset(offset)
    end = offset + x.shape[1]
    if end > context_length:
        raise ValueError(
            f"x: expected offset + t <= context_length={context_length}, "
            f"got offset={offset} and t={x.shape[1]}"
        )
    return x, offset, end


def sinusoidal_positions(
    num_positions: int,
    d: int,
    base: float = 10000.0,
) -> torch.Tensor:
    """Return the sinusoidal position encoding of Vaswani et al. (2017).

    Columns come in pairs that share one frequency: column ``2i`` holds
    ``sin(pos / base**(2i / d))`` and column ``2i + 1`` holds ``cos`` of the same angle. Low
    columns turn quickly with the position, high columns slowly, so every position gets a
    different pattern, and the encoding of ``pos + k`` is a fixed rotation of the encoding of
    ``pos`` (the rotation depends on ``k`` only).

    Args:
        num_positions: how many positions to encode (rows), counted from 0.
        d: the size of each position vector (columns); an odd ``d`` ends with a sine column.
        base: the wavelength scale; 10000 as in the paper.

    Returns:
        A float32 tensor of shape ``(num_positions, d)``, to be added to the token embeddings.

    Introduced in chapter 6.
    """
    num_positions = check_positive_int("num_positions", num_positions)
    d = check_positive_int("d", d)
    base = _check_base(base)
    positions = torch.arange(num_positions, dtype=torch.float64)  # (t,)
    positions = positions.unsqueeze(1)  # (t, 1)
    pair = torch.arange(0, d, 2, dtype=torch.float64)  # 2i for every pair
    # Computed in float64 so that large positions keep their low digits.
    angles = positions / base ** (pair / d)  # (t, ceil(d / 2))
    encoding = torch.zeros(num_positions, d, dtype=torch.float64)
    encoding[:, 0::2] = torch.sin(angles)
    encoding[:, 1::2] = torch.cos(angles[:, : d // 2])
    return encoding.float()  # (t, d)


class LearnedPositions(nn.Module):
    """A learned position vector for each position, added to the token embeddings.

    The table is an ``nn.Embedding`` trained with the rest of the model, as in GPT-2. It knows
    nothing about order in advance and only covers the ``context_length`` positions it has.

    Args:
        context_length: the number of positions that get a vector.
        d: the size of each vector (the model size).

    Shape:
        - Input: ``(b, t, d)`` embeddings, with ``offset + t <= context_length``.
        - Output: ``(b, t, d)``, the input plus the vectors of positions
          ``offset, ..., offset + t - 1``.

    Introduced in chapter 6.
    """

    def __init__(self, context_length: int, d: int) -> None:
        super().__init__()
        self.context_length = check_positive_int(
            "context_length",
            context_length,
        )
        self.d = check_positive_int("d", d)
        self.table = nn.Embedding(context_length, d)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        x, offset, end = _check_span(x, offset, self.d, self.context_length)
        positions = torch.arange(offset, end, device=x.device)  # (t,)
        table: torch.Tensor = self.table(positions)  # (t, d)
        return x + table  # (b, t, d) + (t, d)


class SinusoidalPositions(nn.Module):
    """The fixed sinusoidal encoding as a module: adds :func:`sinusoidal_positions` to the input.

    The table is a buffer, not a parameter: nothing about it is learned, and it moves with the
    module to the model's device.

    Args:
        context_length: the number of positions encoded.
        d: the size of each vector (the model size).
        base: the wavelength scale, 10000 as in the paper.

    Shape:
        - Input: ``(b, t, d)`` embeddings, with ``offset + t <= context_length``.
        - Output: ``(b, t, d)``, the input plus the encoding of positions
          ``offset, ..., offset + t - 1``.

    Introduced in chapter 6.
    """

    table: torch.Tensor

    def __init__(
        self,
        context_length: int,
        d: int,
        base: float = 10000.0,
    ) -> None:
        super().__init__()
        self.context_length = check_positive_int(
            "context_length",
            context_length,
        )
        self.d = check_positive_int("d", d)
        table = sinusoidal_positions(context_length, d, base)  # (t, d)
        self.register_buffer("table", table, persistent=False)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        x, offset, end = _check_span(x, offset, self.d, self.context_length)
        return x + self.table[offset:end].to(x.dtype)  # (b, t, d) + (t, d)


class RotaryEmbedding(nn.Module):
    """Rotary position embedding (RoPE) of Su et al. (2021), applied to queries and keys.

    Each pair of features of a vector at position ``p`` is rotated by the angle
    ``p * theta_i`` with ``theta_i = base**(-2i / d_h)``. A rotation keeps lengths, and the
    dot product of a query rotated for position ``p`` with a key rotated for position ``p'``
    depends on ``p - p'`` only: attention scores see relative positions. Nothing is learned.

    Two conventions pair the features differently; both rotate pair ``i`` by the same angle:

    - interleaved (``interleaved=True``, the default, as in the paper): pair ``i`` is the
      features ``(2i, 2i + 1)``;
    - rotate-half (``interleaved=False``, as in GPT-NeoX and Llama's Hugging Face code):
      pair ``i`` is the features ``(i, i + d_h / 2)``.

    They give the same attention scores once the features of queries and keys are permuted
    the same way (a permutation the learned projections absorb), but weights trained with one
    convention do not work with the other.

    Args:
        head_dim: the size ``d_h`` of each query or key vector; must be even.
        base: the wavelength scale, 10000 as in the paper.
        interleaved: pair features ``(2i, 2i + 1)`` (``True``) or ``(i, i + d_h / 2)``.

    Shape:
        - Input: ``(t, d_h)``, ``(b, t, d_h)`` or ``(b, h, t, d_h)``, e.g. queries or keys
          ``(b, h, t, d_h)``; ``offset`` is the position of the first of the ``t`` tokens,
          so that tokens fed one at a time (keys kept in a cache, already rotated) are
          rotated as in the full sequence.
        - Output: the same shape, dtype and device.

    The frequencies ``inv_freq`` are a float64 tensor on the CPU, not a buffer, so that
    ``module.to(device)`` and ``module.to(dtype)`` leave them alone: Apple's MPS has no
    float64, and bfloat16 would round them. The angles, their cosines and sines are computed
    there too, cast to the input's dtype and then moved to its device.

    Introduced in chapter 6.
    """

    def __init__(
        self,
        head_dim: int,
        base: float = 10000.0,
        *,
        interleaved: bool = True,
    ) -> None:
        super().__init__()
        self.head_dim = check_positive_int("head_dim", head_dim)
        if head_dim % 2:
            even = "an even number (features are rotated in pairs)"
            raise ValueError(f"head_dim: expected {even}, got {head_dim}")
        self.base = _check_base(base)
        self.interleaved = check_bool("interleaved", interleaved)
        two_i = torch.arange(0, head_dim, 2, dtype=torch.float64)  # 2i
        # Not a buffer, which .to would move to a device without float64
        # (Apple's MPS) or round to bfloat16.
        self.inv_freq = self.base ** (-two_i / head_dim)  # (d_h / 2,), CPU

    def angles(self, num_tokens: int, offset: int = 0) -> torch.Tensor:
        """The rotation angle of every pair at positions ``offset, ..., offset + t - 1``.

        Args:
            num_tokens: the number of positions ``t``.
            offset: the first position.

        Returns:
            A float64 tensor of shape ``(t, d_h / 2)``, on the CPU.
        """
        num_tokens = check_positive_int("num_tokens", num_tokens)
        offset = _check_offset(offset)
        positions = torch.arange(
            offset,
            offset + num_tokens,
            dtype=torch.float64,
        )  # (t,), on the CPU
        return torch.outer(positions, self.inv_freq)  # (t, d_h / 2)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        x = check_tensor(
            "x",
            x,
            ranks=(2, 3, 4),
            shape_names=("(t, d_h)", "(b, t, d_h)", "(b, h, t, d_h)"),
            last_dim=self.head_dim,
            last_dim_name="head_dim",
        )
        angles = self.angles(x.shape[-2], offset)  # (t, d_h / 2), CPU
        # Cast first, then move: the device may have no float64 (MPS).
        cos = torch.cos(angles).to(x.dtype).to(x.device)  # (t, d_h / 2)
        sin = torch.sin(angles).to(x.dtype).to(x.device)  # (t, d_h / 2)
        if self.interleaved:
            a, b = x[..., 0::2], x[..., 1::2]  # (..., t, d_h / 2) each
        else:
            a, b = x.chunk(2, dim=-1)  # (..., t, d_h / 2) each
        # Each pair (a, b) turns by its angle: (a cos - b sin, a sin + b cos).
        pairs = (a * cos - b * sin, a * sin + b * cos)
        if self.interleaved:
            return torch.stack(pairs, dim=-1).flatten(-2)  # (..., t, d_h)
        return torch.cat(pairs, dim=-1)  # (..., t, d_h)

    def extra_repr(self) -> str:
        pieces = [f"head_dim={self.head_dim}", f"base={self.base}"]
        pieces.append(f"interleaved={self.interleaved}")
        return ", ".join(pieces)


class RotaryMultiHeadAttention(MultiHeadAttention):
    """Chapter 4's causal multi-head attention with rotary positions.

    The same projections, head split, mask, softmax and output projection as
    :class:`~attention_from_scratch.MultiHeadAttention` (the same state-dict names); after
    the head split, every query and key is rotated for its position by a
    :class:`RotaryEmbedding` of size ``d_h``. Values are not rotated. A model built from
    these layers needs no position vectors added to its inputs. Only the ``project`` step
    changes: ``forward`` and ``attend``, on both paths, are chapter 4's. The constructor
    passes its arguments on as they came, so that chapter 7's layers combine with it
    (:class:`~attention_from_scratch.RotaryGroupedQueryAttention`).

    Args:
        args: chapter 4's arguments, ``d_in, d_out, context_length, dropout, num_heads,
            qkv_bias``, with an even head size ``d_h = d_out // num_heads``.
        base: the wavelength scale of the rotations.
        interleaved: the pairing convention of :class:`RotaryEmbedding`.
        kwargs: chapter 4's keyword arguments (``fused``), and those of the layer this one
            is combined with.

    Shape:
        - Input: ``(b, t, d_in)`` with ``t <= context_length``.
        - Output: ``(b, t, d_out)``; with ``return_weights=True`` also the attention
          weights ``(b, h, t, t)``.

    Introduced in chapter 6.
    """

    def __init__(
        self,
        *args: Any,
        base: float = 10000.0,
        interleaved: bool = True,
        **kwargs: Any,
    ) -> None:
        # Chapter 4's arguments, passed on as they came: a layer of chapter 7
        # that also rotates (Python's multiple inheritance) gets its own.
        super().__init__(*args, **kwargs)
        d_h = self.head_dim
        self.rope = RotaryEmbedding(d_h, base, interleaved=interleaved)

    def project(
        self, x: torch.Tensor, offset: int = 0
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Chapter 4's step, then the queries and keys rotated for positions
        ``offset, offset + 1, ...``; the values are left as they are.

        A decoder that caches keys stores them as returned here, already
        rotated: a key is rotated once, for its own position, and never again.

        Args:
            x: ``(b, t, d_in)`` inputs.
            offset: the position of the first of the ``t`` tokens.

        Returns:
            ``(queries, keys, values)``, each ``(b, h, t, d_h)``.
        """
        queries, keys, values = super().project(x, offset)  # (b, h, t, d_h)
        return self.rope(queries, offset), self.rope(keys, offset), values
