"""Chapter 3's diagrams: the causal mask as a graph, and dropout on one query's weights."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, Rectangle
from matplotlib.path import Path
from matplotlib.transforms import Affine2D

from .style import (
    CELL_PT,
    DIAGRAM_INCHES,
    LABEL_PT,
    ROLE_COLOURS,
    arrow,
    as_floats,
    grid_cell,
    grid_text,
    inch_figure,
    tint,
    token_labels,
    write,
)


def draw_causal_graph(
    mask: torch.Tensor,
    tokens: Iterable[str] | None = None,
    weights: torch.Tensor | None = None,
) -> Figure:
    """Draw a causal mask above the directed graph of who may send to whom.

    Top, the mask: row ``i`` is the query (the receiver), column ``j`` the key (the sender);
    hidden entries (``True``) are vermillion with a cross. Below, the tokens as numbered
    nodes in reading order: a green arc (messages are values) from ``j`` to ``i`` above the
    nodes for every pair the mask allows (earlier to later, a loop for ``j = i``), and a
    dashed vermillion arc below for every pair it forbids (later to earlier). With
    ``weights``, each open entry of the mask shows its weight, and its edge is as wide as
    that weight.

    Args:
        mask: a boolean ``(t, t)`` tensor, ``True`` where attention is forbidden (the book's
            convention, e.g. ``causal_mask(t)``), with 2 to 10 tokens.
        tokens: the ``t`` tokens, as strings; numbered when omitted.
        weights: the ``(t, t)`` attention weights of the allowed edges, or ``None`` for
            edges of one width.

    Returns:
        The matplotlib ``Figure``, 4.5 inches wide.

    Used in chapter 3.
    """
    t = mask.shape[0]
    labels = token_labels(tokens, t)
    hidden = mask.detach().cpu()
    weighted = weights is not None
    if weights is not None:
        weights = as_floats(weights)
        if tuple(weights.shape) != (t, t):
            raise ValueError(f"weights: expected shape {(t, t)}, got {tuple(weights.shape)}")

    def edge_width(i: int, j: int) -> float:  # points of line: 1.3, or 0.4 + 4 per unit weight
        return 0.4 + 4.0 * float(weights[i, j]) if weights is not None else 1.3

    # Stacked, the mask above its graph, so that the figure stays narrow enough to read on a
    # phone. Edges carry messages, which are values: green; what the mask removes: vermillion.
    message, cut = ROLE_COLOURS["value"], ROLE_COLOURS["mask"]
    cell = 0.3 if weights is None else 0.4  # room for a weight in each open cell
    width = 4.5
    spacing = (width - 0.9) / (t - 1)
    arc = 0.4 * (t - 1) * spacing / 2  # how far the longest arc bends from its chord
    graph_height = 2 * arc + 1.6
    height = t * cell + 0.95 + graph_height
    with inch_figure(width, height) as (fig, ax):
        top = height - 0.45
        left = (width - t * cell) / 2 + 0.3
        for i in range(t):
            write(ax, left - 0.06, top - (i + 0.5) * cell, labels[i], ha="right")
            for j in range(t):
                forbidden = bool(hidden[i, j])
                face = cut if forbidden else "#e4e4e4"
                grid_cell(ax, left, top, i, j, cell, facecolor=face, edgecolor="white")
                if forbidden:
                    grid_text(ax, left, top, i, j, cell, "×", color="white")
                elif weights is not None:  # an allowed edge: its weight
                    grid_text(ax, left, top, i, j, cell, f"{float(weights[i, j]):.2f}")
        for j in range(t):
            write(ax, left + (j + 0.5) * cell, top + 0.04, str(j), va="bottom")
        centre, bottom = left + t * cell / 2, top - t * cell
        write(ax, centre, top + 0.25, "key j (sender)", va="baseline")
        write(ax, centre, bottom - 0.08, "row i: query (receiver); × = forbidden", va="top")
        base = graph_height - arc - 0.5
        xs = [0.45 + i * spacing for i in range(t)]
        for i in range(t):
            for j in range(t):
                allowed = not bool(hidden[i, j])
                if i == j:  # a loop on top of the node, with its arrowhead
                    if allowed:
                        loop = Path.arc(-55, 235).transformed(
                            Affine2D().scale(0.12).translate(xs[i], base + 0.23)
                        )
                        ax.add_patch(
                            FancyArrowPatch(
                                path=loop, arrowstyle="-|>", mutation_scale=9, lw=edge_width(i, i),
                                color=message,
                            )
                        )  # fmt: skip
                    continue
                y = base + (0.14 if allowed else -0.6)  # forbidden: below the labels
                step = 0.05 if allowed else 0.0  # clear of the loop on the node
                arrow(
                    ax,
                    (xs[j] + step, y),
                    (xs[i] - step, y),
                    colour=message if allowed else cut,
                    rad=-0.4,
                    lw=edge_width(i, j) if allowed else 0.9,
                    alpha=0.9 if allowed else 0.55,
                    linestyle="-" if allowed else (0, (3, 2)),
                )
        for i in range(t):
            ax.add_patch(
                Circle((xs[i], base), 0.13, facecolor="white", edgecolor="black", zorder=3)
            )
            write(ax, xs[i], base, str(i), zorder=4)
            write(ax, xs[i], base - 0.2, labels[i], va="top", rotation=30, zorder=4)
        mid = (xs[0] + xs[-1]) / 2
        allowed_text = "allowed: earlier → later, and itself"
        if weighted:
            allowed_text += "\nwidth = attention weight"
        write(ax, mid, base + arc + 0.35, allowed_text, va="baseline")
        write(ax, mid, 0.08, "forbidden: later → earlier", va="baseline", color=cut)
    return fig


def draw_dropout(
    weights: torch.Tensor,
    dropped: torch.Tensor,
    tokens: Iterable[str] | None = None,
    *,
    p: float,
    query: int | None = None,
) -> Figure:
    """Draw one query's weights before and after dropout, and the value rows they mix.

    Top row: the weights ``alpha_ij`` of one query ``i``, as outlined bars with their numbers.
    Middle row: the same weights after dropout; the zeroed ones are crossed out in vermillion,
    the kept ones are scaled by ``1 / (1 - p)``. Bottom: the value rows ``v^(j)`` in green,
    faded where their weight was dropped, and the context vector ``z^(i)`` as their weighted
    sum.

    Args:
        weights: the weights of one query, shape ``(s,)``, 1 to 10 keys.
        dropped: the same weights after ``nn.Dropout(p)`` in training mode, shape ``(s,)``.
        tokens: the ``s`` key tokens, as strings; numbered when omitted.
        p: the dropout probability that made ``dropped``, in (0, 1).
        query: the query's position ``i``, written into the labels (``alpha_5j``,
            ``z^(5)``); ``i`` when omitted.

    Returns:
        The matplotlib ``Figure``, at most 7 inches wide.

    Used in chapter 3.
    """
    weights, dropped = as_floats(weights), as_floats(dropped)
    if query is not None and type(query) is not int:
        raise TypeError(f"query: expected None or an int, got {query!r}")
    if query is not None and query < 0:
        raise ValueError(f"query: expected a position >= 0, got {query}")
    i = "i" if query is None else str(query)
    s = weights.shape[0]
    labels = token_labels(tokens, s)
    kept = dropped != 0
    spacing = min(0.5, (DIAGRAM_INCHES - 1.6) / s)  # narrow: legible on a phone
    left = 1.45
    width = max(left + s * spacing + 0.15, 4.5)
    middle = width / 2
    height = 4.1
    bar_height = 0.55
    top_scale = float(dropped.max()) or 1.0
    with inch_figure(width, height) as (fig, ax):
        rows = (
            (3.3, weights, rf"weights $\alpha_{{{i}j}}$"),
            (2.25, dropped, f"after dropout\n(p = {p:g})"),
        )
        for base, row, name in rows:
            write(ax, left - 0.15, base + bar_height / 2, name, ha="right")
            for j in range(s):
                centre = left + (j + 0.5) * spacing
                value = float(row[j])
                zero = row is dropped and not bool(kept[j])
                bar = max(bar_height * value / top_scale, 0.02)
                # Weights have no role colour: outlined bars, unlike any role's fill.
                ax.add_patch(
                    Rectangle(
                        (centre - spacing * 0.3, base),
                        spacing * 0.6,
                        bar,
                        facecolor="none",
                        edgecolor="black",
                        lw=1.0,
                    )
                )
                ink = ROLE_COLOURS["mask"] if zero else "black"
                write(ax, centre, base - 0.04, f"{value:.2f}", va="top", size=CELL_PT, color=ink)
                if zero:
                    write(ax, centre, base + 0.2, "×", size=16, color=ROLE_COLOURS["mask"])
        write(
            ax,
            middle,
            2.98,
            rf"kept weights $\times\,1/(1-p) = {1 / (1 - p):.3g}$; dropped ones are 0",
        )
        for j in range(s):
            centre = left + (j + 0.5) * spacing
            alive = bool(kept[j])  # faded where the weight was dropped
            edge = "black" if alive else "#bbbbbb"
            ax.add_patch(
                Rectangle(
                    (centre - spacing * 0.3, 1.05),
                    spacing * 0.6,
                    0.38,
                    facecolor=tint(ROLE_COLOURS["value"], 0.75 if alive else 0.12),
                    edgecolor=edge,
                    linestyle="-" if alive else "--",
                )
            )
            ink = "white" if alive else "#999999"
            write(ax, centre, 1.24, f"$v^{{({j})}}$", size=LABEL_PT, color=ink)
            write(ax, centre, 0.98, labels[j], va="top", ha="right", rotation=40)
            lw, dashes = (1.4, "-") if alive else (0.8, (0, (2, 2)))
            arrow(ax, (centre, 2.03), (centre, 1.46), lw=lw, colour=edge, linestyle=dashes)
        write(ax, left - 0.15, 1.24, "value rows", ha="right")
        write(
            ax,
            middle,
            0.2,
            "context vector\n"
            rf"$z^{{({i})}} = \sum_j$ (weight after dropout) $\cdot\, v^{{(j)}}$",
            size=LABEL_PT,
            color="black",
        )
    return fig
