"""Chapter 5, "Tensor layout": the graded exercises (grader only, never shipped).

Every answer is a function of a layout (sizes, strides, an offset) that returns another layout,
an order or the jumps of a run, computed from the numbers alone. Each check holds layouts whose
sizes, strides or offsets have 65 bits or more, which no tensor or array can hold (torch and
NumPy store them in 64 bits): no answer can build a tensor with the layout and read the result
off it. Two exercises ask what no function of torch or NumPy computes, public or private (the
jumps of a run, dilated windows), so that the stride reasoning cannot be handed to one. The
grader computes each expected answer here with Python ints, from the stride rules that the
tests of this file hold to torch's own on small layouts.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise, permutations

import numpy as np
from grader.spec import Case, Check, GradedExercise, Raised, call, describe, value_of

# From this number on, no tensor or array can hold a size, a stride or an offset.
HUGE = 1 << 64


def huge(rng: np.random.Generator) -> int:
    """A number too large for a tensor's sizes or strides."""
    return int(rng.integers(1, 8)) * HUGE + int(rng.integers(1, 100))


def small(rng: np.random.Generator, low: int, high: int) -> int:
    """An int in [low, high] (both included)."""
    return int(rng.integers(low, high + 1))


def row_major(shape: Sequence[int]) -> list[int]:
    """The strides of a contiguous tensor of this shape."""
    strides = [1] * len(shape)
    for k in range(len(shape) - 2, -1, -1):
        strides[k] = strides[k + 1] * shape[k + 1]
    return strides


def shown(value: object) -> str:
    """A number, or a tuple of them, as Python that gives it: 3*2**64+17 for a huge one,
    -(3*2**64+17) for a huge negative one."""
    if isinstance(value, tuple | list):
        inner = ", ".join(shown(item) for item in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, int) and value <= -HUGE:
        return f"-({shown(-value)})"
    if isinstance(value, int) and value >= HUGE:
        high, low = divmod(value, HUGE)
        return f"{high}*2**64+{low}"
    return repr(value)


def ints(got: object, length: int, what: str) -> tuple[tuple[int, ...] | None, str | None]:
    """``got`` as a tuple of ``length`` plain ints, or why it is not one."""
    if isinstance(got, Raised):
        return None, f"it raised {got.type_name}: {got.message}"
    if not isinstance(got, list) or not all(type(item) is int for item in got):
        return None, f"{what} should be a tuple of ints, got {describe(got)}"
    if len(got) != length:
        return None, f"{what} should have {length} entries, got {len(got)}"
    return tuple(got), None


def differ(got: Sequence[int], expected: Sequence[int], shape: Sequence[int]) -> list[int]:
    """The dimensions whose strides differ, leaving out dimensions of size 1 (never stepped
    along, so any stride is right)."""
    return [k for k, size in enumerate(shape) if size != 1 and got[k] != expected[k]]


def raised(got: object) -> str | None:
    return f"it raised {got.type_name}: {got.message}" if isinstance(got, Raised) else None


# ---- ch5-ex-permute-strides ------------------------------------------------------------------


def is_contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Row-major strides, dimensions of size 1 left out."""
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides), strict=True):
        if size != 1:
            if stride != expected:
                return False
            expected *= size
    return True


def permuted(values: Sequence[int], order: Sequence[int]) -> tuple[int, ...]:
    return tuple(values[o] for o in order)


def some_order_is_contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    return any(
        is_contiguous(permuted(shape, order), permuted(strides, order))
        for order in permutations(range(len(shape)))
    )


class ContiguousOrder(GradedExercise):
    label = "ch5-ex-permute-strides"
    manual_points = 1
    rubric = (
        "Gets the order (1, 2, 0) for x_3d.permute(2, 0, 1) and says it is the inverse of "
        "(2, 0, 1): permuting with it sends every dimension back to its place in x_3d, whose "
        "layout is contiguous (doing one permutation after the other gives the identity)."
    )
    checks = (
        Check(
            "order",
            2,
            "the order that makes a permuted tensor contiguous again",
            "A dimension keeps its size and its stride when it moves. In a contiguous tensor "
            "the strides fall from the first dimension to the last: sort the dimensions by "
            "stride, then check the row-major rule on the result.",
        ),
        Check(
            "edges",
            1,
            "dimensions of size 1, and tensors that no order makes contiguous",
            "A dimension of size 1 is never stepped along, so its stride does not matter. A "
            "gap (a slice), a stride 0 (an expanded tensor) or an overlap cannot be permuted "
            "away: the answer is then None.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = []
        for i in range(4):
            shape = [small(rng, 2, 6) for _ in range(small(rng, 2, 5))]
            if i >= 2:  # a size, and so the strides before it, too large for a tensor
                shape[small(rng, 0, len(shape) - 1)] = huge(rng)
            cases.append(self.case("order", shape, row_major(shape), rng))
        # dimensions of size 1 with any stride, one of them too large for a tensor
        shape = [small(rng, 2, 5) for _ in range(small(rng, 2, 4))]
        for _ in range(2):
            shape.insert(small(rng, 0, len(shape)), 1)
        strides = row_major(shape)
        ones = [k for k, size in enumerate(shape) if size == 1]
        strides[ones[0]], strides[ones[1]] = huge(rng), 0
        cases.append(self.case("edges", shape, strides, rng))
        # no order can help: a slice's gap, a stride 0, an overlap (windows)
        for kind in ("gap", "stride 0", "overlap"):
            while True:
                shape = [small(rng, 2, 5) for _ in range(small(rng, 2, 4))]
                shape[small(rng, 0, len(shape) - 1)] = huge(rng)
                strides = row_major(shape)
                k = small(rng, 0, len(shape) - 1)
                if kind == "gap":
                    strides[k] *= small(rng, 2, 3)
                elif kind == "stride 0":
                    strides[k] = 0
                elif k < len(shape) - 1:  # one step moves less than the dimensions after it
                    strides[k] -= strides[-1] * small(rng, 1, min(shape[-1] - 1, 4))
                if not some_order_is_contiguous(shape, strides):
                    break
            cases.append(self.case("edges", shape, strides, rng))
        return cases

    @staticmethod
    def case(check: str, shape: list[int], strides: list[int], rng: np.random.Generator) -> Case:
        while True:
            order = [int(o) for o in rng.permutation(len(shape))]
            if order != sorted(order):
                break
        shape, strides = permuted(shape, order), permuted(strides, order)
        exists = some_order_is_contiguous(shape, strides)

        def judge(results: list) -> str | None:
            got = value_of(results)
            if why := raised(got):
                return why
            if got is None:
                if exists:
                    return "an order makes this tensor contiguous, so the answer is not None"
                return None
            answer, why = ints(got, len(shape), "the order")
            if answer is None:
                return f"{why} (or None)"
            if sorted(answer) != list(range(len(shape))):
                return f"{answer} does not list each dimension 0 to {len(shape) - 1} once"
            if not exists:
                return "no order makes this tensor contiguous, so the answer is None"
            new_shape, new_strides = permuted(shape, answer), permuted(strides, answer)
            if not is_contiguous(new_shape, new_strides):
                return (
                    f"permute{answer} gives shape {new_shape} and strides {new_strides}, "
                    "which are not contiguous"
                )
            return None

        seen = f"shape {shown(shape)}, strides {shown(strides)}"
        return Case(check, call("contiguous_order", shape, strides, shown=seen), judge)


# ---- ch5-ex-view-noncontiguous ---------------------------------------------------------------


def merge_jumps(
    shape: Sequence[int], strides: Sequence[int], start: int, end: int
) -> tuple[int, ...]:
    """The distinct jumps, in increasing order, between the storage indices of consecutive
    elements of dimensions ``start`` to ``end`` read in row-major order: a step along
    dimension k moves stride_k and takes every later dimension of the run back from its last
    index to 0. Dimensions of size 1 are never stepped along."""
    jumps = set()
    for k in range(start, end + 1):
        if shape[k] != 1:
            back = sum((shape[m] - 1) * strides[m] for m in range(k + 1, end + 1))
            jumps.add(strides[k] - back)
    return tuple(sorted(jumps))


class MergeJumps(GradedExercise):
    label = "ch5-ex-view-noncontiguous"
    manual_points = 1
    rubric = (
        "Explains with the stride rule why splitting never fails: a dimension of size n1 * n2 "
        "and stride s splits into sizes (n1, n2) with strides (n2 * s, s), which meet the rule "
        "by construction; a new dimension of size 1 is never stepped along, so any stride "
        "serves. Only a merge can need a copy, so view works on a non-contiguous tensor "
        "whenever it only splits or adds dimensions of size 1."
    )
    checks = (
        Check(
            "merge",
            2,
            "the jumps of runs that view can merge and of runs it cannot",
            "With the storage formula, write the storage index of the element just before a "
            "step along dimension k (every later index of the run at its last value) and of the "
            "element just after (those indices back at 0), and subtract. Do it for every "
            "dimension of the run, not only the last two.",
        ),
        Check(
            "edges",
            1,
            "runs with dimensions of size 1 or stride 0, and a run of one dimension",
            "A dimension of size 1 is never stepped along, so it makes no jump of its own, "
            "whatever its stride, and its reset moves nothing. Dimensions that all have size 1 "
            "make no jump at all: the answer is then ().",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = []
        for i in range(6):
            rank = small(rng, 3, 5)
            start = small(rng, 0, rank - 2)
            end = small(rng, start + 1, rank - 1)
            shape = [small(rng, 2, 5) for _ in range(rank)]
            if i >= 3:  # a size too large to read the run element by element
                shape[small(rng, start + 1, end)] = huge(rng)
            strides = [small(rng, 1, 60) for _ in range(rank)]
            strides[end] = huge(rng) if i % 2 else small(rng, 1, 9)
            for k in range(end - 1, start - 1, -1):  # a run that merges
                strides[k] = shape[k + 1] * strides[k + 1]
            if i % 3 == 1:  # padded rows (a slice): the last pair of the run breaks
                strides[end - 1] *= small(rng, 2, 3)
                for k in range(end - 2, start - 1, -1):
                    strides[k] = shape[k + 1] * strides[k + 1]
            elif i % 3 == 2:  # rows that overlap, somewhere in the run
                k = small(rng, start, end - 1)
                strides[k] -= strides[k + 1]
            cases.append(self.case("merge", shape, strides, start, end))
        # a transposed run: a step back at every wrap
        shape = [small(rng, 2, 5), huge(rng), small(rng, 2, 5)]
        strides = [1, shape[2] * shape[0], shape[0]]
        cases.append(self.case("merge", shape, strides, 0, 2))
        # a dimension of size 1 inside the run, and at its end, with strides of any size
        for where in ("inside", "end"):
            rank = small(rng, 3, 5)
            start = small(rng, 0, rank - 3)
            end = small(rng, start + 2, rank - 1)
            shape = [small(rng, 2, 5) for _ in range(rank)]
            strides = [small(rng, 1, 60) for _ in range(rank)]
            one = small(rng, start + 1, end - 1) if where == "inside" else end
            shape[one] = 1
            kept = [k for k in range(start, end + 1) if k != one]
            strides[kept[-1]] = small(rng, 1, 9)
            for outer, inner in reversed(list(pairwise(kept))):
                strides[outer] = shape[inner] * strides[inner]
            strides[one] = huge(rng)
            cases.append(self.case("edges", shape, strides, start, end))
        # a dimension of size 1 cannot mend a break elsewhere in the run
        shape, strides = [3, 1, 4, 2], [huge(rng), 0, 2, 1]
        cases.append(self.case("edges", shape, strides, 0, 3))
        # an expanded dimension (stride 0) before one that is not
        shape = [small(rng, 2, 5), huge(rng), small(rng, 2, 5)]
        strides = [small(rng, 1, 60), 0, small(rng, 1, 60)]
        cases.append(self.case("edges", shape, strides, 0, 2))
        # dimensions that all have size 1, and a run of one dimension
        shape = [small(rng, 2, 5), 1, 1, small(rng, 2, 5)]
        strides = [small(rng, 1, 60), huge(rng), 0, small(rng, 1, 60)]
        cases.append(self.case("edges", shape, strides, 1, 2))
        shape = [small(rng, 2, 5), huge(rng), small(rng, 2, 5)]
        strides = [small(rng, 1, 60), huge(rng), small(rng, 1, 60)]
        cases.append(self.case("edges", shape, strides, 1, 1))
        return cases

    @staticmethod
    def case(check: str, shape: list[int], strides: list[int], start: int, end: int) -> Case:
        shape_t, strides_t = tuple(shape), tuple(strides)
        expected = merge_jumps(shape_t, strides_t, start, end)

        def judge(results: list) -> str | None:
            got = value_of(results)
            if why := raised(got):
                return why
            if not isinstance(got, list) or not all(type(item) is int for item in got):
                return f"expected a tuple of int jumps, got {describe(got)}"
            # The order and repeats are the student's business: the jumps are a set.
            if tuple(sorted(set(got))) != expected:
                return f"the jumps {shown(got)} are not the jumps of this run"
            return None

        seen = f"shape {shown(shape_t)}, strides {shown(strides_t)}, start = {start}, end = {end}"
        return Case(check, call("merge_jumps", shape_t, strides_t, start, end, shown=seen), judge)


# ---- ch5-ex-slice-stride ---------------------------------------------------------------------


def windows_layout(
    shape: Sequence[int],
    strides: Sequence[int],
    offset: int,
    dim: int,
    start: int,
    size: int,
    step: int,
    dilation: int,
) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """The layout of the windows of ``size`` elements ``dilation`` apart along ``dim``, one
    every ``step`` from index ``start`` on: element (w, j) is element
    start + w * step + j * dilation of the dimension."""
    span = (size - 1) * dilation + 1  # the elements from a window's first to its last
    count = (shape[dim] - start - span) // step + 1
    new_shape = (*shape[:dim], count, *shape[dim + 1 :], size)
    new_strides = (
        *strides[:dim],
        step * strides[dim],
        *strides[dim + 1 :],
        dilation * strides[dim],
    )
    return new_shape, new_strides, offset + start * strides[dim]


class WindowsLayout(GradedExercise):
    label = "ch5-ex-slice-stride"
    manual_points = 1
    rubric = (
        "Predicts shape (5, 4), strides (2, 1), offset 0 for x.unfold(0, 4, 2), and explains "
        "why view(-1) fails: merging needs stride 2 = 4 * 1, which fails because the windows "
        "overlap; read in order, the storage indices go back by 1 after each window (0, 1, 2, "
        "3, 2, ...), which no single stride describes. reshape(-1) copies 20 numbers."
    )
    checks = (
        Check(
            "windows",
            2,
            "the layout of dilated windows: shape, strides and offset",
            "Element w of the window dimension and element j inside a window is element "
            "start + w * step + j * dilation of dimension dim: put that in "
            "offset + sum(index * stride) and read off the offset and the two strides. Count "
            "the windows that fit with integer division (//): the dimension may hold more "
            "elements than a loop could count or a float could hold exactly.",
        ),
        Check(
            "edges",
            1,
            "one window, windows of one element, steps longer than a window",
            "Count the windows as the starts start, start + step, ... whose last element, "
            "(size - 1) * dilation further on, is still in the dimension: check a window that "
            "fits exactly once, and a last start whose window would run past the end.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        # Each check holds a dimension too long for a tensor: the layout is linear in the
        # strides and the offset, so torch asked with unit strides would still give them, but
        # the count of windows, a floor division of that length, is not.
        cases = []
        for i in range(5):
            start = small(rng, 0, 4)
            size = small(rng, 2, 4)
            dilation = 1 if i == 0 else small(rng, 2, 4)
            span = (size - 1) * dilation + 1
            n = start + span + (huge(rng) if i >= 3 else small(rng, 0, 8))
            step = small(rng, 1, 4)
            cases.append(self.case("windows", rng, n, start, size, step, dilation, big=i % 2 == 1))
        # exactly one window fits
        start, size, dilation = small(rng, 0, 4), small(rng, 2, 4), small(rng, 2, 4)
        n = start + (size - 1) * dilation + 1
        step = small(rng, 1, 3)
        cases.append(self.case("edges", rng, n, start, size, step, dilation, big=True))
        # windows of one element
        n = small(rng, 3, 9)
        start = small(rng, 0, n - 2)
        cases.append(self.case("edges", rng, n, start, 1, 1, small(rng, 2, 4), big=False))
        # steps longer than a window, in a dimension too long for a tensor, and a last start
        # inside it whose window would run past the end
        size, dilation = small(rng, 2, 3), small(rng, 2, 3)
        span = (size - 1) * dilation + 1
        step = huge(rng)
        n = start + span + step * small(rng, 1, 3) + step - small(rng, 1, span - 1)
        cases.append(self.case("edges", rng, n, start, size, step, dilation, big=True))
        return cases

    @staticmethod
    def case(
        check: str,
        rng: np.random.Generator,
        n: int,
        start: int,
        size: int,
        step: int,
        dilation: int,
        big: bool,
    ) -> Case:
        rank = small(rng, 1, 4)
        dim = small(rng, 0, rank - 1)
        shape = [small(rng, 1, 5) for _ in range(rank)]
        shape[dim] = n
        strides = [huge(rng) if big else small(rng, 1, 60) for _ in range(rank)]
        offset = huge(rng) if big else small(rng, 0, 30)
        shape_t, strides_t = tuple(shape), tuple(strides)
        want_shape, want_strides, want_offset = windows_layout(
            shape_t, strides_t, offset, dim, start, size, step, dilation
        )

        def judge(results: list) -> str | None:
            got = value_of(results)
            if why := raised(got):
                return why
            if not isinstance(got, list) or len(got) != 3:
                return f"expected (shape, strides, offset), got {describe(got)}"
            got_shape, why = ints(got[0], rank + 1, "the shape")
            if got_shape is None:
                return why
            got_strides, why = ints(got[1], rank + 1, "the strides")
            if got_strides is None:
                return why
            if got_shape != want_shape:
                return f"the shape {shown(got_shape)} is wrong"
            if wrong := differ(got_strides, want_strides, want_shape):
                return f"the strides {shown(got_strides)} are wrong along dimension {wrong[0]}"
            if type(got[2]) is not int or got[2] != want_offset:
                return f"the offset {shown(got[2])} is wrong"
            return None

        arguments = (shape_t, strides_t, offset, dim, start, size, step, dilation)
        seen = (
            f"shape {shown(shape_t)}, strides {shown(strides_t)}, offset {shown(offset)}, "
            f"dim = {dim}, start = {start}, size = {size}, step = {step}, "
            f"dilation = {dilation}"
        )
        return Case(check, call("windows_layout", *arguments, shown=seen), judge)


# ---- ch5-ex-expand-strides -------------------------------------------------------------------


def broadcast_strides(
    shape_a: Sequence[int],
    strides_a: Sequence[int],
    shape_b: Sequence[int],
    strides_b: Sequence[int],
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None:
    """The shape two tensors broadcast to and the strides of each expanded to it, or None."""
    rank = max(len(shape_a), len(shape_b))

    def padded(shape: Sequence[int], strides: Sequence[int]) -> list[tuple[int, int]]:
        return [(1, 0)] * (rank - len(shape)) + list(zip(shape, strides, strict=True))

    pairs = list(zip(padded(shape_a, strides_a), padded(shape_b, strides_b), strict=True))
    if any(m != n and 1 not in (m, n) for (m, _), (n, _) in pairs):
        return None
    shape = tuple(max(m, n) for (m, _), (n, _) in pairs)
    new_a = tuple(s if m == size else 0 for ((m, s), _), size in zip(pairs, shape, strict=True))
    new_b = tuple(s if n == size else 0 for (_, (n, s)), size in zip(pairs, shape, strict=True))
    return shape, new_a, new_b


class BroadcastStrides(GradedExercise):
    label = "ch5-ex-expand-strides"
    manual_points = 1
    rubric = (
        "Says grid.add_(1) raises a RuntimeError: the four rows of grid are one row of storage "
        "(stride 0), so several of its elements are one memory location and an in-place write "
        "would write it several times; clone() it first (or write grid + 1) to get storage of "
        "its own."
    )
    checks = (
        Check(
            "broadcast",
            2,
            "the broadcast shape and the strides of both tensors expanded to it",
            "Line the shapes up from the right, a missing dimension counting as size 1; a "
            "dimension of size 1 that grows reads the same element again and again.",
        ),
        Check(
            "edges",
            1,
            "shapes that do not broadcast, equal shapes, a 0-dimensional tensor",
            "Two sizes that differ and are both larger than 1 do not broadcast: the answer is "
            "then None. A 0-dimensional tensor broadcasts to any shape; sizes that already "
            "match keep their strides.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = []
        for i in range(5):
            shape = [small(rng, 2, 5) for _ in range(small(rng, 2, 4))]
            a = b = self.operand(rng, shape, big=i % 2 == 0)
            while b[0] == a[0]:  # shapes that differ: something grows
                b = self.operand(rng, shape, big=i % 2 == 1)
            cases.append(self.case("broadcast", a, b))
        # sizes that clash (the other dimensions may still grow)
        shape = [small(rng, 2, 5) for _ in range(small(rng, 2, 4))]
        a, b = self.operand(rng, shape, big=True), self.operand(rng, shape, big=False)
        k = small(rng, 1, min(len(a[0]), len(b[0])))
        a[0][-k] = small(rng, 2, 5)
        b[0][-k] = a[0][-k] + small(rng, 1, 3)
        cases.append(self.case("edges", a, b))
        # equal shapes: nothing grows
        shape = [small(rng, 2, 5) for _ in range(small(rng, 1, 4))]
        a = (shape, self.strides(rng, shape, big=True))
        cases.append(self.case("edges", a, (shape, self.strides(rng, shape, big=False))))
        # a 0-dimensional tensor
        shape = [small(rng, 1, 5) for _ in range(small(rng, 1, 4))]
        cases.append(self.case("edges", ([], []), (shape, self.strides(rng, shape, big=True))))
        return cases

    @staticmethod
    def strides(rng: np.random.Generator, shape: Sequence[int], *, big: bool) -> list[int]:
        return [huge(rng) if big else small(rng, 1, 60) for _ in shape]

    def operand(
        self, rng: np.random.Generator, shape: Sequence[int], big: bool
    ) -> tuple[list[int], list[int]]:
        """A tensor that broadcasts to ``shape``: maybe fewer dimensions, some of size 1."""
        kept = shape[small(rng, 1, len(shape) - 1) :] if rng.random() < 0.5 else shape
        mine = [1 if rng.random() < 0.35 else size for size in kept]
        return mine, self.strides(rng, mine, big=big)

    @staticmethod
    def case(check: str, a: tuple[list[int], list[int]], b: tuple[list[int], list[int]]) -> Case:
        shape_a, strides_a = tuple(a[0]), tuple(a[1])
        shape_b, strides_b = tuple(b[0]), tuple(b[1])
        expected = broadcast_strides(shape_a, strides_a, shape_b, strides_b)

        def judge(results: list) -> str | None:
            got = value_of(results)
            if why := raised(got):
                return why
            if expected is None:
                if got is not None:
                    return "these shapes do not broadcast, so the answer is None"
                return None
            if got is None:
                return "these shapes broadcast, so the answer is not None"
            if not isinstance(got, list) or len(got) != 3:
                return f"expected (shape, strides_a, strides_b), got {describe(got)}"
            shape, want_a, want_b = expected
            got_shape, why = ints(got[0], len(shape), "the shape")
            if got_shape is None:
                return why
            if got_shape != shape:
                return f"the shape {shown(got_shape)} is wrong"
            for name, item, want in (("a", got[1], want_a), ("b", got[2], want_b)):
                strides, why = ints(item, len(shape), f"the strides of {name}")
                if strides is None:
                    return why
                if wrong := differ(strides, want, shape):
                    return (
                        f"the strides of {name}, {shown(strides)}, are wrong along "
                        f"dimension {wrong[0]}"
                    )
            return None

        seen = (
            f"a: shape {shown(shape_a)}, strides {shown(strides_a)}; "
            f"b: shape {shown(shape_b)}, strides {shown(strides_b)}"
        )
        arguments = (shape_a, strides_a, shape_b, strides_b)
        return Case(check, call("broadcast_strides", *arguments, shown=seen), judge)


EXERCISES = [ContiguousOrder, MergeJumps, WindowsLayout, BroadcastStrides]
