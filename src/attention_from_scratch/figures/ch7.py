"""Chapter 7's diagrams: the KV cache, the tiles of tiled attention, grouped heads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from matplotlib.figure import Figure
from matplotlib.patches import Circle, Rectangle

from .style import (
    HEAD_COLOURS,
    LABEL_PT,
    ROLE_COLOURS,
    grid_cell,
    inch_figure,
    tint,
    write,
)


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

    Used in chapter 7.
    """
    total = prompt_length + steps
    passes = steps + 1  # the prompt, then one pass per step
    cell = min(0.3, 2.9 / total)
    panel = total * cell
    left = 0.75  # right of the row labels, "prompt" to "step 8"
    block = passes * cell + 1.05  # one panel, its title above and its axis and total below
    legend = [
        (tint(ROLE_COLOURS["key"], 0.75), "computed this step"),
        (tint(ROLE_COLOURS["cache"], 0.75), "read from the cache"),
        (ROLE_COLOURS["query"], "query computed"),
    ]
    height = 2 * block + 0.3 * len(legend) + 0.1
    width = left + max(panel, 2.3) + 0.1  # the totals' line is 2.2 inches long
    computed_face, cached_face = legend[0][0], legend[1][0]
    with inch_figure(width, height) as (fig, ax):
        computed = []
        for k, cached in enumerate((False, True)):
            top = height - 0.4 - k * block
            count = 0
            for step in range(passes):
                length = prompt_length + step
                y = top - (step + 1) * cell
                label = "prompt" if step == 0 else f"step {step}"
                write(ax, left - 0.08, y + cell / 2, label, ha="right", size=LABEL_PT)
                for pos in range(length):
                    new = not cached or step == 0 or pos == length - 1
                    count += new
                    face = computed_face if new else cached_face
                    grid_cell(ax, left, top, step, pos, cell, facecolor=face, edgecolor="white")
                queries = range(length) if step == 0 or not cached else [length - 1]
                for pos in queries:
                    centre = (left + (pos + 0.5) * cell, y + cell / 2)
                    ax.add_patch(Circle(centre, cell * 0.16, color=ROLE_COLOURS["query"]))
            computed.append(count)
            bottom = top - passes * cell
            title = "with a KV cache" if cached else "without a cache"
            write(ax, left, top + 0.1, title, ha="left", va="bottom", size=LABEL_PT + 1)
            style: dict[str, Any] = {"ha": "left", "va": "top", "size": LABEL_PT}
            write(ax, left, bottom - 0.08, "position →", color="#555555", **style)
            write(ax, left, bottom - 0.36, f"keys and values computed: {count}", **style)
        for row, (face, name) in enumerate(legend):  # one entry a line: a phone is narrow
            y = 0.1 + 0.3 * (len(legend) - row - 0.5)
            ax.add_patch(Rectangle((left, y - 0.08), 0.16, 0.16, facecolor=face, edgecolor="black"))
            write(ax, left + 0.24, y, name, ha="left", size=LABEL_PT)
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

    Used in chapter 7.
    """
    t, s, block = num_queries, num_keys, block_size
    offset = s - t
    # Under 4.5 inches wide, the legend below the grid: a phone (about 4 inches) then scales
    # the 10-point text down little.
    cell = min(0.26, 3.3 / max(t, s))
    left = 0.75  # right of the query numbers and "query ↓"
    legend_height = 3 * 0.32  # one entry a line
    width = max(left + s * cell + 0.15, 4.0)  # the sizes' line is about 3.3 inches long
    height = 0.6 + t * cell + 0.15 + legend_height + 0.45
    counts = {"computed": 0, "partly masked": 0, "skipped": 0}
    fill = "#BDBDBD"  # of a computed tile: neutral grey, scores have no role colour
    hatched = {"facecolor": "white", "edgecolor": ROLE_COLOURS["mask"], "hatch": "////", "lw": 0}
    with inch_figure(width, height) as (fig, ax):
        top = height - 0.6
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
                                grid_cell(ax, left, top, i, j, cell, **hatched)
                skipped = kind == "skipped"
                edge = ROLE_COLOURS["mask"] if skipped else "black"
                style = (0, (3, 2)) if skipped else "-"
                ax.add_patch(
                    Rectangle(corner, w, h, fill=False, lw=2.0, edgecolor=edge, linestyle=style)
                )
        for i in range(0, t, block):
            write(ax, left - 0.06, top - i * cell - cell / 2, str(i), ha="right", size=LABEL_PT)
        for j in range(0, s, block):
            write(ax, left + (j + 0.5) * cell, top + 0.05, str(j), va="bottom", size=LABEL_PT)
        write(ax, left + s * cell / 2, top + 0.32, "key →", va="bottom", size=LABEL_PT)
        write(ax, left - 0.06, top + 0.32, "query ↓", ha="right", va="bottom", size=LABEL_PT)
        legend_top = top - t * cell - 0.15
        # mypy joins "-" and the dash pattern into a Sequence, which `style` cannot hold.
        for k, (kind, face, edge, hatch, style) in enumerate(  # type: ignore[assignment]
            (
                ("computed", fill, "black", None, "-"),
                ("partly masked", "white", ROLE_COLOURS["mask"], "////", "-"),
                ("skipped", "white", ROLE_COLOURS["mask"], None, (0, (3, 2))),
            )
        ):
            y = legend_top - (k + 0.5) * 0.32
            ax.add_patch(
                Rectangle(
                    (left, y - 0.1),
                    0.2,
                    0.2,
                    facecolor=face,
                    edgecolor=edge,
                    hatch=hatch,
                    linestyle=style,
                    lw=1.5,
                )
            )
            label = f"{kind}: {counts[kind]}"
            write(ax, left + 0.3, y, label, ha="left", size=LABEL_PT)
        sizes = f"t = {t} queries, s = {s} keys, tiles of {block} × {block}"
        write(ax, 0.1, 0.2, sizes, ha="left", size=LABEL_PT)
    fig.axes[0].set_label(" ".join(f"{kind}={n}" for kind, n in counts.items()))
    return fig


# How strongly a group's colour fills its boxes: light enough for black text on any of the
# eight head colours, dark enough to tell yellow and sky blue from white.
_GROUP_TINT = 0.35


def draw_grouped_heads(num_heads: int, kv_heads: Sequence[int]) -> Figure:
    """Draw query heads grouped over shared key/value heads, one row per configuration.

    Each row shows ``h`` query heads (boxes ``q0``, ``q1``, ...) above ``h_kv`` key/value
    heads (a ``k`` half and a ``v`` half), with a line from query head ``i`` to the
    key/value head ``i // g`` that serves it (``g = h / h_kv``). A figure of heads shows no
    roles (book/notation.md): every box, line and outline takes its group's head colour, the
    boxes filled with a light tint of it. With ``h_kv = h`` this is multi-head attention,
    with ``h_kv = 1`` multi-query attention, in between grouped-query attention.

    Args:
        num_heads: ``h``, the number of query heads, 1 to 16.
        kv_heads: the ``h_kv`` of each row, each dividing ``num_heads``; 1 to 4 rows.

    Returns:
        The matplotlib ``Figure``, at most 7 inches wide.

    Used in chapter 7.
    """
    h, rows = num_heads, list(kv_heads)
    # 4.3 inches wide, so that a phone (about 4 inches) scales the 10-point text down little.
    width = 4.3
    labels = 0.95  # the row labels, "Q heads" and "K/V heads", left of the heads
    spacing = (width - labels - 0.05) / h
    box = min(0.36, spacing * 0.8)
    half = min(box, spacing * 0.42)  # the width of a k or v half: a pair fits one slot
    edge = 2 if half >= 0.12 else 1.2  # a thick outline would hide a narrow box's face
    row_height = 1.5
    height = len(rows) * row_height + 0.1
    with inch_figure(width, height) as (fig, ax):
        for r, h_kv in enumerate(rows):
            g = h // h_kv
            top = height - 0.1 - r * row_height
            name = "multi-head" if h_kv == h else "multi-query" if h_kv == 1 else "grouped-query"
            title = f"{name}: $h_{{kv}} = {h_kv}$, $g = {g}$"
            write(ax, 0.1, top - 0.12, title, ha="left", size=LABEL_PT + 1)
            q_y, kv_y = top - 0.55, top - 1.2
            xs = [labels + (i + 0.5) * spacing for i in range(h)]
            kv_xs = [sum(xs[j * g : (j + 1) * g]) / g for j in range(h_kv)]
            for i in range(h):
                j = i // g
                colour = HEAD_COLOURS[j % 8]
                ax.plot([xs[i], kv_xs[j]], [q_y - box / 2, kv_y + box / 2], color=colour, lw=1.5)
                corner = (xs[i] - box / 2, q_y - box / 2)
                face = tint(colour, _GROUP_TINT)
                ax.add_patch(Rectangle(corner, box, box, facecolor=face, edgecolor=colour, lw=edge))
                if box >= 0.3 and h <= 10:  # room for "q9" in 10 points
                    write(ax, xs[i], q_y, f"q{i}", size=LABEL_PT)
            for j, x in enumerate(kv_xs):  # the key half left of x, the value half right
                colour = HEAD_COLOURS[j % 8]
                face = tint(colour, _GROUP_TINT)
                for left in (x - half, x):
                    corner = (left, kv_y - box / 2)
                    ax.add_patch(
                        Rectangle(corner, half, box, facecolor=face, edgecolor=colour, lw=edge)
                    )
                if half >= 0.12:  # room for a letter in 10 points
                    write(ax, x - half / 2, kv_y, "k", size=LABEL_PT)
                    write(ax, x + half / 2, kv_y, "v", size=LABEL_PT)
            write(ax, labels - 0.12, q_y, "Q heads", ha="right", size=LABEL_PT)
            write(ax, labels - 0.12, kv_y, "K/V heads", ha="right", size=LABEL_PT)
    return fig
