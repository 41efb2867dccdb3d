"""The exercises of chapter 5: a student's correct answers earn every point, lazy ones don't.

The correct answers are written here as a student would write them, without the package;
the expectations are the grader's own points and the reasons its checks give.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from attention_from_scratch import merge_heads
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


def merge_heads_reshape(x):
    b, h, t, d_h = x.shape
    return x.permute(0, 2, 1, 3).reshape(b, t, h * d_h)


CORRECT = {
    "ch5-ex-permute-strides": {"permuted_layout": permuted_layout},
    "ch5-ex-view-noncontiguous": {"merged_stride": merged_stride},
    "ch5-ex-slice-stride": {"sliced_layout": sliced_layout},
    "ch5-ex-merge-reshape": {"merge_heads_reshape": merge_heads_reshape},
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


def test_merged_stride_without_size_one_dimensions_loses_the_hidden_point() -> None:
    def rule_only(shape, strides, k):
        if strides[k] == shape[k + 1] * strides[k + 1]:
            return strides[k + 1]
        return None

    points, possible, text = reasons("ch5-ex-view-noncontiguous", {"merged_stride": rule_only})
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


def test_merge_refuses_the_package_and_names_the_missing_transpose() -> None:
    points, possible, text = reasons("ch5-ex-merge-reshape", {"merge_heads_reshape": merge_heads})
    assert points == 0 < possible
    assert "merge_heads" in text

    def delegated(x):
        return merge_heads(x)

    points, _, _ = reasons("ch5-ex-merge-reshape", {"merge_heads_reshape": delegated})
    assert points == 0

    def no_transpose(x):
        b, h, t, d_h = x.shape
        return x.reshape(b, t, h * d_h)

    points, _, text = reasons("ch5-ex-merge-reshape", {"merge_heads_reshape": no_transpose})
    assert points == 0 and "without moving them back" in text


def test_merge_that_always_copies_fails() -> None:
    def always_copies(x):
        b, h, t, d_h = x.shape
        return x.transpose(1, 2).clone().reshape(b, t, h * d_h)

    points, _, text = reasons("ch5-ex-merge-reshape", {"merge_heads_reshape": always_copies})
    assert points == 0 and "copied the numbers" in text


def test_a_correct_answer_may_compute_with_tensors() -> None:
    def with_tensors(shape, strides, order):
        index = torch.tensor(list(order))
        return (
            tuple(torch.tensor(shape)[index].tolist()),
            tuple(torch.tensor(strides)[index].tolist()),
        )

    graded = run_checks("ch5-ex-permute-strides", {"permuted_layout": with_tensors}, hidden=True)
    assert graded.earned == graded.possible


def test_reading_a_layout_through_the_typed_storage_is_refused() -> None:
    def lazy(shape, strides, offset, dim, start, step):
        new_shape, new_strides, _ = sliced_layout(shape, strides, offset, dim, start, step)
        t = torch.zeros(4)
        t.storage()  # any read of a layout, however reached, is refused
        return new_shape, new_strides, offset + start * strides[dim]

    points, _, text = reasons("ch5-ex-slice-stride", {"sliced_layout": lazy})
    assert points == 0 and "Tensor.storage" in text
