"""Chapter 8's figures: the grid of programs, what one program moves between memories, the
key blocks each program visits, and the sentinels that catch a missing mask.

The two ``draw_*`` diagrams take the chapter's sizes; the two ``plot_*`` figures draw
tensors the chapter's kernels wrote (which key blocks each program visited, a buffer after a
kernel ran), and refuse what they cannot draw.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch, Polygon, Rectangle

from .style import (
    LABEL_PT,
    ROLE_COLOURS,
    arrow,
    as_floats,
    grid_cell,
    inch_figure,
    tint,
    write,
)

# A tile of scores drawn whole, as in chapter 7's tile figures: a neutral grey.
_NEUTRAL = "#BDBDBD"
# A tensor of no role (the log-sum-exp, the running m and l, the scores) drawn as a box.
_NO_ROLE = "white"
_SKIPPED_STYLE = (0, (3, 2))  # the dashes of a tile that is never computed, as in chapter 7


def _block_row(
    ax: Axes,
    left: float,
    y: float,
    widths: list[float],
    height: float,
    faces: list[object],
    *,
    dashed: set[int] | None = None,
) -> None:
    """A row of blocks side by side from ``left``, bottom at ``y``; ``dashed`` outlines a
    block that is not read (no fill)."""
    x = left
    for k, (w, face) in enumerate(zip(widths, faces, strict=True)):
        skipped = dashed is not None and k in dashed
        ax.add_patch(
            Rectangle(
                (x, y),
                w,
                height,
                facecolor="white" if skipped else face,
                edgecolor=ROLE_COLOURS["mask"] if skipped else "black",
                linestyle=_SKIPPED_STYLE if skipped else "-",
                lw=1.5 if skipped else 1.0,
            )
        )
        x += w


def draw_program_grid(
    num_queries: int, block: int, num_heads: int, program: tuple[int, int], *, causal: bool
) -> Figure:
    """Draw the grid of programs of the forward kernel, and what one of them reads and writes.

    Top: one box ``(i, bh)`` per program, ``ceil(t / block)`` query blocks across
    (``i = tl.program_id(0)``) by ``b h`` (batch, head) pairs down (``bh =
    tl.program_id(1)``); ``program`` is filled in the queries' blue. Below, aligned with the
    columns, the head of that program: its block of queries ``Q`` (blue), the key and value
    blocks it folds in (orange, green; a block in the future of a causal program is dashed
    and empty: skipped), and its block of the output ``O`` (sky blue), written once. The
    lanes of the last block past ``t`` are hatched.

    Args:
        num_queries: ``t`` (``s = t``), 1 to 512.
        block: queries and keys per block, with ``ceil(t / block)`` from 1 to 6.
        num_heads: ``b h``, the number of (batch, head) pairs, 1 to 4.
        program: ``(i, bh)`` of the program to follow.
        causal: whether key blocks in the future of the program are skipped.

    Returns:
        The matplotlib ``Figure``, at most 7 inches wide.

    Used in chapter 8.
    """
    t, n = num_queries, math.ceil(num_queries / block)
    i, j = program
    width, left = 4.1, 1.05  # room for the rows' and strips' names
    col = min(0.8, (width - left - 0.1) / n)
    box_h, strip_h, strip_gap = 0.36, 0.3, 0.12
    names = {"Q": "query", "K": "key", "V": "value", "O": "output"}
    how = {"Q": "load once", "K": "load", "V": "load", "O": "store once"}
    strips_h = len(names) * (strip_h + strip_gap)
    height = 0.55 + num_heads * box_h + 0.45 + strips_h + 0.4
    past_t = (n * block - t) / block * col  # inches of the last block past t
    with inch_figure(width, height) as (fig, ax):
        grid_top = height - 0.55
        title = f"launch grid: {n} × {num_heads} programs (i, bh)"
        write(ax, 0.1, height - 0.08, title, ha="left", va="top", size=LABEL_PT + 1)
        for q in range(n):
            write(ax, left + (q + 0.5) * col, grid_top + 0.05, f"i = {q}", va="bottom")
        for bh in range(num_heads):
            y = grid_top - (bh + 1) * box_h
            write(ax, left - 0.1, y + box_h / 2, f"bh = {bh}", ha="right", size=LABEL_PT)
            for q in range(n):
                chosen = (q, bh) == (i, j)
                ax.add_patch(
                    Rectangle(
                        (left + q * col + 0.03, y + 0.03),
                        col - 0.06,
                        box_h - 0.06,
                        facecolor=tint(ROLE_COLOURS["query"], 0.55) if chosen else "white",
                        edgecolor=ROLE_COLOURS["query"] if chosen else "black",
                        lw=2.0 if chosen else 1.0,
                    )
                )
                write(ax, left + (q + 0.5) * col, y + box_h / 2, f"({q}, {bh})", size=LABEL_PT)
        strips_top = grid_top - num_heads * box_h - 0.45
        caption = f"program ({i}, {j}), in head bh = {j}:"
        write(ax, 0.1, strips_top + 0.05, caption, ha="left", va="bottom", size=LABEL_PT)
        skipped = set(range(i + 1, n)) if causal else set()
        for r, (name, role) in enumerate(names.items()):
            y = strips_top - (r + 1) * (strip_h + strip_gap) + strip_gap
            if name in ("Q", "O"):  # one block: this program's rows
                faces: list[object] = [
                    tint(ROLE_COLOURS[role], 0.85) if q == i else "white" for q in range(n)
                ]
                _block_row(ax, left, y, [col] * n, strip_h, faces)
            else:  # every block the program folds in, one after another
                faces = [tint(ROLE_COLOURS[role], 0.45)] * n
                _block_row(ax, left, y, [col] * n, strip_h, faces, dashed=skipped)
            if past_t > 0:
                ax.add_patch(
                    Rectangle(
                        (left + n * col - past_t, y),
                        past_t,
                        strip_h,
                        facecolor="white",
                        edgecolor="#555555",
                        hatch="////",
                        lw=0.8,
                    )
                )
            write(ax, left - 0.1, y + strip_h / 2, f"{name}: {how[name]}", ha="right")
        last = min((i + 1) * block, t) - 1
        keys = f"keys 0 to {last if causal else t - 1}"
        note = f"rows {i * block} to {last}, {keys}; hatched: past t = {t}"
        write(ax, 0.1, 0.08, note, ha="left", va="bottom", size=LABEL_PT)
    fig.axes[0].set_label(f"programs={n * num_heads} skipped={len(skipped)}")
    return fig


def _tensor_box(
    ax: Axes, x: float, y: float, w: float, h: float, face: object, name: str, size: str
) -> None:
    """A tensor as a box centred at (x, y), its name inside and its size under it."""
    ax.add_patch(Rectangle((x - w / 2, y - h / 2), w, h, facecolor=face, edgecolor="black"))
    write(ax, x, y, name, size=LABEL_PT)
    write(ax, x, y - h / 2 - 0.04, size, va="top")


def draw_program_memory(block: int, d_h: int, key_blocks: int) -> Figure:
    """Draw what one program of the forward kernel moves between GPU memory and the chip.

    Top, GPU memory (HBM): the program's block of queries ``Q`` and of the output ``O``, the
    keys ``K`` and values ``V`` of its head, and its rows of the log-sum-exp ``lse`` (chapter
    7's ``L`` times log2(e)), the roleless tensors white. Bottom,
    on the chip (registers and shared memory): the block ``q``, one block of keys and values
    at a time, the tile of scores ``S`` (then of weights), the accumulator ``acc`` and the
    running ``m`` and ``l``. Arrows down are loads, up are stores, each with how often it
    happens; the tile of scores has none: it never leaves the chip. The totals, in numbers
    (not bytes), are written at the bottom.

    Args:
        block: queries and keys per block, 16 to 128.
        d_h: the size of one head, 16 to 128.
        key_blocks: how many key blocks the program folds in, 1 to 64.

    Returns:
        The matplotlib ``Figure``, at most 7 inches wide.

    Used in chapter 8.
    """
    width, height = 4.4, 3.75
    qd = f"{block} × {d_h}"
    reads = block * d_h + 2 * key_blocks * block * d_h
    writes = block * d_h + block
    xs = {"q": 0.55, "k": 1.35, "v": 2.05, "o": 3.0, "l": 3.85}
    box = (0.55, 0.4)  # a tensor's box, inches
    with inch_figure(width, height) as (fig, ax):
        hbm_top, chip_top = height - 0.1, height - 1.6
        for top, h, name, title_y, va in (
            (hbm_top, 1.15, "GPU memory (HBM)", hbm_top - 0.08, "top"),
            (chip_top, 1.75, "one program, on the chip", chip_top - 1.75 + 0.08, "bottom"),
        ):
            ax.add_patch(
                FancyBboxPatch(
                    (0.1, top - h),
                    width - 0.2,
                    h,
                    boxstyle="round,pad=0,rounding_size=0.08",
                    facecolor="#F4F4F4",
                    edgecolor="#555555",
                )
            )
            write(ax, 0.2, title_y, name, ha="left", va=va, size=LABEL_PT + 1)
        y_hbm, y_chip = hbm_top - 0.62, chip_top - 0.45
        key_face, value_face = tint(ROLE_COLOURS["key"], 0.6), tint(ROLE_COLOURS["value"], 0.6)
        query_face, out_face = tint(ROLE_COLOURS["query"], 0.6), tint(ROLE_COLOURS["output"], 0.8)
        kv_size = f"{key_blocks} × ({block} × {d_h})"
        for key, face, name, size in (
            ("q", query_face, "Q", qd),
            ("k", key_face, "K", ""),
            ("v", value_face, "V", ""),
            ("o", out_face, "O", qd),
            ("l", _NO_ROLE, "lse", f"{block}"),
        ):
            _tensor_box(ax, xs[key], y_hbm, *box, face, name, size)
        write(ax, (xs["k"] + xs["v"]) / 2, y_hbm - box[1] / 2 - 0.04, kv_size, va="top")
        for key, face, name, size in (
            ("q", query_face, "q", qd),
            ("k", key_face, "k", ""),
            ("v", value_face, "v", ""),
            ("o", out_face, "acc", qd),
            ("l", _NO_ROLE, "m, ℓ", f"2 × {block}"),
        ):
            _tensor_box(ax, xs[key], y_chip, *box, face, name, size)
        write(ax, (xs["k"] + xs["v"]) / 2, y_chip - box[1] / 2 - 0.04, f"{block} × {d_h}", va="top")
        # The scores: computed, used and dropped on the chip.
        s_y = chip_top - 1.13
        ax.add_patch(
            Rectangle(
                (xs["k"] - 0.3, s_y - 0.17), 0.34, 0.34, facecolor=_NO_ROLE, edgecolor="black"
            )
        )
        write(ax, xs["k"] - 0.13, s_y, "S", size=LABEL_PT)
        note = f"{block} × {block} scores: never stored"
        write(ax, xs["k"] + 0.14, s_y, note, ha="left", size=LABEL_PT)
        gap_top, gap_bottom = y_hbm - box[1] / 2 - 0.25, y_chip + box[1] / 2
        for key, label, up in (
            ("q", "once", False),
            ("k", f"×{key_blocks}", False),
            ("v", f"×{key_blocks}", False),
            ("o", "once", True),
            ("l", "once", True),
        ):
            start, end = (gap_bottom, gap_top) if up else (gap_top, gap_bottom)
            arrow(ax, (xs[key], start), (xs[key], end), lw=1.6)
            write(ax, xs[key] + 0.06, (gap_top + gap_bottom) / 2, label, ha="left")
        totals = f"per program: {reads:,} numbers read, {writes:,} written"
        write(ax, 0.1, 0.08, totals, ha="left", va="bottom", size=LABEL_PT)
    fig.axes[0].set_label(f"reads={reads} writes={writes}")
    return fig


#: What the forward kernel did with a tile, as :func:`plot_key_blocks` reads it.
SKIPPED, WHOLE, MASKED = 0, 1, 2
_KIND_NAMES = {WHOLE: "no mask", MASKED: "masked", SKIPPED: "skipped"}
_HIDDEN: dict[str, Any] = {
    "facecolor": "none",
    "edgecolor": ROLE_COLOURS["mask"],
    "hatch": "////",
    "lw": 0,
}


def _check_kinds(name: str, kinds: object, shape: tuple[int, int]) -> torch.Tensor:
    if not isinstance(kinds, torch.Tensor) or kinds.is_floating_point() or kinds.is_complex():
        got = kinds.dtype if isinstance(kinds, torch.Tensor) else type(kinds).__name__
        raise TypeError(f"{name}: expected an integer tensor of tile kinds, got {got}")
    if tuple(kinds.shape) != shape:
        raise ValueError(
            f"{name}: expected (query blocks, key blocks) = {shape}, got {tuple(kinds.shape)}"
        )
    kinds = kinds.detach().cpu()
    if not torch.isin(kinds, torch.tensor([SKIPPED, WHOLE, MASKED])).all():
        raise ValueError(f"{name}: expected kinds 0 (skipped), 1 (no mask) or 2 (masked)")
    return kinds


def _hidden_part(
    ax: Axes, corner: tuple[float, float], q0: int, k0: int, block: int, s: int, unit: float
) -> None:
    """Hatch what the mask hides in the masked tile whose top-left corner is ``corner``
    (inches), for queries ``q0 ...`` and keys ``k0 ...``: keys past ``s``, and, on the
    diagonal of a causal pass, the keys above it."""
    x, y = corner
    if k0 + block > s:  # keys past the end
        past = (k0 + block - s) * unit
        ax.add_patch(
            Rectangle((x + block * unit - past, y - block * unit), past, block * unit, **_HIDDEN)
        )
    if q0 == k0:  # key j > query i: the triangle above the diagonal
        side = block * unit
        ax.add_patch(Polygon([(x, y), (x + side, y), (x + side, y - side)], **_HIDDEN))


def _kind_swatch(ax: Axes, x: float, y: float, name: str) -> None:
    """A small tile drawn as :func:`plot_key_blocks` draws a tile of that kind, bottom-left
    corner at (x, y)."""
    side = 0.16
    if name == "skipped":
        style: dict[str, Any] = {"facecolor": "white", "edgecolor": ROLE_COLOURS["mask"]}
        style |= {"linestyle": _SKIPPED_STYLE, "lw": 1.2}
        ax.add_patch(Rectangle((x, y), side, side, **style))
        return
    ax.add_patch(Rectangle((x, y), side, side, facecolor=_NEUTRAL, edgecolor="black", lw=1.0))
    if name == "masked":
        ax.add_patch(Polygon([(x, y + side), (x + side, y + side), (x + side, y)], **_HIDDEN))


def plot_key_blocks(
    kinds: Mapping[bool, torch.Tensor], num_queries: int, num_keys: int, block: int
) -> Figure:
    """Draw which key blocks each query block's program folded in, as a kernel recorded it.

    One panel per entry of ``kinds`` (``is_causal`` to what the kernel did), side by side:
    the ``(t, s)`` scores cut into ``block`` by ``block`` tiles, query blocks down and key
    blocks across (both labelled), each drawn by what the program did with it: folded in
    without a mask (grey), with the mask (grey, what the mask hides hatched in vermillion:
    keys above the diagonal when causal, keys past ``s``), or skipped (a dashed vermillion
    outline, no fill). The rows past ``t``, the last block's padding lanes (computed, never stored),
    are faded. The counts of each kind are written under each panel, each beside a tile of
    its kind.

    Args:
        kinds: ``is_causal`` to a ``(ceil(t / block), ceil(s / block))`` integer tensor,
            0 skipped, 1 no mask, 2 masked; one or two panels.
        num_queries: ``t``, at least 1.
        num_keys: ``s``, at least 1.
        block: queries and keys per block, with at most 8 blocks a side.

    Returns:
        The matplotlib ``Figure``, at most 7 inches wide.

    Raises:
        TypeError: ``kinds`` is not a dict of integer tensors.
        ValueError: no panel or more than two, a panel of another shape, or a kind other
            than 0, 1 or 2.

    Used in chapter 8.
    """
    t, s = num_queries, num_keys
    n_q, n_k = math.ceil(t / block), math.ceil(s / block)
    if not isinstance(kinds, Mapping):
        raise TypeError(
            f"kinds: expected a dict of is_causal to tensors, got {type(kinds).__name__}"
        )
    if not 1 <= len(kinds) <= 2:
        raise ValueError(f"kinds: expected one or two panels, got {len(kinds)}")
    panels = {
        bool(causal): _check_kinds(f"kinds[{causal}]", grid, (n_q, n_k))
        for causal, grid in kinds.items()
    }
    unit = 1.6 / (max(n_q, n_k) * block)  # inches per token: 1.6 inches at most a side
    tile, gap, left = block * unit, 0.5, 0.4  # room for "query block" left of each panel
    width = left + len(panels) * (n_k * tile + gap)
    height = 0.55 + n_q * tile + 0.95
    counts = {}
    with inch_figure(width, height) as (fig, ax):
        top = height - 0.5
        for p, (causal, grid) in enumerate(panels.items()):
            x0 = left + p * (n_k * tile + gap)
            write(ax, x0, height - 0.08, f"is_causal={causal}", ha="left", va="top", size=LABEL_PT)
            write(ax, x0, top + 0.05, "key block →", ha="left", va="bottom")
            write(ax, x0 - 0.08, top, "query block →", ha="right", va="top", rotation=-90)
            for qi in range(n_q):
                for kj in range(n_k):
                    kind = int(grid[qi, kj])
                    corner = (x0 + kj * tile, top - qi * tile)  # top-left
                    skipped = kind == SKIPPED
                    ax.add_patch(
                        Rectangle(
                            (corner[0], corner[1] - tile),
                            tile,
                            tile,
                            facecolor="white" if skipped else _NEUTRAL,
                            edgecolor=ROLE_COLOURS["mask"] if skipped else "black",
                            linestyle=_SKIPPED_STYLE if skipped else "-",
                            lw=1.4,
                            zorder=2 if skipped else 1,
                        )
                    )
                    if kind == MASKED:
                        _hidden_part(ax, corner, qi * block, kj * block, block, s, unit)
            if n_q * block > t:  # the padding lanes of the last query block
                faded = (n_q * block - t) * unit
                ax.add_patch(
                    Rectangle(
                        (x0, top - n_q * tile),
                        n_k * tile,
                        faded,
                        facecolor="white",
                        alpha=0.65,
                        edgecolor="none",
                        zorder=3,
                    )
                )
            counts[causal] = {name: int((grid == kind).sum()) for kind, name in _KIND_NAMES.items()}
            for r, (name, count) in enumerate(counts[causal].items()):  # with a key
                y = top - n_q * tile - 0.1 - r * 0.27
                _kind_swatch(ax, x0, y - 0.18, name)
                write(ax, x0 + 0.24, y, f"{name}: {count}", ha="left", va="top", size=LABEL_PT)
    fig.axes[0].set_label(repr(counts))
    return fig


_STATUS: dict[str, dict[str, Any]] = {  # what a cell holds after a kernel ran
    "right": {"facecolor": tint(ROLE_COLOURS["output"], 0.8), "edgecolor": "white"},
    "wrong": {"facecolor": "white", "edgecolor": "#444444", "hatch": "xxx"},
    "NaN": {"facecolor": "#F0E442", "edgecolor": "white"},  # Okabe-Ito yellow, of no role
    "sentinel": {"facecolor": "#DDDDDD", "edgecolor": "white"},
    "overwritten": {"facecolor": "#222222", "edgecolor": "white"},
}


def plot_sentinels(
    buffers: Mapping[str, torch.Tensor], expected: torch.Tensor, sentinel: float
) -> Figure:
    """Draw buffers that hold an output followed by sentinels, after a kernel wrote them.

    Each buffer is drawn as rows of ``cols`` cells, as the ``(rows, cols)`` output it starts
    with, then the sentinels after it: an output cell is right (sky blue) when it is close
    to ``expected``, wrong otherwise (cross-hatched), or NaN (yellow); a sentinel is intact
    (light grey) or overwritten (black). A kernel that stores without its mask writes past
    its rows: into the next row, and at the end into the sentinels. The counts are written
    under each panel.

    Args:
        buffers: a panel title to a 1-d buffer after a kernel ran, the output first; one
            to three panels, each at least ``expected.numel()`` long and at most 8 rows of
            sentinels.
        expected: the right output, ``(rows, cols)``, ``cols`` from 1 to 40.
        sentinel: the value the sentinels were filled with.

    Returns:
        The matplotlib ``Figure``, at most 7 inches wide.

    Raises:
        TypeError: a buffer or ``expected`` is not a floating-point tensor.
        ValueError: no panel or more than three, a buffer of the wrong shape, or
            ``expected`` not 2-d with 1 to 40 columns.

    Used in chapter 8.
    """
    if not isinstance(expected, torch.Tensor) or not expected.is_floating_point():
        raise TypeError("expected: expected a floating-point tensor (rows, cols)")
    if expected.dim() != 2 or not 1 <= expected.shape[1] <= 40 or expected.shape[0] == 0:
        raise ValueError(
            f"expected: expected (rows, cols) with 1 to 40 columns, got {tuple(expected.shape)}"
        )
    if not isinstance(buffers, Mapping) or not 1 <= len(buffers) <= 3:
        raise ValueError("buffers: expected a dict of one to three panels")
    rows, cols = expected.shape
    n = rows * cols
    want = as_floats(expected).flatten()
    panels = {}
    for title, buffer in buffers.items():
        name = f"buffers[{title!r}]"
        if not isinstance(buffer, torch.Tensor) or not buffer.is_floating_point():
            raise TypeError(f"{name}: expected a floating-point tensor")
        if buffer.dim() != 1 or not n <= buffer.numel() <= n + 8 * cols:
            raise ValueError(
                f"{name}: expected a 1-d buffer of {n} to {n + 8 * cols} numbers, the output "
                f"then the sentinels, got shape {tuple(buffer.shape)}"
            )
        values = as_floats(buffer)
        right = torch.isclose(values[:n], want, rtol=1e-3, atol=1e-5)  # NaN is not close
        nan = values[:n].isnan()
        intact = values[n:] == sentinel
        status = [
            "right" if ok else "NaN" if bad else "wrong"
            for ok, bad in zip(right.tolist(), nan.tolist(), strict=True)
        ]
        status += ["sentinel" if ok else "overwritten" for ok in intact.tolist()]
        panels[str(title)] = status
    cell = min(0.1, 3.8 / cols)
    width = 0.2 + cols * cell
    heights = [0.35 + math.ceil(len(st) / cols) * cell + 0.3 for st in panels.values()]
    legend: list[list[str]] = [[]]  # the legend's rows, as wide as the figure
    x = 0.1
    for state in _STATUS:
        item = 0.45 + 0.075 * len(state)
        if legend[-1] and x + item - 0.2 > width:
            legend.append([])
            x = 0.1
        legend[-1].append(state)
        x += item
    height = sum(heights) + 0.35 * len(legend) + 0.1
    counts = {}
    with inch_figure(width, height) as (fig, ax):
        top = height - 0.1
        for (title, status), h in zip(panels.items(), heights, strict=True):
            write(ax, 0.1, top, title, ha="left", va="top", size=LABEL_PT)
            grid_top = top - 0.33
            for k, state in enumerate(status):
                i, j = divmod(k, cols)
                grid_cell(ax, 0.1, grid_top, i, j, cell, lw=0.4, **_STATUS[state])
            # The output's end: where the sentinels begin.
            y = grid_top - rows * cell
            ax.plot([0.1, 0.1 + cols * cell], [y, y], color="black", lw=1.5)
            counts[title] = {state: status.count(state) for state in _STATUS}
            summary = ", ".join(f"{state} {count}" for state, count in counts[title].items())
            write(
                ax,
                0.1,
                grid_top - math.ceil(len(status) / cols) * cell - 0.05,
                summary,
                ha="left",
                va="top",
            )
            top -= h
        for r, states in enumerate(legend):
            x, y = 0.1, 0.12 + 0.35 * (len(legend) - 1 - r)
            for state in states:
                style = {**_STATUS[state], "edgecolor": "black"}
                ax.add_patch(Rectangle((x, y), 0.16, 0.16, lw=0.8, **style))
                write(ax, x + 0.22, y + 0.08, state, ha="left")
                x += 0.45 + 0.075 * len(state)
    fig.axes[0].set_label(repr(counts))
    return fig
