"""Chapter 6's diagrams: positions added to token vectors, and the induction circuit."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from .style import (
    DIAGRAM_INCHES,
    HEAD_COLOURS,
    LABEL_PT,
    ROLE_COLOURS,
    arrow,
    as_floats,
    grid_cell,
    grid_frame,
    inch_figure,
    legend_row,
    tint,
    token_labels,
    write,
)


def draw_positions_added(
    token_vectors: torch.Tensor,
    positions: torch.Tensor,
    tokens: Iterable[str] | None = None,
) -> Figure:
    """Draw token vectors plus position vectors: ``E + P`` as three grids, one above the other.

    Row ``p`` of each grid is one position: the token's vector, the position vector
    ``P_p`` and their sum, which is what the first attention layer reads. The grids are
    stacked, joined by a plus and an equals sign, so that the figure stays narrow enough to
    be read unscaled on a phone. The cells are coloured on one diverging scale for all
    three, centred at 0 (white): red positive, blue negative (``RdBu_r``, as chapter 6's
    heatmap of the sinusoidal encoding), darker for larger magnitudes.

    Args:
        token_vectors: the token embeddings, shape ``(t, d)``, 1 to 10 tokens and 1 to 12
            features.
        positions: the position vectors, the same shape.
        tokens: the ``t`` tokens, as strings; numbered when omitted.

    Returns:
        The matplotlib ``Figure``, at most 7 inches wide.

    Used in chapter 6.
    """
    t, d = token_vectors.shape
    labels = token_labels(tokens, t)
    e, pos = as_floats(token_vectors), as_floats(positions)
    total = e + pos  # (t, d)
    scale = float(torch.stack((e, pos, total)).abs().max()) or 1.0
    longest = max(len(f"{i}: {label}") for i, label in enumerate(labels))
    label_room = 0.15 + 0.075 * longest
    cell = min(0.3, (DIAGRAM_INCHES - 0.3 - label_room) / d)
    title, sign_room, legend_room = 0.35, 0.45, 0.5
    height = 3 * (title + t * cell) + 2 * sign_room + legend_room
    width = max(label_room + d * cell + 0.1, 2.6)

    def signed(top: float, matrix: torch.Tensor) -> None:
        for i in range(t):
            write(ax, label_room - 0.05, top - (i + 0.5) * cell, f"{i}: {labels[i]}", ha="right")
            for j in range(d):
                face = diverging(0.5 + 0.5 * float(matrix[i, j]) / scale)[:3]
                grid_cell(
                    ax, label_room, top, i, j, cell, facecolor=face, edgecolor="white", lw=0.5
                )
        grid_frame(ax, label_room, top, t, d, cell)

    diverging = plt.get_cmap("RdBu_r")  # 0 is white, the middle of the scale
    middle = label_room + d * cell / 2
    with inch_figure(width, height) as (fig, ax):
        top = height
        parts = (
            (e, "token vectors", "+"),
            (pos, r"positions $P_p$", "="),
            (total, "sum: the input", ""),
        )
        for matrix, name, sign in parts:
            write(ax, middle, top - title + 0.1, name, va="bottom")
            top -= title
            signed(top, matrix)
            top -= t * cell
            if sign:
                write(ax, middle, top - sign_room / 2, sign, size=LABEL_PT + 4)
                top -= sign_room
        legend_row(
            ax,
            label_room,
            legend_room / 2,
            [
                (diverging(1.0), f"+{scale:.1f}"),
                (diverging(0.5), "0"),
                (diverging(0.0), f"-{scale:.1f}"),
            ],
        )
    return fig


def draw_induction_circuit(
    sequence: Iterable[str],
    previous_weights: torch.Tensor,
    induction_weights: torch.Tensor,
    *,
    query: int,
) -> Figure:
    """Draw the induction circuit on a real sequence: two heads, two layers, one prediction.

    The sequence is drawn once as a row of numbered boxes. Suppose query ``i`` holds token
    ``A`` and ``A`` occurred before at position ``j``, followed by ``B`` at ``j + 1``.
    Below the row, layer 0: the previous-token head's arc from every position up to ``i``
    (the keys the query may read) to its strongest key, so that position ``j + 1`` carries
    the token before it, ``A``. Above the row, layer 1: the induction head's arcs
    from query ``i`` to the keys. In both layers an arc runs from a query to a key, wider and
    more opaque for more weight; the induction head's strongest key should be ``j + 1``,
    whose value ``B`` becomes the prediction for position ``i + 1``. Arcs are drawn from the
    weights passed in, not from the rule. Each layer has its own colour (both heads are
    head 0 of their layer): here the colour tells the two layers apart.

    Args:
        sequence: the ``t`` tokens, as strings; 2 to 32 of them.
        previous_weights: layer 0's head's weights on this sequence, ``(t, t)``.
        induction_weights: layer 1's head's weights on this sequence, ``(t, t)``.
        query: the query ``i`` to follow, whose token occurs earlier in the sequence.

    Returns:
        The matplotlib ``Figure``, at most 7 inches wide.

    Used in chapter 6.
    """
    sequence = list(sequence)
    t = len(sequence)
    prev, ind = as_floats(previous_weights), as_floats(induction_weights)
    # The last earlier occurrence of the query's token (the chapter picks a repeated one).
    source = max(j for j in range(query) if sequence[j] == sequence[query])
    # At most 0.32 inches per token, so that a short sequence gives a narrow figure whose
    # text stays legible when a phone scales it down to its width.
    width = min(DIAGRAM_INCHES, 0.4 + 0.32 * t)
    spacing = (width - 0.4) / t
    height = 3.4
    base = 1.55
    box = min(spacing * 0.85, 0.3)
    with inch_figure(width, height) as (fig, ax):
        xs = [0.25 + (i + 0.5) * spacing for i in range(t)]
        # Layer 0's arcs into the keys the query may read (positions up to it); an
        # arc is at most about 0.35 inches deep, so that long ones stay clear of the text.
        for i in range(1, query + 1):
            j = int(prev[i].argmax())
            if j == i:
                continue
            chord = abs(xs[i] - xs[j])
            arrow(  # from the query to its key, as in layer 1 above
                ax,
                (xs[i], base - box / 2 - 0.25),
                (xs[j], base - box / 2 - 0.25),
                colour=HEAD_COLOURS[0],
                rad=math.copysign(min(0.5, 0.7 / chord), j - i),
                alpha=max(float(prev[i, j]), 0.15),
                lw=1 + float(prev[i, j]),
            )
        for j in range(query + 1):
            weight = float(ind[query, j])
            if weight > 0.03:
                arrow(
                    ax,
                    (xs[query], base + box / 2 + 0.03),
                    (xs[j], base + box / 2 + 0.03),
                    colour=HEAD_COLOURS[1],
                    rad=0.35,
                    alpha=min(1.0, weight),
                    lw=1 + weight,
                )
        for i, token in enumerate(sequence):
            special = i in (query, source, source + 1)
            face = tint(ROLE_COLOURS["input"], 0.45 if special else 0.1)
            corner, lw = (xs[i] - box / 2, base - box / 2), 1.6 if special else 0.6
            ax.add_patch(
                Rectangle(corner, box, box, facecolor=face, edgecolor="black", lw=lw, zorder=3)
            )
            write(ax, xs[i], base, token, zorder=4)
            if i % 2 == 0 or t <= 16:
                write(ax, xs[i], base - box / 2 - 0.02, str(i), va="top", color="#777777", zorder=4)
        target = int(ind[query].argmax())
        second = (
            f'layer 1, induction head:\nquery {query} ("{sequence[query]}") attends most to '
            f'key {target} ("{sequence[target]}"),\nwhich followed the earlier '
            f'"{sequence[query]}" at position {source}'
        )
        note: dict[str, Any] = {"ha": "left", "size": LABEL_PT}
        write(ax, 0.1, height - 0.1, second, va="top", color=HEAD_COLOURS[1], **note)
        prediction = f'→ the model can predict "{sequence[target]}" at position {query + 1}'
        write(ax, 0.1, height - 0.8, prediction, color=HEAD_COLOURS[1], fontweight="bold", **note)
        first = (
            "layer 0, previous-token head: the\nstrongest key of each position up to the"
            f'\nquery, so position {source + 1} carries "{sequence[source]}", the token before it'
        )
        write(ax, 0.1, 0.05, first, va="bottom", color=HEAD_COLOURS[0], **note)
    return fig
