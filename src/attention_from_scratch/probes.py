"""Chapter 6: what a trained head does, measured from its attention weights.

A previous-token head attends from every token to the one before it; an induction head
attends to the token after an earlier copy of the current one. Each score is one number per
head, 1 for a perfect head of its kind.

Dimension names used here: ``b`` batch, ``h`` heads, ``t`` tokens.
"""

from __future__ import annotations

import torch

from ._checks import check_tokens


def _check_weights(weights: object) -> torch.Tensor:
    if not isinstance(weights, torch.Tensor):
        raise TypeError(
            f"weights: expected a float tensor of shape (b, h, t, t), got {type(weights).__name__}"
        )
    if not weights.is_floating_point():
        raise TypeError(f"weights: expected a float tensor, got dtype {weights.dtype}")
    if weights.dim() != 4 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(
            f"weights: expected a tensor of shape (b, h, t, t), got {tuple(weights.shape)}"
        )
    return weights


def previous_token_scores(weights: torch.Tensor) -> torch.Tensor:
    """How much each head attends from every token to the token just before it.

    The score of a head is the mean of ``weights[:, head, i, i - 1]`` over the batch and over
    the queries ``i >= 1``: 1 for a perfect previous-token head, about ``1 / (i + 1)`` for a
    head that spreads its attention evenly.

    Args:
        weights: attention weights of one layer, ``(b, h, t, t)``, with ``t >= 2``.

    Returns:
        A tensor of shape ``(h,)``, one score per head.

    Introduced in chapter 6.
    """
    weights = _check_weights(weights)
    if weights.shape[-1] < 2:
        raise ValueError(f"weights: expected t >= 2 tokens, got {tuple(weights.shape)}")
    diagonal = weights.diagonal(offset=-1, dim1=-2, dim2=-1)  # (b, h, t - 1)
    return diagonal.mean(dim=(0, 2))  # (h,)


def induction_scores(weights: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """How much each head attends to the token after an earlier copy of the current token.

    For a query ``i`` whose token appeared before, at some ``j - 1 < i``, an induction head
    attends to key ``j``: the token that followed the earlier copy, which is the best guess of
    what comes next. The score of a head is the attention weight on all such keys, summed per
    query and averaged over the batch and the queries that have at least one earlier copy: 1
    for a perfect induction head, near 0 for a head that looks elsewhere.

    Args:
        weights: attention weights of one layer, ``(b, h, t, t)``.
        tokens: the token ids the weights were computed for, ``(b, t)``.

    Returns:
        A tensor of shape ``(h,)``, one score per head.

    Introduced in chapter 6.
    """
    weights = _check_weights(weights)
    tokens = check_tokens("tokens", tokens)
    b, _, t, _ = weights.shape
    if tuple(tokens.shape) != (b, t):
        raise ValueError(
            f"tokens: expected shape (b, t) = {(b, t)} like the weights, got {tuple(tokens.shape)}"
        )
    tokens = tokens.to(weights.device)
    # match[b, i, j]: key j follows an earlier copy of query i's token (j - 1 < i).
    match = torch.zeros(b, t, t, dtype=torch.bool, device=weights.device)
    match[:, :, 1:] = tokens[:, :, None] == tokens[:, None, :-1]  # (b, t, t - 1)
    match &= torch.ones(t, t, dtype=torch.bool, device=weights.device).tril(0)
    has_copy = match.any(dim=-1)  # (b, t)
    if not has_copy.any():
        raise ValueError("tokens: expected at least one token that repeats, got none")
    on_match = (weights * match[:, None].to(weights.dtype)).sum(dim=-1)  # (b, h, t)
    on_match = on_match.transpose(0, 1)[:, has_copy]  # (h, queries with a copy)
    return on_match.mean(dim=-1)  # (h,)
