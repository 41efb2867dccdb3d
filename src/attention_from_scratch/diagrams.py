"""Schematic diagrams of what the code does, one or more per chapter (chapters 1 to 7).

The data plots of ``plotting.py`` show numbers; these pictures show the steps: a query
reaching for every key, the blocks of a projection, a mask cutting the future off, heads
sliced out of one wide projection, strides over storage, a cache growing by one column, tiles
sweeping a matrix. Wherever a picture shows data it is drawn from the tensors and sizes the
chapter passes in, so it cannot drift from the code.

One visual language (``plotting.ROLE_COLOURS``): grey inputs, blue queries, orange keys,
green values, sky-blue outputs, vermillion for what a mask or dropout removes, purple for
what a cache keeps; heads take ``plotting.HEAD_COLOURS``. Every figure is at most 7 inches
wide (the book's column), its text at least 9 points; what cannot be drawn legibly at that
width is refused with a ``ValueError`` before any figure exists, and a call that fails leaves
no figure open. Like ``plotting``, this module imports matplotlib, so the package loads it
only when a chapter draws.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import pairwise
from typing import Any

import matplotlib.pyplot as plt
import torch
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, Rectangle
from matplotlib.text import Text

from ._checks import check_positive_int, check_tensor
from .plotting import (
    _COLUMN_INCHES,
    _FONT_PT,
    HEAD_COLOURS,
    ROLE_COLOURS,
    _check_labels,
    _check_title,
)

__all__ = [
    "draw_attention_matrices",
    "draw_causal_graph",
    "draw_context_vector",
    "draw_dropout",
    "draw_grouped_heads",
    "draw_head_split",
    "draw_induction_circuit",
    "draw_kv_cache",
    "draw_positions_added",
    "draw_projections",
    "draw_query_path",
    "draw_strided_read",
    "draw_tiles",
    "draw_wrapper_vs_batched",
    "plot_attention_lines",
]

# Text sizes (points): labels of blocks and tokens, and the numbers inside cells.
_LABEL_PT = 10
_CELL_PT = _FONT_PT
# A schematic with one row or column per token is legible up to this many tokens at the
# column's width; the line view, with two columns of labels 0.2 inches apart, up to 32.
_TOKENS_UP_TO = 10
_LINE_TOKENS_UP_TO = 32
_LINE_HEADS_UP_TO = 8
# The widest figure: a notebook saves figures with a tight bounding box padded by 0.1 inches
# on each side, so that a 6.75-inch figure becomes an image just under the 7-inch column.
_WIDTH = _COLUMN_INCHES - 0.25


# ---------------------------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------------------------


@contextmanager
def _figure(width: float, height: float) -> Iterator[tuple[Figure, Axes]]:
    """A figure whose single axes is measured in inches from its bottom-left corner.

    Drawing in inches makes the sizes in this module the sizes on the page. The figure is
    closed if drawing fails, so that a failed call leaves nothing open.
    """
    width = min(width, _WIDTH)
    fig = plt.figure(figsize=(width, height))
    try:
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set_xlim(0, width)
        ax.set_ylim(0, height)
        ax.axis("off")
        yield fig, ax
    except BaseException:
        plt.close(fig)  # a failed call leaves no half-drawn figure behind
        raise


def _tint(colour: str, strength: float) -> tuple[float, float, float]:
    """``colour`` mixed with white: 0 is white, 1 the colour itself."""
    strength = min(max(strength, 0.0), 1.0)
    return tuple(1 - strength * (1 - c) for c in to_rgb(colour))  # type: ignore[return-value]


def _ink(face: tuple[float, float, float]) -> str:
    """Black or white, whichever reads better on ``face`` (by its luminance)."""
    red, green, blue = face
    return "white" if 0.299 * red + 0.587 * green + 0.114 * blue < 0.5 else "black"


def _cell(ax: Axes, left: float, top: float, i: int, j: int, cell: float, **style: Any) -> None:
    """Square (i, j) of a grid of ``cell``-inch squares whose top-left corner is (left, top)."""
    ax.add_patch(Rectangle((left + j * cell, top - (i + 1) * cell), cell, cell, **style))


def _cell_text(
    ax: Axes, left: float, top: float, i: int, j: int, cell: float, text: str, **style: Any
) -> None:
    """``text`` in the centre of the square that :func:`_cell` draws."""
    _text(ax, left + (j + 0.5) * cell, top - (i + 0.5) * cell, text, **style)


def _frame(
    ax: Axes, left: float, top: float, rows: int, cols: int, cell: float, **style: Any
) -> None:
    """The outline of ``rows`` by ``cols`` squares of the grid of :func:`_cell`."""
    ax.add_patch(
        Rectangle((left, top - rows * cell), cols * cell, rows * cell, fill=False, **style)
    )


def _block(
    ax: Axes,
    left: float,
    top: float,
    values: torch.Tensor,
    cell: float,
    colour: str,
    *,
    numbers: bool = False,
    scale: float | None = None,
    cmap: str | None = None,
    number_pt: float = _CELL_PT,
) -> tuple[float, float]:
    """Draw a matrix as cells whose shade grows with ``|value|``; return (width, height).

    With ``cmap`` (scores and weights, which have no role colour: ``"viridis"``) the cells
    take that colour map on 0 to ``scale`` instead of shades of ``colour``.
    """
    rows, cols = values.shape
    scale = scale or float(values.abs().max()) or 1.0
    colour_map = plt.get_cmap(cmap) if cmap else None
    for i in range(rows):
        for j in range(cols):
            value = float(values[i, j])
            share = min(abs(value) / scale, 1.0)
            if colour_map is not None:
                face = tuple(colour_map(share)[:3])
            else:
                face = _tint(colour, 0.12 + 0.78 * share)
            _cell(ax, left, top, i, j, cell, facecolor=face, edgecolor="white", lw=0.8)
            if numbers:
                _cell_text(
                    ax, left, top, i, j, cell, f"{value:.2f}", size=number_pt, color=_ink(face)
                )
    _frame(ax, left, top, rows, cols, cell, lw=1.2)
    return cols * cell, rows * cell


def _arrow(
    ax: Axes,
    start: tuple[float, float],
    end: tuple[float, float],
    *,
    colour: str = "black",
    lw: float = 1.4,
    rad: float = 0.0,
    alpha: float = 1.0,
    style: str = "-|>",
    linestyle: str = "-",
) -> None:
    ax.add_patch(
        FancyArrowPatch(
            start,
            end,
            arrowstyle=style,
            mutation_scale=12,
            lw=lw,
            color=colour,
            alpha=alpha,
            connectionstyle=f"arc3,rad={rad}",
            linestyle=linestyle,
            shrinkA=2,
            shrinkB=2,
        )
    )


def _text(ax: Axes, x: float, y: float, text: str, *, size: float = _FONT_PT, **style: Any) -> Text:
    """Write ``text`` at (x, y) inches in ``size`` points.

    Centred on (x, y) unless ``style`` sets ``ha`` or ``va``; ``style`` holds any other
    property of matplotlib's ``Text`` (``color``, ``rotation``, ...).
    """
    return ax.text(x, y, text, **{"ha": "center", "va": "center", "fontsize": size, **style})


def _legend(ax: Axes, x: float, y: float, items: Sequence[tuple[str, str]]) -> None:
    """A row of coloured squares with their names, starting at (x, y) in inches."""
    for colour, name in items:
        ax.add_patch(Rectangle((x, y - 0.07), 0.16, 0.16, facecolor=colour, edgecolor="black"))
        text = _text(ax, x + 0.22, y + 0.01, name, ha="left")
        x += 0.4 + 0.075 * len(text.get_text())


def _check_tokens(name: str, tokens: object, size: int) -> list[str]:
    labels = _check_labels(name, tokens, size)
    return labels if labels is not None else [str(i) for i in range(size)]


def _check_count(name: str, value: object, up_to: int, what: str) -> int:
    value = check_positive_int(name, value)
    if value > up_to:
        raise ValueError(
            f"{name}: expected at most {up_to} {what} to draw legibly, got {value}; "
            f"draw a smaller example"
        )
    return value


def _check_index(name: str, value: object, size: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__} {value!r}")
    if not 0 <= value < size:
        raise ValueError(f"{name}: expected an index from 0 to {size - 1}, got {value}")
    return value


def _check_tokens_axis(name: str, x: torch.Tensor) -> None:
    """At most 10 tokens along the first axis of ``x``, one row or column each in a schematic."""
    if x.shape[0] > _TOKENS_UP_TO:
        raise ValueError(
            f"{name}: expected at most {_TOKENS_UP_TO} tokens to draw legibly, got {x.shape[0]} "
            f"(shape {tuple(x.shape)}); slice it first"
        )


def _check_features(name: str, x: torch.Tensor, up_to: int, dim: str) -> None:
    """At most 10 tokens (rows) and ``up_to`` features (columns ``dim``) in a (t, d) ``x``."""
    d = x.shape[1]
    _check_tokens_axis(name, x)
    if d > up_to:
        raise ValueError(
            f"{name}: expected at most {up_to} features to draw legibly, got {dim}={d}; "
            f"slice it, e.g. {name}[:, :{up_to}]"
        )


def _floats(x: torch.Tensor) -> torch.Tensor:
    """``x`` as float32 on the CPU, cut from autograd: what the figures compute with."""
    return x.detach().to("cpu", torch.float32)


def _check_weights(
    name: str, weights: object, ranks: Sequence[int], shapes: Sequence[str]
) -> torch.Tensor:
    """A floating tensor of probabilities: finite, in [0, 1]; returned on the CPU."""
    weights = check_tensor(name, weights, ranks=ranks, shape_names=shapes)
    if weights.shape[-1] == 0 or weights.numel() == 0:
        raise ValueError(f"{name}: expected at least one key, got shape {tuple(weights.shape)}")
    weights = _floats(weights)
    if not torch.isfinite(weights).all() or weights.min() < 0 or weights.max() > 1 + 1e-6:
        raise ValueError(
            f"{name}: expected attention weights, finite and between 0 and 1, got values from "
            f"{float(weights.min()):.3g} to {float(weights.max()):.3g}; apply softmax first"
        )
    return weights


# ---------------------------------------------------------------------------------------------
# Chapter 1
# ---------------------------------------------------------------------------------------------


def draw_context_vector(
    inputs: torch.Tensor, tokens: Iterable[str] | None = None, *, query: int = 1
) -> Figure:
    """Draw one query's path through simplified attention, with its real numbers.

    One row per token ``j``: its embedding ``x^(j)``, the score
    ``omega_qj = x^(q) . x^(j)``, the weight ``alpha_qj`` (softmax of the scores, as a bar and
    a number) and the weighted row ``alpha_qj x^(j)``; the bottom row adds those up into the
    context vector ``z^(q)``. The inputs, which play the keys and the values here, are
    shaded grey (their role colour), the query blue, the context vector sky blue; darker
    cells hold larger magnitudes.

    Args:
        inputs: the embeddings, shape ``(t, d_in)`` with 1 to 10 tokens and 1 to 4 features
            (the numbers are written in the cells).
        tokens: the ``t`` tokens, as strings; numbered when omitted.
        query: the index ``q`` of the query token, from 0 to ``t - 1``.

    Returns:
        The matplotlib ``Figure``, at most 7 inches wide.

    Raises:
        TypeError: ``inputs`` is not a floating-point tensor, a token is not a string, or
            ``query`` is not an int.
        ValueError: ``inputs`` is not 2-D, has more than 10 tokens or 4 features, or
            ``query`` is out of range.

    Used in chapter 1.
    """
    inputs = _check_cell_numbers("inputs", inputs, "(t, d_in)")
    t = inputs.shape[0]
    labels = _check_tokens("tokens", tokens, t)
    query = _check_index("query", query, t)
    return _draw_query_path(
        inputs[query], inputs, inputs, labels, query, scaled=False, legible=True
    )


def draw_query_path(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    tokens: Iterable[str] | None = None,
    *,
    query: int = 1,
) -> Figure:
    """Draw one query's path through scaled dot-product attention, with its real numbers.

    As :func:`draw_context_vector`, with trainable projections: one row per token ``j``, its
    key ``k^(j)``, the score ``omega_qj = q^(q) . k^(j)``, the weight
    ``alpha_qj = softmax_j(omega_qj / sqrt(d_k))`` as a bar and a number, and the weighted
    value ``alpha_qj v^(j)``; the bottom row adds them up into ``z^(q)``.

    Args:
        queries: ``Q``, shape ``(t, d_out)``, 1 to 10 tokens and 1 to 4 features.
        keys: ``K``, the same shape.
        values: ``V``, shape ``(t, d_v)``, 1 to 4 features.
        tokens: the ``t`` tokens, as strings; numbered when omitted.
        query: the index ``q`` of the query token, from 0 to ``t - 1``.

    Returns:
        The matplotlib ``Figure``, at most 7 inches wide.

    Raises:
        TypeError: a tensor is not floating-point, a token is not a string, or ``query`` is
            not an int.
        ValueError: a tensor is not 2-D or too large to write its numbers, the shapes do not
            match, or ``query`` is out of range.

    Used in chapter 2.
    """
    queries = _check_cell_numbers("queries", queries, "(t, d_out)")
    keys = _check_cell_numbers("keys", keys, "(t, d_out)")
    values = _check_cell_numbers("values", values, "(t, d_v)")
    if keys.shape != queries.shape:
        raise ValueError(
            f"keys: expected the shape of queries {tuple(queries.shape)}, got {tuple(keys.shape)}"
        )
    if values.shape[0] != keys.shape[0]:
        raise ValueError(
            f"values: expected one row per key ({keys.shape[0]}), got shape {tuple(values.shape)}"
        )
    labels = _check_tokens("tokens", tokens, queries.shape[0])
    query = _check_index("query", query, queries.shape[0])
    return _draw_query_path(queries[query], keys, values, labels, query, scaled=True, legible=True)


def _check_cell_numbers(name: str, x: object, shape: str) -> torch.Tensor:
    """A (t, d) tensor small enough to write every number in a cell; returned on the CPU."""
    x = check_tensor(name, x, ranks=(2,), shape_names=(shape,))
    d = x.shape[1]
    _check_tokens_axis(name, x)
    if not 1 <= d <= 4:
        raise ValueError(
            f"{name}: expected 1 to 4 features per token to write them in the cells, got "
            f"{d} (shape {tuple(x.shape)})"
        )
    return _floats(x)


def _draw_query_path(
    q: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    labels: list[str],
    query: int,
    *,
    scaled: bool,
    legible: bool = False,
) -> Figure:
    """The figure of draw_context_vector (``scaled=False``) and draw_query_path.

    ``legible``: 12-point numbers in a table without the "x v" column, about 5.3 inches
    wide, so that its numbers stay readable when a phone scales it to its width. The weight
    bars are neutral grey: weights have no role colour.
    """
    t, d_k = keys.shape
    d_v = values.shape[1]
    scores = keys @ q  # (t, d_k) @ (d_k,) -> (t,)
    weights = torch.softmax(scores / (math.sqrt(d_k) if scaled else 1.0), dim=-1)  # (t,)
    weighted = weights[:, None] * values  # (t, 1) * (t, d_v) -> (t, d_v)
    context = weighted.sum(dim=0)  # (d_v,)
    q_name, k_name, v_name = ("q", "k", "v") if scaled else ("x", "x", "x")

    number_pt, label_pt = (12, 13) if legible else (_CELL_PT, _LABEL_PT)
    cell, row = (0.5, 0.5) if legible else (0.42, 0.36)
    height = 1.15 + (t + 1) * row + 0.2
    k_left = 1.05  # the key cells
    score_x = k_left + d_k * cell + (0.45 if legible else 0.55)  # the score column (centre)
    bar_left = score_x + (0.5 if legible else 0.55)
    bar_width = 0.85 if legible else 0.95
    out_left = bar_left + bar_width + (0.3 if legible else 0.7)
    width = out_left + d_v * cell + 0.1

    def numbered_row(left: float, y: float, matrix: torch.Tensor, j: int, role: str) -> None:
        """Row j of ``matrix`` with its numbers, shaded on the scale of the whole matrix."""
        row, colour, scale = matrix[j : j + 1], ROLE_COLOURS[role], float(matrix.abs().max())
        _block(
            ax, left, y, row, cell * 0.98, colour, numbers=True, scale=scale, number_pt=number_pt
        )

    # Chapter 1 has no keys or values yet: its rows are the inputs, grey.
    k_role, v_role = ("key", "value") if scaled else ("input", "input")
    blue, bar_face = ROLE_COLOURS["query"], _tint("#404040", 0.45)  # weights: neutral grey
    with _figure(width, height) as (fig, ax):
        top = height - 0.95
        numbers = ", ".join(f"{v:.2f}" for v in q.tolist())
        headline = f'query ${q_name}^{{({query})}}$ ("{labels[query]}") = [{numbers}]'
        _text(ax, 0.05, height - 0.18, headline, ha="left", size=label_pt, color=blue)
        softmax = rf"softmax($\omega / \sqrt{{{d_k}}}$)" if scaled else "softmax"
        # What the score is; a legible figure leaves it to its caption, the column is narrow.
        dot = "\n" + rf"$= {q_name}^{{({query})}} \cdot {k_name}^{{(j)}}$"
        headers = (
            (k_left + d_k * cell / 2, f"{k_role} ${k_name}^{{(j)}}$"),
            (score_x, rf"$\omega_{{{query}j}}$" + ("" if legible else dot)),
            (bar_left + bar_width / 2, rf"$\alpha_{{{query}j}}$" + "\n" + softmax),
            (out_left + d_v * cell / 2, rf"$\alpha_{{{query}j}}\,{v_name}^{{(j)}}$"),
        )
        for centre, text in headers:
            _text(ax, centre, top + 0.32, text, size=label_pt)
        for j in range(t):
            y = top - j * row
            bold = j == query  # the query's own row
            style = {"fontweight": "bold" if bold else "normal", "color": blue if bold else "black"}
            _text(ax, k_left - 0.08, y - row / 2, labels[j], ha="right", size=label_pt, **style)
            numbered_row(k_left, y - 0.02, keys, j, k_role)
            _text(ax, score_x, y - row / 2, f"{float(scores[j]):.2f}", size=number_pt)
            _arrow(ax, (score_x + 0.28, y - row / 2), (bar_left - 0.02, y - row / 2), lw=0.8)
            share = float(weights[j])
            bar = (bar_width * share / float(weights.max()), row - 0.14)
            ax.add_patch(Rectangle((bar_left, y - row + 0.07), *bar, facecolor=bar_face))
            _text(ax, bar_left + 0.04, y - row / 2, f"{share:.3f}", ha="left", size=number_pt)
            if not legible:
                _text(ax, out_left - 0.35, y - row / 2, rf"$\times\,{v_name}^{{(j)}}$")
            numbered_row(out_left, y - 0.02, weighted, j, v_role)
        y = top - t * row - 0.12
        ax.plot([out_left, out_left + d_v * cell], [y + 0.06] * 2, color="black", lw=1)
        total = rf"sum: $z^{{({query})}}$"
        _text(ax, out_left - 0.1, y - row / 2, total, ha="right", size=label_pt, color="black")
        numbered_row(out_left, y, context[None], 0, "output")
        summed = f"weights sum to {float(weights.sum()):.3f}"
        if legible:  # under the keys and scores, clear of the sum's label
            _text(ax, 0.05, y - row / 2, summed, ha="left", size=number_pt)
        else:
            _text(ax, bar_left - 0.8, y - row / 2, summed, ha="left")
    return fig


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

    Raises:
        TypeError: ``inputs`` is not a floating-point tensor, a token is not a string, or
            ``query`` is not an int.
        ValueError: ``inputs`` is not 2-D or too large to draw, or ``query`` is out of range.

    Used in chapter 1.
    """
    inputs = check_tensor("inputs", inputs, ranks=(2,), shape_names=("(t, d_in)",))
    _check_features("inputs", inputs, 8, "d_in")
    t, d_in = inputs.shape
    labels = _check_tokens("tokens", tokens, t)
    query = _check_index("query", query, t)
    x = _floats(inputs)
    scores = x @ x.T  # (t, d_in) @ (d_in, t) -> (t, t)
    weights = torch.softmax(scores, dim=-1)  # (t, t)
    context = weights @ x  # (t, t) @ (t, d_in) -> (t, d_in)
    longest = max(len(label) for label in labels)
    label_room = 0.15 + 0.08 * longest
    arrow_room = 0.9
    cell = min(0.32, (_WIDTH - 0.2 - label_room - arrow_room) / (d_in + t))
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
    with _figure(width, height) as (fig, ax):
        for top in (upper, lower):
            for i, label in enumerate(labels):
                colour = ROLE_COLOURS["query"] if i == query else "black"
                y = top - (i + 0.5) * cell
                _text(ax, label_room - 0.05, y, label, ha="right", color=colour)
        for matrix, left, top, colour, cmap, scale, name, above in blocks:
            w, h = _block(ax, left, top, matrix, cell, colour, scale=scale, cmap=cmap)
            row = (left, top - (query + 1) * cell)  # the query's row, framed
            ax.add_patch(Rectangle(row, w, cell, fill=False, lw=3.6, edgecolor="white"))
            ax.add_patch(
                Rectangle(row, w, cell, fill=False, lw=2.2, edgecolor=ROLE_COLOURS["query"])
            )
            caption = f"{name} {tuple(matrix.shape)}"
            y, va = (top + 0.08, "bottom") if above else (top - h - 0.08, "top")
            _text(ax, left + w / 2, y, caption, va=va, size=_LABEL_PT)
        middle = upper - block_h / 2  # X X^T: from X to the scores
        x_end = label_room + d_in * cell
        _arrow(ax, (x_end + 0.08, middle), (right - 0.08, middle))
        _text(ax, (x_end + right) / 2, middle + 0.08, "$X X^{\\top}$", va="bottom")
        centre = right + t * cell / 2  # softmax: from the scores down to the weights
        _arrow(ax, (centre, upper - block_h - 0.06), (centre, lower + 0.06))
        _text(ax, centre - 0.1, lower + gap / 2, "softmax\nper row", ha="right")
        middle = lower - block_h / 2  # @ X: from the weights back to Z
        _arrow(ax, (right - 0.08, middle), (x_end + 0.08, middle))
        _text(ax, (x_end + right) / 2, middle + 0.08, "@ X", va="bottom")
    return fig


# ---------------------------------------------------------------------------------------------
# Chapter 2
# ---------------------------------------------------------------------------------------------


def draw_projections(
    inputs: torch.Tensor,
    w_query: torch.Tensor,
    w_key: torch.Tensor,
    w_value: torch.Tensor,
) -> Figure:
    """Draw ``X W_q = Q``, ``X W_k = K``, ``X W_v = V`` as blocks, then ``Q K^T / sqrt(d_k)``.

    Every matrix is a block of cells, one cell per number, shaded darker for larger
    magnitudes and labelled with its letter and shape, so that the inner sizes of each
    product visibly match. Inputs are grey, queries blue, keys orange, values green; the
    scaled scores, which have no role colour, take the heatmap colours (viridis) from 0 to
    their largest magnitude. Its text is 12 to 14 points, to stay readable on a phone.

    Args:
        inputs: ``X``, shape ``(t, d_in)``, 1 to 10 tokens.
        w_query: ``W_q``, shape ``(d_in, d_out)``, as stored in this book (``x @ W``); pass
            ``linear.weight.T`` for an ``nn.Linear``.
        w_key: ``W_k``, shape ``(d_in, d_out)``.
        w_value: ``W_v``, shape ``(d_in, d_out_v)``.

    Returns:
        The matplotlib ``Figure``, at most 7 inches wide: the three projections above, the
        scaled scores below.

    Raises:
        TypeError: an argument is not a floating-point tensor.
        ValueError: a shape does not fit (wrong rank, ``d_in`` differs, ``W_q`` and ``W_k``
            differ), or there are more than 10 tokens or more than 8 features.

    Used in chapter 2.
    """
    inputs = check_tensor("inputs", inputs, ranks=(2,), shape_names=("(t, d_in)",))
    t, d_in = inputs.shape
    _check_tokens_axis("inputs", inputs)
    weights = {}
    for name, w in (("w_query", w_query), ("w_key", w_key), ("w_value", w_value)):
        weights[name] = _floats(check_tensor(name, w, ranks=(2,), shape_names=("(d_in, d_out)",)))
        if weights[name].shape[0] != d_in:
            raise ValueError(
                f"{name}: expected shape (d_in, d_out) with d_in={d_in} like inputs, got shape "
                f"{tuple(weights[name].shape)}; for an nn.Linear pass linear.weight.T"
            )
    if weights["w_query"].shape != weights["w_key"].shape:
        raise ValueError(
            f"w_key: expected the shape of w_query {tuple(weights['w_query'].shape)} so that "
            f"queries and keys can be dotted, got {tuple(weights['w_key'].shape)}"
        )
    sizes = {"inputs": d_in, **{name: w.shape[1] for name, w in weights.items()}}
    for name, size in sizes.items():
        if size > 8:
            raise ValueError(
                f"{name}: expected at most 8 columns to draw legibly, got {size}; draw a "
                f"small example"
            )
    x = _floats(inputs)
    products = {
        "query": x @ weights["w_query"],  # (t, d_in) @ (d_in, d_out) -> (t, d_out)
        "key": x @ weights["w_key"],  # (t, d_in) @ (d_in, d_out) -> (t, d_out)
        "value": x @ weights["w_value"],  # (t, d_in) @ (d_in, d_out_v) -> (t, d_out_v)
    }
    d_k = products["key"].shape[1]
    scaled = products["query"] @ products["key"].T / math.sqrt(d_k)  # (t, t)

    # Fixed room for the "X @" and "=" signs and the gaps (3.75 inches), the rest for cells.
    cells_across = d_in + sum(2 * w.shape[1] for w in weights.values())
    cell = min(0.3, (_WIDTH - 0.3 - 3.75) / cells_across)
    top_height = t * cell + 1.2
    bottom_cell = min(0.3, (_WIDTH - 3.5) / (2 * t + d_k))
    bottom_height = max(t, d_k) * bottom_cell + 1.2
    big, small = 14, 12  # points: letters and signs; shapes and notes
    width = _WIDTH
    height = top_height + bottom_height + 0.2
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
        w, h = _block(ax, left, top, matrix, c, colour, cmap=cmap)
        _text(ax, left + w / 2, top - h - 0.08, f"${name}$", va="top", size=big)
        _text(ax, left + w / 2, top - h - 0.4, str(tuple(matrix.shape)), va="top", size=small)
        return w

    with _figure(width, height) as (fig, ax):
        top = height - 0.45
        _text(ax, 0.05, height - 0.18, "1. project: one product per role", ha="left", size=big)
        left = 0.1
        left += labelled(left, top, x, cell, ROLE_COLOURS["input"], "X") + 0.35
        for role, (letter, w_name) in letters.items():
            matrix = weights[f"w_{role}"]
            _text(ax, left - 0.02, top - t * cell / 2, "X @", ha="left", size=big)
            left += 0.52
            w = labelled(left, top, matrix, cell, ROLE_COLOURS[role], w_name)
            _text(ax, left + w + 0.14, top - t * cell / 2, "=", size=big)
            left += w + 0.28
            left += labelled(left, top, products[role], cell, ROLE_COLOURS[role], letter) + 0.35
        top = bottom_height - 0.45
        _text(
            ax,
            0.05,
            bottom_height - 0.15,
            rf"2. score: $Q K^\top / \sqrt{{d_k}}$, $d_k = {d_k}$",
            ha="left",
            size=big,
        )
        left = 0.3
        c = bottom_cell
        w = labelled(left, top, products["query"], c, ROLE_COLOURS["query"], "Q")
        _text(ax, left + w + 0.17, top - t * c / 2, "@", size=big)
        left += w + 0.34
        w = labelled(left, top, products["key"].T, c, ROLE_COLOURS["key"], r"K^\top")
        _text(ax, left + w + 0.5, top - t * c / 2, rf"$/\sqrt{{{d_k}}}$ =", size=big)
        left += w + 1.0
        # Scores have no role colour: the heatmap colours, as every score matrix in the book.
        w = labelled(left, top, scaled, c, "", r"\omega / \sqrt{d_k}", cmap="viridis")
        _text(ax, left + w + 0.1, top - c / 2, "row i:\nquery i", ha="left", va="top", size=small)
        notes = (left + w + 0.1, top - 2.5 * c)
        _text(ax, *notes, "column j:\nkey j", ha="left", va="top", size=small)
    return fig


# ---------------------------------------------------------------------------------------------
# Chapter 3
# ---------------------------------------------------------------------------------------------


def draw_causal_graph(mask: torch.Tensor, tokens: Iterable[str] | None = None) -> Figure:
    """Draw a causal mask above the directed graph of who may send to whom.

    Top, the mask: row ``i`` is the query (the receiver), column ``j`` the key (the sender);
    hidden entries (``True``) are vermillion with a cross. Below, the tokens as numbered
    nodes in reading order: a green arc (messages are values) from ``j`` to ``i`` above the
    nodes for every pair the mask allows (earlier to later, a loop for ``j = i``), and a
    dashed vermillion arc below for every pair it forbids (later to earlier).

    Args:
        mask: a boolean ``(t, t)`` tensor, ``True`` where attention is forbidden (the book's
            convention, e.g. ``causal_mask(t)``), with 2 to 10 tokens.
        tokens: the ``t`` tokens, as strings; numbered when omitted.

    Returns:
        The matplotlib ``Figure``, 4.5 inches wide.

    Raises:
        TypeError: ``mask`` is not a boolean tensor, or a token is not a string.
        ValueError: ``mask`` is not square, or has fewer than 2 or more than 10 tokens.

    Used in chapter 3.
    """
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask: expected a boolean torch.Tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask: expected a boolean tensor (True = forbidden), got {mask.dtype}; "
            f"e.g. causal_mask(t)"
        )
    if mask.dim() != 2 or mask.shape[0] != mask.shape[1] or mask.shape[0] < 2:
        raise ValueError(
            f"mask: expected a square (t, t) mask with t >= 2, got shape {tuple(mask.shape)}"
        )
    from matplotlib.path import Path  # only this diagram draws a path
    from matplotlib.transforms import Affine2D

    t = mask.shape[0]
    _check_tokens_axis("mask", mask)
    labels = _check_tokens("tokens", tokens, t)
    hidden = mask.detach().cpu()
    # Stacked, the mask above its graph, so that the figure stays narrow enough to read on a
    # phone. Edges carry messages, which are values: green; what the mask removes: vermillion.
    message, cut = ROLE_COLOURS["value"], ROLE_COLOURS["mask"]
    cell = 0.3
    width = 4.5
    spacing = (width - 0.9) / (t - 1)
    arc = 0.4 * (t - 1) * spacing / 2  # how far the longest arc bends from its chord
    graph_height = 2 * arc + 1.6
    height = t * cell + 0.95 + graph_height
    with _figure(width, height) as (fig, ax):
        top = height - 0.45
        left = (width - t * cell) / 2 + 0.3
        for i in range(t):
            _text(ax, left - 0.06, top - (i + 0.5) * cell, labels[i], ha="right")
            for j in range(t):
                forbidden = bool(hidden[i, j])
                face = cut if forbidden else "#e4e4e4"
                _cell(ax, left, top, i, j, cell, facecolor=face, edgecolor="white")
                if forbidden:
                    _cell_text(ax, left, top, i, j, cell, "×", color="white")
        for j in range(t):
            _text(ax, left + (j + 0.5) * cell, top + 0.04, str(j), va="bottom")
        centre, bottom = left + t * cell / 2, top - t * cell
        _text(ax, centre, top + 0.25, "key j (sender)", va="baseline")
        _text(ax, centre, bottom - 0.08, "row i: query (receiver); × = forbidden", va="top")
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
                                path=loop, arrowstyle="-|>", mutation_scale=9, lw=1.3,
                                color=message,
                            )
                        )  # fmt: skip
                    continue
                y = base + (0.14 if allowed else -0.6)  # forbidden: below the labels
                step = 0.05 if allowed else 0.0  # clear of the loop on the node
                _arrow(
                    ax,
                    (xs[j] + step, y),
                    (xs[i] - step, y),
                    colour=message if allowed else cut,
                    rad=-0.4,
                    lw=1.3 if allowed else 0.9,
                    alpha=0.9 if allowed else 0.55,
                    linestyle="-" if allowed else (0, (3, 2)),
                )
        for i in range(t):
            ax.add_patch(
                plt.Circle((xs[i], base), 0.13, facecolor="white", edgecolor="black", zorder=3)
            )
            _text(ax, xs[i], base, str(i), zorder=4)
            _text(ax, xs[i], base - 0.2, labels[i], va="top", rotation=30, zorder=4)
        mid = (xs[0] + xs[-1]) / 2
        _text(ax, mid, base + arc + 0.35, "allowed: earlier → later, and itself", va="baseline")
        _text(ax, mid, 0.08, "forbidden: later → earlier", va="baseline", color=cut)
    return fig


def draw_dropout(
    weights: torch.Tensor,
    dropped: torch.Tensor,
    tokens: Iterable[str] | None = None,
    *,
    p: float,
) -> Figure:
    """Draw one query's weights before and after dropout, and the value rows they mix.

    Top row: the weights ``alpha_ij`` of one query, as grey bars with their numbers. Middle row:
    the same weights after dropout; the zeroed ones are crossed out in vermillion, the kept
    ones are scaled by ``1 / (1 - p)``. Bottom: the value rows ``v^(j)`` in green, faded
    where their weight was dropped, and the context vector as their weighted sum.

    Args:
        weights: the weights of one query, shape ``(s,)``, 1 to 10 keys.
        dropped: the same weights after ``nn.Dropout(p)`` in training mode, shape ``(s,)``.
        tokens: the ``s`` key tokens, as strings; numbered when omitted.
        p: the dropout probability that made ``dropped``, in (0, 1).

    Returns:
        The matplotlib ``Figure``, at most 7 inches wide.

    Raises:
        TypeError: a tensor is not floating-point, ``p`` is not a number, or a token is not
            a string.
        ValueError: shapes differ or are not ``(s,)``, more than 10 keys, ``p`` is not in
            (0, 1), or ``dropped`` is not ``weights`` with some entries zeroed and the rest
            scaled by ``1 / (1 - p)``.

    Used in chapter 3.
    """
    weights = _check_weights("weights", weights, (1,), ("(s,)",))
    dropped = _floats(check_tensor("dropped", dropped, ranks=(1,), shape_names=("(s,)",)))
    if dropped.shape != weights.shape:
        raise ValueError(
            f"dropped: expected the shape of weights {tuple(weights.shape)}, got "
            f"{tuple(dropped.shape)}"
        )
    if isinstance(p, bool) or not isinstance(p, (int, float)):
        raise TypeError(f"p: expected a float in (0, 1), got {type(p).__name__} {p!r}")
    if not 0.0 < float(p) < 1.0:
        raise ValueError(f"p: expected a float in (0, 1), got {p}")
    s = weights.shape[0]
    _check_tokens_axis("weights", weights)
    labels = _check_tokens("tokens", tokens, s)
    kept = dropped != 0
    if not torch.allclose(dropped[kept], weights[kept] / (1 - p), rtol=1e-4, atol=1e-6):
        raise ValueError(
            f"dropped: expected weights with some entries zeroed and the others scaled by "
            f"1 / (1 - p) = {1 / (1 - p):.3g}, got values that are not; pass the output of "
            f"nn.Dropout(p) applied to weights"
        )
    spacing = min(0.5, (_WIDTH - 1.6) / s)  # narrow: legible on a phone
    left = 1.45
    width = max(left + s * spacing + 0.15, 4.5)
    middle = width / 2
    height = 4.1
    bar_height = 0.55
    top_scale = float(dropped.max()) or 1.0
    with _figure(width, height) as (fig, ax):
        rows = (
            (3.3, weights, r"weights $\alpha_{ij}$"),
            (2.25, dropped, f"after dropout\n(p = {p:g})"),
        )
        for base, row, name in rows:
            _text(ax, left - 0.15, base + bar_height / 2, name, ha="right")
            for j in range(s):
                centre = left + (j + 0.5) * spacing
                value = float(row[j])
                zero = row is dropped and not bool(kept[j])
                bar = max(bar_height * value / top_scale, 0.02)
                face = "#8c8c8c"  # weights: neutral grey, no role colour
                ax.add_patch(
                    Rectangle((centre - spacing * 0.3, base), spacing * 0.6, bar, facecolor=face)
                )
                ink = ROLE_COLOURS["mask"] if zero else "black"
                _text(ax, centre, base - 0.04, f"{value:.2f}", va="top", size=_CELL_PT, color=ink)
                if zero:
                    _text(ax, centre, base + 0.2, "×", size=16, color=ROLE_COLOURS["mask"])
        _text(
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
                    facecolor=_tint(ROLE_COLOURS["value"], 0.75 if alive else 0.12),
                    edgecolor=edge,
                    linestyle="-" if alive else "--",
                )
            )
            ink = "white" if alive else "#999999"
            _text(ax, centre, 1.24, f"$v^{{({j})}}$", size=_LABEL_PT, color=ink)
            _text(ax, centre, 0.98, labels[j], va="top", ha="right", rotation=40)
            lw, dashes = (1.4, "-") if alive else (0.8, (0, (2, 2)))
            _arrow(ax, (centre, 2.03), (centre, 1.46), lw=lw, colour=edge, linestyle=dashes)
        _text(ax, left - 0.15, 1.24, "value rows", ha="right")
        _text(
            ax,
            middle,
            0.2,
            "context vector\n"
            r"$z = \sum_j$ (weight after dropout) $\cdot\, v^{(j)}$",
            size=_LABEL_PT,
            color="black",
        )
    return fig


# ---------------------------------------------------------------------------------------------
# Chapter 4
# ---------------------------------------------------------------------------------------------


def _head_cells(
    ax: Axes,
    left: float,
    top: float,
    rows: int,
    cell: float,
    heads_of: list[int],
    features: Sequence[int] | None = None,
) -> None:
    """A grid of ``rows`` rows whose column c is coloured by head heads_of[c].

    With ``features``, each cell of column c is numbered features[c], the feature it holds.
    """
    for i in range(rows):
        for j, head in enumerate(heads_of):
            if features is not None:
                _cell_text(ax, left, top, i, j, cell, str(features[j]), size=_CELL_PT)
            face = _tint(HEAD_COLOURS[head % 8], 0.55)
            _cell(ax, left, top, i, j, cell, facecolor=face, edgecolor="white", lw=0.8)
    _frame(ax, left, top, rows, len(heads_of), cell, lw=1.0)


def draw_head_split(b: int, t: int, d_out: int, num_heads: int) -> Figure:
    """Draw the head split ``(b, t, d_out) -> (b, t, h, d_h) -> (b, h, t, d_h)`` and back.

    One sequence of the batch is drawn (the ``b`` sequences are split alike). Each feature
    column keeps its head's colour and number through the steps, and each picture draws its
    outer axis as separate blocks: ``view`` cuts each token's ``d_out`` numbers into ``h``
    groups of ``d_h`` (one strip per token, tokens outside, heads inside);
    ``transpose(1, 2)`` swaps the nesting, so that each head is a ``(t, d_h)`` matrix of its
    own (one block per head, stacked). The arrows below run the merge: ``transpose(1, 2)``,
    ``.contiguous()``, ``view(b, t, d_out)``.

    Args:
        b: the batch size (written in the shapes).
        t: the number of tokens, 1 to 10.
        d_out: the output size, a multiple of ``num_heads``, at most 16.
        num_heads: the number of heads ``h``, 1 to 8.

    Returns:
        The matplotlib ``Figure``, at most 7 inches wide.

    Raises:
        TypeError: an argument is not an int.
        ValueError: an argument is not positive, too large to draw, or ``d_out`` is not a
            multiple of ``num_heads``.

    Used in chapter 4.
    """
    b = check_positive_int("b", b)
    t = _check_count("t", t, _TOKENS_UP_TO, "tokens")
    d_out = _check_count("d_out", d_out, 16, "features")
    num_heads = _check_count("num_heads", num_heads, 8, "heads")
    if d_out % num_heads:
        raise ValueError(f"d_out: expected a multiple of num_heads={num_heads}, got d_out={d_out}")
    d_h = d_out // num_heads
    heads_of = [c // d_h for c in range(d_out)]
    # About 4.5 inches wide, so that a phone (about 4 inches) scales the 10-point text down
    # little: the margins, the two arrows' gaps (as wide as their labels) and the head labels
    # take 2.4 inches, the three pictures' cells the rest.
    view_gap, transpose_gap, head_label = 0.55, 1.12, 0.6
    columns = 2 * d_out + d_h + 0.5 * (num_heads - 1)  # the pictures' widths, in cells
    cell = min(0.3, 2.15 / columns, 2.4 / t, 3.6 / (num_heads * t))
    numbered = cell >= (0.19 if d_out <= 10 else 0.25)  # room for the feature numbers
    gap = cell * 0.5  # between the heads of one token
    row_gap = cell * 0.3  # between the tokens of (t, h, d_h)
    block_gap = cell * 0.8  # between the heads of (h, t, d_h)
    stacked = num_heads * t * cell + (num_heads - 1) * block_gap
    span = num_heads * d_h * cell + (num_heads - 1) * gap  # the (t, h, d_h) picture
    width = 0.12 + d_out * cell + view_gap + span + transpose_gap + d_h * cell + head_label
    # The arrows' labels reach 0.6 inches above and 0.8 below the middle of the first rows;
    # the shapes' labels stay clear of them above.
    shape_y = max(0.12, 0.62 - t * cell / 2)  # the shapes' labels, above the pictures' top
    below = max(t * cell + (t - 1) * row_gap, stacked, t * cell / 2 + 0.8) + 0.1
    height = shape_y + 0.45 + below

    def cells(left: float, top: float, rows: int, heads: list[int], first: int) -> None:
        """``_head_cells``, its columns numbered from feature ``first`` on if there is room."""
        _head_cells(ax, left, top, rows, cell, heads)
        for i in range(rows) if numbered else ():
            for j in range(len(heads)):
                _cell_text(ax, left, top, i, j, cell, str(first + j), size=_LABEL_PT)

    with _figure(width, height) as (fig, ax):
        top = height - shape_y - 0.45
        # 1. (t, d_out)
        left = 0.12
        cells(left, top, t, heads_of, 0)
        shape = f"(b, t, d_out)\n= ({b}, {t}, {d_out})"
        _text(ax, left + d_out * cell / 2, top + shape_y, shape, va="bottom", size=_LABEL_PT)
        ends = [left + d_out * cell]
        # 2. (t, h, d_h): one strip per token, cut into its heads' groups
        left = ends[0] + view_gap
        for token in range(t):
            y = top - token * (cell + row_gap)
            for head in range(num_heads):
                x0 = left + head * (d_h * cell + gap)
                cells(x0, y, 1, [head] * d_h, head * d_h)
        shape = f"(b, t, h, d_h)\n= ({b}, {t}, {num_heads}, {d_h})"
        _text(ax, left + span / 2, top + shape_y, shape, va="bottom", size=_LABEL_PT)
        starts = [left]
        ends.append(left + span)
        # 3. (h, t, d_h): one (t, d_h) block per head, stacked
        left = ends[1] + transpose_gap
        for head in range(num_heads):
            y = top - head * (t * cell + block_gap)
            cells(left, y, t, [head] * d_h, head * d_h)
            _text(
                ax,
                left + d_h * cell + 0.08,
                y - t * cell / 2,
                f"head {head}",
                ha="left",
                color=HEAD_COLOURS[head % 8],
                size=_LABEL_PT,
            )
        shape = f"(b, h, t, d_h)\n= ({b}, {num_heads}, {t}, {d_h})"
        _text(ax, left + d_h * cell / 2, top + shape_y, shape, va="bottom", size=_LABEL_PT)
        starts.append(left)
        middle = top - t * cell / 2
        for (x0, x1), split, merge in (
            ((ends[0], starts[0]), "view", "view"),
            ((ends[1], starts[1]), "transpose\n(1, 2)", "transpose\n(1, 2)\n.contiguous()"),
        ):
            _arrow(ax, (x0 + 0.06, middle + 0.2), (x1 - 0.06, middle + 0.2))
            _text(ax, (x0 + x1) / 2, middle + 0.26, split, va="bottom", size=_LABEL_PT)
            _arrow(ax, (x1 - 0.06, middle - 0.2), (x0 + 0.06, middle - 0.2), colour="#555555")
            grey = {"va": "top", "color": "#555555", "size": _LABEL_PT}
            _text(ax, (x0 + x1) / 2, middle - 0.26, merge, **grey)
    return fig


def draw_wrapper_vs_batched(d_in: int, d_h: int, num_heads: int) -> Figure:
    """Draw the wrapper's separate heads beside the batched module's one wide projection.

    Left, ``MultiHeadAttentionWrapper``: ``h`` separate heads, each with its own
    ``(d_in, d_h)`` query, key and value weights, run one after another, their outputs
    concatenated. Right, ``MultiHeadAttention``: one ``(d_in, h * d_h)`` matrix per role
    whose column blocks are the heads' matrices side by side, one product for all heads,
    then split. Matrices are coloured by head and named by role.

    Args:
        d_in: the input size, 1 to 8.
        d_h: the size of one head, 1 to 8.
        num_heads: the number of heads ``h``, 1 to 4.

    Returns:
        The matplotlib ``Figure``, at most 7 inches wide.

    Raises:
        TypeError: an argument is not an int.
        ValueError: an argument is not positive or too large to draw.

    Used in chapter 4.
    """
    d_in = _check_count("d_in", d_in, 8, "input features")
    d_h = _check_count("d_h", d_h, 8, "features per head")
    num_heads = _check_count("num_heads", num_heads, 4, "heads")
    d_out = num_heads * d_h
    cell = min(0.22, 1.3 / (3 * d_h), 2.0 / (3 * d_out))
    names = ("W_q", "W_k", "W_v")
    head_height = d_in * cell + 0.45
    height = num_heads * head_height + 1.35
    width = _WIDTH
    split = 3.45

    def matrix(left: float, top: float, cols_of: list[int], name: str) -> float:
        """A weight matrix, its column c coloured by head cols_of[c]; returns its width."""
        _head_cells(ax, left, top, d_in, cell, cols_of)
        _text(
            ax, left + len(cols_of) * cell / 2, top + 0.03, f"${name}$", va="bottom", size=_LABEL_PT
        )
        return len(cols_of) * cell

    with _figure(width, height) as (fig, ax):
        for centre, text in (
            (split / 2, "MultiHeadAttentionWrapper:\nh heads, each with its own weights"),
            ((split + width) / 2, "MultiHeadAttention:\none wide matrix per role"),
        ):
            _text(ax, centre, height - 0.1, text, va="top")
        ax.plot([split - 0.1] * 2, [0.1, height - 0.1], color="#bbbbbb", lw=1)
        top = height - 0.8
        for head in range(num_heads):
            y = top - head * head_height
            middle, colour = y - d_in * cell / 2, HEAD_COLOURS[head % 8]
            _text(ax, 0.05, middle, f"head {head}", ha="left", color=colour)
            left = 0.7
            for name in names:
                left += matrix(left, y, [head] * d_h, name) + 0.25
            _arrow(ax, (left - 0.15, middle), (left + 0.25, middle))
            _text(ax, left + 0.3, middle, f"(b, t, {d_h})", ha="left", color=colour)
        _text(
            ax,
            split / 2,
            0.1,
            f"each $W$: $(d_{{in}}, d_h) = ({d_in}, {d_h})$;\n"
            f"outputs concatenated: (b, t, {d_out})",
            va="bottom",
        )
        left = split + 0.2
        cols = [c // d_h for c in range(d_out)]
        for name in names:
            left += matrix(left, top, cols, name) + 0.25
        _text(
            ax,
            (split + width) / 2,
            top - d_in * cell - 0.2,
            f"each $W$: $(d_{{in}}, h \\cdot d_h) = ({d_in}, {d_out})$,\n"
            "the heads' matrices side by side:\none product per role for all heads,\n"
            f"then view and transpose: (b, {num_heads}, t, {d_h})",
            va="top",
        )
    return fig


def plot_attention_lines(
    weights: torch.Tensor,
    tokens: Iterable[str] | None = None,
    *,
    key_tokens: Iterable[str] | None = None,
    head_names: Iterable[str] | None = None,
    title: str | None = None,
) -> Figure:
    """Draw attention as lines from each query to each key (a static "head view").

    Each panel is one head: the query tokens in a column on the left, the key tokens on the
    right, and a line from query ``i`` to key ``j`` whose opacity is the weight
    ``alpha_ij`` (a weight of 1 is opaque, 0 invisible) in the head's colour. Where a
    heatmap shows the numbers, this view shows at a glance where each token looks.

    Args:
        weights: one head ``(t, s)`` or several ``(h, t, s)``, with 1 to 8 heads and 1 to 32
            tokens per side; softmax weights, finite and between 0 and 1.
        tokens: the ``t`` query tokens, as strings (numbered when omitted); also the keys
            when ``key_tokens`` is omitted and ``s = t``.
        key_tokens: the ``s`` key tokens, for cross-attention.
        head_names: a title for each panel; ``"head 0"``, ``"head 1"``, ... by default.
        title: a title for the whole figure.

    Returns:
        The matplotlib ``Figure``, at most 7 inches wide: a panel per head, two per row up
        to four heads, four per row above.

    Raises:
        TypeError: ``weights`` is not a floating-point tensor, or a label is not a string.
        ValueError: ``weights`` is not 2-D or 3-D, is empty, holds values outside [0, 1],
            has more than 8 heads or 32 tokens per side, or the labels do not match.

    Used in chapters 4 and 6.
    """
    stack = _check_weights("weights", weights, (2, 3), ("(t, s)", "(h, t, s)"))
    if stack.dim() == 2:
        stack = stack[None]  # (1, t, s)
    h, t, s = stack.shape  # none is 0: _check_weights refuses an empty tensor
    if h > _LINE_HEADS_UP_TO:
        raise ValueError(
            f"weights: expected at most {_LINE_HEADS_UP_TO} heads to draw legibly, got {h}; "
            f"draw them in groups, e.g. weights[:{_LINE_HEADS_UP_TO}]"
        )
    if max(t, s) > _LINE_TOKENS_UP_TO:
        raise ValueError(
            f"weights: expected at most {_LINE_TOKENS_UP_TO} tokens per side to draw "
            f"legibly, got shape {tuple(stack.shape)}; slice it, e.g. weights[..., :32, :32]"
        )
    rows_labels = _check_tokens("tokens", tokens, t)
    if key_tokens is None and tokens is not None and s == t:
        cols_labels = rows_labels
    else:
        cols_labels = _check_tokens("key_tokens", key_tokens, s)
    names = _check_labels("head_names", head_names, h) or [f"head {i}" for i in range(h)]
    title = _check_title(title)
    # Two panels per row up to four heads (a narrower figure reads better on a phone).
    cols = min(h, 2 if h <= 4 else 4)
    grid_rows = -(-h // cols)
    step = 0.22 if max(t, s) > 12 else 0.3
    panel_height = max(t, s) * step + 0.6
    longest = max(len(label) for label in rows_labels + cols_labels)
    # Two heads need no more than 5.2 inches: a narrower figure is scaled down less on a phone.
    panel_width = min(2.6, _WIDTH / cols)
    width = cols * panel_width
    label_room = min(0.1 + 0.075 * longest, panel_width * 0.3)
    height = grid_rows * panel_height + (0.35 if title else 0.05) + 0.3
    with _figure(width, height) as (fig, ax):
        key = "queries on the left, keys on the right; a line's opacity is its weight"
        _text(ax, 0.05, 0.15, key, ha="left", color="#444444")
        if title:
            _text(ax, width / 2, height - 0.17, title, size=_LABEL_PT + 1)
        for head in range(h):
            row, col = divmod(head, cols)
            x0 = col * panel_width + label_room + 0.05
            x1 = (col + 1) * panel_width - label_room - 0.05
            top = height - (0.35 if title else 0.05) - row * panel_height - 0.35
            colour = HEAD_COLOURS[head % 8]
            name = names[head]
            _text(
                ax, (x0 + x1) / 2, top + 0.18, name, size=_LABEL_PT, color=colour, fontweight="bold"
            )
            ys = [top - i * step for i in range(max(t, s))]  # queries' and keys' rows alike
            # One collection per head: 8 heads of 32 tokens are 8192 lines, which as separate
            # Line2D objects took seconds to draw. Weights under 0.01 would be invisible.
            red, green, blue = to_rgb(colour)
            segments, colours = [], []
            matrix = stack[head].tolist()  # (t, s) as floats
            for i in range(t):
                for j in range(s):
                    alpha = matrix[i][j]
                    if alpha > 0.01:
                        segments.append([(x0, ys[i]), (x1, ys[j])])
                        colours.append((red, green, blue, min(alpha, 1.0)))
            ax.add_collection(
                LineCollection(segments, colors=colours, linewidths=2.0, capstyle="round")
            )
            for i in range(t):
                _text(ax, x0 - 0.05, ys[i], rows_labels[i], ha="right")
            for j in range(s):
                _text(ax, x1 + 0.05, ys[j], cols_labels[j], ha="left")
    fig.axes[0].set_label("line view")
    return fig


# ---------------------------------------------------------------------------------------------
# Chapter 5
# ---------------------------------------------------------------------------------------------


def draw_strided_read(x: torch.Tensor, *, name: str = "x") -> Figure:
    """Draw the order in which a 2-D tensor reads its storage, and whether ``view`` can follow.

    Top: the storage, one cell per element with its index. Bottom: the tensor's elements in
    row-major order (the order ``view(-1)`` must produce), each joined by a line to the
    storage cell it reads. Between consecutive elements, the jump in storage is written
    below; a contiguous tensor jumps by +1 every time (parallel lines), a transposed one by
    its strides (crossing lines), and ``view`` needs every jump across the merged axes to be
    the same. Jumps that break the pattern are bold. Cells are neutral (white storage, light
    grey reading order): the course's role colours mean nothing here.

    Args:
        x: a tensor with two dimensions, at least one element, and at most 16 elements in
            it and in its storage.
        name: what to call the tensor in the title.

    Returns:
        The matplotlib ``Figure``, at most 7 inches wide.

    Raises:
        TypeError: ``x`` is not a tensor, or ``name`` is not a str.
        ValueError: ``x`` is not 2-D, is empty, or it or its storage holds more than 16
            elements.

    Used in chapter 5.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x: expected a torch.Tensor, got {type(x).__name__}")
    if not isinstance(name, str):
        raise TypeError(f"name: expected a str, got {type(name).__name__} {name!r}")
    if x.dim() != 2:
        raise ValueError(f"x: expected a tensor with 2 dimensions, got shape {tuple(x.shape)}")
    if x.numel() == 0:
        raise ValueError(f"x: expected at least one element, got shape {tuple(x.shape)}")
    n = x.untyped_storage().nbytes() // x.element_size()
    if max(n, x.numel()) > 16:
        raise ValueError(
            f"x: expected a tensor whose storage holds at most 16 elements to draw legibly, "
            f"got {x.numel()} elements over a storage of {n}; draw a small example"
        )
    rows, cols = x.shape
    stride = x.stride()
    offset = x.storage_offset()
    storage = torch.as_strided(x, (n,), (1,), 0).detach().cpu()
    order = [offset + i * stride[0] + j * stride[1] for i in range(rows) for j in range(cols)]
    jumps = [b - a for a, b in pairwise(order)]
    flat = len(set(jumps)) <= 1
    # At most 4.4 inches wide, so that a phone (about 4 inches) scales the 10-point text down
    # little; drawn from the bottom up, and the figure's height set once the title is known.
    cell = min(0.42, 4.1 / max(n, len(order)))
    width = max(max(n, len(order)) * cell + 0.3, 3.8)  # 3.8: the verdict's longer line
    stagger = 0.18 if cell < 0.3 else 0.0  # narrow cells: every other jump a line lower
    low = 0.8 + stagger + cell  # the top of the row in reading order
    top = low + 1.1 + cell  # the top of the storage row
    values = [float(v) for v in storage.tolist()]
    style = {"size": _LABEL_PT}
    with _figure(width, top + 1.0) as (fig, ax):

        def fitted(across: float, up: float, lines: Sequence[str], **options: Any) -> Text:
            """``lines`` as one line at (across, up) if it fits the figure, else one per line."""
            text = _text(ax, across, up, " ".join(lines), **options)
            if text.get_window_extent().width / fig.dpi > width - 0.3:
                text.set_text("\n".join(lines))
            return text

        # Reading order
        expected = jumps[0] if jumps else 1
        verdict = (
            [f"every jump is {expected:+d}: one stride covers the flat tensor,", "view(-1) works"]
            if flat
            else [
                f"jumps of {', '.join(f'{j:+d}' for j in sorted(set(jumps)))}: no single "
                "stride reads this order,",
                "so view(-1) fails",
            ]
        )
        fitted(width / 2, 0.08, verdict, va="bottom", **style)
        for r, jump in enumerate(jumps):
            weight = "bold" if jump != expected else "normal"
            between = (0.15 + (r + 1) * cell, low - cell - 0.1 - stagger * (r % 2))
            _text(ax, *between, f"{jump:+d}", va="top", fontweight=weight, **style)
        faces = {"storage": "#FFFFFF", "read": "#E6E6E6"}  # neutral: no role is drawn
        for r, k in enumerate(order):
            _cell(ax, 0.15, low, 0, r, cell, facecolor=faces["read"], edgecolor="black")
            _cell_text(ax, 0.15, low, 0, r, cell, f"{values[k]:g}", **style)
            ax.plot(
                [0.15 + (k + 0.5) * cell, 0.15 + (r + 0.5) * cell],
                [top - cell - 0.27, low + 0.34],
                color="#555555",
                lw=0.9,
                alpha=0.8,
            )
        label = f"{name} read row by row, as view(-1) must read it"
        text = _text(ax, 0.15, low + 0.08, label, ha="left", va="bottom", **style)
        if text.get_window_extent().width / fig.dpi > width - 0.3:
            text.set_text(label.removeprefix(name + " "))  # the title names the tensor
        # Storage
        index = "[{}]" if cell >= 0.34 else "{}"  # room for the brackets of "[11]"
        for k in range(n):
            _cell(ax, 0.15, top, 0, k, cell, facecolor=faces["storage"], edgecolor="black")
            _cell_text(ax, 0.15, top, 0, k, cell, f"{values[k]:g}", **style)
            below = (0.15 + (k + 0.5) * cell, top - cell - 0.04)
            _text(ax, *below, index.format(k), va="top", color="#555555", **style)
        _text(ax, 0.15, top + 0.08, "storage", ha="left", va="bottom", **style)
        title = [f"{name}:", f"shape {tuple(x.shape)}, stride {tuple(stride)}"]
        title = fitted(width / 2, top + 0.4, title, va="bottom", size=_LABEL_PT + 1)
        height = top + 0.48 + title.get_window_extent().height / fig.dpi
        fig.set_figheight(height)
        ax.set_ylim(0, height)
    return fig


# ---------------------------------------------------------------------------------------------
# Chapter 6
# ---------------------------------------------------------------------------------------------


def draw_positions_added(
    token_vectors: torch.Tensor,
    positions: torch.Tensor,
    tokens: Iterable[str] | None = None,
) -> Figure:
    """Draw token vectors plus position vectors: ``E + P`` as three grids, row by row.

    Row ``p`` of each grid is one position: the token's vector, the position vector
    ``P_p`` and their sum, which is what the first attention layer reads. The cells are
    coloured on one diverging scale for all three, centred at 0 (white): red positive,
    blue negative (``RdBu_r``, as chapter 6's heatmap of the sinusoidal encoding),
    darker for larger magnitudes.

    Args:
        token_vectors: the token embeddings, shape ``(t, d)``, 1 to 10 tokens and 1 to 12
            features.
        positions: the position vectors, the same shape.
        tokens: the ``t`` tokens, as strings; numbered when omitted.

    Returns:
        The matplotlib ``Figure``, at most 7 inches wide.

    Raises:
        TypeError: a tensor is not floating-point, or a token is not a string.
        ValueError: the shapes differ or are too large to draw.

    Used in chapter 6.
    """
    token_vectors = check_tensor(
        "token_vectors", token_vectors, ranks=(2,), shape_names=("(t, d)",)
    )
    positions = check_tensor("positions", positions, ranks=(2,), shape_names=("(t, d)",))
    if positions.shape != token_vectors.shape:
        raise ValueError(
            f"positions: expected the shape of token_vectors {tuple(token_vectors.shape)}, "
            f"got {tuple(positions.shape)}"
        )
    _check_features("token_vectors", token_vectors, 12, "d")
    t, d = token_vectors.shape
    labels = _check_tokens("tokens", tokens, t)
    e, pos = _floats(token_vectors), _floats(positions)
    total = e + pos  # (t, d)
    scale = float(torch.stack((e, pos, total)).abs().max()) or 1.0
    longest = max(len(f"{i}: {label}") for i, label in enumerate(labels))
    label_room = 0.15 + 0.075 * longest
    cell = min(0.3, (_WIDTH - 0.3 - label_room - 1.3) / (3 * d))
    height = t * cell + 1.0
    width = label_room + 3 * d * cell + 1.3 + 0.1

    def signed(left: float, top: float, matrix: torch.Tensor) -> float:
        for i in range(t):
            for j in range(d):
                face = diverging(0.5 + 0.5 * float(matrix[i, j]) / scale)[:3]
                _cell(ax, left, top, i, j, cell, facecolor=face, edgecolor="white", lw=0.5)
        _frame(ax, left, top, t, d, cell)
        return d * cell

    diverging = plt.get_cmap("RdBu_r")  # 0 is white, the middle of the scale
    with _figure(width, height) as (fig, ax):
        top = height - 0.45
        for i, label in enumerate(labels):
            _text(ax, label_room - 0.05, top - (i + 0.5) * cell, f"{i}: {label}", ha="right")
        left = label_room
        parts = (
            (e, "token vectors", "+"),
            (pos, r"positions $P_p$", "="),
            (total, "sum: the input", ""),
        )
        for matrix, name, sign in parts:
            w = signed(left, top, matrix)
            _text(ax, left + w / 2, top + 0.1, name, va="bottom")
            if sign:
                _text(ax, left + w + 0.32, top - t * cell / 2, sign, size=_LABEL_PT + 4)
            left += w + 0.65
        _legend(
            ax,
            label_room,
            0.22,
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
    Below the row, the first layer: the previous-token head's strongest arc into every
    position up to ``i`` (the keys the query may read), so that position ``j + 1`` carries
    the token before it, ``A``. Above the row, the second layer: the induction head's arcs
    from query ``i`` to the keys, opacity by weight; its strongest key should be ``j + 1``,
    whose value ``B`` becomes the prediction for position ``i + 1``. Arcs are drawn from the
    weights passed in, not from the rule.

    Args:
        sequence: the ``t`` tokens, as strings; 2 to 32 of them.
        previous_weights: the layer-1 head's weights on this sequence, ``(t, t)``.
        induction_weights: the layer-2 head's weights on this sequence, ``(t, t)``.
        query: the query ``i`` to follow, whose token occurs earlier in the sequence.

    Returns:
        The matplotlib ``Figure``, at most 7 inches wide.

    Raises:
        TypeError: a weight tensor is not floating-point, a token is not a string, or
            ``query`` is not an int.
        ValueError: the shapes do not match the sequence, the weights are not between 0 and
            1, or the query's token does not occur earlier.

    Used in chapter 6.
    """
    if isinstance(sequence, (str, bytes)) or not isinstance(sequence, Iterable):
        raise TypeError(f"sequence: expected a sequence of strings, got {type(sequence).__name__}")
    sequence = list(sequence)
    sequence = _check_tokens("sequence", sequence, len(sequence))
    t = len(sequence)
    if not 2 <= t <= _LINE_TOKENS_UP_TO:
        raise ValueError(
            f"sequence: expected 2 to {_LINE_TOKENS_UP_TO} tokens to draw legibly, got {t}"
        )
    prev = _check_weights("previous_weights", previous_weights, (2,), ("(t, t)",))
    ind = _check_weights("induction_weights", induction_weights, (2,), ("(t, t)",))
    for name, matrix in (("previous_weights", prev), ("induction_weights", ind)):
        if tuple(matrix.shape) != (t, t):
            raise ValueError(
                f"{name}: expected shape ({t}, {t}) to match the sequence, got "
                f"{tuple(matrix.shape)}"
            )
    query = _check_index("query", query, t)
    earlier = [j for j in range(query) if sequence[j] == sequence[query]]
    if not earlier:
        raise ValueError(
            f"query: expected a position whose token occurred earlier, got {query} "
            f"(token {sequence[query]!r} first occurs there)"
        )
    source = earlier[-1]
    # At most 0.32 inches per token, so that a short sequence gives a narrow figure whose
    # text stays legible when a phone scales it down to its width.
    width = min(_WIDTH, 0.4 + 0.32 * t)
    spacing = (width - 0.4) / t
    height = 3.4
    base = 1.55
    box = min(spacing * 0.85, 0.3)
    with _figure(width, height) as (fig, ax):
        xs = [0.25 + (i + 0.5) * spacing for i in range(t)]
        # The first layer's arcs into the keys the query may read (positions up to it); an
        # arc is at most about 0.35 inches deep, so that long ones stay clear of the text.
        for i in range(1, query + 1):
            j = int(prev[i].argmax())
            if j == i:
                continue
            chord = abs(xs[i] - xs[j])
            _arrow(
                ax,
                (xs[j], base - box / 2 - 0.25),
                (xs[i], base - box / 2 - 0.25),
                colour=HEAD_COLOURS[0],
                rad=math.copysign(min(0.5, 0.7 / chord), i - j),
                alpha=max(float(prev[i, j]), 0.15),
                lw=2.2 if i == source + 1 else 1.0,
            )
        for j in range(query + 1):
            weight = float(ind[query, j])
            if weight > 0.03:
                _arrow(
                    ax,
                    (xs[query], base + box / 2 + 0.03),
                    (xs[j], base + box / 2 + 0.03),
                    colour=HEAD_COLOURS[1],
                    rad=0.35,
                    alpha=min(1.0, weight),
                    lw=1 + 2 * weight,
                )
        for i, token in enumerate(sequence):
            special = i in (query, source, source + 1)
            face = _tint(ROLE_COLOURS["input"], 0.45 if special else 0.1)
            corner, lw = (xs[i] - box / 2, base - box / 2), 1.6 if special else 0.6
            ax.add_patch(
                Rectangle(corner, box, box, facecolor=face, edgecolor="black", lw=lw, zorder=3)
            )
            _text(ax, xs[i], base, token, zorder=4)
            if i % 2 == 0 or t <= 16:
                _text(ax, xs[i], base - box / 2 - 0.02, str(i), va="top", color="#777777", zorder=4)
        target = int(ind[query].argmax())
        second = (
            f'second layer, induction head:\nquery {query} ("{sequence[query]}") attends most to '
            f'key {target} ("{sequence[target]}"),\nwhich followed the earlier '
            f'"{sequence[query]}" at position {source}'
        )
        note = {"ha": "left", "size": _LABEL_PT}
        _text(ax, 0.1, height - 0.1, second, va="top", color=HEAD_COLOURS[1], **note)
        prediction = f'→ the model can predict "{sequence[target]}" at position {query + 1}'
        _text(ax, 0.1, height - 0.8, prediction, color=HEAD_COLOURS[1], fontweight="bold", **note)
        first = (
            "first layer, previous-token head: the\nstrongest key of each position up to the"
            f'\nquery, so position {source + 1} carries "{sequence[source]}", the token before it'
        )
        _text(ax, 0.1, 0.05, first, va="bottom", color=HEAD_COLOURS[0], **note)
    return fig


# ---------------------------------------------------------------------------------------------
# Chapter 7
# ---------------------------------------------------------------------------------------------


def draw_kv_cache(prompt_length: int, steps: int) -> Figure:
    """Draw which keys and values each decoding step computes, without and with a KV cache.

    One row per forward pass: the prompt first, then one row per decoding step, each of
    which feeds the token generated last; one column per position. Top, without a cache:
    every step runs the whole sequence again, projecting every key and value (orange) and
    every query (blue dot). Bottom, with a cache: each step computes the query, key and value
    of the new token only, and reads the earlier keys and values from the cache (purple).
    The totals of computed keys and values are written under each panel. The panels are
    stacked, so that a position is one column in both and the figure, under 4 inches wide,
    is not scaled down on a phone.

    Args:
        prompt_length: the number of prompt tokens, 1 to 12.
        steps: the number of decoding steps after the prompt, 1 to 8, with
            ``prompt_length + steps`` at most 16.

    Returns:
        The matplotlib ``Figure``, at most 7 inches wide.

    Raises:
        TypeError: an argument is not an int.
        ValueError: an argument is not positive or too large to draw.

    Used in chapter 7.
    """
    prompt_length = _check_count("prompt_length", prompt_length, 12, "prompt tokens")
    steps = _check_count("steps", steps, 8, "steps")
    total = prompt_length + steps
    if total > 16:
        raise ValueError(
            f"steps: expected prompt_length + steps <= 16 to draw legibly, got "
            f"{prompt_length} + {steps} = {total}"
        )
    passes = steps + 1  # the prompt, then one pass per step
    cell = min(0.3, 2.9 / total)
    panel = total * cell
    left = 0.75  # right of the row labels, "prompt" to "step 8"
    block = passes * cell + 1.05  # one panel, its title above and its axis and total below
    legend = [
        (_tint(ROLE_COLOURS["key"], 0.75), "computed this step"),
        (_tint(ROLE_COLOURS["cache"], 0.75), "read from the cache"),
        (ROLE_COLOURS["query"], "query computed"),
    ]
    height = 2 * block + 0.3 * len(legend) + 0.1
    width = left + max(panel, 2.3) + 0.1  # the totals' line is 2.2 inches long
    computed_face, cached_face = legend[0][0], legend[1][0]
    with _figure(width, height) as (fig, ax):
        computed = []
        for k, cached in enumerate((False, True)):
            top = height - 0.4 - k * block
            count = 0
            for step in range(passes):
                length = prompt_length + step
                y = top - (step + 1) * cell
                label = "prompt" if step == 0 else f"step {step}"
                _text(ax, left - 0.08, y + cell / 2, label, ha="right", size=_LABEL_PT)
                for pos in range(length):
                    new = not cached or step == 0 or pos == length - 1
                    count += new
                    face = computed_face if new else cached_face
                    _cell(ax, left, top, step, pos, cell, facecolor=face, edgecolor="white")
                queries = range(length) if step == 0 or not cached else [length - 1]
                for pos in queries:
                    centre = (left + (pos + 0.5) * cell, y + cell / 2)
                    ax.add_patch(plt.Circle(centre, cell * 0.16, color=ROLE_COLOURS["query"]))
            computed.append(count)
            bottom = top - passes * cell
            title = "with a KV cache" if cached else "without a cache"
            _text(ax, left, top + 0.1, title, ha="left", va="bottom", size=_LABEL_PT + 1)
            style = {"ha": "left", "va": "top", "size": _LABEL_PT}
            _text(ax, left, bottom - 0.08, "position →", color="#555555", **style)
            _text(ax, left, bottom - 0.36, f"keys and values computed: {count}", **style)
        for row, (face, name) in enumerate(legend):  # one entry a line: a phone is narrow
            y = 0.1 + 0.3 * (len(legend) - row - 0.5)
            ax.add_patch(Rectangle((left, y - 0.08), 0.16, 0.16, facecolor=face, edgecolor="black"))
            _text(ax, left + 0.24, y, name, ha="left", size=_LABEL_PT)
    fig.axes[0].set_label(f"computed {computed[0]} {computed[1]}")
    return fig


def draw_tiles(num_queries: int, num_keys: int, block_size: int) -> Figure:
    """Draw the tiles of causal tiled attention: computed, skipped, and partly masked.

    The ``(t, s)`` score matrix is cut into ``block_size`` by ``block_size`` tiles, visited as
    ``tiled_attention`` visits them (query ``i`` at position ``s - t + i``). A tile wholly
    in the future of its queries is skipped (vermillion outline, no fill); a tile that
    crosses the diagonal is computed and then masked above it (hatched cells); every other
    tile is computed whole (grey: scores have no role colour). The counts are written in the
    legend.

    Args:
        num_queries: ``t``, 1 to 32.
        num_keys: ``s``, at least ``t`` and at most 32.
        block_size: the tile size, 1 to ``s``.

    Returns:
        The matplotlib ``Figure``, at most 7 inches wide.

    Raises:
        TypeError: an argument is not an int.
        ValueError: an argument is out of range, or ``s < t``.

    Used in chapter 7.
    """
    t = _check_count("num_queries", num_queries, 32, "queries")
    s = _check_count("num_keys", num_keys, 32, "keys")
    if s < t:
        raise ValueError(f"num_keys: expected at least num_queries={t} keys, got {s}")
    block = _check_count("block_size", block_size, s, "tokens per tile (at most num_keys)")
    offset = s - t
    cell = min(0.26, 4.0 / max(t, s))
    width = s * cell + 2.85
    height = t * cell + 1.2
    counts = {"computed": 0, "partly masked": 0, "skipped": 0}
    fill = "#BDBDBD"  # of a computed tile: neutral grey, scores have no role colour
    hatched = {"facecolor": "white", "edgecolor": ROLE_COLOURS["mask"], "hatch": "////", "lw": 0}
    with _figure(width, height) as (fig, ax):
        left, top = 0.75, height - 0.75
        for q0 in range(0, t, block):
            bq = min(block, t - q0)
            last_key = offset + q0 + bq
            for k0 in range(0, s, block):
                bk = min(block, s - k0)
                corner, w, h = (left + k0 * cell, top - (q0 + bq) * cell), bk * cell, bq * cell
                if k0 >= last_key:
                    kind = "skipped"
                elif k0 + min(bk, last_key - k0) - 1 > offset + q0:
                    kind = "partly masked"
                else:
                    kind = "computed"
                counts[kind] += 1
                if kind != "skipped":
                    ax.add_patch(Rectangle(corner, w, h, facecolor=fill, edgecolor="none"))
                if kind == "partly masked":  # hatch the cells above the diagonal
                    for i in range(q0, q0 + bq):
                        for j in range(k0, k0 + bk):
                            if j > offset + i:
                                _cell(ax, left, top, i, j, cell, **hatched)
                skipped = kind == "skipped"
                edge = ROLE_COLOURS["mask"] if skipped else "black"
                style = (0, (3, 2)) if skipped else "-"
                ax.add_patch(
                    Rectangle(corner, w, h, fill=False, lw=2.0, edgecolor=edge, linestyle=style)
                )
        for i in range(0, t, block):
            _text(ax, left - 0.06, top - i * cell - cell / 2, str(i), ha="right")
        for j in range(0, s, block):
            _text(ax, left + (j + 0.5) * cell, top + 0.05, str(j), va="bottom")
        _text(ax, left + s * cell / 2, top + 0.3, "key →", va="bottom")
        _text(ax, left - 0.06, top + 0.3, "query ↓", ha="right", va="bottom")
        legend_x = left + s * cell + 0.2
        for k, (kind, face, edge, hatch, style) in enumerate(
            (
                ("computed", fill, "black", None, "-"),
                ("partly masked", "white", ROLE_COLOURS["mask"], "////", "-"),
                ("skipped", "white", ROLE_COLOURS["mask"], None, (0, (3, 2))),
            )
        ):
            y = top - 0.2 - k * 0.45
            ax.add_patch(
                Rectangle(
                    (legend_x, y - 0.12),
                    0.3,
                    0.3,
                    facecolor=face,
                    edgecolor=edge,
                    hatch=hatch,
                    linestyle=style,
                    lw=1.5,
                )
            )
            _text(ax, legend_x + 0.4, y + 0.03, f"{kind}: {counts[kind]}", ha="left")
        sizes = f"t = {t} queries, s = {s} keys, tiles of {block} × {block}"
        _text(ax, left, 0.2, sizes, ha="left")
    fig.axes[0].set_label(" ".join(f"{kind}={n}" for kind, n in counts.items()))
    return fig


def draw_grouped_heads(num_heads: int, kv_heads: Sequence[int]) -> Figure:
    """Draw query heads grouped over shared key/value heads, one row per configuration.

    Each row shows ``h`` query heads (blue boxes) above ``h_kv`` key/value heads (orange
    and green halves), with a line from query head ``i`` to the key/value head ``i // g``
    that serves it (``g = h / h_kv``), in its group's colour. With ``h_kv = h`` this is
    multi-head attention, with ``h_kv = 1`` multi-query attention, in between
    grouped-query attention.

    Args:
        num_heads: ``h``, the number of query heads, 1 to 16.
        kv_heads: the ``h_kv`` of each row, each dividing ``num_heads``; 1 to 4 rows.

    Returns:
        The matplotlib ``Figure``, at most 7 inches wide.

    Raises:
        TypeError: ``num_heads`` or an entry of ``kv_heads`` is not an int, or ``kv_heads``
            is not a sequence.
        ValueError: a value is out of range or does not divide ``num_heads``.

    Used in chapter 7.
    """
    h = _check_count("num_heads", num_heads, 16, "query heads")
    if isinstance(kv_heads, (str, bytes)) or not isinstance(kv_heads, Sequence):
        raise TypeError(
            f"kv_heads: expected a sequence of ints, got {type(kv_heads).__name__} {kv_heads!r}"
        )
    if not 1 <= len(kv_heads) <= 4:
        raise ValueError(f"kv_heads: expected 1 to 4 rows, got {len(kv_heads)}")
    rows = [check_positive_int("kv_heads", value) for value in kv_heads]
    for value in rows:
        if h % value:
            raise ValueError(
                f"kv_heads: expected divisors of num_heads={h}, got {value} (remainder {h % value})"
            )
    # 4.3 inches wide, so that a phone (about 4 inches) scales the 10-point text down little.
    width = 4.3
    labels = 0.95  # the row labels, "Q heads" and "K/V heads", left of the heads
    spacing = (width - labels - 0.05) / h
    box = min(0.36, spacing * 0.8)
    half = min(box, spacing * 0.42)  # the width of a k or v half: a pair fits one slot
    edge = 2 if half >= 0.12 else 1.2  # a thick outline would hide a narrow box's face
    row_height = 1.5
    height = len(rows) * row_height + 0.1
    q_face = _tint(ROLE_COLOURS["query"], 0.8)
    with _figure(width, height) as (fig, ax):
        for r, h_kv in enumerate(rows):
            g = h // h_kv
            top = height - 0.1 - r * row_height
            name = "multi-head" if h_kv == h else "multi-query" if h_kv == 1 else "grouped-query"
            title = f"{name}: $h_{{kv}} = {h_kv}$, $g = {g}$"
            _text(ax, 0.1, top - 0.12, title, ha="left", size=_LABEL_PT + 1)
            q_y, kv_y = top - 0.55, top - 1.2
            xs = [labels + (i + 0.5) * spacing for i in range(h)]
            kv_xs = [sum(xs[j * g : (j + 1) * g]) / g for j in range(h_kv)]
            for i in range(h):
                j = i // g
                colour = HEAD_COLOURS[j % 8]
                ax.plot([xs[i], kv_xs[j]], [q_y - box / 2, kv_y + box / 2], color=colour, lw=1.5)
                corner = (xs[i] - box / 2, q_y - box / 2)
                ax.add_patch(
                    Rectangle(corner, box, box, facecolor=q_face, edgecolor=colour, lw=edge)
                )
                if box >= 0.3 and h <= 10:  # room for "q9" in 10 points
                    _text(ax, xs[i], q_y, f"q{i}", color="white", size=_LABEL_PT)
            for j, x in enumerate(kv_xs):  # the key half left of x, the value half right
                for left, role in ((x - half, "key"), (x, "value")):
                    face, outline = ROLE_COLOURS[role], HEAD_COLOURS[j % 8]
                    corner = (left, kv_y - box / 2)
                    ax.add_patch(
                        Rectangle(corner, half, box, facecolor=face, edgecolor=outline, lw=edge)
                    )
                if half >= 0.12:  # room for a letter in 10 points
                    _text(ax, x - half / 2, kv_y, "k", size=_LABEL_PT)
                    _text(ax, x + half / 2, kv_y, "v", color="white", size=_LABEL_PT)
            _text(ax, labels - 0.12, q_y, "Q heads", ha="right", size=_LABEL_PT)
            _text(ax, labels - 0.12, kv_y, "K/V heads", ha="right", size=_LABEL_PT)
    return fig
