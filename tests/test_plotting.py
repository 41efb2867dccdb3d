"""The figures: labels, colour bars, annotations, head grids and layout pictures.

Figures are drawn with the non-interactive Agg backend and closed after each test.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from helpers import TOKENS, text_objects
from matplotlib.axes import Axes
from matplotlib.figure import Figure

import attention_from_scratch as afs


def texts(ax: Axes) -> list[str]:
    return [text.get_text() for text in ax.texts]


def tick_labels(ax: Axes) -> tuple[list[str], list[str]]:
    x = [label.get_text() for label in ax.get_xticklabels()]
    y = [label.get_text() for label in ax.get_yticklabels()]
    return x, y


def test_importing_the_package_does_not_import_matplotlib() -> None:
    code = (
        "import sys\n"
        "import attention_from_scratch as afs\n"
        "print('before', 'matplotlib' in sys.modules)\n"
        "afs.plot_attention\n"
        "print('after', 'matplotlib' in sys.modules)\n"
    )
    env = {**os.environ, "MPLBACKEND": "Agg"}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert result.stdout.split() == ["before", "False", "after", "True"]


def test_lazy_attributes_are_the_plotting_functions() -> None:
    from attention_from_scratch import figures

    assert afs.plot_attention is figures.plot_attention
    assert afs.plot_attention_heads is figures.plot_attention_heads
    assert afs.plot_layout is figures.plot_layout
    with pytest.raises(AttributeError, match="plot_nothing"):
        _ = afs.plot_nothing


# ---------------------------------------------------------------------------------------------
# plot_attention
# ---------------------------------------------------------------------------------------------


def toy_weights() -> torch.Tensor:
    _, inputs = afs.toy_sentence()
    _, weights = afs.simplified_attention(inputs, return_weights=True)
    return weights


def test_plot_attention_labels_colorbar_and_annotations(toy_tokens: list[str]) -> None:
    ax = afs.plot_attention(toy_weights(), toy_tokens, title="simplified attention")
    assert isinstance(ax, Axes)
    assert tick_labels(ax) == (toy_tokens, toy_tokens)
    assert ax.get_title() == "simplified attention"
    assert ax.get_xlabel() == "key (attended to)"
    assert ax.get_ylabel() == "query (attending)"
    # A colour bar: the image has one, and it lives in a second axes of the same figure.
    assert len(ax.images) == 1
    assert ax.images[0].colorbar is not None
    assert len(ax.figure.axes) == 2
    # One annotation per cell, rounded to two decimals; row 0 starts 0.2098, 0.2006, 0.1981.
    annotations = texts(ax)
    assert len(annotations) == 36
    assert annotations[:3] == ["0.21", "0.20", "0.20"]
    # Row 4, column 5 of the seed's weights is 0.1295; row 5, column 4 is 0.0988.
    assert annotations[4 * 6 + 5] == "0.13"
    assert annotations[5 * 6 + 4] == "0.10"


def test_plot_attention_image_holds_the_weights(toy_tokens: list[str]) -> None:
    weights = toy_weights()
    ax = afs.plot_attention(weights, toy_tokens)
    image = torch.as_tensor(ax.images[0].get_array())
    torch.testing.assert_close(image, weights)


def test_plot_attention_without_annotations(toy_tokens: list[str]) -> None:
    ax = afs.plot_attention(toy_weights(), toy_tokens, annotate=False)
    assert texts(ax) == []
    assert tick_labels(ax) == (toy_tokens, toy_tokens)


def test_plot_attention_skips_annotations_for_many_tokens() -> None:
    weights = torch.softmax(torch.randn(20, 20, generator=torch.Generator().manual_seed(0)), -1)
    tokens = [f"tok{i}" for i in range(20)]
    ax = afs.plot_attention(weights, tokens)
    assert texts(ax) == []
    assert tick_labels(ax) == (tokens, tokens)
    # Numbers on request, up to 16 tokens per axis; above that they cannot fit their cells.
    forced = afs.plot_attention(weights[:16, :16], tokens[:16], annotate=True)
    assert len(texts(forced)) == 256
    before = plt.get_fignums()
    with pytest.raises(ValueError, match=r"annotate: expected at most 16 tokens .* got 20"):
        afs.plot_attention(weights, tokens, annotate=True)
    assert plt.get_fignums() == before


def test_plot_attention_for_cross_attention_uses_key_tokens() -> None:
    torch.manual_seed(0)
    module = afs.CrossAttention(3, 4, 2)
    french = ["le", "chat"]
    english = ["the", "black", "cat", "sleeps"]
    x = torch.rand(1, len(french), 3)
    context = torch.rand(1, len(english), 4)
    _, weights = module(x, context, return_weights=True)
    # The weights still require grad; the plot must detach them.
    assert weights.requires_grad
    ax = afs.plot_attention(weights[0], french, key_tokens=english)
    assert tick_labels(ax) == (english, french)
    assert len(texts(ax)) == 2 * 4


def test_plot_attention_without_tokens_numbers_the_axes() -> None:
    ax = afs.plot_attention(torch.full((3, 3), 1 / 3))
    assert tick_labels(ax) == (["0", "1", "2"], ["0", "1", "2"])
    assert texts(ax) == ["0.33"] * 9


def test_plot_attention_draws_on_a_given_axes() -> None:
    fig, (left, right) = plt.subplots(1, 2)
    returned = afs.plot_attention(torch.eye(2), ["a", "b"], ax=right)
    assert returned is right
    assert returned.figure is fig
    assert len(left.images) == 0
    assert len(right.images) == 1


def test_plot_attention_of_masked_scores(toy_tokens: list[str]) -> None:
    scores = torch.zeros(6, 6).masked_fill(afs.causal_mask(6), float("-inf"))
    ax = afs.plot_attention(scores, toy_tokens)
    annotations = texts(ax)
    assert annotations[0] == "0.00"
    assert annotations[1] == "-inf"
    assert annotations.count("-inf") == 15


# ---------------------------------------------------------------------------------------------
# plot_attention_heads
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("num_heads", "max_cols", "grid_cells"), [(1, 4, 1), (3, 2, 4), (4, 4, 4), (6, 4, 8)]
)
def test_plot_attention_heads_grid(num_heads: int, max_cols: int, grid_cells: int) -> None:
    torch.manual_seed(num_heads)
    module = afs.MultiHeadAttention(3, 2 * num_heads, 6, 0.0, num_heads=num_heads)
    _, inputs = afs.toy_sentence()
    _, weights = module(inputs.unsqueeze(0), return_weights=True)
    tokens, _ = afs.toy_sentence()
    fig = afs.plot_attention_heads(weights[0], tokens, title="heads", max_cols=max_cols)
    assert isinstance(fig, Figure)
    assert fig.get_suptitle() == "heads"
    heatmaps = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert len(heatmaps) == grid_cells
    visible = [ax for ax in heatmaps if ax.get_visible()]
    hidden = [ax for ax in heatmaps if not ax.get_visible()]
    assert [ax.get_title() for ax in visible] == [f"head {i}" for i in range(num_heads)]
    assert len(hidden) == grid_cells - num_heads
    for ax in visible:
        assert tick_labels(ax) == (tokens, tokens)
        assert len(ax.images) == 1
        # Cell numbers only where a panel has room for them: one or two heads.
        assert len(texts(ax)) == (36 if num_heads <= 2 else 0)
    # The grid fits the book's column (about 7 inches).
    assert fig.get_figwidth() <= 7.0 + 1e-9


def test_plot_attention_heads_defaults_to_two_columns() -> None:
    fig = afs.plot_attention_heads(torch.full((8, 6, 6), 1 / 6))
    heatmaps = [ax for ax in fig.axes if ax.get_title().startswith("head")]
    columns = {round(ax.get_position().x0, 3) for ax in heatmaps}
    assert len(heatmaps) == 8 and len(columns) == 2
    assert fig.get_figwidth() <= 7.0 + 1e-9
    assert all(texts(ax) == [] for ax in heatmaps)


@pytest.mark.parametrize("shape", [(0, 6, 6), (2, 0, 6), (2, 6, 0)])
def test_plot_attention_heads_refuses_empty_inputs(shape: tuple[int, int, int]) -> None:
    before = plt.get_fignums()
    with pytest.raises(ValueError, match=r"weights: expected at least one"):
        afs.plot_attention_heads(torch.zeros(shape))
    assert plt.get_fignums() == before


def test_plot_attention_refuses_what_cannot_be_read_before_drawing() -> None:
    before = plt.get_fignums()
    with pytest.raises(
        ValueError,
        match=r"at most 64 tokens per axis to draw legibly, got 400 \(shape \(400, 400\)\); "
        r"slice it, e.g. weights\[:64, :64\]",
    ):
        afs.plot_attention(torch.full((400, 400), 1 / 400))
    assert plt.get_fignums() == before
    ax = afs.plot_attention(torch.full((32, 32), 1 / 32))
    assert ax.figure.get_figwidth() <= 7.0 + 1e-9
    assert texts(ax) == []  # too many cells to number


def test_plot_layout_refuses_a_view_of_a_large_storage() -> None:
    before = plt.get_fignums()
    big = torch.arange(100_000.0)
    with pytest.raises(ValueError, match=r"x: expected a tensor whose storage holds at most"):
        afs.plot_layout(big[:6].view(2, 3))
    assert plt.get_fignums() == before
    fig = afs.plot_layout(torch.arange(12.0).view(3, 4))
    assert fig.get_figwidth() <= 7.0 + 1e-9


def test_plot_attention_heads_passes_annotate_on() -> None:
    fig = afs.plot_attention_heads(torch.full((2, 3, 3), 1 / 3), annotate=False)
    heatmaps = [ax for ax in fig.axes if ax.get_title().startswith("head")]
    assert len(heatmaps) == 2
    assert all(texts(ax) == [] for ax in heatmaps)


# ---------------------------------------------------------------------------------------------
# plot_layout
# ---------------------------------------------------------------------------------------------


def layout_panels(fig: Figure) -> tuple[Axes, Axes]:
    top, bottom = fig.axes
    return top, bottom


def test_plot_layout_of_a_contiguous_tensor() -> None:
    x = torch.arange(6.0).view(2, 3)
    fig = afs.plot_layout(x, title="a 2 x 3 matrix")
    top, bottom = layout_panels(fig)
    title = top.get_title()
    assert title.startswith("a 2 x 3 matrix\n")
    assert "shape (2, 3)" in title
    assert "stride (3, 1)" in title
    assert title.endswith(", contiguous")
    # Each cell shows its value, then its storage index.
    assert texts(top) == ["0", "[0]", "1", "[1]", "2", "[2]", "3", "[3]", "4", "[4]", "5", "[5]"]
    assert texts(bottom) == texts(top)
    assert bottom.get_title() == "storage (one flat block of memory)"


def test_plot_layout_of_a_transposed_tensor() -> None:
    x = torch.arange(6.0).view(2, 3).T
    top, bottom = layout_panels(afs.plot_layout(x))
    title = top.get_title()
    assert "shape (3, 2)" in title
    assert "stride (1, 3)" in title
    assert "not contiguous" in title
    # Reading the transpose row by row visits the storage in the order 0, 3, 1, 4, 2, 5.
    assert texts(top)[1::2] == ["[0]", "[3]", "[1]", "[4]", "[2]", "[5]"]
    assert texts(top)[0::2] == ["0", "3", "1", "4", "2", "5"]
    # The storage itself is unchanged.
    assert texts(bottom)[1::2] == ["[0]", "[1]", "[2]", "[3]", "[4]", "[5]"]


def test_plot_layout_of_a_slice_with_an_offset() -> None:
    x = torch.arange(12.0).view(3, 4)[1:, 1:3]
    top, bottom = layout_panels(afs.plot_layout(x))
    assert "shape (2, 2)" in top.get_title()
    assert "stride (4, 1)" in top.get_title()
    assert "not contiguous" in top.get_title()
    assert texts(top)[1::2] == ["[5]", "[6]", "[9]", "[10]"]
    assert texts(top)[0::2] == ["5", "6", "9", "10"]
    assert len(texts(bottom)) == 2 * 12


# ---------------------------------------------------------------------------------------------
# Limits: what cannot be drawn legibly is refused at once, and nothing is left open
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda: afs.plot_attention(torch.full((400, 400), 1 / 400)),
        lambda: afs.plot_attention(torch.full((1000, 1000), 1 / 1000), annotate=True),
        lambda: afs.plot_attention(torch.full((6, 1000), 1 / 1000), TOKENS),
        lambda: afs.plot_attention_heads(torch.full((8, 400, 400), 1 / 400)),
        lambda: afs.plot_attention_heads(torch.full((1000, 2, 2), 0.5)),
        lambda: afs.plot_layout(torch.arange(1_000_000.0)[:6].view(2, 3)),
        lambda: afs.plot_layout(torch.arange(400.0).view(20, 20)),
    ],
    ids=["400-tokens", "1000-annotated", "1000-keys", "heads-400", "1000-heads", "view", "20x20"],
)
def test_what_cannot_be_drawn_is_refused_before_drawing(call: Callable[[], object]) -> None:
    before = plt.get_fignums()
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(ValueError, match=r"expected .*at most \d+ .* to draw legibly, got"):
            call()
        elapsed = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Drawing 400 tokens used to take 40 s and 10.7 GB: a refusal draws nothing at all.
    assert elapsed < 2.0
    assert peak < 50e6
    assert plt.get_fignums() == before


def test_the_largest_heatmap_allowed_stays_small() -> None:
    weights = torch.softmax(torch.randn(64, 64, generator=torch.Generator().manual_seed(0)), -1)
    tokens = [f"tok{i}" for i in range(64)]
    tracemalloc.start()
    try:
        ax = afs.plot_attention(weights, tokens)
        ax.figure.savefig(io.BytesIO(), format="png", dpi=100)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 200e6  # measured: about 9 MB
    assert ax.figure.get_figwidth() <= 7.0 + 1e-9
    assert ax.figure.get_figheight() <= 7.0 + 1e-9
    assert texts(ax) == []
    # Only every second label, so that 9-point labels do not overlap; upright on the x axis.
    x, y = tick_labels(ax)
    assert x == y == tokens[::2]
    assert {label.get_rotation() for label in ax.get_xticklabels()} == {90.0}


def test_plot_attention_defaults_to_a_figure_that_fits_the_column(toy_tokens: list[str]) -> None:
    ax = afs.plot_attention(toy_weights(), toy_tokens)
    width, height = ax.figure.get_size_inches()
    assert 4.0 <= width <= 7.0
    assert height <= 7.0


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: afs.plot_attention(torch.zeros(0, 3)), r"weights: expected at least one query"),
        (lambda: afs.plot_attention(torch.zeros(3, 0)), r"weights: expected at least one query"),
        (lambda: afs.plot_attention_heads(torch.zeros(0, 6, 6)), r"at least one head"),
        (lambda: afs.plot_layout(torch.zeros(0, 3)), r"x: expected at least one element"),
        (lambda: afs.plot_layout(torch.zeros(3, 0)), r"x: expected at least one element"),
    ],
    ids=["no-queries", "no-keys", "no-heads", "layout-no-rows", "layout-no-columns"],
)
def test_empty_inputs_are_refused_clearly(call: Callable[[], object], match: str) -> None:
    before = plt.get_fignums()
    with pytest.raises(ValueError, match=match):
        call()
    assert plt.get_fignums() == before


@pytest.mark.parametrize(
    ("tokens", "error", "match"),
    [
        ([0, 1, 2], TypeError, r"tokens: expected a sequence of strings, got int 0 at position 0"),
        (["a", None, "c"], TypeError, r"got NoneType None at position 1"),
        ({"a", "b", "c"}, TypeError, r"tokens: expected a sequence of strings .*got set"),
        (3, TypeError, r"tokens: expected a sequence of strings .*got int"),
        (b"abc", TypeError, r"tokens: expected a sequence of strings, got a single str"),
        (iter(["a", "b"]), ValueError, r"tokens: expected 3 labels to match the weights, got 2"),
        # The same iterator a second time: it is empty, and said so.
        (iter([]), ValueError, r"tokens: expected 3 labels to match the weights, got 0"),
    ],
    ids=["ints", "none-inside", "set", "int", "bytes", "short-iterator", "empty-iterator"],
)
def test_bad_tokens_are_refused(tokens: object, error: type, match: str) -> None:
    before = plt.get_fignums()
    with pytest.raises(error, match=match):
        afs.plot_attention(torch.full((3, 3), 1 / 3), tokens)
    if not isinstance(tokens, Iterator):  # an iterator was used up by the first call
        with pytest.raises(error, match=match.replace("at position 0", "")):
            afs.plot_attention_heads(torch.full((2, 3, 3), 1 / 3), tokens)
    assert plt.get_fignums() == before


def test_tokens_may_be_a_generator_read_once() -> None:
    words = ["the", "cat", "sat"]
    ax = afs.plot_attention(torch.full((3, 3), 1 / 3), (word for word in words))
    assert tick_labels(ax) == (words, words)
    fig = afs.plot_attention_heads(torch.full((4, 3, 3), 1 / 3), (word for word in words))
    heatmaps = [ax for ax in fig.axes if ax.get_title().startswith("head")]
    assert len(heatmaps) == 4
    assert all(tick_labels(ax) == (words, words) for ax in heatmaps)


def test_failed_calls_leave_no_figure_open(monkeypatch: pytest.MonkeyPatch) -> None:
    before = plt.get_fignums()
    # Errors found while drawing, after the figure exists.
    with pytest.raises(ValueError, match="no-such-map"):
        afs.plot_attention(torch.eye(3), cmap="no-such-map")
    with pytest.raises(ValueError, match="no-such-map"):
        afs.plot_attention_heads(torch.full((3, 2, 2), 0.5), cmap="no-such-map")

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("drawing failed")

    monkeypatch.setattr(Axes, "add_patch", broken)
    with pytest.raises(RuntimeError, match="drawing failed"):
        afs.plot_layout(torch.arange(6.0).view(2, 3))
    assert plt.get_fignums() == before
    # A figure the caller made is theirs: it stays open.
    fig, ax = plt.subplots()
    with pytest.raises(ValueError, match="no-such-map"):
        afs.plot_attention(torch.eye(3), ax=ax, cmap="no-such-map")
    assert plt.fignum_exists(fig.number)


def test_annotate_accepts_numpy_bools_and_refuses_other_types() -> None:
    ax = afs.plot_attention(torch.full((3, 3), 1 / 3), annotate=np.bool_(False))
    assert texts(ax) == []
    ax = afs.plot_attention(torch.full((3, 3), 1 / 3), annotate=np.bool_(True))
    assert len(texts(ax)) == 9
    with pytest.raises(TypeError, match=r"annotate: expected a bool, got str 'yes'"):
        afs.plot_attention(torch.eye(3), annotate="yes")


# ---------------------------------------------------------------------------------------------
# Head grids laid out for the book's column
# ---------------------------------------------------------------------------------------------


def test_eight_heads_make_four_rows_of_two_with_one_colour_bar() -> None:
    weights = torch.softmax(torch.randn(8, 6, 6, generator=torch.Generator().manual_seed(1)), -1)
    fig = afs.plot_attention_heads(weights, TOKENS, title="eight heads")
    heatmaps = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    colour_bars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert len(heatmaps) == 8 and len(colour_bars) == 1
    assert len({round(ax.get_position().x0, 3) for ax in heatmaps}) == 2
    assert len({round(ax.get_position().y0, 3) for ax in heatmaps}) == 4
    assert fig.get_figwidth() <= 7.0
    # One colour scale for every panel, so that the shared bar reads right for each.
    limits = {ax.images[0].get_clim() for ax in heatmaps}
    assert len(limits) == 1
    assert limits.pop() == (0.0, 1.0)  # weights: the book's one scale, 0 to 1
    # No numbers in small panels; every text of the figure is at least 9 points.
    assert all(texts(ax) == [] for ax in heatmaps)
    fig.canvas.draw()
    assert min(text.get_fontsize() for text in text_objects(fig)) >= 9
    # Each panel is about 3 inches wide with its labels (its slot is half of 6.7 inches),
    # and its heatmap alone more than 2 inches.
    renderer = fig.canvas.get_renderer()
    for ax in heatmaps:
        assert ax.get_tightbbox(renderer).width / fig.dpi >= 2.7
        assert ax.get_window_extent(renderer).width / fig.dpi >= 2.0


def test_two_small_heads_keep_their_numbers_at_nine_points() -> None:
    fig = afs.plot_attention_heads(torch.full((2, 6, 6), 1 / 6), TOKENS)
    heatmaps = [ax for ax in fig.axes if ax.get_title().startswith("head")]
    assert [len(texts(ax)) for ax in heatmaps] == [36, 36]
    assert min(text.get_fontsize() for text in text_objects(fig)) >= 9
    assert [ax.get_label() for ax in fig.axes].count("<colorbar>") == 1
    with pytest.raises(ValueError, match=r"annotate: expected at most 8 tokens .* got 12"):
        afs.plot_attention_heads(torch.full((2, 12, 12), 1 / 12), annotate=True)


def test_every_text_is_at_least_nine_points(toy_tokens: list[str]) -> None:
    figures = [
        afs.plot_attention(toy_weights(), toy_tokens).figure,
        afs.plot_layout(torch.arange(12.0).view(3, 4).T),
    ]
    for fig in figures:
        sizes = [text.get_fontsize() for text in text_objects(fig)]
        assert sizes and min(sizes) >= 9
        assert fig.get_figwidth() <= 7.0 + 1e-9


def test_plot_layout_greys_rows_and_colours_heads_with_the_okabe_ito_palette() -> None:
    from matplotlib.colors import to_rgb

    def tint(colour: str) -> tuple[float, ...]:
        return tuple(0.55 + 0.45 * c for c in to_rgb(colour))

    def faces(ax: Axes) -> list[tuple[float, ...]]:
        return [tuple(round(c, 6) for c in p.get_facecolor()[:3]) for p in ax.patches]

    def rounded(colours: list[tuple[float, ...]]) -> list[tuple[float, ...]]:
        return [tuple(round(c, 6) for c in colour) for colour in colours]

    # Okabe and Ito's eight colours, in the order of notation.md's head colours.
    okabe_ito = ["#0072B2", "#CC79A7", "#009E73", "#E69F00"]
    okabe_ito += ["#56B4E9", "#D55E00", "#000000", "#F0E442"]
    # Rows are told apart by neutral greys: the course's colours mark heads only.
    greys = [to_rgb(grey) for grey in ("#E6E6E6", "#9E9E9E", "#C7C7C7", "#808080")]
    assert set(greys).isdisjoint(to_rgb(colour) for colour in okabe_ito)
    x = torch.arange(12.0).view(3, 4)
    top, bottom = layout_panels(afs.plot_layout(x.T))
    # Row i of x.T reads storage i, i + 4, i + 8: those take row i's grey.
    assert faces(top) == rounded([greys[i] for i in range(4) for _ in range(3)])
    assert faces(bottom) == rounded([greys[k % 4] for k in range(12)])
    # Storage that a slice does not read stays white.
    top, bottom = layout_panels(afs.plot_layout(x[1:, 1:3]))
    read = {5: 0, 6: 0, 9: 1, 10: 1}
    white = (1.0, 1.0, 1.0)
    expected = [greys[read[k]] if k in read else white for k in range(12)]
    assert faces(bottom) == rounded(expected)
    # With heads=(h, d_h), element k of a (t, h * d_h) storage has its head's colour.
    top, bottom = layout_panels(afs.plot_layout(x[:, 2:], heads=(2, 2)))
    head_of = [0, 0, 1, 1] * 3
    assert faces(bottom) == rounded([tint(okabe_ito[head]) for head in head_of])
    assert faces(top) == rounded([tint(okabe_ito[1])] * 6)
    legend = bottom.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["head 0", "head 1"]
    with pytest.raises(TypeError, match=r"heads: expected a tuple \(h, d_h\)"):
        afs.plot_layout(x, heads=2)


def test_plot_layout_draws_up_to_sixteen_elements() -> None:
    fig = afs.plot_layout(torch.arange(16.0).view(4, 4))
    assert len(texts(fig.axes[1])) == 2 * 16
    with pytest.raises(ValueError, match=r"at most 16 elements .* got 20 elements"):
        afs.plot_layout(torch.arange(20.0).view(4, 5))


# ---------------------------------------------------------------------------------------------
# nan and infinite entries are shown, not hidden
# ---------------------------------------------------------------------------------------------


def test_nan_and_infinite_entries_are_blank_and_labelled() -> None:
    nan, inf = float("nan"), float("inf")
    weights = torch.tensor([[0.5, 0.5, -inf], [nan, 0.25, 0.75], [inf, 0.0, 1.0]])
    ax = afs.plot_attention(weights)
    assert texts(ax) == ["0.50", "0.50", "-inf", "nan", "0.25", "0.75", "inf", "0.00", "1.00"]
    image = ax.images[0]
    # The colour scale spans the finite entries; the others are masked (drawn blank).
    assert image.get_clim() == (0.0, 1.0)
    masked = np.ma.getmaskarray(np.ma.masked_invalid(image.get_array()))
    assert masked.sum() == 3
    # Their numbers are black, so that they show on the blank cells.
    colours = [text.get_color() for text in ax.texts]
    assert colours[2] == colours[3] == colours[6] == "black"


def colour_limits(ax) -> tuple[float, float]:
    return ax.images[0].get_clim()


def test_weights_are_drawn_on_a_zero_to_one_scale_and_scores_on_their_range() -> None:
    # A matrix of small weights must not be stretched so that 0.15 looks like 1.
    weights = torch.tensor([[1.0, 0.0], [0.15, 0.1]])
    assert colour_limits(afs.plot_attention(weights)) == (0.0, 1.0)
    scores = torch.tensor([[-2.0, 3.0], [0.5, 1.0]])
    assert colour_limits(afs.plot_attention(scores)) == (-2.0, 3.0)
    assert colour_limits(afs.plot_attention(weights, limits=(0.0, 0.5))) == (0.0, 0.5)
    fig = afs.plot_attention_heads(torch.full((2, 3, 3), 0.2), limits=(0.0, 0.4))
    assert {ax.images[0].get_clim() for ax in fig.axes if ax.images} == {(0.0, 0.4)}
    plt.close("all")


@pytest.mark.parametrize("limits", [(1.0, 0.0), (0.0, float("nan")), [0.0, 1.0], (0, 1, 2)])
def test_bad_colour_limits_are_refused_by_name(limits) -> None:
    with pytest.raises(ValueError, match="limits: expected a tuple"):
        afs.plot_attention(torch.eye(2), limits=limits)
    plt.close("all")
