"""The figures' one visual language: colours by role and head, sizes, and drawing helpers.

Every figure of the book, data plot or schematic, takes its colours and sizes from here:
one colour per role from the colour-blind-safe Okabe-Ito palette (``ROLE_COLOURS``), one
colour per head (``HEAD_COLOURS``), text of at least 9 points, and at most 7 inches of width
(the book's column). The schematic diagrams draw on one axes measured in inches
(:func:`inch_figure`), so the sizes written in ``ch1.py`` ... ``ch7.py`` are the sizes on
the page. book/notation.md shows the legend.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import matplotlib.pyplot as plt
import torch
from matplotlib.axes import Axes
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, Rectangle
from matplotlib.text import Text

# The palette, for every figure module (views read it from palette too).
from ..palette import HEAD_COLOURS as HEAD_COLOURS
from ..palette import ROLE_COLOURS as ROLE_COLOURS

if TYPE_CHECKING:  # matplotlib.typing is new in matplotlib 3.8
    from matplotlib.typing import ColorType

# The book's column is about 7 inches wide: a wider figure is scaled down until its labels
# cannot be read.
COLUMN_INCHES = 7.0
# The smallest text in a figure (points); cell numbers, tick labels and storage indices.
FONT_PT = 9
# Text sizes of the schematic diagrams (points): labels of blocks and tokens, cell numbers.
LABEL_PT = 10
CELL_PT = FONT_PT
# The widest diagram: a notebook saves figures with a tight bounding box padded by 0.1 inches
# on each side, so that a 6.75-inch figure becomes an image just under the 7-inch column.
DIAGRAM_INCHES = COLUMN_INCHES - 0.25

# Rows of a layout picture: neutral greys, neighbours far apart in lightness, black text
# legible on each (the darkest, #808080, gives a 5:1 contrast). The course's colours are
# kept for roles and heads.
LAYOUT_ROW_GREYS: tuple[str, ...] = ("#E6E6E6", "#9E9E9E", "#C7C7C7", "#808080")


def token_labels(tokens: Iterable[str] | None, size: int) -> list[str]:
    """The tokens as a list, or ``"0"``, ``"1"``, ... when there are none."""
    return list(tokens) if tokens is not None else [str(i) for i in range(size)]


@contextmanager
def inch_figure(width: float, height: float) -> Iterator[tuple[Figure, Axes]]:
    """A figure whose single axes is measured in inches from its bottom-left corner.

    Drawing in inches makes the sizes in this module the sizes on the page. The figure is
    closed if drawing fails, so that a failed call leaves nothing open.
    """
    width = min(width, DIAGRAM_INCHES)
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


def tint(colour: str, strength: float) -> tuple[float, float, float]:
    """``colour`` mixed with white: 0 is white, 1 the colour itself."""
    strength = min(max(strength, 0.0), 1.0)
    # tuple() of a generator is typed tuple[float, ...]; to_rgb gives three numbers.
    return tuple(1 - strength * (1 - c) for c in to_rgb(colour))  # type: ignore[return-value]


def ink_for(face: tuple[float, float, float]) -> str:
    """Black or white, whichever reads better on ``face`` (by its luminance)."""
    red, green, blue = face
    return "white" if 0.299 * red + 0.587 * green + 0.114 * blue < 0.5 else "black"


def grid_cell(ax: Axes, left: float, top: float, i: int, j: int, cell: float, **style: Any) -> None:
    """Square (i, j) of a grid of ``cell``-inch squares whose top-left corner is (left, top)."""
    ax.add_patch(Rectangle((left + j * cell, top - (i + 1) * cell), cell, cell, **style))


def grid_text(
    ax: Axes, left: float, top: float, i: int, j: int, cell: float, text: str, **style: Any
) -> None:
    """``text`` in the centre of the square that :func:`grid_cell` draws."""
    write(ax, left + (j + 0.5) * cell, top - (i + 0.5) * cell, text, **style)


def grid_frame(
    ax: Axes, left: float, top: float, rows: int, cols: int, cell: float, **style: Any
) -> None:
    """The outline of ``rows`` by ``cols`` squares of the grid of :func:`grid_cell`."""
    ax.add_patch(
        Rectangle((left, top - rows * cell), cols * cell, rows * cell, fill=False, **style)
    )


def shaded_block(
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
    number_pt: float = CELL_PT,
) -> tuple[float, float]:
    """Draw a matrix as cells whose shade grows with ``|value|``; return (width, height).

    With ``cmap`` (scores and weights, which have no role colour: ``"viridis"``) the cells
    take that colour map on 0 to ``scale`` instead of shades of ``colour``.
    """
    rows, cols = values.shape
    scale = scale or float(values.abs().max()) or 1.0
    colour_map = plt.get_cmap(cmap) if cmap else None
    face: tuple[float, float, float]
    for i in range(rows):
        for j in range(cols):
            value = float(values[i, j])
            share = min(abs(value) / scale, 1.0)
            if colour_map is not None:
                # RGB of the map's RGBA; tuple() of it is typed tuple[float, ...].
                face = tuple(colour_map(share)[:3])  # type: ignore[assignment]
            else:
                face = tint(colour, 0.12 + 0.78 * share)
            grid_cell(ax, left, top, i, j, cell, facecolor=face, edgecolor="white", lw=0.8)
            if numbers:
                grid_text(
                    ax, left, top, i, j, cell, f"{value:.2f}", size=number_pt, color=ink_for(face)
                )
    grid_frame(ax, left, top, rows, cols, cell, lw=1.2)
    return cols * cell, rows * cell


def arrow(
    ax: Axes,
    start: tuple[float, float],
    end: tuple[float, float],
    *,
    colour: str = "black",
    lw: float = 1.4,
    rad: float = 0.0,
    alpha: float = 1.0,
    style: str = "-|>",
    linestyle: str | tuple[float, Sequence[float]] = "-",  # a name, or (offset, dashes)
) -> None:
    """An arrow from ``start`` to ``end`` (inches), bent by ``rad`` (0: straight)."""
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


def write(ax: Axes, x: float, y: float, text: str, *, size: float = FONT_PT, **style: Any) -> Text:
    """Write ``text`` at (x, y) inches in ``size`` points.

    Centred on (x, y) unless ``style`` sets ``ha`` or ``va``; ``style`` holds any other
    property of matplotlib's ``Text`` (``color``, ``rotation``, ...).
    """
    return ax.text(x, y, text, **{"ha": "center", "va": "center", "fontsize": size, **style})


def legend_row(ax: Axes, x: float, y: float, items: Sequence[tuple[ColorType, str]]) -> None:
    """A row of coloured squares with their names, starting at (x, y) in inches."""
    for colour, name in items:
        ax.add_patch(Rectangle((x, y - 0.07), 0.16, 0.16, facecolor=colour, edgecolor="black"))
        text = write(ax, x + 0.22, y + 0.01, name, ha="left")
        x += 0.4 + 0.075 * len(text.get_text())


def as_floats(x: torch.Tensor) -> torch.Tensor:
    """``x`` as float32 on the CPU, cut from autograd: what the figures compute with."""
    return x.detach().to("cpu", torch.float32)


def check_labels(name: str, labels: object, size: int) -> list[str] | None:
    """Return ``labels`` as a list of ``size`` strings; an iterator is consumed once."""
    if labels is None:
        return None
    if isinstance(labels, (str, bytes)):
        raise TypeError(f"{name}: expected a sequence of strings, got a single str {labels!r}")
    if isinstance(labels, (set, frozenset)) or not isinstance(labels, Iterable):
        raise TypeError(
            f"{name}: expected a sequence of strings (a list or a tuple), "
            f"got {type(labels).__name__}"
        )
    labels = list(labels)
    for position, label in enumerate(labels):
        if not isinstance(label, str):
            raise TypeError(
                f"{name}: expected a sequence of strings, got {type(label).__name__} "
                f"{label!r} at position {position}; convert them, e.g. "
                f"[str(token) for token in {name}]"
            )
    if len(labels) != size:
        raise ValueError(f"{name}: expected {size} labels to match the weights, got {len(labels)}")
    return labels


def check_title(title: object) -> str | None:
    if title is not None and not isinstance(title, str):
        raise TypeError(f"title: expected a str or None, got {type(title).__name__} {title!r}")
    return title
