"""The exercises of chapter 5: a student's correct answers earn every point, lazy ones don't.

The correct answers are written here as a student would write them, without the package;
the expectations are the grader's own points and the reasons its checks give.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from attention_from_scratch.exercises import load_hidden, run_checks

ROOT = Path(__file__).resolve().parent.parent
load_hidden(ROOT / "grading" / "hidden", chapters=[5])


# ------------------------------------------------------------------ correct answers


def permuted_layout(shape, strides, order):
    return tuple(shape[o] for o in order), tuple(strides[o] for o in order)


def merged_stride(shape, strides, k):
    if shape[k + 1] == 1:
        return strides[k]
    if shape[k] == 1:
        return strides[k + 1]
    if strides[k] == shape[k + 1] * strides[k + 1]:
        return strides[k + 1]
    return None


def sliced_layout(shape, strides, offset, dim, start, step):
    new_shape, new_strides = list(shape), list(strides)
    new_shape[dim] = (shape[dim] - start + step - 1) // step
    new_strides[dim] = strides[dim] * step
    return tuple(new_shape), tuple(new_strides), offset + start * strides[dim]


def expanded_strides(shape, strides, new_shape):
    added = len(new_shape) - len(shape)
    answer = [0] * added  # a dimension added in front repeats the whole tensor
    for old_size, old_stride, size in zip(shape, strides, new_shape[added:], strict=True):
        answer.append(old_stride if size in (-1, old_size) else 0)
    return tuple(answer)


CORRECT = {
    "ch5-ex-permute-strides": {"permuted_layout": permuted_layout},
    "ch5-ex-view-noncontiguous": {"merged_stride": merged_stride},
    "ch5-ex-slice-stride": {"sliced_layout": sliced_layout},
    "ch5-ex-expand-strides": {"expanded_strides": expanded_strides},
}


@pytest.mark.parametrize("label", sorted(CORRECT))
def test_a_correct_answer_earns_every_point(label: str) -> None:
    graded = run_checks(label, CORRECT[label], hidden=True)
    assert graded.earned == graded.possible > 0, graded


def reasons(label: str, namespace: dict) -> tuple[float, float, str]:
    graded = run_checks(label, namespace, hidden=True)
    text = " ".join(f"{r.reason} {r.hint}" for r in graded.checks if not r.passed)
    return graded.earned, graded.possible, text


# ------------------------------------------------------------------ lazy answers


def test_permute_refuses_reading_the_layout_off_a_tensor() -> None:
    def lazy(shape, strides, order):
        t = torch.empty_strided(shape, strides).permute(*order)
        return tuple(t.shape), t.stride()

    points, possible, text = reasons("ch5-ex-permute-strides", {"permuted_layout": lazy})
    assert points == 0 < possible
    assert "torch.empty_strided" in text


def test_permute_names_the_inverse_permutation_and_unmoved_strides() -> None:
    def inverse(shape, strides, order):
        back = [order.index(k) for k in range(len(order))]
        return tuple(shape[o] for o in back), tuple(strides[o] for o in back)

    def unmoved(shape, strides, order):
        return tuple(shape[o] for o in order), tuple(strides)

    _, _, text = reasons("ch5-ex-permute-strides", {"permuted_layout": inverse})
    assert "permute does the opposite" in text
    _, _, text = reasons("ch5-ex-permute-strides", {"permuted_layout": unmoved})
    assert "a stride moves with its dimension" in text
    # The hint teaches the idea but does not give the rule away.
    assert "order[k]" not in text.split("Ask,")[-1]


def test_permute_values_copied_from_the_page_fail() -> None:
    def printed(shape, strides, order):
        return (4, 2, 3), (1, 12, 4)

    points, _, _ = reasons("ch5-ex-permute-strides", {"permuted_layout": printed})
    assert points == 0


def test_merged_stride_refuses_view_and_names_contiguity_mistake() -> None:
    def lazy(shape, strides, k):
        t = torch.zeros(10_000).as_strided(shape, strides)
        try:
            merged = t.view(*shape[:k], -1, *shape[k + 2 :])
        except RuntimeError:
            return None
        return merged.stride(k)

    points, possible, text = reasons("ch5-ex-view-noncontiguous", {"merged_stride": lazy})
    assert points == 0 < possible
    assert "as_strided" in text

    def contiguous_only(shape, strides, k):
        row_major = [1] * len(shape)
        for i in range(len(shape) - 2, -1, -1):
            row_major[i] = row_major[i + 1] * shape[i + 1]
        return strides[k + 1] if list(strides) == row_major else None

    _, _, text = reasons("ch5-ex-view-noncontiguous", {"merged_stride": contiguous_only})
    assert "only the two merged dimensions matter" in text


def test_merged_stride_without_size_one_dimensions_fails_the_public_check() -> None:
    def rule_only(shape, strides, k):
        if strides[k] == shape[k + 1] * strides[k + 1]:
            return strides[k + 1]
        return None

    # The public check has a dimension of size 1 whose stride breaks the rule: a student sees
    # the mistake before grading, and why.
    public = run_checks("ch5-ex-view-noncontiguous", {"merged_stride": rule_only})
    assert public.earned == 0 < public.possible
    text = " ".join(r.reason for r in public.checks if not r.passed)
    assert "size 1 is never stepped along" in text
    points, _, text = reasons("ch5-ex-view-noncontiguous", {"merged_stride": rule_only})
    assert points == 0
    assert "size 1" in text


def test_merged_stride_with_half_the_size_one_rule_loses_the_hidden_point() -> None:
    def trailing_only(shape, strides, k):
        if shape[k + 1] == 1:  # handled; a leading dimension of size 1 is not
            return strides[k]
        if strides[k] == shape[k + 1] * strides[k + 1]:
            return strides[k + 1]
        return None

    public = run_checks("ch5-ex-view-noncontiguous", {"merged_stride": trailing_only})
    assert public.earned == public.possible > 0
    points, possible, text = reasons("ch5-ex-view-noncontiguous", {"merged_stride": trailing_only})
    assert 0 < points < possible
    assert "size 1" in text


def test_slice_refuses_indexing_a_tensor() -> None:
    def lazy(shape, strides, offset, dim, start, step):
        t = torch.zeros(10_000).as_strided(shape, strides, offset)
        s = t.narrow(dim, start, shape[dim] - start)
        index = [slice(None)] * len(shape)
        index[dim] = slice(None, None, step)
        s = s[tuple(index)]
        return tuple(s.shape), s.stride(), s.storage_offset()

    points, possible, text = reasons("ch5-ex-slice-stride", {"sliced_layout": lazy})
    assert points == 0 < possible
    assert "as_strided" in text


def test_slice_with_a_wrong_count_or_offset_fails() -> None:
    def floor_count(shape, strides, offset, dim, start, step):
        new_shape, new_strides = list(shape), list(strides)
        new_shape[dim] = (shape[dim] - start) // step
        new_strides[dim] = strides[dim] * step
        return tuple(new_shape), tuple(new_strides), offset + start * strides[dim]

    def offset_forgotten(shape, strides, offset, dim, start, step):
        new_shape, new_strides, _ = sliced_layout(shape, strides, offset, dim, start, step)
        return new_shape, new_strides, start * strides[dim]

    points, _, text = reasons("ch5-ex-slice-stride", {"sliced_layout": floor_count})
    assert points == 0 and "count the indices" in text
    points, _, text = reasons("ch5-ex-slice-stride", {"sliced_layout": offset_forgotten})
    assert points == 0 and "offset" in text


def test_expand_refuses_expanding_a_tensor() -> None:
    def lazy(shape, strides, new_shape):
        t = torch.zeros(10_000).as_strided(shape, strides)
        return t.expand(*new_shape).stride()

    points, possible, text = reasons("ch5-ex-expand-strides", {"expanded_strides": lazy})
    assert points == 0 < possible

    def lazy_broadcast(shape, strides, new_shape):
        sizes = [s for s in new_shape if s != -1]  # wrong for -1, and refused anyway
        return torch.broadcast_to(torch.zeros(shape), sizes).stride()

    points, _, text = reasons("ch5-ex-expand-strides", {"expanded_strides": lazy_broadcast})
    assert points == 0 and "broadcast_to" in text

    def lazy_numpy(shape, strides, new_shape):
        # NumPy's ndarray constructor takes strides (C, not refusable); broadcast_to is
        # refused.
        a = np.ndarray(shape, np.int8, buffer=bytearray(10_000), strides=strides)
        sizes = [
            old if s == -1 else s for old, s in zip(shape, new_shape[-len(shape) :], strict=True)
        ]
        sizes = list(new_shape[: len(new_shape) - len(shape)]) + sizes
        return tuple(np.broadcast_to(a, sizes).strides)

    points, _, text = reasons("ch5-ex-expand-strides", {"expanded_strides": lazy_numpy})
    assert points == 0 and "broadcast_to" in text


def test_expand_names_the_copy_and_the_grown_dimension_mistakes() -> None:
    def row_major(shape, strides, new_shape):
        sizes = list(new_shape[: len(new_shape) - len(shape)])
        sizes += [
            old if s == -1 else s for old, s in zip(shape, new_shape[-len(shape) :], strict=True)
        ]
        answer = [1] * len(sizes)
        for k in range(len(sizes) - 2, -1, -1):
            answer[k] = answer[k + 1] * sizes[k + 1]
        return tuple(answer)

    def strides_kept(shape, strides, new_shape):
        return (0,) * (len(new_shape) - len(shape)) + tuple(strides)

    points, _, text = reasons("ch5-ex-expand-strides", {"expanded_strides": row_major})
    assert points == 0 and "expand copies nothing" in text
    points, _, text = reasons("ch5-ex-expand-strides", {"expanded_strides": strides_kept})
    assert points == 0 and "reads the same element at every step" in text


def test_expand_without_minus_one_loses_the_hidden_point() -> None:
    def no_minus_one(shape, strides, new_shape):
        added = len(new_shape) - len(shape)
        answer = [0] * added
        for old_size, old_stride, size in zip(shape, strides, new_shape[added:], strict=True):
            answer.append(old_stride if size == old_size else 0)
        return tuple(answer)

    points, possible, text = reasons("ch5-ex-expand-strides", {"expanded_strides": no_minus_one})
    assert 0 < points < possible
    assert "-1" in text


def test_expand_values_copied_from_the_page_fail() -> None:
    def printed(shape, strides, new_shape):
        return (0, 2, 0, 1)

    points, _, _ = reasons("ch5-ex-expand-strides", {"expanded_strides": printed})
    assert points == 0


# NumPy's stride tricks read a layout as torch's calls do; they are refused too.


def test_numpy_stride_tricks_are_refused() -> None:
    def permuted_numpy(shape, strides, order):
        base = np.zeros(10_000, dtype=np.int8)
        a = np.lib.stride_tricks.as_strided(base, shape, strides).transpose(order)
        return tuple(a.shape), tuple(a.strides)

    def merged_numpy(shape, strides, k):
        base = np.zeros(10_000, dtype=np.int8)
        a = np.lib.stride_tricks.as_strided(base, shape, strides)
        merged = a.reshape(*shape[:k], -1, *shape[k + 2 :])
        return merged.strides[k] if np.shares_memory(merged, a) else None

    def sliced_numpy(shape, strides, offset, dim, start, step):
        base = np.zeros(10_000, dtype=np.int8)
        a = np.lib.stride_tricks.as_strided(base[offset:], shape, strides)
        index = [slice(None)] * len(shape)
        index[dim] = slice(start, None, step)
        s = a[tuple(index)]
        first = s.__array_interface__["data"][0] - base.__array_interface__["data"][0]
        return tuple(s.shape), tuple(s.strides), first

    def expanded_numpy(shape, strides, new_shape):
        base = np.zeros(10_000, dtype=np.int8)
        a = np.lib.stride_tricks.as_strided(base, shape, strides)
        sizes = [
            old if s == -1 else s for old, s in zip(shape, new_shape[-len(shape) :], strict=True)
        ]
        sizes = list(new_shape[: len(new_shape) - len(shape)]) + sizes
        return tuple(np.broadcast_to(a, sizes).strides)

    for label, name, lazy in [
        ("ch5-ex-permute-strides", "permuted_layout", permuted_numpy),
        ("ch5-ex-view-noncontiguous", "merged_stride", merged_numpy),
        ("ch5-ex-slice-stride", "sliced_layout", sliced_numpy),
        ("ch5-ex-expand-strides", "expanded_strides", expanded_numpy),
    ]:
        points, possible, text = reasons(label, {name: lazy})
        assert points == 0 < possible, label
        assert "as_strided" in text, label


def test_an_answer_that_computes_with_tensors_is_told_to_use_python_ints() -> None:
    def with_tensors(shape, strides, order):
        index = torch.tensor(list(order))
        return (
            tuple(torch.tensor(shape)[index].tolist()),
            tuple(torch.tensor(strides)[index].tolist()),
        )

    points, _, text = reasons("ch5-ex-permute-strides", {"permuted_layout": with_tensors})
    assert points == 0
    assert "more than 64 bits" in text and "compute the layout with Python ints" in text


def test_reading_a_layout_through_the_typed_storage_is_refused() -> None:
    def lazy(shape, strides, offset, dim, start, step):
        new_shape, new_strides, _ = sliced_layout(shape, strides, offset, dim, start, step)
        t = torch.zeros(4)
        t.storage()  # any read of a layout, however reached, is refused
        return new_shape, new_strides, offset + start * strides[dim]

    points, _, text = reasons("ch5-ex-slice-stride", {"sliced_layout": lazy})
    assert points == 0 and "Tensor.storage" in text


# A real tensor or array with the layout answers every question; the checks' layouts with
# strides of 65 bits and more fit in none, whatever builds it (NumPy's ndarray constructor and
# torch.ops.aten cannot be refused).

BUFFER = 1 << 20


def _ndarray(shape, strides, offset=0):
    return np.ndarray(shape, np.int8, buffer=bytearray(BUFFER), offset=offset, strides=strides)


def _sizes(shape, new_shape):
    added = len(new_shape) - len(shape)
    kept = [old if s == -1 else s for old, s in zip(shape, new_shape[added:], strict=True)]
    return list(new_shape[:added]) + kept


def test_a_numpy_array_built_with_the_layout_earns_nothing() -> None:
    def permuted(shape, strides, order):
        a = _ndarray(shape, strides).transpose(order)
        return tuple(a.shape), tuple(a.strides)

    def merged(shape, strides, k):
        a = _ndarray(shape, strides)
        m = a.reshape(*shape[:k], -1, *shape[k + 2 :])
        return m.strides[k] if np.shares_memory(m, a) else None

    def sliced(shape, strides, offset, dim, start, step):
        buffer = bytearray(BUFFER)
        base = np.frombuffer(buffer, np.int8)
        a = np.ndarray(shape, np.int8, buffer=buffer, offset=offset, strides=strides)
        index = [slice(None)] * len(shape)
        index[dim] = slice(start, None, step)
        s = a[tuple(index)]
        first = s.__array_interface__["data"][0] - base.__array_interface__["data"][0]
        return tuple(s.shape), tuple(s.strides), first

    def expanded(shape, strides, new_shape):
        a = _ndarray(shape, strides)
        sizes = _sizes(shape, new_shape)
        it = np.nditer((a, np.empty(sizes, np.int8)), flags=["multi_index", "refs_ok"])
        return tuple(it.itviews[0].strides)

    for label, name, lazy in [
        ("ch5-ex-permute-strides", "permuted_layout", permuted),
        ("ch5-ex-view-noncontiguous", "merged_stride", merged),
        ("ch5-ex-slice-stride", "sliced_layout", sliced),
        ("ch5-ex-expand-strides", "expanded_strides", expanded),
    ]:
        points, possible, text = reasons(label, {name: lazy})
        assert points == 0 < possible, label
        assert "no tensor or array can hold" in text, label


def test_torch_ops_aten_is_refused() -> None:
    aten = torch.ops.aten

    def strided(shape, strides, offset=0):
        return aten.as_strided.default(torch.zeros(BUFFER), list(shape), list(strides), offset)

    def permuted(shape, strides, order):
        t = aten.permute(strided(shape, strides), list(order))
        return tuple(t.shape), tuple(aten.sym_stride(t))

    def merged(shape, strides, k):
        try:
            m = aten.view(strided(shape, strides), [*shape[:k], -1, *shape[k + 2 :]])
        except RuntimeError:
            return None
        return int(aten.sym_stride(m)[k])

    def sliced(shape, strides, offset, dim, start, step):
        t = aten.slice.Tensor(strided(shape, strides, offset), dim, start, None, step)
        return tuple(t.shape), tuple(aten.sym_stride(t)), int(aten.sym_storage_offset(t))

    def expanded(shape, strides, new_shape):
        return tuple(aten.sym_stride(aten.expand(strided(shape, strides), list(new_shape))))

    for label, name, lazy in [
        ("ch5-ex-permute-strides", "permuted_layout", permuted),
        ("ch5-ex-view-noncontiguous", "merged_stride", merged),
        ("ch5-ex-slice-stride", "sliced_layout", sliced),
        ("ch5-ex-expand-strides", "expanded_strides", expanded),
    ]:
        points, possible, text = reasons(label, {name: lazy})
        assert points == 0 < possible, label
        assert "aten" in text, label


def test_an_int_that_equals_everything_earns_nothing() -> None:
    class Equal(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

    any_int = Equal(0)

    def permuted(shape, strides, order):
        return (any_int,) * len(shape), (any_int,) * len(shape)

    def merged(shape, strides, k):
        return any_int

    def sliced(shape, strides, offset, dim, start, step):
        return (any_int,) * len(shape), (any_int,) * len(shape), any_int

    def expanded(shape, strides, new_shape):
        return (any_int,) * len(new_shape)

    for label, name, lazy in [
        ("ch5-ex-permute-strides", "permuted_layout", permuted),
        ("ch5-ex-view-noncontiguous", "merged_stride", merged),
        ("ch5-ex-slice-stride", "sliced_layout", sliced),
        ("ch5-ex-expand-strides", "expanded_strides", expanded),
    ]:
        points, possible, text = reasons(label, {name: lazy})
        assert points == 0 < possible, label
        assert "Equal" in text, label


def test_reading_the_checks_expectation_off_the_stack_earns_nothing() -> None:
    def peek(*arguments):
        frame = sys._getframe(1)
        while frame is not None and "expected" not in frame.f_locals:
            frame = frame.f_back
        return frame.f_locals["expected"]

    for label, name in [
        ("ch5-ex-permute-strides", "permuted_layout"),
        ("ch5-ex-view-noncontiguous", "merged_stride"),
        ("ch5-ex-slice-stride", "sliced_layout"),
        ("ch5-ex-expand-strides", "expanded_strides"),
    ]:
        points, possible, _ = reasons(label, {name: peek})
        assert points == 0 < possible, label


def test_the_checks_own_references_are_refused() -> None:
    from attention_from_scratch.exercises import ch5 as checks

    for label, name, reference in [
        ("ch5-ex-permute-strides", "permuted_layout", checks.permute_reference),
        ("ch5-ex-view-noncontiguous", "merged_stride", checks.merged_stride_rule),
        ("ch5-ex-slice-stride", "sliced_layout", checks.slice_reference),
        ("ch5-ex-expand-strides", "expanded_strides", checks.expand_rule),
    ]:
        points, possible, text = reasons(label, {name: reference})
        assert points == 0 < possible, label
        assert "attention_from_scratch.exercises.ch5" in text, label


def test_rewriting_an_argument_does_not_move_the_expectation() -> None:
    def identity(shape, strides, order):
        if isinstance(order, list):
            order[:] = range(len(order))  # the check's reference must not see this
        return tuple(shape[o] for o in order), tuple(strides[o] for o in order)

    points, possible, text = reasons("ch5-ex-permute-strides", {"permuted_layout": identity})
    assert 0 < points < possible
    assert "not the layout of the permuted tensor" in text


def test_merged_stride_refuses_a_divisibility_rule() -> None:
    # Rows padded (the stride a multiple of size * stride, as in a slice x[:, :n]) or
    # overlapping pass a test of divisibility but cannot be merged.
    def divisible(shape, strides, k):
        if shape[k + 1] == 1:
            return strides[k]
        if shape[k] == 1:
            return strides[k + 1]
        if strides[k] % strides[k + 1] == 0 and strides[k] >= shape[k + 1] * strides[k + 1]:
            return strides[k + 1]
        return None

    points, _, text = reasons("ch5-ex-view-noncontiguous", {"merged_stride": divisible})
    assert points == 1  # the hidden point for size-1 dimensions, which it gets right
    assert "view cannot merge them" in text


@pytest.mark.parametrize("seed", range(4))
def test_the_rules_for_large_layouts_agree_with_torch(seed: int) -> None:
    from attention_from_scratch.exercises import ch5 as checks

    generator = torch.Generator().manual_seed(seed)
    for _ in range(300):
        rank = int(torch.randint(2, 5, (1,), generator=generator))
        shape = torch.randint(1, 5, (rank,), generator=generator).tolist()
        strides = torch.randint(1, 30, (rank,), generator=generator).tolist()
        k = int(torch.randint(0, rank - 1, (1,), generator=generator))
        if torch.rand((), generator=generator) < 0.5:
            strides[k] = shape[k + 1] * strides[k + 1]
        x = torch.zeros(2000).as_strided(shape, strides)
        try:
            torch_says = x.view(*shape[:k], -1, *shape[k + 2 :]).stride(k)
        except RuntimeError:
            torch_says = None
        if shape[k] * shape[k + 1] > 1:  # a merged size 1 is never stepped along
            assert checks.merged_stride_rule(shape, strides, k) == torch_says, (shape, strides)
        # grow some size-1 dimensions, keep the others (some as -1), add one in front
        grown = torch.randint(2, 5, (rank,), generator=generator).tolist()
        keep = torch.rand(rank, generator=generator) < 0.5
        new_shape = [
            grow if old == 1 else (-1 if minus else old)
            for old, grow, minus in zip(shape, grown, keep.tolist(), strict=True)
        ]
        new_shape = [int(torch.randint(1, 4, (1,), generator=generator)), *new_shape]
        expanded = x.expand(*new_shape)
        sizes = expanded.shape
        rule = checks.expand_rule(shape, strides, new_shape)
        used = [i for i, size in enumerate(sizes) if size > 1]
        assert [rule[i] for i in used] == [expanded.stride(i) for i in used]
