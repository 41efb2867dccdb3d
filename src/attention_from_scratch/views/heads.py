"""The head view: lines from a token to the tokens each head attends to (chapters 4 and 6).

``head_view(tokens, weights)`` draws the attention weights of one or more layers the way
bertviz's head view does: the tokens in two columns, queries on the left and keys on the
right, and from the chosen query one line per key and head, as opaque as the weight, in the
head's colour (``palette.HEAD_COLOURS``). A layer chooser and head toggles (each shown
only where there are two or more) pick what is drawn; ``js/heads.js`` draws it. Chapter 4
shows the heads of its multi-head example, chapter 6 the real heads of its trained
induction model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .._checks import check_tensor
from ..palette import HEAD_COLOURS
from .widget import View, check_labels, fallback_table, rounded

#: The most tokens a head view draws: one row per token, legible on a phone.
MAX_HEAD_TOKENS = 32
#: Weights are written with this many decimals, which keeps a page's data small; a line is
#: drawn for each weight of at least LINE_THRESHOLD (a fainter one would not be seen).
WEIGHT_DECIMALS = 4
LINE_THRESHOLD = 0.005


def _layers(weights: object, t: int) -> list[torch.Tensor]:
    """``weights`` as a list of ``(h, t, t)`` tensors, one per layer, checked."""
    if isinstance(weights, torch.Tensor):
        x = check_tensor(
            "weights", weights, ranks=(3, 4), shape_names=("(h, t, t)", "(layers, h, t, t)")
        )
        layers = [x] if x.dim() == 3 else list(x)
    elif isinstance(weights, (list, tuple)) and weights:
        layers = [
            check_tensor(f"weights[{n}]", w, ranks=(3,), shape_names=("(h, t, t)",))
            for n, w in enumerate(weights)
        ]
    else:
        raise TypeError(
            "weights: expected a tensor (h, t, t) or (layers, h, t, t), or a non-empty list "
            f"of (h, t, t) tensors, got {type(weights).__name__}"
        )
    h = layers[0].shape[0]
    for n, w in enumerate(layers):
        if tuple(w.shape) != (h, t, t):
            raise ValueError(
                f"weights: expected layer {n} of shape (h, t, t) = ({h}, {t}, {t}) for "
                f"{t} tokens, got {tuple(w.shape)}"
            )
    stacked = torch.stack([w.detach().to("cpu", torch.float64) for w in layers])  # (L, h, t, t)
    if not torch.isfinite(stacked).all() or (stacked < 0).any():
        raise ValueError("weights: expected attention weights (finite, at least 0), got others")
    sums = stacked.sum(dim=-1)  # (L, h, t)
    if not torch.allclose(sums, torch.ones_like(sums), atol=1e-3):
        raise ValueError(
            "weights: expected rows that sum to 1 (softmax weights, without dropout), got "
            f"sums from {sums.min():.3f} to {sums.max():.3f}"
        )
    return list(stacked)


def head_view_data(
    tokens: Sequence[str],
    weights: torch.Tensor | Sequence[torch.Tensor],
    *,
    layer_names: Sequence[str] | None = None,
    query: int | None = None,
) -> dict[str, Any]:
    """The JSON-able data of a head view (what ``js/heads.js`` reads).

    Args:
        tokens: one label per token, ``t`` of them (at most 32).
        weights: attention weights of one sequence: ``(h, t, t)`` for one layer,
            ``(layers, h, t, t)``, or a list of ``(h, t, t)``, layer 0 first.
        layer_names: one name per layer (default "layer 0", "layer 1", ...).
        query: the token chosen first (default: the last one).

    Returns:
        A dict with ``tokens``, ``weights`` (``[layer][head][query][key]``, rounded to
        ``WEIGHT_DECIMALS``), ``layer_names``, ``head_colours``, ``query`` and ``threshold``.

    Shape:
        weights ``(layers, h, t, t)``.
    """
    labels = check_labels(tokens, MAX_HEAD_TOKENS)
    t = len(labels)
    layers = _layers(weights, t)
    names: list[str] | None
    if layer_names is None:
        names = [f"layer {n}" for n in range(len(layers))]
    else:
        names = list(layer_names) if isinstance(layer_names, (list, tuple)) else None
        if names is None or not all(isinstance(name, str) for name in names):
            raise TypeError(f"layer_names: expected a list of str, got {layer_names!r}")
        if len(names) != len(layers):
            raise ValueError(
                f"layer_names: expected {len(layers)} names, one per layer, got {len(names)}"
            )
    if query is None:
        query = t - 1
    if isinstance(query, bool) or not isinstance(query, int):
        raise TypeError(f"query: expected an int, got {type(query).__name__} {query!r}")
    if not 0 <= query < t:
        raise ValueError(f"query: expected a token index in [0, {t}), got {query}")
    h = layers[0].shape[0]
    return {
        "tokens": labels,
        "weights": rounded(torch.stack(layers).tolist(), WEIGHT_DECIMALS),  # (L, h, t, t)
        "layer_names": names,
        "head_colours": [HEAD_COLOURS[head % len(HEAD_COLOURS)] for head in range(h)],
        "query": query,
        "threshold": LINE_THRESHOLD,
    }


def head_view(
    tokens: Sequence[str],
    weights: torch.Tensor | Sequence[torch.Tensor],
    *,
    layer_names: Sequence[str] | None = None,
    query: int | None = None,
) -> View:
    """An interactive, bertviz-style view of attention heads (chapter 4).

    A cell that ends in it shows the tokens in two columns and, from the query the reader
    picks (hover, click, tap or the arrow keys), one line per key and head, in the head's
    colour and as opaque as its weight; buttons choose the layer (where there are several)
    and switch heads on and off (where there are several).
    Where scripts do not run, a table gives each head's largest weight for every query.

    Args:
        tokens: one label per token (at most 32).
        weights: ``(h, t, t)``, ``(layers, h, t, t)`` or a list of ``(h, t, t)`` tensors, the
            weights of one sequence (take ``[0]`` of a batch).
        layer_names: one name per layer.
        query: the token chosen first (default: the last).

    Returns:
        A :class:`View`.

    Raises:
        TypeError, ValueError: an argument of the wrong type or value, named in the message.
    """
    data = head_view_data(tokens, weights, layer_names=layer_names, query=query)
    labels = data["tokens"]
    h = len(data["head_colours"])
    rows = []
    # A view of one layer names no layer in its rows.
    several = len(data["layer_names"]) > 1
    for name, layer in zip(data["layer_names"], data["weights"], strict=True):
        for i, token in enumerate(labels):
            cells = []
            for head in range(h):
                row = layer[head][i]
                j = max(range(len(row)), key=row.__getitem__)
                cells.append(f"{j} {labels[j]} ({row[j]:.2f})")
            rows.append([f"{name}, {i} {token}" if several else f"{i} {token}", *cells])
    table = fallback_table(
        "The key each head attends to most, for every query (weight in brackets)",
        ["query", *[f"head {head}" for head in range(h)]],
        rows,
    )
    fallback = (
        '<p class="afs-note">The interactive head view needs JavaScript; here is what each '
        "head attends to most.</p>" + table
    )
    return View("heads", data, label="Head view of attention", fallback=fallback)
