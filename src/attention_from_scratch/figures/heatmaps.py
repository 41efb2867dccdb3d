"""Heatmaps of attention weights: ``plot_attention`` and ``plot_attention_heads`` (chapter 1 on).

The package exports both for readers' own weights, so they check their input: what cannot be
drawn legibly at the column's width is refused with a ``ValueError`` before any figure exists,
so that a large tensor passed by mistake cannot hold a kernel for minutes or fill its memory;
slice it first. A call that fails leaves no figure open.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.image import AxesImage

from .._checks import check_bool, check_positive_int
from .style import COLUMN_INCHES, FONT_PT, check_labels, check_title

# A little of the column is kept free because the tight bounding box of a saved image may
# reach past the figure by the width of a tick label.
_GRID_INCHES = COLUMN_INCHES - 0.3
# A heatmap of more tokens per axis is a blur of sub-millimetre cells at the column's width,
# and drawing one used to take minutes (400 tokens: 40 s and 10.7 GB). Measured on a busy
# 2-core machine, drawn and saved as a PNG: 64 tokens, 0.8 s and 9 MB (traced by
# tracemalloc); 16 heads of 64 tokens, 7.7 s and 14 MB; a refusal, a few milliseconds.
_DRAW_UP_TO = 64
# Cell numbers at 9 pt ("0.21") need cells about 0.3 inches wide: up to 10 tokens by default,
# up to 16 on request in a column-wide heatmap, and up to 8 in a panel of a head grid.
_ANNOTATE_AUTO_UP_TO = 10
_ANNOTATE_UP_TO = 16
_PANEL_ANNOTATE_UP_TO = 8
# Two columns of panels at least 3 inches wide fit the column; 16 heads make a figure
# about 25 inches tall, as long as a reader will scroll.
_HEADS_UP_TO = 16
# A tick label at 9 points needs about 0.16 inches; above that density only every k-th
# label is shown, so that labels never overlap.
_TICK_INCHES = 0.16
# Key labels are slanted at 45 degrees up to this many, upright (90 degrees) above it.
_SLANTED_UP_TO = 16


def _fit_column(width: float, height: float) -> tuple[float, float]:
    """Scale a (width, height) in inches down, keeping its shape, to fit the column."""
    scale = min(1.0, COLUMN_INCHES / width, COLUMN_INCHES / height)
    return width * scale, height * scale


def _as_matrix(name: str, weights: object, rank: int) -> torch.Tensor:
    if not isinstance(weights, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(weights).__name__}")
    if weights.dim() != rank:
        shape = "(t, s)" if rank == 2 else "(h, t, s)"
        raise ValueError(
            f"{name}: expected a tensor of shape {shape}, got shape {tuple(weights.shape)}; "
            f"pick one batch element first, e.g. {name}[0]"
        )
    if weights.is_complex():
        raise TypeError(f"{name}: expected a real tensor, got dtype {weights.dtype}")
    return weights.detach().to("cpu", torch.float32)


def _check_size(name: str, shape: tuple[int, ...], what: str) -> None:
    """Refuse empty matrices and matrices too large to draw, before any figure exists."""
    if min(shape) == 0:
        raise ValueError(f"{name}: expected at least {what}, got shape {shape}")
    largest = max(shape[-2:])
    if largest > _DRAW_UP_TO:
        lead = ":, " * (len(shape) - 2)
        raise ValueError(
            f"{name}: expected at most {_DRAW_UP_TO} tokens per axis to draw legibly, got "
            f"{largest} (shape {shape}); slice it, e.g. "
            f"{name}[{lead}:{_DRAW_UP_TO}, :{_DRAW_UP_TO}]"
        )


def _check_annotate(annotate: object, size: int, up_to: int, auto: bool) -> bool:
    """Resolve ``annotate=None`` to ``auto``; refuse numbers that cannot fit their cells."""
    if annotate is None:
        return auto
    annotate = check_bool("annotate", annotate)
    if annotate and size > up_to:
        raise ValueError(
            f"annotate: expected at most {up_to} tokens per axis for the numbers to fit in "
            f"their cells, got {size}; leave annotate=None, or slice the weights"
        )
    return annotate


def _colour_range(matrix: torch.Tensor, limits: object) -> tuple[float, float]:
    """The colour scale: ``limits`` when given; 0 to 1 when every finite entry lies there
    (weights: a pale cell then means a small weight, not the smallest of this matrix);
    otherwise the range of the finite entries (nan and ±inf have no colour)."""
    if limits is not None:
        if (
            not isinstance(limits, tuple)
            or len(limits) != 2
            or not all(_is_real(v) and math.isfinite(v) for v in limits)
            or not limits[0] < limits[1]
        ):
            raise ValueError(
                f"limits: expected a tuple (low, high) of finite numbers with low < high, "
                f"got {limits!r}"
            )
        return float(limits[0]), float(limits[1])
    finite = matrix[torch.isfinite(matrix)]
    if finite.numel() == 0:
        return 0.0, 1.0
    low, high = float(finite.min()), float(finite.max())
    if low >= 0.0 and high <= 1.0:
        return 0.0, 1.0
    return (low, high) if low < high else (low - 0.5, high + 0.5)


def _is_real(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _set_ticks(
    ax: Axes, labels: tuple[list[str] | None, list[str] | None] | None, rows: int, cols: int
) -> None:
    """Label the axes with the tokens, every k-th one only where they would overlap."""
    fig = ax.get_figure()
    box = ax.get_position()
    # The axes' figure, taken to be a Figure (a SubFigure has no size of its own); an axes
    # in use has one, though get_figure is typed to return None too.
    width, height = fig.get_size_inches()  # type: ignore[union-attr]
    for axis, n, inches, names in (
        ("x", cols, box.width * width, labels[1] if labels else None),
        ("y", rows, box.height * height, labels[0] if labels else None),
    ):
        step = max(1, math.ceil(n / max(1, int(inches / _TICK_INCHES))))
        positions = list(range(0, n, step))
        texts = [names[i] if names else str(i) for i in positions]
        if axis == "x":
            # Slanted labels read best, but dense ones overlap unless upright.
            dense = len(positions) > _SLANTED_UP_TO
            ax.set_xticks(
                positions,
                labels=texts,
                rotation=90 if dense else 45,
                ha="center" if dense else "right",
                fontsize=FONT_PT,
            )
        else:
            ax.set_yticks(positions, labels=texts, fontsize=FONT_PT)


def _draw_heatmap(
    ax: Axes,
    matrix: torch.Tensor,
    row_labels: list[str] | None,
    col_labels: list[str] | None,
    *,
    annotate: bool,
    cmap: str,
    limits: tuple[float, float],
) -> AxesImage:
    num_queries, num_keys = matrix.shape
    image = ax.imshow(matrix.numpy(), cmap=cmap, aspect="equal", vmin=limits[0], vmax=limits[1])
    labels = (row_labels, col_labels) if row_labels or col_labels else None
    if labels is not None and (row_labels is None or col_labels is None):
        labels = (
            row_labels or [str(i) for i in range(num_queries)],
            col_labels or [str(j) for j in range(num_keys)],
        )
    _set_ticks(ax, labels, num_queries, num_keys)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    if annotate:
        middle = (limits[0] + limits[1]) / 2
        for i in range(num_queries):
            for j in range(num_keys):
                value = float(matrix[i, j])
                # nan and ±inf cells are blank (white): their text must be black to show.
                colour = "white" if math.isfinite(value) and value <= middle else "black"
                ax.text(
                    j, i, f"{value:.2f}", ha="center", va="center", color=colour, fontsize=FONT_PT
                )
    return image


def plot_attention(
    weights: torch.Tensor,
    tokens: Iterable[str] | None = None,
    *,
    key_tokens: Iterable[str] | None = None,
    title: str | None = None,
    annotate: bool | None = None,
    ax: Axes | None = None,
    cmap: str = "viridis",
    limits: tuple[float, float] | None = None,
) -> Axes:
    """Draw one attention matrix as a labelled heatmap.

    Row ``i`` is the query token and column ``j`` the key token, so each row shows where one
    token looks; for softmax weights every row sums to one. The new figure is at most 7 inches
    wide and tall (the book's column); its text is at least 9 points.

    ``nan`` and infinite entries (e.g. masked scores of ``-inf``) are not hidden or replaced:
    they have no colour, so their cells are left blank, and with ``annotate`` their cells read
    ``nan``, ``inf`` or ``-inf``. The colour scale runs from 0 to 1 when every finite entry
    lies there (attention weights), so that matrices drawn apart read on one scale; otherwise
    it spans the finite entries (scores), unless ``limits`` sets it.

    Args:
        weights: the attention weights, shape ``(t, s)`` (``s = t`` for self-attention), with
            at least one and at most 64 tokens per axis; slice a longer one, e.g.
            ``weights[:64, :64]``.
        tokens: the ``t`` query tokens (rows), as strings; any iterable, read once. Also used
            for the columns when ``key_tokens`` is not given and ``s = t``. Above about 32
            tokens per axis only every k-th label is shown, so that labels do not overlap.
        key_tokens: the ``s`` key tokens (columns), for cross-attention.
        title: the title of the plot.
        annotate: write each value in its cell. ``None`` (the default) writes them when both
            sides have at most 10 tokens; ``True`` is refused above 16 tokens per axis, where
            the numbers no longer fit their cells. A NumPy bool works too.
        ax: the axes to draw on; a new figure is made when omitted.
        cmap: a matplotlib colour map name.
        limits: the colour scale ``(low, high)``; give panels to be compared the same one.

    Returns:
        The matplotlib ``Axes`` holding the heatmap; its colour bar is a second axes of the
        same figure.

    Raises:
        TypeError: ``weights`` is not a real tensor, or a token is not a string.
        ValueError: ``weights`` is not 2-D, is empty or has more than 64 tokens per axis,
            the number of tokens does not match, or ``limits`` is not ``(low, high)`` with
            ``low < high``.

    Introduced in chapter 1.
    """
    matrix = _as_matrix("weights", weights, 2)
    num_queries, num_keys = matrix.shape
    _check_size("weights", tuple(matrix.shape), "one query and one key")
    row_labels = check_labels("tokens", tokens, num_queries)
    col_labels: list[str] | None
    if key_tokens is None and row_labels is not None and num_keys == num_queries:
        col_labels = row_labels
    else:
        col_labels = check_labels("key_tokens", key_tokens, num_keys)
    annotate = _check_annotate(
        annotate,
        max(num_queries, num_keys),
        _ANNOTATE_UP_TO,
        max(num_queries, num_keys) <= _ANNOTATE_AUTO_UP_TO,
    )
    title = check_title(title)
    if ax is not None and not isinstance(ax, Axes):
        raise TypeError(f"ax: expected a matplotlib Axes or None, got {type(ax).__name__}")
    own_figure = ax is None
    if ax is None:
        _, ax = plt.subplots(figsize=_fit_column(0.6 * num_keys + 2.4, 0.6 * num_queries + 1.6))
    try:
        image = _draw_heatmap(
            ax,
            matrix,
            row_labels,
            col_labels,
            annotate=annotate,
            cmap=cmap,
            limits=_colour_range(matrix, limits),
        )
        # An axes that is drawn on has a figure (get_figure is typed to return None too).
        colorbar = ax.get_figure().colorbar(  # type: ignore[union-attr]
            image, ax=ax, fraction=0.046, pad=0.04
        )
        colorbar.ax.tick_params(labelsize=FONT_PT)
        if title:
            ax.set_title(title)
    except Exception:
        if own_figure:
            # a failed call leaves no half-drawn figure behind; the figure made above is a
            # Figure, though get_figure is typed to return a SubFigure or None too
            plt.close(ax.get_figure())  # type: ignore[arg-type]
        raise
    return ax


def plot_attention_heads(
    weights: torch.Tensor,
    tokens: Iterable[str] | None = None,
    *,
    title: str | None = None,
    annotate: bool | None = None,
    max_cols: int = 2,
    cmap: str = "viridis",
    limits: tuple[float, float] | None = None,
) -> Figure:
    """Draw the attention matrix of every head in a grid of heatmaps with one colour bar.

    The grid is laid out for the book's column: the figure is at most 6.7 inches wide, two
    panels per row (e.g. 8 heads make 4 rows of 2), each panel about 3 inches wide, all
    panels on one colour scale shown by a single colour bar, and text of at least 9 points.
    Axis titles are written once per row and column. ``nan`` and infinite entries are left
    blank, as in :func:`plot_attention`.

    Args:
        weights: per-head attention weights of one sequence, shape ``(h, t, s)``, with
            1 to 16 heads and 1 to 64 tokens per axis; draw more heads in groups, e.g.
            ``weights[:16]``.
        tokens: the tokens, as in :func:`plot_attention` (any iterable, read once). In small
            panels only every k-th label is shown where they would overlap.
        title: a title for the whole figure.
        annotate: write the values in the cells. ``None`` (the default) writes them only for
            one or two heads of at most 8 tokens per axis (the panels of a larger grid are too
            small for numbers); ``True`` is refused above 8 tokens per axis.
        max_cols: the most panels per row. The default 2 fits the book's column with panels
            about 3 inches wide; more columns make narrower panels (the figure stays within
            the column).
        cmap: a matplotlib colour map name.
        limits: the colour scale ``(low, high)``, shared by all panels; by default as in
            :func:`plot_attention`, over all heads at once.

    Returns:
        The matplotlib ``Figure``; its heatmap axes are titled "head 0", "head 1", ..., unused
        cells of the grid are hidden, and its last axes is the shared colour bar.

    Raises:
        TypeError: ``weights`` is not a real tensor, a token is not a string, or
            ``max_cols`` is not an int.
        ValueError: ``weights`` is not 3-D, is empty, has more than 16 heads or more than 64
            tokens per axis, or the number of tokens does not match.

    Introduced in chapter 4.
    """
    stack = _as_matrix("weights", weights, 3)
    num_heads, num_queries, num_keys = stack.shape
    max_cols = check_positive_int("max_cols", max_cols)
    _check_size("weights", tuple(stack.shape), "one head, one query and one key")
    if num_heads > _HEADS_UP_TO:
        raise ValueError(
            f"weights: expected at most {_HEADS_UP_TO} heads to draw legibly, got {num_heads} "
            f"(shape {tuple(stack.shape)}); draw them in groups, e.g. weights[:{_HEADS_UP_TO}]"
        )
    row_labels = check_labels("tokens", tokens, num_queries)
    col_labels = row_labels if num_keys == num_queries else None
    annotate = _check_annotate(
        annotate,
        max(num_queries, num_keys),
        _PANEL_ANNOTATE_UP_TO,
        num_heads <= 2 and max(num_queries, num_keys) <= _PANEL_ANNOTATE_UP_TO,
    )
    title = check_title(title)
    cols = min(num_heads, max_cols)
    rows = -(-num_heads // cols)
    # About 0.9 inches go to the shared colour bar and 0.8 to each panel's tick labels; the
    # heatmap keeps its aspect, plus room for the panel title and the rotated key labels.
    panel = (_GRID_INCHES - 0.9) / cols - 0.8
    height = rows * (panel * num_queries / num_keys + 1.0) + (0.5 if title else 0.1)
    fig, axes = plt.subplots(
        rows, cols, figsize=(_GRID_INCHES, height), squeeze=False, layout="constrained"
    )
    try:
        limits = _colour_range(stack, limits)
        image = None
        for head, ax in enumerate(axes.flat):
            if head >= num_heads:
                ax.set_visible(False)
                continue
            image = _draw_heatmap(
                ax,
                stack[head],
                row_labels,
                col_labels,
                annotate=annotate,
                cmap=cmap,
                limits=limits,
            )
            ax.set_title(f"head {head}", fontsize=10)
        # Axis titles once per row and column: repeated, they crowd the panels.
        for (row, col), ax in np.ndenumerate(axes):
            if col > 0:
                ax.set_ylabel("")
            if row < rows - 1 and (row + 1) * cols + col < num_heads:
                ax.set_xlabel("")
        # num_heads >= 1: the loop drew at least one heatmap, so image is not None.
        colorbar = fig.colorbar(
            image,  # type: ignore[arg-type]
            ax=axes.ravel().tolist(),
            shrink=min(1.0, 4.0 / height),
        )
        colorbar.ax.tick_params(labelsize=FONT_PT)
        if title:
            fig.suptitle(title)
    except Exception:
        plt.close(fig)  # a failed call leaves no half-drawn figure behind
        raise
    return fig
