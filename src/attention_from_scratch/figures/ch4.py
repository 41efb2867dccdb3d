"""Chapter 4's diagrams: the head split (as shapes and as numbers), the wrapper beside the
batched module, the line view.

``plot_attention_lines`` is the one figure here a reader points at weights of their own (the
chapters draw it for chapter 4's heads and chapter 6's trained model), so it checks its input;
the other figures draw the chapter's fixed sizes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import matplotlib.pyplot as plt
import torch
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from .._checks import check_tensor
from .style import (
    CELL_PT,
    DIAGRAM_INCHES,
    HEAD_COLOURS,
    LABEL_PT,
    arrow,
    as_floats,
    check_labels,
    check_title,
    grid_cell,
    grid_frame,
    grid_text,
    inch_figure,
    tint,
    write,
)

# The line view, two columns of labels 0.2 inches apart, is legible up to 32 tokens per side
# and 8 heads (two rows of four panels).
_LINE_TOKENS_UP_TO = 32
_LINE_HEADS_UP_TO = 8


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
                grid_text(ax, left, top, i, j, cell, str(features[j]), size=CELL_PT)
            face = tint(HEAD_COLOURS[head % 8], 0.55)
            grid_cell(ax, left, top, i, j, cell, facecolor=face, edgecolor="white", lw=0.8)
    grid_frame(ax, left, top, rows, len(heads_of), cell, lw=1.0)


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

    Used in chapter 4.
    """
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
                grid_text(ax, left, top, i, j, cell, str(first + j), size=LABEL_PT)

    with inch_figure(width, height) as (fig, ax):
        top = height - shape_y - 0.45
        # 1. (t, d_out)
        left = 0.12
        cells(left, top, t, heads_of, 0)
        shape = f"(b, t, d_out)\n= ({b}, {t}, {d_out})"
        write(ax, left + d_out * cell / 2, top + shape_y, shape, va="bottom", size=LABEL_PT)
        ends = [left + d_out * cell]
        # 2. (t, h, d_h): one strip per token, cut into its heads' groups
        left = ends[0] + view_gap
        for token in range(t):
            y = top - token * (cell + row_gap)
            for head in range(num_heads):
                x0 = left + head * (d_h * cell + gap)
                cells(x0, y, 1, [head] * d_h, head * d_h)
        shape = f"(b, t, h, d_h)\n= ({b}, {t}, {num_heads}, {d_h})"
        write(ax, left + span / 2, top + shape_y, shape, va="bottom", size=LABEL_PT)
        starts = [left]
        ends.append(left + span)
        # 3. (h, t, d_h): one (t, d_h) block per head, stacked
        left = ends[1] + transpose_gap
        for head in range(num_heads):
            y = top - head * (t * cell + block_gap)
            cells(left, y, t, [head] * d_h, head * d_h)
            write(
                ax,
                left + d_h * cell + 0.08,
                y - t * cell / 2,
                f"head {head}",
                ha="left",
                color=HEAD_COLOURS[head % 8],
                size=LABEL_PT,
            )
        shape = f"(b, h, t, d_h)\n= ({b}, {num_heads}, {t}, {d_h})"
        write(ax, left + d_h * cell / 2, top + shape_y, shape, va="bottom", size=LABEL_PT)
        starts.append(left)
        middle = top - t * cell / 2
        for (x0, x1), split, merge in (
            ((ends[0], starts[0]), "view", "view"),
            ((ends[1], starts[1]), "transpose\n(1, 2)", "transpose\n(1, 2)\n.contiguous()"),
        ):
            arrow(ax, (x0 + 0.06, middle + 0.2), (x1 - 0.06, middle + 0.2))
            write(ax, (x0 + x1) / 2, middle + 0.26, split, va="bottom", size=LABEL_PT)
            arrow(ax, (x1 - 0.06, middle - 0.2), (x0 + 0.06, middle - 0.2), colour="#555555")
            grey: dict[str, Any] = {"va": "top", "color": "#555555", "size": LABEL_PT}
            write(ax, (x0 + x1) / 2, middle - 0.26, merge, **grey)
    return fig


def draw_split_numbers(
    projected: torch.Tensor, heads: torch.Tensor, tokens: Sequence[str]
) -> Figure:
    """Draw one sequence's projections before and after the head split, number by number.

    Left, ``projected``, ``(t, d_out)``, with the columns of head m framed in head m's
    colour; right, one ``(t, d_h)`` panel per head, ``heads[m]``, framed alike, its columns
    labelled by the features they came from. The numbers are the same: only the shape
    changed. Each number is printed to two decimals.

    Args:
        projected: one sequence's projections before the split, ``(t, d_out)``.
        heads: the same sequence after ``view`` and ``transpose``, ``(h, t, d_h)``.
        tokens: the ``t`` tokens, the labels of the rows.

    Returns:
        The matplotlib ``Figure``, 5.2 inches wide.

    Used in chapter 4.
    """
    full, split = as_floats(projected), as_floats(heads)
    t, d_out = full.shape
    num_heads, _, d_h = split.shape
    labels = list(tokens)
    fig, axes = plt.subplots(
        1,
        1 + num_heads,
        figsize=(5.2, 3.2),
        layout="constrained",
        width_ratios=[num_heads, *[1] * num_heads],
    )
    try:
        panels = [(full, f"queries[0]\n(t, d_out) = ({t}, {d_out})", range(d_out))]
        panels += [
            (split[m], f"head {m}\n({t}, {d_h})", range(m * d_h, (m + 1) * d_h))
            for m in range(num_heads)
        ]
        for ax, (matrix, title, features) in zip(axes, panels, strict=True):
            # No fill: colour names the heads only, and the numbers carry the point.
            # Cells wider than tall: a number such as -0.35 needs about 0.35 inches.
            ax.imshow(torch.zeros_like(matrix).numpy(), cmap="Greys", vmin=0, vmax=1, aspect="auto")
            for row in range(t):
                for col in range(matrix.shape[1]):
                    value = f"{float(matrix[row, col]):.2f}"
                    ax.text(col, row, value, ha="center", va="center", fontsize=CELL_PT)
            ax.set_xticks(range(matrix.shape[1]), labels=[str(f) for f in features])
            ax.set_yticks(range(t), labels=labels if ax is axes[0] else [])
            ax.tick_params(length=0, labelsize=CELL_PT)  # no tick marks to hit the numbers
            ax.set_title(title, fontsize=LABEL_PT)
        fig.supxlabel("feature", fontsize=LABEL_PT)
        for m in range(num_heads):  # frame the columns that go to each head, in its colour
            colour = HEAD_COLOURS[m % 8]
            # Inset from the cells' edges, so that the numbers' minus signs stay clear of it.
            frame = Rectangle(
                (m * d_h - 0.47, -0.47), d_h - 0.06, t - 0.06, fill=False, lw=2.0, color=colour
            )
            axes[0].add_patch(frame)
            for label in axes[0].get_xticklabels()[m * d_h : (m + 1) * d_h]:
                label.set_color(colour)
            for side in axes[m + 1].spines.values():
                side.set_edgecolor(colour)
                side.set_linewidth(2.5)
    except BaseException:
        plt.close(fig)  # a failed call leaves no half-drawn figure behind
        raise
    return fig


def draw_wrapper_vs_batched(d_in: int, d_h: int, num_heads: int) -> Figure:
    """Draw the wrapper's separate heads above the batched module's one wide projection.

    Top, ``MultiHeadAttentionWrapper``: ``h`` separate heads, each with its own
    ``(d_in, d_h)`` query, key and value weights, run one after another, their outputs
    concatenated. Bottom, ``MultiHeadAttention``: one ``(d_in, h * d_h)`` matrix per role
    whose column blocks are the heads' matrices side by side, one product for all heads,
    then split. Matrices are coloured by head and named by role. The two parts are stacked,
    so the figure is narrow and its text stays legible on a phone.

    Args:
        d_in: the input size, 1 to 8.
        d_h: the size of one head, 1 to 8.
        num_heads: the number of heads ``h``, 1 to 4.

    Returns:
        The matplotlib ``Figure``, 4 inches wide.

    Used in chapter 4.
    """
    d_out = num_heads * d_h
    width = 4.0
    # Wrapper row: label, three matrices with gaps, an arrow and the output shape.
    cell = min(0.22, (width - 2.55) / (3 * d_h), (width - 1.05) / (3 * d_out))
    names = ("W_q", "W_k", "W_v")
    head_height = d_in * cell + 0.4
    line = 0.19  # one line of text at FONT_PT, in inches
    top_part = 2 * line + 0.2 + num_heads * head_height + 2 * line + 0.1
    bottom_part = 2 * line + 0.3 + d_in * cell + 0.15 + 3 * line + 0.1
    height = top_part + 0.2 + bottom_part

    def matrix(left: float, top: float, cols_of: list[int], name: str) -> float:
        """A weight matrix, its column c coloured by head cols_of[c]; returns its width."""
        _head_cells(ax, left, top, d_in, cell, cols_of)
        write(
            ax, left + len(cols_of) * cell / 2, top + 0.03, f"${name}$", va="bottom", size=LABEL_PT
        )
        return len(cols_of) * cell

    with inch_figure(width, height) as (fig, ax):
        y = height - 0.05
        write(
            ax,
            width / 2,
            y,
            "MultiHeadAttentionWrapper:\nh heads, each with its own weights",
            va="top",
        )
        y -= 2 * line + 0.2 + 0.25
        for head in range(num_heads):
            middle, colour = y - d_in * cell / 2, HEAD_COLOURS[head % 8]
            write(ax, 0.05, middle, f"head {head}", ha="left", color=colour)
            left = 0.75
            for name in names:
                left += matrix(left, y, [head] * d_h, name) + 0.25
            arrow(ax, (left - 0.15, middle), (left + 0.2, middle))
            write(ax, left + 0.25, middle, f"(b, t, {d_h})", ha="left", color=colour)
            y -= head_height
        write(
            ax,
            width / 2,
            y + 0.2,
            f"each $W$: $(d_{{in}}, d_h) = ({d_in}, {d_h})$;\n"
            f"outputs concatenated: (b, t, {d_out})",
            va="top",
        )
        y = height - top_part - 0.1
        ax.plot([0.1, width - 0.1], [y, y], color="#bbbbbb", lw=1)
        y -= 0.1
        write(ax, width / 2, y, "MultiHeadAttention:\none wide matrix per role", va="top")
        y -= 2 * line + 0.3 + 0.1
        cols = [c // d_h for c in range(d_out)]
        total = 3 * d_out * cell + 2 * 0.25
        left = (width - total) / 2
        for name in names:
            left += matrix(left, y, cols, name) + 0.25
        write(
            ax,
            width / 2,
            y - d_in * cell - 0.12,
            f"each $W$: $(d_{{in}}, h \\cdot d_h) = ({d_in}, {d_out})$,\n"
            "the heads' matrices side by side: one product\nper role for all heads, "
            f"then view and transpose:\n(b, {num_heads}, t, {d_h})",
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
    names = check_labels("head_names", head_names, h) or [f"head {i}" for i in range(h)]
    title = check_title(title)
    # Two panels per row up to four heads (a narrower figure reads better on a phone).
    cols = min(h, 2 if h <= 4 else 4)
    grid_rows = -(-h // cols)
    step = 0.22 if max(t, s) > 12 else 0.3
    panel_height = max(t, s) * step + 0.6
    longest = max(len(label) for label in rows_labels + cols_labels)
    # Two panels side by side take 4 inches, which a phone 390 pixels wide shows at nearly
    # 100 pixels per inch: 9-point labels stay 12 pixels high. Eight heads take the column.
    panel_width = {1: 2.6, 2: 2.0}.get(cols, DIAGRAM_INCHES / cols)
    width = cols * panel_width
    label_room = min(0.1 + 0.075 * longest, panel_width * 0.3)
    key = "queries on the left, keys on the right; a line's opacity is its weight"
    if width < 4.5:  # the key takes 4.3 inches on one line
        key = key.replace("; ", ";\n")
    key_room = 0.3 if "\n" not in key else 0.45
    height = grid_rows * panel_height + (0.35 if title else 0.05) + key_room
    with inch_figure(width, height) as (fig, ax):
        write(ax, 0.05, key_room / 2, key, ha="left", color="#444444")
        if title:
            write(ax, width / 2, height - 0.17, title, size=LABEL_PT + 1)
        for head in range(h):
            row, col = divmod(head, cols)
            x0 = col * panel_width + label_room + 0.05
            x1 = (col + 1) * panel_width - label_room - 0.05
            top = height - (0.35 if title else 0.05) - row * panel_height - 0.35
            colour = HEAD_COLOURS[head % 8]
            name = names[head]
            write(
                ax, (x0 + x1) / 2, top + 0.18, name, size=LABEL_PT, color=colour, fontweight="bold"
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
                write(ax, x0 - 0.05, ys[i], rows_labels[i], ha="right")
            for j in range(s):
                write(ax, x1 + 0.05, ys[j], cols_labels[j], ha="left")
    fig.axes[0].set_label("line view")
    return fig


def _check_tokens(name: str, tokens: object, size: int) -> list[str]:
    labels = check_labels(name, tokens, size)
    return labels if labels is not None else [str(i) for i in range(size)]


def _check_index(name: str, value: object, size: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__} {value!r}")
    if not 0 <= value < size:
        raise ValueError(f"{name}: expected an index from 0 to {size - 1}, got {value}")
    return value


def _check_weights(
    name: str, weights: object, ranks: Sequence[int], shapes: Sequence[str]
) -> torch.Tensor:
    """A floating tensor of probabilities: finite, in [0, 1]; returned on the CPU."""
    weights = check_tensor(name, weights, ranks=ranks, shape_names=shapes)
    if weights.shape[-1] == 0 or weights.numel() == 0:
        raise ValueError(f"{name}: expected at least one key, got shape {tuple(weights.shape)}")
    weights = as_floats(weights)
    if not torch.isfinite(weights).all() or weights.min() < 0 or weights.max() > 1 + 1e-6:
        raise ValueError(
            f"{name}: expected attention weights, finite and between 0 and 1, got values from "
            f"{float(weights.min()):.3g} to {float(weights.max()):.3g}; apply softmax first"
        )
    return weights
