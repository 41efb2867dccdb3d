"""Self-checks of the exercises of chapter 5, "Tensor layout".

Each answer computes a layout from numbers alone (sizes, strides, an offset). The checks try
it on the layouts of the page's tensors, `x_3d.permute(2, 0, 1)`, `x_t`, `y`, `x_matrix`,
`grid`, written out here with the answers a reader can check against the tensors themselves.
Grading is not done here: see :mod:`._core`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._core import Exercise


def _ints(value: object, what: str) -> tuple[int, ...]:
    """A tuple or list of ints as a tuple (a check fails otherwise)."""
    assert isinstance(value, tuple | list), f"{what}: expected a tuple, got {type(value).__name__}"
    assert all(isinstance(v, int) and not isinstance(v, bool) for v in value), (
        f"{what}: expected ints, got {value!r}"
    )
    return tuple(value)


def _layout(value: object, parts: int) -> tuple[Any, ...]:
    assert isinstance(value, tuple | list) and len(value) == parts, (
        f"expected a tuple of {parts}, got {value!r}"
    )
    return tuple(value)


permute_strides = Exercise("ch5-ex-permute-strides", chapter=5)


@permute_strides.check(
    hint="A dimension keeps its size and its stride when it moves. In a contiguous tensor the "
    "strides fall from the first dimension to the last: sort the dimensions by stride."
)
def the_order_that_undoes_a_permute(contiguous_order: Callable[..., object]) -> None:
    """the order that makes x_3d.permute(2, 0, 1) and x_t contiguous"""
    got = _ints(contiguous_order((3, 2, 2), (1, 6, 3)), "x_3d.permute(2, 0, 1)")
    assert got == (1, 2, 0), f"x_3d.permute(2, 0, 1): got {got}"
    got = _ints(contiguous_order((4, 3), (1, 4)), "x_t")
    assert got == (1, 0), f"x_t: got {got}"


@permute_strides.check(
    hint="A dimension of size 1 is never stepped along: its stride does not matter. A gap (a "
    "slice) or a stride 0 (an expanded tensor) cannot be permuted away: return None."
)
def size_one_and_no_order_at_all(contiguous_order: Callable[..., object]) -> None:
    """y (with a dimension of size 1), then x_matrix[:, ::2] and grid, which none fixes"""
    got = _ints(contiguous_order((2, 4, 1, 16), (64, 16, 64, 1)), "y")
    # The dimension of size 1 (dimension 2) may go anywhere.
    assert got in {(2, 0, 1, 3), (0, 2, 1, 3), (0, 1, 2, 3), (0, 1, 3, 2)}, f"y: got {got}"
    got_slice = contiguous_order((3, 2), (4, 2))
    assert got_slice is None, f"x_matrix[:, ::2]: got {got_slice!r}"
    got_grid = contiguous_order((4, 3), (0, 1))
    assert got_grid is None, f"grid: got {got_grid!r}"


view_noncontiguous = Exercise("ch5-ex-view-noncontiguous", chapter=5)


def _jumps(value: object, what: str) -> tuple[int, ...]:
    """The distinct jumps an answer lists, in increasing order."""
    return tuple(sorted(set(_ints(value, what))))


@view_noncontiguous.check(
    hint="With the storage formula, write the index of the element just before a step along "
    "dimension k (the later indices of the run at their last value) and just after (those "
    "indices at 0), and subtract; do it for every dimension of the run."
)
def the_jumps_of_a_permuted_tensor(merge_jumps: Callable[..., object]) -> None:
    """runs of x_3d.permute(2, 0, 1): shape (3, 2, 2), strides (1, 6, 3), and of x_t"""
    for start, end, expected in ((1, 2, (3,)), (0, 1, (-5, 6)), (0, 2, (-8, 3))):
        got = _jumps(merge_jumps((3, 2, 2), (1, 6, 3), start, end), f"dims {start} to {end}")
        assert got == expected, f"dimensions {start} to {end}: got {got}"
    got = _jumps(merge_jumps((4, 3), (1, 4), 0, 1), "x_t")
    assert got == (-7, 4), f"x_t: got {got}"


@view_noncontiguous.check(
    hint="A dimension of size 1 is never stepped along: it makes no jump of its own, whatever "
    "its stride. A stride 0 is a step like any other."
)
def a_dimension_of_size_one_or_stride_zero(merge_jumps: Callable[..., object]) -> None:
    """runs of y: shape (2, 4, 1, 16), strides (64, 16, 64, 1), and of grid"""
    for start, end, expected in ((1, 3, (1,)), (0, 2, (16,)), (2, 2, ())):
        got = _jumps(merge_jumps((2, 4, 1, 16), (64, 16, 64, 1), start, end), "y")
        assert got == expected, f"y, dimensions {start} to {end}: got {got}"
    got = _jumps(merge_jumps((4, 3), (0, 1), 0, 1), "grid")
    assert got == (-2, 1), f"grid: got {got}"


slice_stride = Exercise("ch5-ex-slice-stride", chapter=5)


@slice_stride.check(
    hint="Element w of the window dimension, j of the new last one, is element "
    "start + w * step + j * dilation of dimension dim: put it in the storage formula."
)
def windows_of_the_columns_of_x_matrix(windows_layout: Callable[..., object]) -> None:
    """windows of 2 columns of x_matrix, every 2 (the heads' split), and of x with gaps"""
    got = _layout(windows_layout((3, 4), (4, 1), 0, 1, 0, 2, 2, 1), 3)
    assert got[2] == 0, f"x_matrix, offset: got {got[2]!r}"
    assert (_ints(got[0], "shape"), _ints(got[1], "strides")) == ((3, 2, 2), (4, 2, 1)), (
        f"x_matrix: got {got}"
    )
    got = _layout(windows_layout((12,), (1,), 0, 0, 0, 3, 1, 2), 3)
    assert (_ints(got[0], "shape"), _ints(got[1], "strides"), got[2]) == ((8, 3), (1, 2), 0), (
        f"x, dilation 2: got {got}"
    )


@slice_stride.check(
    hint="The windows start at index start, which moves the offset; count the starts whose "
    "last element, (size - 1) * dilation further on, is still in the dimension."
)
def windows_from_index_one(windows_layout: Callable[..., object]) -> None:
    """windows of x from index 1 on (4 elements, every 2), and of x_t's rows, 2 apart"""
    got = _layout(windows_layout((12,), (1,), 0, 0, 1, 4, 2, 1), 3)
    assert (_ints(got[0], "shape"), _ints(got[1], "strides"), got[2]) == ((4, 4), (2, 1), 1), (
        f"x: got {got}"
    )
    got = _layout(windows_layout((4, 3), (1, 4), 0, 0, 0, 2, 1, 2), 3)
    expected = ((2, 3, 2), (1, 4, 2), 0)
    assert (_ints(got[0], "shape"), _ints(got[1], "strides"), got[2]) == expected, f"x_t: got {got}"


expand_strides = Exercise("ch5-ex-expand-strides", chapter=5)


@expand_strides.check(
    hint="Line the shapes up from the right, a missing dimension counting as size 1; a "
    "dimension of size 1 that grows reads the same element again and again."
)
def a_row_plus_a_matrix(broadcast_strides: Callable[..., object]) -> None:
    """row + torch.zeros(4, 3): row (3,) broadcast to (4, 3), as in grid"""
    got = _layout(broadcast_strides((3,), (1,), (4, 3), (3, 1)), 3)
    assert tuple(_ints(part, "part") for part in got) == ((4, 3), (0, 1), (3, 1)), f"got {got}"


@expand_strides.check(
    hint="Both tensors may grow. Two sizes that differ and are both larger than 1 do not "
    "broadcast: return None."
)
def a_column_and_a_row(broadcast_strides: Callable[..., object]) -> None:
    """a (3, 1) column plus a (4,) row, then (4, 3) plus (3, 4), which do not broadcast"""
    got = _layout(broadcast_strides((3, 1), (1, 1), (4,), (1,)), 3)
    assert tuple(_ints(part, "part") for part in got) == ((3, 4), (1, 0), (0, 1)), f"got {got}"
    clash = broadcast_strides((4, 3), (3, 1), (3, 4), (4, 1))
    assert clash is None, f"(4, 3) and (3, 4): got {clash!r}"
