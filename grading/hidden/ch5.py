"""Hidden checks of chapter 5: loaded by the grader, never shipped to students."""

from __future__ import annotations

from attention_from_scratch.exercises import get_exercise
from attention_from_scratch.exercises.ch5 import (
    _check_expanded_strides,
    _check_merged_stride,
    _check_permuted_layout,
    _check_sliced_layout,
    expand_cases,
    merge_cases,
    permute_cases,
    slice_cases,
)

permute_strides = get_exercise("ch5-ex-permute-strides")
view_noncontiguous = get_exercise("ch5-ex-view-noncontiguous")
slice_stride = get_exercise("ch5-ex-slice-stride")
expand_strides = get_exercise("ch5-ex-expand-strides")


@permute_strides.check(
    points=1,
    hint="`permuted_layout` must also work for one dimension and for six.",
    hidden=True,
)
def permutes_other_ranks(permuted_layout):
    cases = permute_cases(101, (1, 6, 6, 2), (1, 6))
    cases.append(((3, 1, 4), (1, 99, 3), [2, 0, 1]))  # the order as a list
    _check_permuted_layout(permuted_layout, cases)


@view_noncontiguous.check(
    points=1,
    hint="`merged_stride` must also handle a merged dimension of size 1.",
    hidden=True,
)
def merges_size_one_dimensions(merged_stride):
    _check_merged_stride(merged_stride, merge_cases(103, 8, size_one=True, huge=2))


@slice_stride.check(
    points=1,
    hint="`sliced_layout` must also handle a step longer than the dimension.",
    hidden=True,
)
def slices_with_long_steps(sliced_layout):
    cases = slice_cases(107, 8, max_size=3, huge=2)
    cases.append(((5, 4), (4, 1), 3, 0, 4, 7))  # one element left, offset moved
    _check_sliced_layout(sliced_layout, cases)


@expand_strides.check(
    points=1,
    hint="`expanded_strides` must also handle -1 (keep this size) and more dimensions added "
    "in front, some of size 1.",
    hidden=True,
)
def expands_with_minus_one_and_new_dimensions(expanded_strides):
    cases = expand_cases(127, 10, max_new=3, minus_one=True, huge=2)
    cases.append(((3, 1), (1, 3), (1, 2, -1, 4)))  # a transposed column, repeated
    _check_expanded_strides(expanded_strides, cases)
