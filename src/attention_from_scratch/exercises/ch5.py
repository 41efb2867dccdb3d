"""Checks for the exercises of chapter 5, "Tensor layout".

Every answer computes a layout by reasoning: a function of a shape, strides and offset that
the checks call on layouts they draw themselves. Some of those layouts have strides of 65 bits
or more, which no tensor or array can hold (torch and NumPy store strides in 64 bits), so no
answer can build a real tensor with the layout and read the result off it: that closes
NumPy's ndarray constructor (C, which no refusal sees) and every ``torch.ops.aten`` operator
not listed here. The ways of reading a layout off a real tensor (torch's, its aten operators,
NumPy's stride tricks) and the operation asked about are refused besides, for a clear message
on the small layouts. Expected values come from torch (small layouts) or from the
stride rule (large ones), computed here after the answer has returned, from the check's own
copy of the inputs, and the answer's numbers must be plain ``int``s.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

from ..layout import describe_layout
from ._core import Exercise
from ._shortcuts import ShortcutTaken, call_refusing

# Strides from this size on fit in no tensor or array: torch and NumPy store them in 64 bits.
HUGE = 1 << 64

# Every way to read a layout off a tensor, or to build a tensor from a given layout: an
# answer that must compute a layout by hand may call none of them. Each exercise adds the
# operation whose result it asks about, so that its shape cannot be read either.
LAYOUT_SHORTCUTS: tuple[Callable[..., Any], ...] = (
    torch.Tensor.stride,
    torch.Tensor.storage_offset,
    torch.Tensor.data_ptr,
    torch.Tensor.storage,
    torch.Tensor.untyped_storage,
    torch.Tensor.is_contiguous,
    torch.Tensor.numpy,
    torch.Tensor.__array__,
    torch.Tensor.as_strided,
    torch.as_strided,
    torch.empty_strided,
    describe_layout,
)
# NumPy's stride tricks are Python functions, refused by their code objects however they are
# reached. NumPy's ndarray constructor (which takes strides) is C and cannot be refused; an
# answer that builds one with the right strides in bytes has already worked the layout out.
NUMPY_SHORTCUTS: tuple[Callable[..., Any], ...] = ()
try:
    import numpy as _np

    NUMPY_SHORTCUTS = tuple(
        getattr(function, "_implementation", function)
        for function in (
            _np.lib.stride_tricks.as_strided,
            _np.lib.stride_tricks.sliding_window_view,
            _np.broadcast_to,
            _np.broadcast_arrays,
            # what broadcast_to calls, reachable under its own name
            *[
                getattr(module, "_broadcast_to", _np.broadcast_to)
                for module in (
                    getattr(_np.lib, "_stride_tricks_impl", None),
                    getattr(_np.lib, "stride_tricks", None),
                )
                if module is not None
            ],
        )
    )
except ImportError:  # pragma: no cover - numpy ships with the course's environment
    pass
LAYOUT_SHORTCUTS += NUMPY_SHORTCUTS


def _aten(*names: str) -> tuple[Any, ...]:
    """torch.ops.aten's operators of these names, each as called (the packet) and as each of
    its overloads: a TorchFunctionMode sees whichever the answer called."""
    found: list[Any] = []
    for name in names:
        packet = getattr(torch.ops.aten, name, None)
        if packet is None:  # pragma: no cover - every name exists in the supported torch
            continue
        found.append(packet)
        found.extend(getattr(packet, overload) for overload in packet.overloads())
    return tuple(found)


LAYOUT_SHORTCUTS += _aten(
    "as_strided",
    "as_strided_",
    "empty_strided",
    "stride",
    "sym_stride",
    "storage_offset",
    "sym_storage_offset",
    "is_contiguous",
)
PERMUTES = (
    torch.Tensor.permute,
    torch.permute,
    torch.Tensor.movedim,
    torch.movedim,
    *_aten("permute"),
)
SLICES = (torch.Tensor.__getitem__, torch.Tensor.narrow, torch.narrow, *_aten("slice"))
MERGES = (
    torch.Tensor.view,
    torch.Tensor.reshape,
    torch.reshape,
    torch.Tensor.flatten,
    torch.flatten,
    *_aten("view", "reshape", "_reshape_alias"),
)
# The check's own references, refused by code (the grader's fresh copy of this module) and by
# full name (the package's copy, which a notebook can import).
REFERENCES = (
    "permute_reference",
    "merged_stride_reference",
    "merged_stride_rule",
    "slice_reference",
    "expand_reference",
    "expand_rule",
)


PACKAGE_MODULE = "attention_from_scratch.exercises.ch5"


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _is_int(value: object) -> bool:
    """A plain Python int: not a bool, and no subclass that could redefine ``==``."""
    return type(value) is int


def _ints(value: object, what: str, length: int) -> tuple[int, ...]:
    assert isinstance(value, (tuple, list)), (
        f"{what} must be a tuple of ints, got {type(value).__name__}"
    )
    assert len(value) == length, f"{what} must have {length} entries, got {len(value)}"
    assert all(_is_int(v) for v in value), (
        f"{what} must hold plain Python ints, got {[type(v).__name__ for v in value]}"
    )
    return tuple(value)


def _huge(*numbers: Iterable[int] | int) -> bool:
    """Whether any of the numbers (ints, or tuples of them) is too large for a tensor."""
    flat = [n for x in numbers for n in (x if isinstance(x, (tuple, list)) else (x,))]
    return any(n >= HUGE for n in flat)


def _call(
    function: Callable[..., Any],
    arguments: tuple[Any, ...],
    shortcuts: tuple[Any, ...],
    write: str,
) -> Any:
    """Call the answer on copies of the arguments, with the shortcuts and the check's own
    references refused, and return its plain result (``call_refusing``). A layout too large
    for a tensor that makes the answer raise is explained: the answer built a tensor or an
    array where it should have computed."""
    module = globals()
    references = tuple(module[name] for name in REFERENCES)
    named = tuple(f"{PACKAGE_MODULE}.{name}" for name in REFERENCES)
    copies = tuple(list(a) if isinstance(a, list) else a for a in arguments)
    try:
        return call_refusing(
            function, *copies, shortcuts=(*shortcuts, *references), write=write, named=named
        )
    except ShortcutTaken:
        raise
    except (OverflowError, ValueError, TypeError, RuntimeError) as error:
        if not _huge(*arguments):
            raise
        raise AssertionError(
            "no tensor or array can hold strides of more than 64 bits: compute the layout "
            f"with Python ints (your answer raised {type(error).__name__} on shape "
            f"{arguments[0]}, strides {arguments[1]})"
        ) from error


def _randint(low: int, high: int, generator: torch.Generator) -> int:
    """An int in [low, high] (both included)."""
    return int(torch.randint(low, high + 1, (1,), generator=generator))


def _random_layout(
    rank: int, generator: torch.Generator, max_size: int = 6, *, huge: bool = False
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A shape and strides that are not row-major: strides drawn at random; with huge, each
    stride is 2**64 or more, too large for any tensor."""
    shape = tuple(_randint(1, max_size, generator) for _ in range(rank))
    strides = tuple(
        _randint(1, 60, generator) + (_randint(1, 9, generator) * HUGE if huge else 0)
        for _ in range(rank)
    )
    return shape, strides


# ------------------------------------------------------------------------------- permute

permute_strides = Exercise(
    "ch5-ex-permute-strides",
    chapter=5,
    manual_points=1,
    rubric="Predicts shape (4, 2, 3) and strides (1, 12, 4) for torch.zeros(2, 3, 4)"
    ".permute(2, 0, 1), and says it is not contiguous: (1, 12, 4) are not the row-major "
    "strides (6, 3, 1) of a (4, 2, 3) tensor.",
)


def permute_reference(
    shape: Sequence[int], strides: Sequence[int], order: Sequence[int]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Dimension k of the result is dimension order[k] of the input, size and stride."""
    return tuple(shape[o] for o in order), tuple(strides[o] for o in order)


def _check_permuted_layout(permuted_layout: object, cases: list[tuple[Any, ...]]) -> None:
    assert callable(permuted_layout), "`permuted_layout` must be a function"
    for shape, strides, order in cases:
        answer = _call(
            permuted_layout,
            (shape, strides, order),
            (*LAYOUT_SHORTCUTS, *PERMUTES),
            "the permuted layout",
        )
        expected = permute_reference(shape, strides, order)
        assert isinstance(answer, (tuple, list)) and len(answer) == 2, (
            "`permuted_layout` must return two tuples, (shape, strides)"
        )
        got = (
            _ints(answer[0], "the shape", len(shape)),
            _ints(answer[1], "the strides", len(shape)),
        )
        if got == expected:
            continue
        inverse = [order.index(k) for k in range(len(order))]
        if got == permute_reference(shape, strides, inverse):
            raise AssertionError(
                f"for shape {shape}, strides {strides}, order {order}: you placed old "
                "dimension k at position order[k]; permute does the opposite"
            )
        if got[0] == expected[0] and got[1] == tuple(strides):
            raise AssertionError(
                f"for shape {shape}, strides {strides}, order {order}: the shape is right but "
                "the strides stayed in their old order; a stride moves with its dimension"
            )
        raise AssertionError(
            f"for shape {shape}, strides {strides}, order {order}: got {got}, which is not "
            "the layout of the permuted tensor"
        )


def permute_cases(
    seed: int, ranks: Sequence[int], huge_ranks: Sequence[int] = ()
) -> list[tuple[Any, ...]]:
    """One layout of each rank in ranks, then one too large for a tensor per huge_ranks."""
    generator = _generator(seed)
    cases = []
    for rank, huge in [(r, False) for r in ranks] + [(r, True) for r in huge_ranks]:
        shape, strides = _random_layout(rank, generator, huge=huge)
        order = tuple(int(o) for o in torch.randperm(rank, generator=generator))
        cases.append((shape, strides, order))
    return cases


@permute_strides.check(
    points=2,
    hint="`permuted_layout(shape, strides, order)` returns (new_shape, new_strides) from the "
    "three tuples alone. Ask, for each position k of the result: which dimension of the input "
    "does it come from, and what does that dimension take along with it?",
)
def permuted_layout_by_hand(permuted_layout):
    _check_permuted_layout(permuted_layout, permute_cases(5, (3, 4, 2, 5, 3, 4), (4,)))


# ------------------------------------------------------------------- view of a merge

view_noncontiguous = Exercise(
    "ch5-ex-view-noncontiguous",
    chapter=5,
    manual_points=1,
    rubric="Explains with the stride rule why splitting never fails: a dimension of size "
    "n1 * n2 and stride s splits into sizes (n1, n2) with strides (n2 * s, s), which always "
    "exist; only a merge can need a copy, so view succeeds on a non-contiguous tensor "
    "whenever it only splits or adds size-1 dimensions.",
)


def merged_stride_rule(shape: Sequence[int], strides: Sequence[int], k: int) -> int | None:
    """The stride of dimensions k and k + 1 merged, or None, from the stride rule alone: for
    layouts too large for torch (the tests hold it to torch's view on small ones)."""
    if shape[k + 1] == 1:  # never stepped along: the merged dimension walks dimension k
        return strides[k]
    if shape[k] == 1 or strides[k] == shape[k + 1] * strides[k + 1]:
        return strides[k + 1]
    return None


def merged_stride_reference(shape: Sequence[int], strides: Sequence[int], k: int) -> int | None:
    """The stride torch's view gives dimensions k and k + 1 merged, or None if view fails."""
    if _huge(strides):
        return merged_stride_rule(shape, strides, k)
    count = 1 + sum((size - 1) * stride for size, stride in zip(shape, strides, strict=True))
    base = torch.zeros(count)
    x = base.as_strided(tuple(shape), tuple(strides))
    new_shape = (*shape[:k], shape[k] * shape[k + 1], *shape[k + 2 :])
    try:
        return int(x.view(new_shape).stride(k))
    except RuntimeError:
        return None


def merge_cases(seed: int, n: int, *, size_one: bool, huge: int = 0) -> list[tuple[Any, ...]]:
    """Layouts where dimensions k and k + 1 can be merged (about half) or cannot: strides at
    random, or (one in six) a multiple of the compatible stride (rows padded, as in a slice
    x[:, :n]) or one step short of it (rows that overlap). The last ``huge`` are too large
    for a tensor."""
    generator = _generator(seed)
    cases = []
    while len(cases) < n + huge:
        rank = _randint(2, 4, generator)
        big = len(cases) >= n
        shape, strides = _random_layout(rank, generator, max_size=5, huge=big)
        shape, strides = list(shape), list(strides)
        k = _randint(0, rank - 2, generator)
        shape[k] = max(shape[k], 2)
        shape[k + 1] = max(shape[k + 1], 2)
        compatible = shape[k + 1] * strides[k + 1]
        if size_one:  # one of the two merged dimensions has size 1
            shape[k + _randint(0, 1, generator)] = 1
        elif len(cases) % 2 == 0:  # compatible, although the tensor is not contiguous
            strides[k] = compatible
        elif len(cases) % 6 == 1:  # padded rows
            strides[k] = compatible * _randint(2, 3, generator)
        elif len(cases) % 6 == 3 and shape[k + 1] > 2:  # overlapping rows
            strides[k] = compatible - strides[k + 1]
        cases.append((tuple(shape), tuple(strides), k))
    return cases


def _check_merged_stride(merged_stride: object, cases: list[tuple[Any, ...]]) -> None:
    assert callable(merged_stride), "`merged_stride` must be a function"
    for shape, strides, k in cases:
        got = _call(
            merged_stride, (shape, strides, k), (*LAYOUT_SHORTCUTS, *MERGES), "the merged stride"
        )
        expected = merged_stride_reference(shape, strides, k)
        where = f"merging dimensions {k} and {k + 1} of shape {shape}, strides {strides}"
        if expected is None:
            assert got is None, f"{where}: view cannot merge them, so the answer is None"
            continue
        size_one = 1 in (shape[k], shape[k + 1])
        if size_one:  # any stride is allowed along a dimension of size 1
            assert got is not None, (
                f"{where}: view can merge them; a dimension of size 1 is never stepped along, "
                "so its stride does not matter"
            )
        assert got is not None, (
            f"{where}: view can merge them, although the tensor may not be contiguous; only "
            "the two merged dimensions matter"
        )
        assert _is_int(got), f"{where}: return an int stride or None, got {type(got).__name__}"
        if size_one:
            assert got == expected, (
                f"{where}: got stride {got}; the merged dimension steps the way the dimension "
                "that is not of size 1 does"
            )
        assert got == expected, f"{where}: got stride {got}, not the one view gives"


@view_noncontiguous.check(
    points=2,
    hint="`merged_stride(shape, strides, k)` returns the stride of the merged dimension, or "
    "None when view must fail. Think of walking the merged dimension one element at a time: "
    "when does that walk take the same step in storage every time, whatever the other "
    "dimensions do?",
)
def merged_stride_by_hand(merged_stride):
    cases = merge_cases(7, 12, size_one=False, huge=2)
    # A dimension of size 1 may have any stride, here one the stride rule would refuse.
    cases.append(((3, 1, 4), (5, 99, 2), 0))
    _check_merged_stride(merged_stride, cases)


# ------------------------------------------------------------------------------- slicing

slice_stride = Exercise(
    "ch5-ex-slice-stride",
    chapter=5,
    manual_points=1,
    rubric="Says both slices of x_matrix are not contiguous: their strides (4, 2) are not "
    "the row-major (2, 1) of a (3, 2) tensor; 1::2 keeps the strides and moves the offset "
    "to 1.",
)


def slice_reference(
    shape: Sequence[int], strides: Sequence[int], offset: int, dim: int, start: int, step: int
) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """The layout of x[..., start::step, ...] along dim, from the stride formula."""
    new_shape = list(shape)
    new_shape[dim] = math.ceil((shape[dim] - start) / step)
    new_strides = list(strides)
    new_strides[dim] = strides[dim] * step
    return tuple(new_shape), tuple(new_strides), offset + start * strides[dim]


def slice_cases(seed: int, n: int, max_size: int = 7, *, huge: int = 0) -> list[tuple[Any, ...]]:
    """n slices of random layouts, then ``huge`` more whose strides and offset are too large
    for a tensor."""
    generator = _generator(seed)
    cases = []
    for i in range(n + huge):
        rank = _randint(1, 4, generator)
        big = i >= n
        shape, strides = _random_layout(rank, generator, max_size=max_size, huge=big)
        offset = _randint(0, 9, generator) + (_randint(1, 9, generator) * HUGE if big else 0)
        dim = _randint(0, rank - 1, generator)
        start = _randint(0, shape[dim] - 1, generator)
        step = _randint(1, 4, generator)
        cases.append((shape, strides, offset, dim, start, step))
    return cases


def _check_sliced_layout(sliced_layout: object, cases: list[tuple[Any, ...]]) -> None:
    assert callable(sliced_layout), "`sliced_layout` must be a function"
    for case in cases:
        shape, strides, offset, dim, start, step = case
        answer = _call(sliced_layout, case, (*LAYOUT_SHORTCUTS, *SLICES), "the layout of a slice")
        expected = slice_reference(*case)
        assert isinstance(answer, (tuple, list)) and len(answer) == 3, (
            "`sliced_layout` must return (shape, strides, offset)"
        )
        got_shape = _ints(answer[0], "the shape", len(shape))
        got_strides = _ints(answer[1], "the strides", len(shape))
        got_offset = answer[2]
        where = (
            f"slicing {start}::{step} along dimension {dim} of shape {shape}, strides "
            f"{strides}, offset {offset}"
        )
        assert got_shape == expected[0], (
            f"{where}: the shape {got_shape} is wrong; count the indices start, start + step, "
            "... that stay below the size"
        )
        assert got_strides == expected[1], f"{where}: the strides {got_strides} are wrong"
        assert _is_int(got_offset) and got_offset == expected[2], (
            f"{where}: the offset {got_offset!r} is wrong; where in storage is the first "
            "element of the slice?"
        )


@slice_stride.check(
    points=2,
    hint="`sliced_layout(shape, strides, offset, dim, start, step)` returns (shape, strides, "
    "offset) of the slice. Use the formula for the storage index of an element: where is "
    "element 0 of the slice, and how far is element 1 along `dim` from it?",
)
def sliced_layout_by_hand(sliced_layout):
    _check_sliced_layout(sliced_layout, slice_cases(11, 12, huge=2))


# ---------------------------------------------------------------------------- expand

expand_strides = Exercise(
    "ch5-ex-expand-strides",
    chapter=5,
    manual_points=1,
    rubric="Predicts strides (0, 2, 0, 1) for torch.zeros(3, 1, 2).expand(4, 3, 5, 2). Says "
    "grid.add_(1) raises a RuntimeError: the four rows of grid are one row of storage "
    "(stride 0), so several of its elements are one memory location and an in-place write "
    "would hit it several times; clone() the tensor first to get storage of its own.",
)

EXPANDS = (
    torch.Tensor.expand,
    torch.Tensor.expand_as,
    torch.Tensor.broadcast_to,
    torch.broadcast_to,
    torch.broadcast_tensors,
    *_aten("expand"),
)


def expand_rule(
    shape: Sequence[int], strides: Sequence[int], new_shape: Sequence[int]
) -> tuple[int, ...]:
    """The strides of the expanded tensor from the rule alone: for layouts too large for
    torch (the tests hold it to torch's expand on small ones)."""
    added = len(new_shape) - len(shape)
    kept = [
        stride if new in (-1, size) else 0
        for size, stride, new in zip(shape, strides, new_shape[added:], strict=True)
    ]
    return (0,) * added + tuple(kept)


def expand_reference(
    shape: Sequence[int], strides: Sequence[int], new_shape: Sequence[int]
) -> tuple[int, ...]:
    """The strides torch's expand gives, read off a tensor with that layout."""
    if _huge(strides):
        return expand_rule(shape, strides, new_shape)
    count = 1 + sum((size - 1) * stride for size, stride in zip(shape, strides, strict=True))
    x = torch.zeros(count).as_strided(tuple(shape), tuple(strides))
    return tuple(x.expand(*new_shape).stride())


def expand_cases(
    seed: int, n: int, *, max_new: int, minus_one: bool, huge: int = 0
) -> list[tuple[Any, ...]]:
    """Layouts with at least one size-1 dimension that grows, up to max_new dimensions added
    in front, and (with minus_one) some kept sizes given as -1; the last ``huge`` of them
    too large for a tensor."""
    generator = _generator(seed)
    cases = []
    for i in range(n + huge):
        rank = _randint(1, 4, generator)
        shape, strides = _random_layout(rank, generator, max_size=4, huge=i >= n)
        shape = [1 if _randint(0, 2, generator) == 0 else size for size in shape]
        shape[_randint(0, rank - 1, generator)] = 1
        new_shape = [_randint(1, 5, generator) for _ in range(_randint(0, max_new, generator))]
        grows = [size == 1 and _randint(0, 2, generator) > 0 for size in shape]
        if not any(grows) and all(size == 1 for size in new_shape):
            grows[shape.index(1)] = True
        for size, grow in zip(shape, grows, strict=True):
            keep = -1 if minus_one and _randint(0, 2, generator) == 0 else size
            new_shape.append(_randint(2, 6, generator) if grow else keep)
        cases.append((tuple(shape), strides, tuple(new_shape)))
    return cases


def _row_major(shape: Sequence[int]) -> tuple[int, ...]:
    strides = [1] * len(shape)
    for k in range(len(shape) - 2, -1, -1):
        strides[k] = strides[k + 1] * shape[k + 1]
    return tuple(strides)


def _check_expanded_strides(expanded_strides: object, cases: list[tuple[Any, ...]]) -> None:
    assert callable(expanded_strides), "`expanded_strides` must be a function"
    for shape, strides, new_shape in cases:
        answer = _call(
            expanded_strides,
            (shape, strides, new_shape),
            (*LAYOUT_SHORTCUTS, *EXPANDS),
            "the strides of an expanded tensor",
        )
        expected = expand_reference(shape, strides, new_shape)
        got = _ints(answer, "the strides", len(new_shape))
        where = f"expanding shape {shape}, strides {strides} to {new_shape}"
        sizes = [
            s if s != -1 else shape[k - len(new_shape) + len(shape)]
            for k, s in enumerate(new_shape)
        ]
        # A dimension of size 1 is never stepped along: its stride does not matter.
        used = [k for k, size in enumerate(sizes) if size > 1]
        if all(got[k] == expected[k] for k in used):
            continue
        if all(got[k] == _row_major(sizes)[k] for k in used):
            raise AssertionError(
                f"{where}: got the strides of a new contiguous tensor, {got}; expand copies "
                "nothing and reads the old storage"
            )
        extra = len(new_shape) - len(shape)
        grown = [k for k in used if k >= extra and shape[k - extra] == 1]
        if grown and all(got[k] == expected[k] for k in used if k not in grown):
            raise AssertionError(
                f"{where}: got {got}; a dimension of size 1 that grows reads the same element "
                "at every step along it"
            )
        raise AssertionError(f"{where}: got {got}, not the strides expand gives")


@expand_strides.check(
    points=2,
    hint="`expanded_strides(shape, strides, new_shape)` returns the strides of the expanded "
    "tensor from the three tuples alone. Ask, for each dimension of the result: when you step "
    "along it, which element of the old storage do you read next?",
)
def expanded_strides_by_hand(expanded_strides):
    _check_expanded_strides(
        expanded_strides, expand_cases(13, 12, max_new=2, minus_one=False, huge=2)
    )
