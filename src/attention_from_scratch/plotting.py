"""Pictures of attention weights and tensor layouts (chapters 1 to 5).

This module imports matplotlib, so the package loads it only when one of these functions is
first used: ``import attention_from_scratch`` stays light.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

# Above this many cells per side the numbers no longer fit in the squares.
_ANNOTATE_UP_TO = 10


# The book's column is about 7 inches wide: a wider figure is scaled down until its labels
# cannot be read. Above _DRAW_UP_TO tokens per axis a heatmap is no longer legible (and
# drawing it takes seconds to minutes), so it is refused with advice to slice.
_COLUMN_INCHES = 7.0
_DRAW_UP_TO = 64
_LAYOUT_UP_TO = 48


def _fit_column(width: float, height: float) -> tuple[float, float]:
    """Scale a (width, height) in inches down, keeping its shape, to fit the column."""
    scale = min(1.0, _COLUMN_INCHES / width, _COLUMN_INCHES / height)
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
    return weights.detach().to("cpu", torch.float32)


def _check_labels(name: str, labels: Sequence[str] | None, size: int) -> list[str] | None:
    if labels is None:
        return None
    if isinstance(labels, str):
        raise TypeError(f"{name}: expected a sequence of strings, got a single str {labels!r}")
    labels = [str(label) for label in labels]
    if len(labels) != size:
        raise ValueError(f"{name}: expected {size} labels to match the weights, got {len(labels)}")
    return labels


def plot_attention(
    weights: torch.Tensor,
    tokens: Sequence[str] | None = None,
    *,
    key_tokens: Sequence[str] | None = None,
    title: str | None = None,
    annotate: bool | None = None,
    ax: Axes | None = None,
    cmap: str = "viridis",
) -> Axes:
    """Draw one attention matrix as a labelled heatmap.

    Row ``i`` is the query token and column ``j`` the key token, so each row shows where one
    token looks; for softmax weights every row sums to one.

    Args:
        weights: the attention weights, shape ``(t, s)`` (``s = t`` for self-attention).
        tokens: labels of the ``t`` query tokens (rows); also used for the columns when
            ``key_tokens`` is not given and ``s = t``.
        key_tokens: labels of the ``s`` key tokens (columns), for cross-attention.
        title: the title of the plot.
        annotate: write each value in its cell; by default only when both sides have at most
            10 tokens.
        ax: the axes to draw on; a new figure is made when omitted.
        cmap: a matplotlib colour map name.

    Returns:
        The matplotlib ``Axes`` holding the heatmap.

    Introduced in chapter 1.
    """
    matrix = _as_matrix("weights", weights, 2)
    num_queries, num_keys = matrix.shape
    if min(num_queries, num_keys) == 0:
        raise ValueError(
            f"weights: expected at least one query and one key, got shape {tuple(matrix.shape)}"
        )
    if max(num_queries, num_keys) > _DRAW_UP_TO:
        raise ValueError(
            f"weights: expected at most {_DRAW_UP_TO} tokens per axis to draw legibly, got "
            f"shape {tuple(matrix.shape)}; slice it, e.g. weights[:{_DRAW_UP_TO}, "
            f":{_DRAW_UP_TO}]"
        )
    row_labels = _check_labels("tokens", tokens, num_queries)
    if key_tokens is None and row_labels is not None and num_keys == num_queries:
        col_labels = row_labels
    else:
        col_labels = _check_labels("key_tokens", key_tokens, num_keys)
    if ax is None:
        _, ax = plt.subplots(figsize=_fit_column(0.6 * num_keys + 2.4, 0.6 * num_queries + 1.6))
    image = ax.imshow(matrix.numpy(), cmap=cmap, aspect="equal")
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    ax.set_xticks(range(num_keys), labels=col_labels or range(num_keys), rotation=45, ha="right")
    ax.set_yticks(range(num_queries), labels=row_labels or range(num_queries))
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    if title:
        ax.set_title(title)
    if annotate is None:
        annotate = max(num_queries, num_keys) <= _ANNOTATE_UP_TO
    if annotate:
        finite = matrix[torch.isfinite(matrix)]
        middle = float((finite.max() + finite.min()) / 2) if finite.numel() else 0.0
        for i in range(num_queries):
            for j in range(num_keys):
                value = float(matrix[i, j])
                colour = "black" if value > middle else "white"
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", color=colour, fontsize=8)
    return ax


def plot_attention_heads(
    weights: torch.Tensor,
    tokens: Sequence[str] | None = None,
    *,
    title: str | None = None,
    annotate: bool | None = None,
    max_cols: int = 2,
) -> Figure:
    """Draw the attention matrix of every head in a grid of heatmaps.

    Args:
        weights: per-head attention weights of one sequence, shape ``(h, t, s)``.
        tokens: labels of the tokens, as in :func:`plot_attention`.
        title: a title for the whole figure.
        annotate: write the values in the cells (default: only for at most two heads of
            small matrices; smaller panels have no room for numbers).
        max_cols: the most heatmaps per row of the grid; two fit the book's column.

    Returns:
        The matplotlib ``Figure``; its axes are titled "head 0", "head 1", ...

    Introduced in chapter 4.
    """
    stack = _as_matrix("weights", weights, 3)
    num_heads, num_queries, num_keys = stack.shape
    if isinstance(max_cols, bool) or not isinstance(max_cols, int) or max_cols < 1:
        raise ValueError(f"max_cols: expected a positive int, got {max_cols!r}")
    if min(num_heads, num_queries, num_keys) == 0:
        raise ValueError(
            "weights: expected at least one head, one query and one key, got shape "
            f"{tuple(stack.shape)}"
        )
    if annotate is None:
        annotate = num_heads <= 2 and max(num_queries, num_keys) <= _ANNOTATE_UP_TO
    cols = min(num_heads, max_cols)
    rows = -(-num_heads // cols)
    width = cols * (0.55 * num_keys + 2.2)
    # The figure is as wide as the column allows; each panel keeps its aspect.
    # A little narrower than the column: the tight bounding box of the saved image may
    # reach past the figure by the width of a tick label.
    width_fit = min(width, _COLUMN_INCHES - 0.3)
    height = rows * (0.55 * num_queries + 1.6) * width_fit / width
    fig, axes = plt.subplots(
        rows,
        cols,
        figsize=(width_fit, height),
        squeeze=False,
        layout="constrained",
    )
    try:
        for head, ax in enumerate(axes.flat):
            if head < num_heads:
                plot_attention(stack[head], tokens, title=f"head {head}", annotate=annotate, ax=ax)
            else:
                ax.set_visible(False)
        # Axis titles once per row and column: repeated, they crowd the colour bars.
        for (row, col), ax in np.ndenumerate(axes):
            if col > 0:
                ax.set_ylabel("")
            if row < rows - 1 and (row + 1) * cols + col < num_heads:
                ax.set_xlabel("")
    except Exception:
        plt.close(fig)  # a failed call leaves no half-drawn figure behind
        raise
    if title:
        fig.suptitle(title)
    return fig


def plot_layout(x: torch.Tensor, *, title: str | None = None) -> Figure:
    """Draw a 2-D tensor next to its storage, with each element's storage index.

    The top panel is the tensor as we index it (rows and columns); the bottom panel is the flat
    storage it reads from. Each cell shows its value and, underneath, the storage index that
    ``storage_offset + i * stride[0] + j * stride[1]`` gives, so a transposed tensor shows
    the same storage read in a different order.

    Args:
        x: a tensor with two dimensions.
        title: a title for the figure (the shape and strides are always shown).

    Returns:
        The matplotlib ``Figure``.

    Introduced in chapter 5.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x: expected a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2:
        raise ValueError(f"x: expected a tensor with 2 dimensions, got shape {tuple(x.shape)}")
    rows, cols = x.shape
    row_stride, col_stride = x.stride()
    offset = x.storage_offset()
    n = x.untyped_storage().nbytes() // x.element_size()
    if max(n, rows * cols) > _LAYOUT_UP_TO:
        raise ValueError(
            f"x: expected a tensor whose storage holds at most {_LAYOUT_UP_TO} elements to draw "
            f"legibly, got {n}; draw a small example, e.g. of a tensor made with "
            f"torch.arange({_LAYOUT_UP_TO // 2}).view(...)"
        )
    storage = torch.as_strided(x, (n,), (1,), 0)
    storage = storage.detach().cpu()
    values = x.detach().cpu()
    cell = min(0.6, (_COLUMN_INCHES - 1.0) / max(cols, n))
    fig, (top, bottom) = plt.subplots(
        2,
        1,
        figsize=(max(cols, n) * cell + 1.0, rows * cell + 2.2),
        gridspec_kw={"height_ratios": [rows, 1.3]},
        layout="constrained",
    )
    for i in range(rows):
        for j in range(cols):
            index = offset + i * row_stride + j * col_stride
            top.add_patch(
                plt.Rectangle(
                    (j, rows - 1 - i),
                    1,
                    1,
                    fill=True,
                    facecolor=plt.cm.tab20(index % 20),
                    alpha=0.45,
                    edgecolor="black",
                )
            )
            top.text(
                j + 0.5,
                rows - 1 - i + 0.6,
                f"{values[i, j].item():g}",
                ha="center",
                va="center",
                fontsize=9,
            )
            top.text(
                j + 0.5,
                rows - 1 - i + 0.25,
                f"[{index}]",
                ha="center",
                va="center",
                fontsize=7,
                color="black",
            )
    top.set_xlim(0, max(cols, n))
    top.set_ylim(0, rows)
    top.set_aspect("equal")
    top.axis("off")
    top.set_title(
        (f"{title}\n" if title else "")
        + f"shape {tuple(x.shape)}, stride {tuple(x.stride())}, "
        + ("contiguous" if x.is_contiguous() else "not contiguous")
    )
    for k in range(n):
        bottom.add_patch(
            plt.Rectangle(
                (k, 0), 1, 1, facecolor=plt.cm.tab20(k % 20), alpha=0.45, edgecolor="black"
            )
        )
        bottom.text(k + 0.5, 0.6, f"{storage[k].item():g}", ha="center", va="center", fontsize=9)
        bottom.text(k + 0.5, 0.25, f"[{k}]", ha="center", va="center", fontsize=7, color="black")
    bottom.set_xlim(0, max(cols, n))
    bottom.set_ylim(0, 1)
    bottom.set_aspect("equal")
    bottom.axis("off")
    bottom.set_title("storage (one flat block of memory)", fontsize=9)
    return fig
