"""The figures: labels, colour bars, annotations, head grids and layout pictures.

Figures are drawn with the non-interactive Agg backend and closed after each test.
"""

from __future__ import annotations

import os
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

import attention_from_scratch as afs


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


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
    from attention_from_scratch import plotting

    assert afs.plot_attention is plotting.plot_attention
    assert afs.plot_attention_heads is plotting.plot_attention_heads
    assert afs.plot_layout is plotting.plot_layout
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
