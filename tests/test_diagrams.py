"""The schematic diagrams: what they draw, what they refuse, and that they fit the column.

Expected numbers come from hand computation or from the definitions (a causal mask of 6
tokens allows 21 pairs and forbids 15), never from the diagram code itself. Figures are drawn
with the non-interactive Agg backend and closed after each test.
"""

from __future__ import annotations

import io
from collections.abc import Callable

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch
from helpers import TOKENS, all_texts
from matplotlib.axes import Axes
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch, Rectangle
from matplotlib.text import Text

import attention_from_scratch as afs
from attention_from_scratch import figures
from attention_from_scratch.figures import HEAD_COLOURS, ROLE_COLOURS

# Okabe and Ito's eight colours, distinguishable with every common colour-vision deficiency.
OKABE_ITO = {
    "#000000",
    "#e69f00",
    "#56b4e9",
    "#009e73",
    "#f0e442",
    "#0072b2",
    "#d55e00",
    "#cc79a7",
    "#999999",  # the grey Okabe and Ito use for neutral elements
}


def inputs() -> torch.Tensor:
    return afs.toy_sentence()[1]


def weights(rows: int = 6) -> torch.Tensor:
    scores = torch.randn(rows, rows, generator=torch.Generator().manual_seed(0))
    return torch.softmax(scores.masked_fill(afs.causal_mask(rows), float("-inf")), dim=-1)


def causal_kinds(n: int) -> torch.Tensor:
    """What chapter 8's causal kernel does with n x n tiles, by hand: 2 (masked) on the
    diagonal, 1 (no mask) below it, 0 (skipped) above it."""
    return torch.ones(n, n, dtype=torch.long).tril() + torch.eye(n, dtype=torch.long)


SENTINEL = 1234.5
SOFTMAX = torch.softmax(torch.randn(5, 37, generator=torch.Generator().manual_seed(0)), dim=-1)


def sentinel_buffer(wrong_rows: int = 0, hit: int = 0, sentinels: int = 64) -> torch.Tensor:
    """Chapter 8's softmax output (5 x 37) and its sentinels, after a kernel that got the
    first ``wrong_rows`` rows wrong (NaN) and overwrote the first ``hit`` sentinels."""
    buffer = torch.full((SOFTMAX.numel() + sentinels,), SENTINEL)
    buffer[: SOFTMAX.numel()] = SOFTMAX.flatten()
    buffer[: wrong_rows * 37] = float("nan")
    buffer[SOFTMAX.numel() : SOFTMAX.numel() + hit] = 0.5
    return buffer


# One call per public function, with the sizes of the chapter that uses it.
GOOD: dict[str, Callable[[], Figure]] = {
    "context_vector": lambda: figures.draw_context_vector(inputs(), TOKENS, query=1),
    "query_path": lambda: figures.draw_query_path(
        inputs()[:, :2], inputs()[:, 1:], inputs(), TOKENS, query=5
    ),
    "attention_matrices": lambda: figures.draw_attention_matrices(inputs(), TOKENS),
    "projections": lambda: figures.draw_projections(
        inputs(), torch.rand(3, 2), torch.rand(3, 2), torch.rand(3, 2)
    ),
    "causal_graph": lambda: figures.draw_causal_graph(afs.causal_mask(6), TOKENS),
    "dropout": lambda: figures.draw_dropout(
        torch.full((6,), 1 / 6), torch.tensor([1 / 3, 0, 1 / 3, 0, 0, 1 / 3]), TOKENS, p=0.5
    ),
    "head_split": lambda: figures.draw_head_split(2, 6, 4, 2),
    "split_numbers": lambda: figures.draw_split_numbers(
        inputs() @ torch.rand(3, 4) - 0.5, torch.rand(2, 6, 2) - 0.5, TOKENS
    ),
    "wrapper_vs_batched": lambda: figures.draw_wrapper_vs_batched(3, 2, 2),
    "lines": lambda: figures.plot_attention_lines(torch.stack((weights(), weights())), TOKENS),
    "lines_eight_heads_32_tokens": lambda: figures.plot_attention_lines(
        weights(32).expand(8, 32, 32)
    ),
    "strided_read": lambda: figures.draw_strided_read(torch.arange(1.0, 13).view(3, 4).T),
    "positions_added": lambda: figures.draw_positions_added(
        torch.rand(6, 8) - 0.5, afs.sinusoidal_positions(6, 8), TOKENS
    ),
    "induction_circuit": lambda: figures.draw_induction_circuit(
        list("abcdabcd"), weights(8), weights(8), query=5
    ),
    "kv_cache": lambda: figures.draw_kv_cache(7, 4),
    "tiles": lambda: figures.draw_tiles(16, 16, 4),
    "grouped_heads": lambda: figures.draw_grouped_heads(8, (8, 2, 1)),
    "program_grid": lambda: figures.draw_program_grid(100, 32, 2, (2, 1), causal=True),
    "program_memory": lambda: figures.draw_program_memory(32, 32, 3),
    "key_blocks": lambda: figures.plot_key_blocks(
        {True: causal_kinds(4), False: torch.tensor([[1, 1, 1, 2]] * 4)}, 100, 100, 32
    ),
    "sentinels": lambda: figures.plot_sentinels(
        {"with masks": sentinel_buffer(), "without": sentinel_buffer(wrong_rows=5, hit=27)},
        SOFTMAX,
        SENTINEL,
    ),
}


@pytest.mark.parametrize("name", list(GOOD))
def test_every_diagram_fits_the_column_with_legible_text(name: str) -> None:
    before = plt.get_fignums()
    fig = GOOD[name]()
    assert isinstance(fig, Figure)
    # Exactly one new figure, for the caller to show or close.
    assert len(plt.get_fignums()) == len(before) + 1
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    assert buffer.getvalue().startswith(b"\x89PNG")
    # Everything drawn, labels included, lies within the book's 7-inch column, even after
    # the notebook pads the tight bounding box by 0.1 inches on each side.
    renderer = fig.canvas.get_renderer()
    box = fig.get_tightbbox(renderer)
    assert fig.get_figwidth() <= 7.0 + 1e-9
    assert box.width + 0.2 <= 7.0 + 1e-6, f"{name}: drawn {box.width:.2f} inches wide"
    assert box.x0 >= -0.05, f"{name}: text runs off the left edge"
    assert fig.get_figheight() <= 16.0  # two rows of four 32-token line views, the tallest
    sizes = [text.get_fontsize() for text in fig.findobj(Text) if text.get_text()]
    assert sizes and min(sizes) >= 9


def test_palette_is_one_colour_per_role_and_colour_blind_safe() -> None:
    roles = {"input", "query", "key", "value", "output", "mask", "cache"}
    assert set(ROLE_COLOURS) == roles
    assert len({to_hex(colour) for colour in ROLE_COLOURS.values()}) == len(roles)
    assert {to_hex(colour) for colour in ROLE_COLOURS.values()} <= OKABE_ITO
    assert len(set(HEAD_COLOURS)) == 8
    assert {to_hex(colour) for colour in HEAD_COLOURS} <= OKABE_ITO


# ---------------------------------------------------------------------------------------------
# What each diagram shows
# ---------------------------------------------------------------------------------------------


def test_context_vector_shows_the_numbers_of_journey() -> None:
    texts = all_texts(figures.draw_context_vector(inputs(), TOKENS, query=1))
    # journey . journey = 0.55^2 + 0.87^2 + 0.66^2 = 1.495, and journey . Your = 0.9544.
    assert "1.50" in texts and "0.95" in texts
    # The weight of "journey" for itself and its context vector, as printed in chapter 1.
    assert "0.238" in texts
    # z^(1) = [0.4419, 0.6515, 0.5683], the last block, drawn before the sum of the weights.
    end = texts.index("weights sum to 1.000")
    assert texts[end - 3 : end] == ["0.44", "0.65", "0.57"]


def test_query_path_scales_the_scores_by_the_key_size() -> None:
    x = inputs()
    texts = all_texts(figures.draw_query_path(x, x, x, TOKENS, query=1))
    # The same scores as chapter 1, divided by sqrt(d_k) = sqrt(3) before the softmax.
    expected = torch.softmax(x @ x[1] / 3**0.5, dim=-1)
    assert [f"{w:.3f}" for w in expected.tolist()] == [
        text for text in texts if len(text) == 5 and text.startswith("0.")
    ]
    assert "1.50" in texts  # the unscaled score of journey with itself
    assert any("softmax" in text and "sqrt{3}" in text for text in texts)


def test_attention_matrices_frame_the_query_row_in_every_block() -> None:
    fig = figures.draw_attention_matrices(inputs(), TOKENS, query=5)
    texts = all_texts(fig)
    assert sum("(6, 3)" in text for text in texts) == 2  # X and Z, named with their shapes
    assert sum("(6, 6)" in text for text in texts) == 2  # the scores and the weights
    frames = [
        patch
        for patch in fig.axes[0].patches
        if to_hex(patch.get_edgecolor()) == to_hex(ROLE_COLOURS["query"])
    ]
    assert len(frames) == 4
    # Every frame sits on the bottom row, row 5 of the six, of its block: the weights and Z
    # (the lower pair) as low as any cell, X and the scores (the upper pair) level.
    lowest = min(patch.get_y() for patch in fig.axes[0].patches if isinstance(patch, Rectangle))
    heights = sorted(frame.get_y() for frame in frames)
    assert heights[:2] == pytest.approx([lowest] * 2)
    assert heights[2] == pytest.approx(heights[3]) and heights[2] > lowest + 6 * 0.2


def test_projections_label_every_block_with_its_shape() -> None:
    fig = figures.draw_projections(inputs(), torch.rand(3, 2), torch.rand(3, 2), torch.rand(3, 5))
    texts = all_texts(fig)
    assert texts.count("(3, 2)") == 2 and "(3, 5)" in texts
    assert texts.count("(6, 2)") == 3  # Q and K above, Q again below
    assert "(6, 5)" in texts and "(2, 6)" in texts and "(6, 6)" in texts


def arrows(fig: Figure, colour: str) -> list[FancyArrowPatch]:
    return [
        patch
        for patch in fig.axes[0].patches
        if isinstance(patch, FancyArrowPatch) and to_hex(patch.get_edgecolor()) == colour
    ]


def test_causal_graph_draws_an_arc_per_allowed_and_forbidden_pair() -> None:
    fig = figures.draw_causal_graph(afs.causal_mask(6), TOKENS)
    # 6 tokens: 15 pairs j < i and 6 self-loops are allowed, 15 pairs j > i forbidden.
    # Allowed edges carry messages, which are values: green.
    assert len(arrows(fig, to_hex(ROLE_COLOURS["value"]))) == 21
    assert len(arrows(fig, to_hex(ROLE_COLOURS["mask"]))) == 15
    assert all_texts(fig).count("×") == 15
    # No mask at all: every pair may talk.
    open_fig = figures.draw_causal_graph(torch.zeros(4, 4, dtype=torch.bool))
    assert len(arrows(open_fig, to_hex(ROLE_COLOURS["value"]))) == 16
    assert arrows(open_fig, to_hex(ROLE_COLOURS["mask"])) == []


def test_dropout_crosses_out_exactly_the_dropped_weights() -> None:
    torch.manual_seed(123)
    row = torch.softmax(torch.randn(6), dim=-1)
    dropped = torch.nn.Dropout(0.5)(row)
    zeros = int((dropped == 0).sum())
    assert 0 < zeros < 6  # this seed drops some but not all
    texts = all_texts(figures.draw_dropout(row, dropped, TOKENS, p=0.5))
    assert texts.count("×") == zeros
    assert texts.count("0.00") >= zeros
    assert any("= 2" in text for text in texts)  # 1 / (1 - 0.5)


def test_dropout_names_its_query_in_the_labels() -> None:
    row = torch.full((4,), 0.25)
    texts = all_texts(figures.draw_dropout(row, row * 2, p=0.5, query=3))
    assert any("alpha_{3j}" in text for text in texts)
    assert any("z^{(3)}" in text for text in texts)
    with pytest.raises(ValueError):
        figures.draw_dropout(row, row * 2, p=0.5, query=-1)
    with pytest.raises(TypeError):
        figures.draw_dropout(row, row * 2, p=0.5, query=2.0)


def test_head_split_keeps_each_feature_in_its_column() -> None:
    fig = figures.draw_head_split(2, 6, 4, 2)
    texts = all_texts(fig)
    assert "(b, t, d_out)\n= (2, 6, 4)" in texts
    assert "(b, t, h, d_h)\n= (2, 6, 2, 2)" in texts
    assert "(b, h, t, d_h)\n= (2, 2, 6, 2)" in texts
    # Feature 3 appears once per token in each of the three pictures.
    assert texts.count("3") == 3 * 6
    assert "head 0" in texts and "head 1" in texts


def test_split_numbers_prints_each_panel_and_frames_each_head() -> None:
    projected = torch.tensor([[-0.25, 0.5, 1.0, -1.5]]).expand(6, 4)  # (t, d_out)
    heads = torch.tensor([[[-0.25, 0.5]], [[1.0, -1.5]]]).expand(2, 6, 2)  # (h, t, d_h)
    fig = figures.draw_split_numbers(projected, heads, TOKENS)
    texts = all_texts(fig)
    # Each number once per token on the left and once in its head's panel.
    for number in ("-0.25", "0.50", "1.00", "-1.50"):
        assert texts.count(number) == 2 * 6
    assert "queries[0]\n(t, d_out) = (6, 4)" in texts
    assert "head 0\n(6, 2)" in texts and "head 1\n(6, 2)" in texts
    # Head m's two columns are framed in its colour, and its panel is edged in it.
    frames = [patch for patch in fig.axes[0].patches if isinstance(patch, Rectangle)]
    assert [to_hex(frame.get_edgecolor()) for frame in frames] == [
        to_hex(HEAD_COLOURS[0]),
        to_hex(HEAD_COLOURS[1]),
    ]
    assert [frame.get_width() < 2 for frame in frames] == [True, True]
    for m in (0, 1):
        edges = {to_hex(side.get_edgecolor()) for side in fig.axes[m + 1].spines.values()}
        assert edges == {to_hex(HEAD_COLOURS[m])}


def test_wrapper_vs_batched_shows_both_shapes() -> None:
    texts = " ".join(all_texts(figures.draw_wrapper_vs_batched(3, 2, 2)))
    assert "(3, 2)" in texts and "(3, 4)" in texts and "(b, t, 4)" in texts


def lines(fig: Figure) -> list[Line2D]:
    return [line for line in fig.axes[0].get_lines() if len(line.get_xdata()) == 2]


def line_alphas(fig: Figure) -> dict[str, list[float]]:
    """The opacity of every line of a line view, by the colour of its head."""
    found: dict[str, list[float]] = {}
    for collection in fig.axes[0].collections:
        for red, green, blue, alpha in collection.get_colors():
            found.setdefault(to_hex((red, green, blue)), []).append(round(float(alpha), 6))
    return found


def test_line_view_draws_a_line_per_weight_with_its_opacity() -> None:
    # One head looking at itself, one spreading evenly over the first two keys.
    eye = torch.eye(3)
    even = torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.5, 0.5, 0.0]])
    fig = figures.plot_attention_lines(torch.stack((eye, even)), ["a", "b", "c"])
    by_head = line_alphas(fig)
    assert sorted(by_head) == sorted(to_hex(colour) for colour in HEAD_COLOURS[:2])
    assert sorted(by_head[to_hex(HEAD_COLOURS[0])]) == [1.0, 1.0, 1.0]
    assert sorted(by_head[to_hex(HEAD_COLOURS[1])]) == [0.5, 0.5, 0.5, 0.5, 1.0]
    # Each line joins a query on the left to a key on the right: eye's lines are level.
    segments = fig.axes[0].collections[0].get_segments()
    assert all(start[1] == end[1] and start[0] < end[0] for start, end in segments)
    assert {"head 0", "head 1", "a", "b", "c"} <= set(all_texts(fig))
    # One head as (t, s), cross-attention labels, named panels.
    fig = figures.plot_attention_lines(
        torch.full((2, 3), 1 / 3),
        ["le", "chat"],
        key_tokens=["the", "black", "cat"],
        head_names=["cross"],
        title="French to English",
    )
    assert sum(len(alphas) for alphas in line_alphas(fig).values()) == 6
    assert {"le", "chat", "the", "black", "cat", "cross", "French to English"} <= set(
        all_texts(fig)
    )


def test_strided_read_tells_whether_view_can_follow() -> None:
    transposed = torch.arange(1.0, 13).view(3, 4).T  # reads storage 0, 4, 8, 1, 5, ...
    texts = all_texts(figures.draw_strided_read(transposed, name="x_t"))
    assert texts.count("+4") == 8 and texts.count("-7") == 3
    assert any("view(-1) fails" in text for text in texts)
    texts = all_texts(figures.draw_strided_read(transposed.contiguous()))
    assert texts.count("+1") == 11
    assert any("view(-1) works" in text for text in texts)


def test_induction_circuit_names_the_token_to_predict() -> None:
    sequence = ["3", "14", "7", "1", "9", "3", "14", "7", "1"]
    t = len(sequence)
    previous = torch.zeros(t, t)
    previous[0, 0] = 1.0
    previous[torch.arange(1, t), torch.arange(t - 1)] = 1.0  # always the token before
    induction = torch.eye(t)
    induction[7] = 0.0
    induction[7, 3] = 1.0  # query 7 ("7") attends to key 3 ("1"), after the earlier "7"
    fig = figures.draw_induction_circuit(sequence, previous, induction, query=7)
    texts = " ".join(all_texts(fig))
    assert 'key 3 ("1")' in texts and 'earlier "7" at position 2' in texts
    assert 'predict "1" at position 8' in texts
    # The first layer's arcs into positions 1 to 7, the keys query 7 may read (not 8); the
    # second layer's single arc, from query 7 to key 3.
    assert len(arrows(fig, to_hex(HEAD_COLOURS[0]))) == 7
    assert len(arrows(fig, to_hex(HEAD_COLOURS[1]))) == 1


def test_kv_cache_counts_the_keys_and_values_computed() -> None:
    fig = figures.draw_kv_cache(7, 4)
    texts = all_texts(fig)
    # Without a cache: 7 + 8 + 9 + 10 + 11 = 45; with one: the prompt's 7, then 1 per step.
    assert "keys and values computed: 45" in texts
    assert "keys and values computed: 11" in texts
    # The rows are labelled in each of the two panels, stacked one above the other.
    assert [text for text in texts if text.startswith("step")] == 2 * [
        f"step {i}" for i in (1, 2, 3, 4)
    ]


@pytest.mark.parametrize(
    ("t", "s", "block", "counts"),
    [
        (16, 16, 4, (6, 4, 6)),  # 16 tiles: 4 on the diagonal, 6 below, 6 above it
        (12, 16, 4, (6, 3, 3)),  # queries at positions 4 to 15, as when decoding with a cache
        (5, 5, 2, (4, 2, 3)),  # ragged: the last diagonal tile is one cell, nothing masked
    ],
)
def test_tiles_are_computed_skipped_or_partly_masked(
    t: int, s: int, block: int, counts: tuple[int, int, int]
) -> None:
    texts = all_texts(figures.draw_tiles(t, s, block))
    computed, partly, skipped = counts
    assert f"computed: {computed}" in texts
    assert f"partly masked: {partly}" in texts
    assert f"skipped: {skipped}" in texts


def test_grouped_heads_connect_each_query_head_to_its_group() -> None:
    fig = figures.draw_grouped_heads(8, (8, 2, 1))
    drawn = lines(fig)
    assert len(drawn) == 3 * 8
    # In the grouped row, query heads 0-3 share one colour and 4-7 another.
    grouped = drawn[8:16]
    colours = [to_hex(line.get_color()) for line in grouped]
    assert len(set(colours[:4])) == 1 and len(set(colours[4:])) == 1
    assert colours[0] != colours[4]
    texts = " ".join(all_texts(fig))
    assert "multi-head" in texts and "grouped-query" in texts and "multi-query" in texts


def test_program_grid_boxes_every_program_and_skips_the_future() -> None:
    fig = figures.draw_program_grid(100, 32, 2, (2, 1), causal=True)
    texts = all_texts(fig)
    # ceil(100 / 32) = 4 query blocks by 2 pairs: 8 programs, each labelled (i, bh).
    assert sorted(text for text in texts if text.startswith("(")) == sorted(
        f"({i}, {bh})" for i in range(4) for bh in range(2)
    )
    # Program 2 of a causal pass reads key blocks 0 to 2 and skips block 3, in K and in V.
    dashed = [
        patch
        for patch in fig.axes[0].patches
        if isinstance(patch, Rectangle) and patch.get_linestyle() not in ("-", "solid")
    ]
    assert len(dashed) == 2
    assert all(to_hex(patch.get_edgecolor()) == ROLE_COLOURS["mask"].lower() for patch in dashed)
    assert "rows 64 to 95, keys 0 to 95; hatched: past t = 100" in texts
    full = figures.draw_program_grid(100, 32, 2, (2, 1), causal=False)
    assert "rows 64 to 95, keys 0 to 99; hatched: past t = 100" in all_texts(full)


def test_program_memory_counts_what_one_program_reads_and_writes() -> None:
    texts = all_texts(figures.draw_program_memory(32, 64, 5))
    # Reads: queries 32 x 64 once, keys and values 2 x 5 blocks of 32 x 64;
    # writes: 32 x 64 outputs and 32 log-sum-exps.
    assert "per program: 22,528 numbers read, 2,080 written" in texts
    assert "5 × (32 × 64)" in texts and "×5" in texts
    assert "32 × 32 scores: never stored" in texts


@pytest.mark.parametrize(
    ("kinds", "t", "block", "counts"),
    [
        ({True: causal_kinds(4)}, 100, 32, {"no mask": 6, "masked": 4, "skipped": 6}),
        ({False: torch.tensor([[1, 2]] * 3)}, 40, 16, {"no mask": 3, "masked": 3, "skipped": 0}),
    ],
)
def test_key_blocks_counts_each_kind_of_tile(
    kinds: dict[bool, torch.Tensor], t: int, block: int, counts: dict[str, int]
) -> None:
    texts = all_texts(figures.plot_key_blocks(kinds, t, t if True in kinds else 20, block))
    for name, count in counts.items():
        assert f"{name}: {count}" in texts
    (causal,) = kinds
    assert f"is_causal={causal}" in texts
    assert "key block →" in texts and "query block →" in texts


def test_sentinels_count_right_wrong_nan_intact_and_overwritten_cells() -> None:
    wrong = sentinel_buffer(wrong_rows=2, hit=27)
    wrong[37:74] = 0.5  # row 1 wrong but a number, row 0 NaN
    fig = figures.plot_sentinels({"a": sentinel_buffer(), "b": wrong}, SOFTMAX, SENTINEL)
    texts = all_texts(fig)
    assert "right 185, wrong 0, NaN 0, sentinel 64, overwritten 0" in texts
    assert "right 111, wrong 37, NaN 37, sentinel 37, overwritten 27" in texts
    assert {"right", "wrong", "NaN", "sentinel", "overwritten"} <= set(texts)  # the legend


# ---------------------------------------------------------------------------------------------
# Bad input: a clear error, and no figure left open. Only the line view, which a reader points
# at weights of their own, checks its input; the other diagrams draw a chapter's fixed tensors.
# ---------------------------------------------------------------------------------------------

BAD: list[tuple[Callable[[], object], type[Exception], str]] = [
    (
        lambda: figures.plot_attention_lines(torch.full((6, 6), float("nan"))),
        ValueError,
        r"weights: expected attention weights, finite",
    ),
    (
        lambda: figures.plot_attention_lines(torch.full((9, 4, 4), 0.25)),
        ValueError,
        r"at most 8 heads",
    ),
    (
        lambda: figures.plot_attention_lines(torch.full((40, 40), 1 / 40)),
        ValueError,
        r"at most 32 tokens per side",
    ),
    (
        lambda: figures.plot_attention_lines(torch.full((2, 4, 4), 0.25), ["a", "b"]),
        ValueError,
        r"tokens: expected 4 labels",
    ),
    (
        lambda: figures.plot_attention_lines(torch.full((4, 4), 0.25), head_names="h"),
        TypeError,
        r"head_names: expected a sequence of strings",
    ),
    (
        lambda: figures.plot_attention_lines(torch.ones(2, 2, dtype=torch.long)),
        TypeError,
        r"weights: expected a floating-point tensor",
    ),
]


# Chapter 8's plots draw what its kernels wrote, tensors a reader may pass by mistake.
BAD += [
    (
        lambda: figures.plot_key_blocks({True: causal_kinds(3)}, 100, 100, 32),
        ValueError,
        r"kinds\[True\]: expected \(query blocks, key blocks\) = \(4, 4\), got \(3, 3\)",
    ),
    (
        lambda: figures.plot_key_blocks({True: causal_kinds(4) * 2}, 100, 100, 32),
        ValueError,
        r"kinds\[True\]: expected kinds 0 \(skipped\), 1 \(no mask\) or 2 \(masked\)",
    ),
    (
        lambda: figures.plot_key_blocks({True: causal_kinds(4).float()}, 100, 100, 32),
        TypeError,
        r"kinds\[True\]: expected an integer tensor of tile kinds, got torch.float32",
    ),
    (
        lambda: figures.plot_key_blocks({}, 100, 100, 32),
        ValueError,
        r"kinds: expected one or two panels, got 0",
    ),
    (
        lambda: figures.plot_sentinels({"a": sentinel_buffer()[:100]}, SOFTMAX, SENTINEL),
        ValueError,
        r"buffers\['a'\]: expected a 1-d buffer of 185 to 481 numbers",
    ),
    (
        lambda: figures.plot_sentinels({"a": sentinel_buffer()}, SOFTMAX.flatten(), SENTINEL),
        ValueError,
        r"expected: expected \(rows, cols\) with 1 to 40 columns, got \(185,\)",
    ),
    (
        lambda: figures.plot_sentinels({"a": sentinel_buffer().long()}, SOFTMAX, SENTINEL),
        TypeError,
        r"buffers\['a'\]: expected a floating-point tensor",
    ),
]


@pytest.mark.parametrize(("call", "error", "match"), BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_input_is_refused_clearly_and_draws_nothing(
    call: Callable[[], object], error: type[Exception], match: str
) -> None:
    before = plt.get_fignums()
    with pytest.raises(error, match=match):
        call()
    assert plt.get_fignums() == before


@pytest.mark.parametrize("name", list(GOOD))
def test_a_failure_while_drawing_leaves_no_figure_open(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("drawing failed")

    before = plt.get_fignums()
    monkeypatch.setattr(Axes, "text", broken)
    with pytest.raises(RuntimeError, match="drawing failed"):
        GOOD[name]()
    assert plt.get_fignums() == before
