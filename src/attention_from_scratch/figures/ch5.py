"""Chapter 5's figures: a tensor beside its storage (``plot_layout``) and a strided read.

``plot_layout`` is exported by the package for readers' own tensors, so it checks its input.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import matplotlib.pyplot as plt
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.text import Text

from .._checks import check_positive_int
from .style import (
    FONT_PT,
    HEAD_COLOURS,
    LABEL_PT,
    LAYOUT_ROW_GREYS,
    check_title,
    grid_cell,
    grid_text,
    inch_figure,
    tint,
    write,
)

# One row of storage cells must fit the column with indices such as "[15]": 16 cells of
# 0.34 inches make 5.6 inches.
_LAYOUT_UP_TO = 16
# A layout cell holds its value in 10-point text over its index in 9-point text; 12 storage
# cells then make a figure about 4.4 inches wide, which a phone shows at about 90 %.
_LAYOUT_CELL_INCHES = 0.34
_LAYOUT_PT = 10


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

    Used in chapter 5.
    """
    n = x.untyped_storage().nbytes() // x.element_size()  # the whole storage
    rows, cols = x.shape
    stride = x.stride()
    offset: int = x.storage_offset()  # type: ignore[assignment]  # a SymInt only when traced
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
    style = {"size": LABEL_PT}
    with inch_figure(width, top + 1.0) as (fig, ax):

        def fitted(across: float, up: float, lines: Sequence[str], **options: Any) -> Text:
            """``lines`` as one line at (across, up) if it fits the figure, else one per line."""
            text = write(ax, across, up, " ".join(lines), **options)
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
            write(ax, *between, f"{jump:+d}", va="top", fontweight=weight, **style)
        faces = {"storage": "#FFFFFF", "read": "#E6E6E6"}  # neutral: no role is drawn
        for r, k in enumerate(order):
            grid_cell(ax, 0.15, low, 0, r, cell, facecolor=faces["read"], edgecolor="black")
            grid_text(ax, 0.15, low, 0, r, cell, f"{values[k]:g}", **style)
            ax.plot(
                [0.15 + (k + 0.5) * cell, 0.15 + (r + 0.5) * cell],
                [top - cell - 0.27, low + 0.34],
                color="#555555",
                lw=0.9,
                alpha=0.8,
            )
        label = f"{name} read row by row, as view(-1) must read it"
        text = write(ax, 0.15, low + 0.08, label, ha="left", va="bottom", **style)
        if text.get_window_extent().width / fig.dpi > width - 0.3:
            text.set_text(label.removeprefix(name + " "))  # the title names the tensor
        # Storage
        index = "[{}]" if cell >= 0.34 else "{}"  # room for the brackets of "[11]"
        for k in range(n):
            grid_cell(ax, 0.15, top, 0, k, cell, facecolor=faces["storage"], edgecolor="black")
            grid_text(ax, 0.15, top, 0, k, cell, f"{values[k]:g}", **style)
            below = (0.15 + (k + 0.5) * cell, top - cell - 0.04)
            write(ax, *below, index.format(k), va="top", color="#555555", **style)
        write(ax, 0.15, top + 0.08, "storage", ha="left", va="bottom", **style)
        title = [f"{name}:", f"shape {tuple(x.shape)}, stride {tuple(stride)}"]
        heading = fitted(width / 2, top + 0.4, title, va="bottom", size=LABEL_PT + 1)
        height = top + 0.48 + heading.get_window_extent().height / fig.dpi
        fig.set_figheight(height)
        ax.set_ylim(0, height)
    return fig


def plot_layout(
    x: torch.Tensor, *, title: str | None = None, heads: tuple[int, int] | None = None
) -> Figure:
    """Draw a 2-D tensor next to its storage, with each element's storage index.

    The top panel is the tensor as we index it (rows and columns); the bottom panel is the flat
    storage it reads from. Each cell shows its value (to 3 significant digits) and, underneath,
    the storage index that ``storage_offset + i * stride[0] + j * stride[1]`` gives, so a
    transposed tensor shows the same storage read in a different order. Row ``i`` of the tensor
    takes the neutral grey ``LAYOUT_ROW_GREYS[i % 4]``, and so does each storage element it
    reads; storage the tensor does not read stays white. With ``heads``, every element takes
    instead a light tint of its head's colour (``HEAD_COLOURS``), named in a legend: the
    course's colours mark heads only. Cells are about a third of an inch wide, the tensor
    centred above its storage, so that a 12-element storage gives a figure about 4.4 inches
    wide whose 10-point text stays legible on a phone.

    Args:
        x: a tensor with two dimensions, at least one element, and at most 16 elements in it
            and in its whole storage (one row of 16 storage cells fills the column). A small
            view of a large tensor is refused too, because its storage is drawn in full.
        title: a title for the figure (the shape and strides are always shown).
        heads: ``(h, d_h)`` when the storage holds row-major ``(..., h * d_h)`` projections:
            storage element ``k`` then belongs to head ``(k // d_h) % h`` and takes that head's
            colour, ``HEAD_COLOURS[head]``.

    Returns:
        The matplotlib ``Figure``; its two axes are the tensor and its storage.

    Raises:
        TypeError: ``x`` is not a tensor.
        ValueError: ``x`` is not 2-D, is empty, or it or its storage holds more than 16
            elements; ``heads`` is not two positive integers.

    Introduced in chapter 5.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x: expected a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2:
        raise ValueError(f"x: expected a tensor with 2 dimensions, got shape {tuple(x.shape)}")
    if x.numel() == 0:
        raise ValueError(f"x: expected at least one element, got shape {tuple(x.shape)}")
    title = check_title(title)
    if heads is not None:
        if not isinstance(heads, tuple) or len(heads) != 2:
            raise TypeError(f"heads: expected a tuple (h, d_h), got {heads!r}")
        heads = (check_positive_int("heads[0]", heads[0]), check_positive_int("heads[1]", heads[1]))

    rows, cols = x.shape
    row_stride, col_stride = x.stride()
    offset: int = x.storage_offset()  # type: ignore[assignment]  # a SymInt only when traced
    read_by: dict[int, int] = {}  # storage index -> the first row of x that reads it
    for i in range(rows):
        for j in range(cols):
            read_by.setdefault(offset + i * row_stride + j * col_stride, i)

    def colour(k: int) -> str | tuple[float, float, float]:
        if heads is not None:
            return tint(HEAD_COLOURS[(k // heads[1]) % heads[0] % len(HEAD_COLOURS)], 0.45)
        if k not in read_by:
            return "#FFFFFF"
        return LAYOUT_ROW_GREYS[read_by[k] % len(LAYOUT_ROW_GREYS)]

    n = x.untyped_storage().nbytes() // x.element_size()
    if max(n, rows * cols) > _LAYOUT_UP_TO:
        raise ValueError(
            f"x: expected a tensor whose storage holds at most {_LAYOUT_UP_TO} elements to draw "
            f"legibly, got {rows * cols} elements over a storage of {n}; draw a small example, "
            f"e.g. of a tensor made with torch.arange(12.0).view(3, 4)"
        )
    storage = torch.as_strided(x, (n,), (1,), 0).detach().cpu()
    values = x.detach().cpu()
    width = max(cols, n, 11)  # 11 cells leave room for the title
    left = (width - cols) / 2  # the tensor is centred above its storage
    fig, (top, bottom) = plt.subplots(
        2,
        1,
        figsize=(width * _LAYOUT_CELL_INCHES + 0.2, (rows + 1) * _LAYOUT_CELL_INCHES + 1.1),
        gridspec_kw={"height_ratios": [rows, 1]},
        layout="constrained",
    )
    try:
        for i in range(rows):
            for j in range(cols):
                index = offset + i * row_stride + j * col_stride
                _draw_cell(top, left + j, rows - 1 - i, values[i, j].item(), index, colour(index))
        for k in range(n):
            _draw_cell(bottom, (width - n) / 2 + k, 0, storage[k].item(), k, colour(k))
        if heads is not None:
            bottom.legend(
                handles=[
                    Rectangle((0, 0), 1, 1, facecolor=colour(i * heads[1]), ec="black")
                    for i in range(heads[0])
                ],
                labels=[f"head {i}" for i in range(heads[0])],
                loc="upper center",
                bbox_to_anchor=(0.5, 0.0),
                ncols=min(heads[0], 4),
                fontsize=_LAYOUT_PT,
                frameon=False,
            )
        for ax, height in ((top, rows), (bottom, 1)):
            ax.set_xlim(0, width)
            ax.set_ylim(0, height)
            ax.set_aspect("equal")
            ax.axis("off")
        top.set_title(
            (f"{title}\n" if title else "")
            + f"shape {tuple(x.shape)}, stride {tuple(x.stride())}, "
            + ("contiguous" if x.is_contiguous() else "not contiguous"),
            fontsize=_LAYOUT_PT,
        )
        bottom.set_title("storage (one flat block of memory)", fontsize=_LAYOUT_PT)
    except Exception:
        plt.close(fig)  # a failed call leaves no half-drawn figure behind
        raise
    return fig


def _draw_cell(
    ax: Axes, left: float, bottom: int, value: object, index: int, colour: object
) -> None:
    """One cell of a layout picture: its value above, its storage index below."""
    ax.add_patch(Rectangle((left, bottom), 1, 1, facecolor=colour, edgecolor="black"))
    ax.text(
        left + 0.5, bottom + 0.69, f"{value:.3g}", ha="center", va="center", fontsize=_LAYOUT_PT
    )
    # The index one point smaller, so that "[10]" keeps clear of the cell's borders.
    ax.text(left + 0.5, bottom + 0.27, f"[{index}]", ha="center", va="center", fontsize=FONT_PT)
