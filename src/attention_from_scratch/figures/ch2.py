"""Chapter 2's diagrams: the three projections as blocks, and one query's scaled path."""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from matplotlib.figure import Figure

from .ch1 import query_path_figure
from .style import (
    ROLE_COLOURS,
    as_floats,
    inch_figure,
    shaded_block,
    token_labels,
    write,
)


def draw_projections(
    inputs: torch.Tensor,
    w_query: torch.Tensor,
    w_key: torch.Tensor,
    w_value: torch.Tensor,
) -> Figure:
    """Draw ``X W_q = Q``, ``X W_k = K``, ``X W_v = V`` as blocks, then ``Q K^T / sqrt(d_k)``.

    Every matrix is a block of cells, one cell per number, shaded darker for larger
    magnitudes and labelled with its letter and shape, so that the inner sizes of each
    product visibly match. ``X`` is drawn once, followed by the three weight matrices side by
    side and, after an equals sign, their three products in the same order. Inputs are grey,
    queries blue, keys orange, values green; the scaled scores, which have no role colour,
    take the heatmap colours (viridis) from 0 to their largest magnitude. The figure is under
    5 inches wide with text of 12 to 14 points, to stay readable on a phone.

    Args:
        inputs: ``X``, shape ``(t, d_in)``, 1 to 10 tokens.
        w_query: ``W_q``, shape ``(d_in, d_out)``, as stored in this book (``x @ W``); pass
            ``linear.weight.T`` for an ``nn.Linear``.
        w_key: ``W_k``, shape ``(d_in, d_out)``.
        w_value: ``W_v``, shape ``(d_in, d_out_v)``.

    Returns:
        The matplotlib ``Figure``, at most 4.9 inches wide: the three projections above, the
        scaled scores below.

    Used in chapter 2.
    """
    t, d_in = inputs.shape
    weights = {"w_query": w_query, "w_key": w_key, "w_value": w_value}
    weights = {name: as_floats(w) for name, w in weights.items()}
    x = as_floats(inputs)
    products = {
        "query": x @ weights["w_query"],  # (t, d_in) @ (d_in, d_out) -> (t, d_out)
        "key": x @ weights["w_key"],  # (t, d_in) @ (d_in, d_out) -> (t, d_out)
        "value": x @ weights["w_value"],  # (t, d_in) @ (d_in, d_out_v) -> (t, d_out_v)
    }
    d_k = products["key"].shape[1]
    scaled = products["query"] @ products["key"].T / math.sqrt(d_k)  # (t, t)

    # Under 5 inches wide, so that a phone scaling the figure to 390 pixels shows its 12- and
    # 14-point text at about 9 and 10 points: X is drawn once, and the three weight matrices
    # and their three products side by side, a small gap apart.
    big, small = 14, 12  # points: letters and signs; shapes and notes
    gap = 0.14  # between the three weight matrices, and between the three products
    widths = [w.shape[1] for w in weights.values()]
    cells_across = d_in + 2 * sum(widths)
    cell = min(0.24, (4.9 - 0.2 - 0.8 - 4 * gap) / cells_across)
    top_height = max(t, d_in) * cell + 1.25
    bottom_cell = min(0.24, (4.9 - 1.45) / (2 * t + d_k))
    bottom_height = max(t, d_k) * bottom_cell + 1.7
    width = 0.1 + cells_across * cell + 4 * gap + 0.8 + 0.1
    height = top_height + bottom_height + 0.1
    letters = {"query": ("Q", "W_q"), "key": ("K", "W_k"), "value": ("V", "W_v")}

    def labelled(
        left: float,
        top: float,
        matrix: torch.Tensor,
        c: float,
        colour: str,
        name: str,
        cmap: str | None = None,
    ) -> float:
        """A block with its name and shape below it; returns its width."""
        w, h = shaded_block(ax, left, top, matrix, c, colour, cmap=cmap)
        write(ax, left + w / 2, top - h - 0.08, f"${name}$", va="top", size=big)
        write(ax, left + w / 2, top - h - 0.46, str(tuple(matrix.shape)), va="top", size=small)
        return w

    with inch_figure(width, height) as (fig, ax):
        top = height - 0.45
        write(ax, 0.05, height - 0.18, "1. project: one product per role", ha="left", size=big)
        left = 0.1
        left += labelled(left, top, x, cell, ROLE_COLOURS["input"], "X")
        write(ax, left + 0.2, top - t * cell / 2, "@", size=big)
        left += 0.4
        for role, (_, w_name) in letters.items():
            matrix = weights[f"w_{role}"]
            left += labelled(left, top, matrix, cell, ROLE_COLOURS[role], w_name) + gap
        left -= gap
        write(ax, left + 0.2, top - t * cell / 2, "=", size=big)
        left += 0.4
        for role, (letter, _) in letters.items():
            left += labelled(left, top, products[role], cell, ROLE_COLOURS[role], letter) + gap
        top = bottom_height - 0.95
        write(
            ax,
            0.05,
            bottom_height - 0.15,
            rf"2. score: $Q K^\top / \sqrt{{d_k}}$, $d_k = {d_k}$",
            ha="left",
            size=big,
        )
        left = 0.1
        c = bottom_cell
        w = labelled(left, top, products["query"], c, ROLE_COLOURS["query"], "Q")
        write(ax, left + w + 0.15, top - t * c / 2, "@", size=big)
        left += w + 0.3
        w = labelled(left, top, products["key"].T, c, ROLE_COLOURS["key"], r"K^\top")
        write(ax, left + w + 0.45, top - t * c / 2, rf"$/\sqrt{{{d_k}}}$ =", size=big)
        left += w + 0.9
        # Scores have no role colour: the heatmap colours, as every score matrix in the book.
        w = labelled(left, top, scaled, c, "", r"\omega / \sqrt{d_k}", cmap="viridis")
        notes = "row i: query i\ncolumn j: key j"
        write(ax, left + w / 2, top + 0.08, notes, va="bottom", size=small)
    return fig


def draw_query_path(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    tokens: Iterable[str] | None = None,
    *,
    query: int = 1,
) -> Figure:
    """Draw one query's path through scaled dot-product attention, with its real numbers.

    As :func:`draw_context_vector`, with trainable projections: one row per token ``j`` in
    two tables, the upper with its key ``k^(j)``, the score ``omega_qj = q^(q) . k^(j)`` and
    the weight ``alpha_qj = softmax_j(omega_qj / sqrt(d_k))`` as a bar and a number, the
    lower with the weighted value ``alpha_qj v^(j)``, and under them their sum, ``z^(q)``.

    Args:
        queries: ``Q``, shape ``(t, d_out)``, 1 to 10 tokens and 1 to 4 features.
        keys: ``K``, the same shape.
        values: ``V``, shape ``(t, d_v)``, 1 to 4 features.
        tokens: the ``t`` tokens, as strings; numbered when omitted.
        query: the index ``q`` of the query token, from 0 to ``t - 1``.

    Returns:
        The matplotlib ``Figure``, at most 7 inches wide.

    Used in chapter 2.
    """
    queries, keys, values = as_floats(queries), as_floats(keys), as_floats(values)
    labels = token_labels(tokens, queries.shape[0])
    return query_path_figure(queries[query], keys, values, labels, query, scaled=True)
