"""Chapter 5's exercises: a correct answer earns every point on every variant, lazy answers do
not (the answers torch's private pure-Python stride helpers gave the earlier exercises among
them), the self-check passes a correct answer and fails a wrong one with its hint, and the
grader's stride rules agree with torch's on every layout small enough for a tensor.

The correct answers below are written as a student would write them, independently of the
grader's references (``grading/ch5.py``) and of the book's solutions (which the slow test
grades as a submission).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from grading_helpers import failures, full_marks, grade, graded_exercise

from attention_from_scratch.exercises import run_checks

AUTO = [
    "ch5-ex-permute-strides",
    "ch5-ex-view-noncontiguous",
    "ch5-ex-slice-stride",
    "ch5-ex-expand-strides",
]

CORRECT = """
def contiguous_order(shape, strides):
    n = len(shape)
    # Dimensions of size 1 go last, in any order; the others by falling stride.
    big = sorted((k for k in range(n) if shape[k] > 1), key=lambda k: strides[k], reverse=True)
    order = big + [k for k in range(n) if shape[k] == 1]
    step = 1
    for k in reversed(big):
        if strides[k] != step:
            return None
        step *= shape[k]
    return tuple(order)

def merge_jumps(shape, strides, start, end):
    # The storage index of the last element of dimensions k..end, all indices
    # before k at 0: a step along k - 1 goes from there to index 0 of k..end.
    jumps = []
    for k in range(start, end + 1):
        if shape[k] > 1:
            last = sum((shape[m] - 1) * strides[m] for m in range(k + 1, end + 1))
            jumps.append(strides[k] - last)
    return tuple(sorted(set(jumps)))

def windows_layout(shape, strides, offset, dim, start, size, step, dilation):
    last = shape[dim] - 1 - (size - 1) * dilation  # the last index a window may start at
    count = (last - start) // step + 1
    new_shape = list(shape) + [size]
    new_strides = list(strides) + [strides[dim] * dilation]
    new_shape[dim] = count
    new_strides[dim] = step * strides[dim]
    return tuple(new_shape), tuple(new_strides), offset + start * strides[dim]

def broadcast_strides(shape_a, strides_a, shape_b, strides_b):
    rank = max(len(shape_a), len(shape_b))
    a = [(1, 0)] * (rank - len(shape_a)) + list(zip(shape_a, strides_a))
    b = [(1, 0)] * (rank - len(shape_b)) + list(zip(shape_b, strides_b))
    shape, new_a, new_b = [], [], []
    for (m, s), (n, t) in zip(a, b):
        if m != n and m != 1 and n != 1:
            return None
        size = max(m, n)
        shape.append(size)
        new_a.append(s if m == size else 0)
        new_b.append(t if n == size else 0)
    return tuple(shape), tuple(new_a), tuple(new_b)
"""


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("label", AUTO)
def test_a_correct_answer_earns_every_point_on_every_variant(label: str, seed: int) -> None:
    score = grade(label, CORRECT, seed=seed)
    assert full_marks(score), failures(score)


@pytest.mark.parametrize("label", AUTO)
def test_the_self_check_passes_a_correct_answer(label: str) -> None:
    namespace: dict = {}
    exec(CORRECT, namespace)
    result = run_checks(label, namespace)
    assert result.passed, [(c.name, c.reason) for c in result.checks]


LAZY = {
    # torch answers every question on a tensor with the layout, where one can be built.
    ("ch5-ex-permute-strides", "torch, order by order"): """
import itertools, torch
def contiguous_order(shape, strides):
    t = torch.empty_strided(shape, strides)
    for order in itertools.permutations(range(len(shape))):
        if t.permute(*order).is_contiguous():
            return order
    return None
""",
    # Sorting by stride finds the order, but not that there may be none.
    ("ch5-ex-permute-strides", "sorted strides, never None"): """
def contiguous_order(shape, strides):
    return tuple(sorted(range(len(shape)), key=lambda k: -strides[k]))
""",
    ("ch5-ex-permute-strides", "the page's order"): """
def contiguous_order(shape, strides):
    return (1, 2, 0)
""",
    # torch reads the jumps off a tensor with the layout, where one can be built.
    ("ch5-ex-view-noncontiguous", "torch, walking the storage"): """
import torch
def merge_jumps(shape, strides, start, end):
    t = torch.arange(10_000).as_strided(shape, strides)
    run = t[(0,) * start].flatten(0, end - start) if end > start else t[(0,) * start]
    return tuple(sorted(set(run.diff().tolist())))
""",
    # torch's pure-Python copy of view's stride rule answers whether view merges, and
    # with which stride, but not the jumps (the old exercise's full-marks answer).
    ("ch5-ex-view-noncontiguous", "torch's private view rule"): """
from torch._subclasses.fake_impls import _compute_stride
def merge_jumps(shape, strides, start, end):
    merged = 1
    for s in shape[start : end + 1]:
        merged *= s
    new_shape = list(shape[:start]) + [merged] + list(shape[end + 1 :])
    new = _compute_stride(list(shape), list(strides), new_shape)
    return None if new is None else new[start]
""",
    # The same, dressed as jumps: one jump when view merges, else the strides of the run.
    ("ch5-ex-view-noncontiguous", "torch's private view rule, as jumps"): """
from torch._subclasses.fake_impls import _compute_stride
def merge_jumps(shape, strides, start, end):
    merged = 1
    for s in shape[start : end + 1]:
        merged *= s
    new_shape = list(shape[:start]) + [merged] + list(shape[end + 1 :])
    new = _compute_stride(list(shape), list(strides), new_shape)
    if merged == 1:
        return ()
    if new is not None:
        return (new[start],)
    return tuple(sorted({strides[k] for k in range(start, end + 1) if shape[k] > 1}))
""",
    # A step's own stride, without the later dimensions going back to 0.
    ("ch5-ex-view-noncontiguous", "steps without the resets"): """
def merge_jumps(shape, strides, start, end):
    return tuple(sorted({strides[k] for k in range(start, end + 1) if shape[k] > 1}))
""",
    # The reset of every later dimension, dimensions of size 1 stepped along too.
    ("ch5-ex-view-noncontiguous", "size-1 dimensions make jumps"): """
def merge_jumps(shape, strides, start, end):
    return tuple(sorted({
        strides[k] - sum((shape[m] - 1) * strides[m] for m in range(k + 1, end + 1))
        for k in range(start, end + 1)
    }))
""",
    ("ch5-ex-slice-stride", "torch's unfold"): """
import torch
def windows_layout(shape, strides, offset, dim, start, size, step, dilation):
    t = torch.empty(10_000).as_strided(shape, strides, offset)
    w = t.narrow(dim, start, shape[dim] - start).unfold(dim, size, step)
    return tuple(w.shape), w.stride(), w.storage_offset()
""",
    # torch's pure-Python unfold geometry after the shift for the start (the old exercise's
    # full-marks answer): no dilation.
    ("ch5-ex-slice-stride", "torch's private unfold geometry"): """
from torch._refs import _get_unfold_shape_stride
def windows_layout(shape, strides, offset, dim, start, size, step, dilation):
    shape = list(shape)
    offset = offset + start * strides[dim]
    shape[dim] = shape[dim] - start
    new_shape, new_strides = _get_unfold_shape_stride(shape, list(strides), dim, size, step)
    return tuple(new_shape), tuple(new_strides), offset
""",
    # The same geometry over a window's whole span counts the windows, but reads every
    # element of the span.
    ("ch5-ex-slice-stride", "torch's unfold geometry over the span"): """
from torch._refs import _get_unfold_shape_stride
def windows_layout(shape, strides, offset, dim, start, size, step, dilation):
    shape = list(shape)
    offset = offset + start * strides[dim]
    shape[dim] = shape[dim] - start
    span = (size - 1) * dilation + 1
    new_shape, new_strides = _get_unfold_shape_stride(shape, list(strides), dim, span, step)
    return tuple(new_shape[:-1]) + (size,), tuple(new_strides), offset
""",
    # The layout is linear in the strides and the offset: torch asked with unit strides on a
    # meta tensor, the answers added up with the real strides as weights. The count of windows
    # is not linear, and no tensor holds a dimension as long as the grader's.
    ("ch5-ex-slice-stride", "torch with unit strides, combined"): """
import torch
def windows_layout(shape, strides, offset, dim, start, size, step, dilation):
    n = len(shape)
    span = (size - 1) * dilation + 1
    out_strides, out_offset = [0] * (n + 1), 0
    for k in range(n + 1):
        unit = [int(m == k) for m in range(n)]
        t = torch.empty(0, device="meta").as_strided(tuple(shape), unit, int(k == n))
        w = t.narrow(dim, start, shape[dim] - start).unfold(dim, span, step)[..., ::dilation]
        weight = strides[k] if k < n else offset
        out_strides = [a + weight * s for a, s in zip(out_strides, w.stride())]
        out_offset += weight * w.storage_offset()
    return tuple(w.shape), tuple(out_strides), out_offset
""",
    # torch counts the windows of a short dimension, one more window for every step of
    # length added: steps too long for a tensor defeat it.
    ("ch5-ex-slice-stride", "torch on a short dimension, extrapolated"): """
import torch
def windows_layout(shape, strides, offset, dim, start, size, step, dilation):
    span = (size - 1) * dilation + 1
    short = shape[dim] % step + step * ((start + span) // step + 2)
    w = torch.empty(short, device="meta")[start:].unfold(0, span, step)
    new_shape, new_strides = list(shape), list(strides)
    new_shape[dim] = w.shape[0] + (shape[dim] - short) // step
    new_strides[dim] = step * strides[dim]
    new_shape.append(size)
    new_strides.append(dilation * strides[dim])
    return tuple(new_shape), tuple(new_strides), offset + start * strides[dim]
""",
    # A float count loses the low bits of a dimension longer than 2**53.
    ("ch5-ex-slice-stride", "a float count"): """
def windows_layout(shape, strides, offset, dim, start, size, step, dilation):
    span = (size - 1) * dilation + 1
    new_shape, new_strides = list(shape), list(strides)
    new_shape[dim] = int((shape[dim] - start - span) / step) + 1
    new_strides[dim] = step * strides[dim]
    new_shape.append(size)
    new_strides.append(dilation * strides[dim])
    return tuple(new_shape), tuple(new_strides), offset + start * strides[dim]
""",
    # A slice start::step, the chapter's old question, is not the windows.
    ("ch5-ex-slice-stride", "a slice"): """
def windows_layout(shape, strides, offset, dim, start, size, step, dilation):
    new_shape, new_strides = list(shape), list(strides)
    new_shape[dim] = len(range(start, shape[dim], step))
    new_strides[dim] = strides[dim] * step
    new_offset = offset + start * strides[dim]
    return tuple(new_shape) + (size,), tuple(new_strides) + (dilation,), new_offset
""",
    ("ch5-ex-slice-stride", "the page's layout"): """
def windows_layout(shape, strides, offset, dim, start, size, step, dilation):
    return (4, 4), (2, 1), 1
""",
    ("ch5-ex-expand-strides", "torch's broadcast_tensors"): """
import torch
def broadcast_strides(shape_a, strides_a, shape_b, strides_b):
    a, b = torch.empty_strided(shape_a, strides_a), torch.empty_strided(shape_b, strides_b)
    try:
        a, b = torch.broadcast_tensors(a, b)
    except RuntimeError:
        return None
    return tuple(a.shape), a.stride(), b.stride()
""",
    # torch's broadcast_shapes gives the shape; strides 0 only for the added dimensions.
    ("ch5-ex-expand-strides", "the shape from torch, zeros only in front"): """
import torch
def broadcast_strides(shape_a, strides_a, shape_b, strides_b):
    try:
        shape = tuple(torch.broadcast_shapes(shape_a, shape_b))
    except RuntimeError:
        return None
    pad = lambda strides: (0,) * (len(shape) - len(strides)) + tuple(strides)
    return shape, pad(strides_a), pad(strides_b)
""",
    ("ch5-ex-expand-strides", "the page's strides"): """
def broadcast_strides(shape_a, strides_a, shape_b, strides_b):
    return (4, 3), (0, 1), (3, 1)
""",
}


@pytest.mark.parametrize(("label", "name"), list(LAZY))
def test_a_lazy_answer_earns_less_than_full_marks(label: str, name: str) -> None:
    for seed in range(3):
        score = grade(label, LAZY[(label, name)], seed=seed)
        assert score.earned < score.possible, seed


@pytest.mark.parametrize("label", AUTO)
def test_a_tensor_built_with_the_layout_earns_nothing(label: str) -> None:
    """Every check holds a layout too large for a tensor, so torch answers none of them."""
    name = next(key for key in LAZY if key[0] == label)[1]
    assert grade(label, LAZY[(label, name)], seed=0).earned == 0


def test_the_self_check_fails_a_wrong_answer_with_its_hint() -> None:
    never_none = LAZY[("ch5-ex-permute-strides", "sorted strides, never None")]
    namespace: dict = {}
    exec(never_none, namespace)
    result = run_checks("ch5-ex-permute-strides", namespace)
    passed = {c.name: c.passed for c in result.checks}
    assert passed == {
        "the_order_that_undoes_a_permute": True,
        "size_one_and_no_order_at_all": False,
    }
    assert "return None" in result.checks[1].hint
    namespace = {}
    exec(LAZY[("ch5-ex-view-noncontiguous", "size-1 dimensions make jumps")], namespace)
    result = run_checks("ch5-ex-view-noncontiguous", namespace)
    assert [c.passed for c in result.checks] == [True, False]
    assert "size 1" in result.checks[1].hint
    result = run_checks("ch5-ex-slice-stride", {"windows_layout": ...})
    assert not result.passed and all("still `...`" in c.reason for c in result.checks)
    result = run_checks("ch5-ex-expand-strides", {"broadcast_strides": lambda *args: None})
    assert not any(c.passed for c in result.checks)


# ---- the grader's rules against torch, on layouts small enough for a tensor -----------------


def rules():
    """The grader's reference functions (grading/ch5.py is loaded by path, not imported)."""
    module = graded_exercise("ch5-ex-permute-strides").cases.__globals__
    return module


def random_layout(rng: np.random.Generator, rank: int) -> tuple[list[int], list[int]]:
    """Sizes (some 1) and strides, about half of the neighbours' strides compatible."""
    shape = [int(rng.choice([1, 1, 2, 3, 4])) for _ in range(rank)]
    strides = [int(rng.integers(0, 30)) for _ in range(rank)]
    for k in range(rank - 2, -1, -1):
        if rng.random() < 0.6:
            strides[k] = shape[k + 1] * strides[k + 1]
    return shape, strides


def tensor(shape: list[int], strides: list[int]) -> torch.Tensor:
    return torch.zeros(100_000).as_strided(shape, strides)


@pytest.mark.parametrize("seed", range(3))
def test_the_grader_rules_agree_with_torch(seed: int) -> None:
    grader = rules()
    rng = np.random.default_rng(seed)
    for _ in range(300):
        rank = int(rng.integers(1, 5))
        shape, strides = random_layout(rng, rank)
        x = tensor(shape, strides)
        # contiguity, and whether an order makes the tensor contiguous
        assert grader["is_contiguous"](shape, strides) == x.is_contiguous()
        any_order = any(
            x.permute(*order).is_contiguous() for order in itertools.permutations(range(rank))
        )
        assert grader["some_order_is_contiguous"](shape, strides) == any_order
        # the jumps of a run, as a walk over the storage reads them, and whether view merges it
        start = int(rng.integers(0, rank))
        end = int(rng.integers(start, rank))
        indices = torch.arange(100_000).as_strided(shape, strides)
        run = indices[(0,) * start + (slice(None),) * (end - start + 1) + (0,) * (rank - 1 - end)]
        walked = tuple(sorted(set(run.flatten().diff().tolist())))
        jumps = grader["merge_jumps"](shape, strides, start, end)
        assert jumps == walked, (shape, strides, start, end)
        try:
            torch_says = x.view(*shape[:start], -1, *shape[end + 1 :]).stride(start)
        except RuntimeError:
            torch_says = None
        assert (torch_says is not None) == (len(jumps) <= 1), (shape, strides, start, end)
        assert len(jumps) != 1 or torch_says == jumps[0]
        # windows, with gaps, element by element; without, as torch's unfold lays them out
        dim = int(rng.integers(0, rank))
        n = int(rng.integers(1, 13))
        wide = [*shape[:dim], n, *shape[dim + 1 :]]
        first = int(rng.integers(0, n))
        size = int(rng.integers(1, n - first + 1))
        widest = (n - first - 1) // (size - 1) if size > 1 else 3
        dilation = int(rng.integers(1, min(widest, 3) + 1))
        step = int(rng.integers(1, 5))
        got = grader["windows_layout"](wide, strides, 0, dim, first, size, step, dilation)
        count = got[0][dim]
        assert first + (count - 1) * step + (size - 1) * dilation < n  # the last fits
        assert first + count * step + (size - 1) * dilation >= n  # the next would not
        source = torch.arange(100_000).as_strided(wide, strides)
        starts = first + torch.arange(count)[:, None] * step  # (count, 1)
        picked = (starts + torch.arange(size) * dilation).flatten()  # (count * size,)
        expected = source.index_select(dim, picked).unflatten(dim, (count, size))
        built = torch.arange(100_000).as_strided(got[0], got[1], got[2])
        assert torch.equal(built, expected.movedim(dim + 1, -1)), (wide, strides, dim)
        if dilation == 1:
            w = source.narrow(dim, first, n - first).unfold(dim, size, step)
            assert got[0] == tuple(w.shape) and got[2] == w.storage_offset()
            assert grader["differ"](got[1], w.stride(), tuple(w.shape)) == []
        # broadcasting
        other_shape, other_strides = random_layout(rng, int(rng.integers(0, 4)))
        y = tensor(other_shape, other_strides)
        rule = grader["broadcast_strides"](shape, strides, other_shape, other_strides)
        try:
            a, b = torch.broadcast_tensors(x, y)
        except RuntimeError:
            assert rule is None
            continue
        assert rule is not None and rule[0] == tuple(a.shape)
        assert grader["differ"](rule[1], a.stride(), rule[0]) == []
        assert grader["differ"](rule[2], b.stride(), rule[0]) == []
