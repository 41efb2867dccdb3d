"""Chapter 1's diagrams: one query's path through simplified attention, and every query at once.

``query_path_figure`` draws the one-query table for chapter 2's ``draw_query_path`` too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from .style import (
    DIAGRAM_INCHES,
    LABEL_PT,
    ROLE_COLOURS,
    arrow,
    as_floats,
    inch_figure,
    shaded_block,
    tint,
    token_labels,
    write,
)


def draw_context_vector(
    inputs: torch.Tensor, tokens: Iterable[str] | None = None, *, query: int = 1
) -> Figure:
    """Draw one query's path through simplified attention, with its real numbers.

    Two tables with one row per token ``j``. The upper one holds its embedding ``x^(j)``,
    the score ``omega_qj = x^(q) . x^(j)`` and the weight ``alpha_qj`` (softmax of the scores,
    as a bar and a number); the lower one the weighted row ``alpha_qj x^(j)``, and under
    them their sum, the context vector ``z^(q)``. The inputs, which play the keys and the
    values here, are shaded grey (their role colour), the query blue, the context vector sky
    blue; darker cells hold larger magnitudes.

    Args:
        inputs: the embeddings, shape ``(t, d_in)`` with 1 to 10 tokens and 1 to 4 features
            (the numbers are written in the cells).
        tokens: the ``t`` tokens, as strings; numbered when omitted.
        query: the index ``q`` of the query token, from 0 to ``t - 1``.

    Returns:
        The matplotlib ``Figure``, at most 7 inches wide.

    Used in chapter 1.
    """
    inputs = as_floats(inputs)
    labels = token_labels(tokens, inputs.shape[0])
    return query_path_figure(inputs[query], inputs, inputs, labels, query, scaled=False)


def draw_attention_matrices(
    inputs: torch.Tensor, tokens: Iterable[str] | None = None, *, query: int = 1
) -> Figure:
    """Draw simplified attention for every token at once: ``Z = softmax(X X^T) X``.

    Four blocks in a U, narrow enough for a phone: the inputs ``X`` and, to their right, the
    scores ``omega = X X^T``; below the scores the weights ``alpha`` (softmax of each row),
    and to their left the context vectors ``Z = alpha X``. Each block is labelled with its
    shape; ``X`` and ``Z`` are shaded in their role colours by magnitude, the scores and
    weights, which have no role colour, in the heatmap colours (viridis), the scores from 0
    to their largest magnitude and the weights from 0 to 1. Row ``query`` is framed in blue
    in every block: it is the one-query computation of :func:`draw_context_vector`.

    Args:
        inputs: the embeddings ``X``, shape ``(t, d_in)``, 1 to 10 tokens and 1 to 8
            features.
        tokens: the ``t`` tokens, as strings; numbered when omitted.
        query: the row to frame, from 0 to ``t - 1``.

    Returns:
        The matplotlib ``Figure``, at most 7 inches wide.

    Used in chapter 1.
    """
    t, d_in = inputs.shape
    labels = token_labels(tokens, t)
    x = as_floats(inputs)
    scores = x @ x.T  # (t, d_in) @ (d_in, t) -> (t, t)
    weights = torch.softmax(scores, dim=-1)  # (t, t)
    context = weights @ x  # (t, t) @ (t, d_in) -> (t, d_in)
    # Text of 11 and 12 points: the figure is under 5 inches wide, so a phone that scales it
    # to 390 pixels shows it at about 9 points.
    text_pt, caption_pt = LABEL_PT + 1, LABEL_PT + 2
    longest = max(len(label) for label in labels)
    label_room = 0.15 + 0.09 * longest
    arrow_room = 0.9
    cell = min(0.32, (DIAGRAM_INCHES - 0.2 - label_room - arrow_room) / (d_in + t))
    block_h = t * cell
    gap = 0.75  # between the two rows of blocks: the softmax arrow
    height = 2 * block_h + gap + 0.9
    width = label_room + (d_in + t) * cell + arrow_room + 0.1
    right = label_room + d_in * cell + arrow_room  # left edge of the scores and weights
    upper, lower = height - 0.4, height - 0.4 - block_h - gap  # tops of the two rows
    blocks = (  # matrix, left, top, colour, colour map and its scale, name, name above?
        (x, label_room, upper, ROLE_COLOURS["input"], None, None, "$X$", True),
        (scores, right, upper, "", "viridis", None, r"scores $\omega$", True),
        (weights, right, lower, "", "viridis", 1.0, r"weights $\alpha$", False),
        (context, label_room, lower, ROLE_COLOURS["output"], None, None, "$Z$", False),
    )
    with inch_figure(width, height) as (fig, ax):
        for top in (upper, lower):
            for i, label in enumerate(labels):
                colour = ROLE_COLOURS["query"] if i == query else "black"
                y = top - (i + 0.5) * cell
                write(ax, label_room - 0.05, y, label, ha="right", color=colour, size=text_pt)
        for matrix, left, top, colour, cmap, scale, name, above in blocks:
            w, h = shaded_block(ax, left, top, matrix, cell, colour, scale=scale, cmap=cmap)
            row = (left, top - (query + 1) * cell)  # the query's row, framed
            ax.add_patch(Rectangle(row, w, cell, fill=False, lw=3.6, edgecolor="white"))
            ax.add_patch(
                Rectangle(row, w, cell, fill=False, lw=2.2, edgecolor=ROLE_COLOURS["query"])
            )
            caption = f"{name} {tuple(matrix.shape)}"
            y, va = (top + 0.08, "bottom") if above else (top - h - 0.08, "top")
            write(ax, left + w / 2, y, caption, va=va, size=caption_pt)
        middle = upper - block_h / 2  # X X^T: from X to the scores
        x_end = label_room + d_in * cell
        arrow(ax, (x_end + 0.08, middle), (right - 0.08, middle))
        write(ax, (x_end + right) / 2, middle + 0.08, "$X X^{\\top}$", va="bottom", size=text_pt)
        centre = right + t * cell / 2  # softmax: from the scores down to the weights
        arrow(ax, (centre, upper - block_h - 0.06), (centre, lower + 0.06))
        write(ax, centre - 0.1, lower + gap / 2, "softmax\nper row", ha="right", size=text_pt)
        middle = lower - block_h / 2  # @ X: from the weights back to Z
        arrow(ax, (right - 0.08, middle), (x_end + 0.08, middle))
        write(ax, (x_end + right) / 2, middle + 0.08, "@ X", va="bottom", size=text_pt)
    return fig


def query_path_figure(
    q: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    labels: list[str],
    query: int,
    *,
    scaled: bool,
) -> Figure:
    """The figure of draw_context_vector (``scaled=False``) and draw_query_path.

    Two tables stacked, so that the figure stays under 5 inches wide and its 12- and
    13-point text reads at about 9 points when a phone scales it to 390 pixels. The upper
    table takes each key row to its score and its weight, drawn as a bar with its number
    just past the bar's end, so a short bar never runs into it; the bars are a dark neutral
    shade, not the inputs' grey, since weights have no role colour. The lower table holds
    the weighted value rows and, under a rule, their sum, the context vector.
    """
    t, d_k = keys.shape
    d_v = values.shape[1]
    scores = keys @ q  # (t, d_k) @ (d_k,) -> (t,)
    weights = torch.softmax(scores / (math.sqrt(d_k) if scaled else 1.0), dim=-1)  # (t,)
    weighted = weights[:, None] * values  # (t, 1) * (t, d_v) -> (t, d_v)
    context = weighted.sum(dim=0)  # (d_v,)
    q_name, k_name, v_name = ("q", "k", "v") if scaled else ("x", "x", "x")

    number_pt, label_pt = 12, 13
    cell = row = 0.48
    k_left = 1.05  # the key cells and, below, the weighted rows; token labels to their left
    score_x = k_left + d_k * cell + 0.42  # the score column (centre)
    bar_left = score_x + 0.5
    label_room = 0.55  # the weight's number, after its bar
    longest = 0.7  # the longest bar
    width = bar_left + longest + label_room + 0.05
    upper = 1.1 + t * row  # the upper table: headline, headers, one row per token
    lower = 0.6 + (t + 1) * row + 0.3  # the lower table: header, rows, rule and sum
    height = upper + lower

    def numbered_row(left: float, y: float, matrix: torch.Tensor, j: int, role: str) -> None:
        """Row j of ``matrix`` with its numbers, shaded on the scale of the whole matrix."""
        row_, colour, scale = matrix[j : j + 1], ROLE_COLOURS[role], float(matrix.abs().max())
        shaded_block(
            ax, left, y, row_, cell * 0.98, colour, numbers=True, scale=scale, number_pt=number_pt
        )

    def token(y: float, j: int) -> None:
        """The label of token j, left of a row whose top is at y; the query's in bold blue."""
        bold = j == query
        style = {"fontweight": "bold" if bold else "normal", "color": blue if bold else "black"}
        write(ax, k_left - 0.08, y - row / 2, labels[j], ha="right", size=label_pt, **style)

    # Chapter 1 has no keys or values yet: its key rows are the inputs, grey; its weighted
    # rows are the parts of the context vector that they sum to, sky blue.
    k_role, v_role = ("key", "value") if scaled else ("input", "output")
    blue, bar_face = ROLE_COLOURS["query"], tint("#000000", 0.7)  # weights: no role colour
    with inch_figure(width, height) as (fig, ax):
        numbers = ", ".join(f"{v:.2f}" for v in q.tolist())
        headline = f'query ${q_name}^{{({query})}}$ ("{labels[query]}") = [{numbers}]'
        write(ax, 0.05, height - 0.2, headline, ha="left", size=label_pt, color=blue)
        top = height - 1.0
        softmax = rf"softmax($\omega / \sqrt{{{d_k}}}$)" if scaled else "softmax"
        headers = (
            (k_left + d_k * cell / 2, f"{k_role} ${k_name}^{{(j)}}$"),
            (score_x, rf"$\omega_{{{query}j}}$"),
            (bar_left + (longest + label_room) / 2, rf"$\alpha_{{{query}j}}$" + "\n" + softmax),
        )
        for centre, text in headers:
            write(ax, centre, top + 0.32, text, size=label_pt)
        for j in range(t):
            y = top - j * row
            token(y, j)
            numbered_row(k_left, y - 0.02, keys, j, k_role)
            write(ax, score_x, y - row / 2, f"{float(scores[j]):.2f}", size=number_pt)
            arrow(ax, (score_x + 0.26, y - row / 2), (bar_left - 0.02, y - row / 2), lw=0.8)
            share = float(weights[j])
            bar = (longest * share / float(weights.max()), row - 0.14)
            ax.add_patch(Rectangle((bar_left, y - row + 0.07), *bar, facecolor=bar_face))
            end = bar_left + bar[0] + 0.04  # the number outside its bar, whatever its length
            write(ax, end, y - row / 2, f"{share:.3f}", ha="left", size=number_pt)

        top = lower - 0.6  # the lower table
        header = rf"$\alpha_{{{query}j}}\,{v_name}^{{(j)}}$"
        write(ax, k_left + d_v * cell / 2, top + 0.3, header, size=label_pt)
        row_name = "value" if scaled else "row"
        note = (
            f"each {row_name} ${v_name}^{{(j)}}$\ntimes its weight\n"
            rf"$\alpha_{{{query}j}}$; the rows" + f"\nadd up to $z^{{({query})}}$"
        )
        write(ax, k_left + d_v * cell + 0.2, top, note, ha="left", va="top", size=number_pt)
        for j in range(t):
            y = top - j * row
            token(y, j)
            numbered_row(k_left, y - 0.02, weighted, j, v_role)
        y = top - t * row - 0.12
        ax.plot([k_left, k_left + d_v * cell], [y + 0.06] * 2, color="black", lw=1)
        total = rf"sum: $z^{{({query})}}$"
        write(ax, k_left - 0.08, y - row / 2, total, ha="right", size=label_pt)
        numbered_row(k_left, y, context[None], 0, "output")
        summed = f"weights sum to {float(weights.sum()):.3f}"
        write(ax, width - 0.05, y - row / 2, summed, ha="right", size=number_pt)
    return fig
