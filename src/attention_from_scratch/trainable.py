"""Chapter 2: self-attention with trainable query, key and value weights.

Dimension names used here: ``b`` batch, ``t`` tokens, ``d_in`` input embedding size, ``d_out``
size of the queries, keys and values (called ``d_k`` in the scaling factor).
"""

from __future__ import annotations

import torch
from torch import nn

from ._checks import check_bool, check_positive_int, check_tensor


class SelfAttentionV1(nn.Module):
    """Scaled dot-product self-attention with weights stored as plain ``nn.Parameter`` matrices.

    The three weight matrices are created with ``torch.rand`` in the order query, key, value, so
    ``torch.manual_seed(123)`` before construction reproduces the numbers printed in chapter 2.
    They are stored as ``(d_in, d_out)`` and applied as ``x @ W``.

    Args:
        d_in: size of each input embedding.
        d_out: size of each query, key, value and output vector.

    Shape:
        - Input: ``(t, d_in)`` or ``(b, t, d_in)``.
        - Output: ``(t, d_out)`` or ``(b, t, d_out)``; with ``return_weights=True`` also the
          attention weights, ``(t, t)`` or ``(b, t, t)``.

    Introduced in chapter 2.
    """

    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.d_in = check_positive_int("d_in", d_in)
        self.d_out = check_positive_int("d_out", d_out)
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))

    def forward(
        self, x: torch.Tensor, return_weights: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        x = check_tensor(
            "x",
            x,
            ranks=(2, 3),
            shape_names=("(t, d_in)", "(b, t, d_in)"),
            last_dim=self.d_in,
            like=self,
        )
        return_weights = check_bool("return_weights", return_weights)
        queries = x @ self.W_query  # (b, t, d_out)
        keys = x @ self.W_key  # (b, t, d_out)
        values = x @ self.W_value  # (b, t, d_out)
        # transpose(-2, -1) rather than .T, so that a batch dimension in
        # front is left alone.
        scores = queries @ keys.transpose(-2, -1)  # (b, t, t)
        scores = scores / keys.shape[-1] ** 0.5  # divided by sqrt(d_k)
        weights = torch.softmax(scores, dim=-1)  # (b, t, t)
        context = weights @ values  # (b, t, d_out)
        return (context, weights) if return_weights else context

    def extra_repr(self) -> str:
        return f"d_in={self.d_in}, d_out={self.d_out}"


class SelfAttentionV2(nn.Module):
    """Scaled dot-product self-attention with ``nn.Linear`` projections.

    ``nn.Linear`` stores its weight as ``(d_out, d_in)`` and computes ``x @ weight.T``, so copying
    ``v1.W_query.T`` into ``v2.W_query.weight`` makes the two versions agree exactly. The
    layers are created in the order query, key, value.

    Args:
        d_in: size of each input embedding.
        d_out: size of each query, key, value and output vector.
        qkv_bias: add a learnable bias to the three projections.

    Shape:
        - Input: ``(t, d_in)`` or ``(b, t, d_in)``.
        - Output: ``(t, d_out)`` or ``(b, t, d_out)``; with ``return_weights=True`` also the
          attention weights, ``(t, t)`` or ``(b, t, t)``.

    Introduced in chapter 2.
    """

    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False) -> None:
        super().__init__()
        self.d_in = check_positive_int("d_in", d_in)
        self.d_out = check_positive_int("d_out", d_out)
        check_bool("qkv_bias", qkv_bias)
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(
        self, x: torch.Tensor, return_weights: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        x = check_tensor(
            "x",
            x,
            ranks=(2, 3),
            shape_names=("(t, d_in)", "(b, t, d_in)"),
            last_dim=self.d_in,
            like=self,
        )
        return_weights = check_bool("return_weights", return_weights)
        queries = self.W_query(x)  # (b, t, d_out)
        keys = self.W_key(x)  # (b, t, d_out)
        values = self.W_value(x)  # (b, t, d_out)
        scores = queries @ keys.transpose(-2, -1)  # (b, t, t)
        scores = scores / keys.shape[-1] ** 0.5  # divided by sqrt(d_k)
        weights = torch.softmax(scores, dim=-1)  # (b, t, t)
        context = weights @ values  # (b, t, d_out)
        return (context, weights) if return_weights else context

    def extra_repr(self) -> str:
        return f"d_in={self.d_in}, d_out={self.d_out}"
