"""Chapter 1: attention with no trainable weights.

Every token is compared with every other token by a dot product, the scores are normalised into
weights with softmax, and each token's context vector is the weighted sum of all the tokens.

Dimension names used here: ``b`` batch, ``t`` tokens, ``d_in`` embedding size (the
outputs keep it: there are no weights to change it).
"""

from __future__ import annotations

from typing import Literal, overload

import torch

from ._checks import check_bool, check_float_tensor, check_tensor


def _check_dim(x: torch.Tensor, dim: object) -> int:
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"dim: expected an int, got {type(dim).__name__} {dim!r}")
    # Like torch, a 0-d tensor has one dimension to reduce over: dim 0 or -1.
    rank = max(x.dim(), 1)
    if not -rank <= dim < rank:
        raise ValueError(
            f"dim: expected a dimension in [{-rank}, {rank - 1}] for a tensor of shape "
            f"{tuple(x.shape)}, got {dim}"
        )
    return dim


def softmax_naive(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax written straight from its formula, ``exp(x) / sum(exp(x))``.

    It is correct for moderate scores but breaks at the extremes, in float32: once the sum of
    the exponentials overflows (``exp(89.0)`` is already infinite) the weights become 0 or
    ``nan``; for scores below about -87 the exponentials are subnormal numbers with fewer
    digits, and the weights go wrong without a warning; below about -104 every ``exp`` rounds
    to 0 (underflow) and the weights become ``nan``. Use :func:`softmax_stable` (or
    ``torch.softmax``) in real code.

    Args:
        x: scores, a floating tensor of any shape.
        dim: the dimension whose entries should sum to one.

    Returns:
        A tensor of the same shape as ``x`` whose entries along ``dim`` are positive and sum to 1.

    Introduced in chapter 1.
    """
    x = check_float_tensor("x", x)
    dim = _check_dim(x, dim)
    exp = torch.exp(x)
    return exp / exp.sum(dim=dim, keepdim=True)


def softmax_stable(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax that cannot overflow: subtract the largest score before exponentiating.

    Softmax does not change when the same number is subtracted from every score, because the
    factor ``exp(-m)`` cancels between numerator and denominator. With ``m`` the maximum, every
    exponent is at most 0, so every ``exp`` is at most 1.

    Args:
        x: scores, a floating tensor of any shape.
        dim: the dimension whose entries should sum to one.

    Returns:
        A tensor of the same shape as ``x``, equal to ``torch.softmax(x, dim)``, including its
        edge cases: a 0-d tensor gives 1, an empty tensor gives an empty tensor, a ``nan``
        anywhere in a slice makes that whole slice ``nan``, and a slice of only ``-inf`` gives
        ``nan`` (there is no weight to hand out). These are not hidden or repaired: they show
        where the scores went wrong.

    Introduced in chapter 1.
    """
    x = check_float_tensor("x", x)
    dim = _check_dim(x, dim)
    if x.numel() == 0:
        # Nothing to normalise, and amax refuses an empty dimension.
        return torch.empty_like(x)
    shifted = x - x.amax(dim=dim, keepdim=True)
    exp = torch.exp(shifted)
    return exp / exp.sum(dim=dim, keepdim=True)


def simplified_attention_loop(
    inputs: torch.Tensor, return_weights: bool = False
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Parameter-free self-attention computed one dot product at a time.

    This is the slow, explicit version of :func:`simplified_attention`: two nested loops fill the
    score matrix, softmax turns each row into weights, and a third loop sums the weighted
    inputs. It exists to be read, not to be fast.

    Args:
        inputs: token embeddings of shape ``(t, d_in)``.
        return_weights: also return the attention weights.

    Returns:
        The context vectors, shape ``(t, d_in)``; with ``return_weights=True`` also the attention
        weights, shape ``(t, t)``, where row ``i`` holds how much token ``i`` attends to each
        token. A ``nan`` or infinite input is not hidden: it makes every score it touches
        non-finite, and softmax then turns those rows into ``nan``, as in
        :func:`simplified_attention`.

    Introduced in chapter 1.
    """
    inputs = check_tensor(
        "inputs",
        inputs,
        ranks=(2,),
        shape_names=("(t, d_in)",),
    )
    return_weights = check_bool("return_weights", return_weights)
    num_tokens = inputs.shape[0]
    scores = torch.empty(
        num_tokens,
        num_tokens,
        dtype=inputs.dtype,
        device=inputs.device,
    )  # (t, t)
    for i, x_i in enumerate(inputs):
        for j, x_j in enumerate(inputs):
            scores[i, j] = torch.dot(x_i, x_j)
    weights = torch.softmax(scores, dim=-1)  # (t, t)
    context = torch.zeros_like(inputs)  # (t, d_in)
    for i in range(num_tokens):
        for j, x_j in enumerate(inputs):
            context[i] += weights[i, j] * x_j
    return (context, weights) if return_weights else context


# The type of the result follows return_weights: one tensor, or (context, weights).
@overload
def simplified_attention(
    inputs: torch.Tensor, return_weights: Literal[False] = False
) -> torch.Tensor: ...
@overload
def simplified_attention(
    inputs: torch.Tensor, return_weights: Literal[True]
) -> tuple[torch.Tensor, torch.Tensor]: ...
@overload
def simplified_attention(
    inputs: torch.Tensor, return_weights: bool
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]: ...
def simplified_attention(
    inputs: torch.Tensor, return_weights: bool = False
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Parameter-free self-attention in matrix form: ``softmax(X X^T) X``.

    Args:
        inputs: token embeddings of shape ``(t, d_in)`` or ``(b, t, d_in)``.
        return_weights: also return the attention weights.

    Returns:
        The context vectors, the same shape as ``inputs``; with ``return_weights=True`` also
        the attention weights, shape ``(t, t)`` or ``(b, t, t)``. Non-finite inputs are not
        hidden or repaired: a ``nan`` anywhere in a sequence enters every score of that
        sequence (each token is compared with it), so all its weights and context vectors
        become ``nan``; other sequences of the batch are unaffected.

    Introduced in chapter 1.
    """
    inputs = check_tensor(
        "inputs",
        inputs,
        ranks=(2, 3),
        shape_names=("(t, d_in)", "(b, t, d_in)"),
    )
    return_weights = check_bool("return_weights", return_weights)
    scores = inputs @ inputs.transpose(-2, -1)  # (..., t, t)
    weights = torch.softmax(scores, dim=-1)  # (..., t, t)
    context = weights @ inputs  # (..., t, d_in)
    return (context, weights) if return_weights else context
