"""Checks for the exercises of chapter 5, "Tensor layout".

Expected values are computed here from the stride rule, never from a learner's code.
"""

from __future__ import annotations

import torch

from ..layout import merge_heads, split_heads
from ._core import Exercise

permute_strides = Exercise("ch5-ex-permute-strides", chapter=5)


@permute_strides.check(
    points=2,
    hint="`p` must be torch.zeros(2, 3, 4).permute(2, 0, 1): shape (4, 2, 3), strides "
    "(1, 12, 4), not contiguous.",
)
def permuted_layout(p):
    assert isinstance(p, torch.Tensor)
    assert tuple(p.shape) == (4, 2, 3) and p.stride() == (1, 12, 4)
    assert not p.is_contiguous()


view_noncontiguous = Exercise(
    "ch5-ex-view-noncontiguous",
    chapter=5,
    manual_points=1,
    rubric="Explains with the stride rule: splitting one dimension or adding a size-1 "
    "dimension never merges two dimensions, so the strides always exist.",
)


@view_noncontiguous.check(
    points=1,
    hint="`split_view` must be a view (not a copy) of the non-contiguous tensor `a`, with "
    "the same numbers in a new shape.",
)
def a_view_of_a_non_contiguous_tensor(a, split_view):
    assert isinstance(a, torch.Tensor) and isinstance(split_view, torch.Tensor)
    assert not a.is_contiguous() and split_view.shape != a.shape
    assert a.untyped_storage().data_ptr() == split_view.untyped_storage().data_ptr()
    assert torch.equal(split_view, a.reshape(split_view.shape))


slice_stride = Exercise(
    "ch5-ex-slice-stride",
    chapter=5,
    manual_points=2,
    rubric="1 point: m[:, ::2] has shape (3, 2), strides (4, 2), offset 0 and is not "
    "contiguous. 1 point: m[:, 1::2] has the same strides and offset 1.",
)

merge_reshape = Exercise(
    "ch5-ex-merge-reshape",
    chapter=5,
    manual_points=1,
    rubric="Says reshape copies the fresh (b, h, t, d_h) tensor but returns a view right "
    "after split_heads, where the transpose restores the row-major layout.",
)


@merge_reshape.check(
    points=2,
    hint="`merge_heads_reshape(x)` must turn a (b, h, t, d_h) tensor into (b, t, h * d_h), "
    "equal to the package's merge_heads.",
)
def merges_like_merge_heads(merge_heads_reshape):
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(2, 4, 5, 3, generator=generator)  # (b, h, t, d_h)
    assert torch.equal(merge_heads_reshape(x), merge_heads(x))
    proj = torch.randn(2, 5, 12, generator=generator)  # (b, t, d_out)
    assert torch.equal(merge_heads_reshape(split_heads(proj, 4)), proj)
