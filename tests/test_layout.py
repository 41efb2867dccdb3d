"""Tensor layout: describe_layout, and the split_heads / merge_heads pair."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from helpers import FAST
from hypothesis import given
from hypothesis import strategies as st

import attention_from_scratch as afs

sizes = {
    "b": st.integers(1, 3),
    "t": st.integers(1, 6),
    "h": st.integers(1, 4),
    "d_h": st.integers(1, 5),
}


# ---------------------------------------------------------------------------------------------
# describe_layout
# ---------------------------------------------------------------------------------------------


def test_describe_layout_of_a_contiguous_tensor() -> None:
    x = torch.arange(24.0).view(2, 3, 4)
    layout = afs.describe_layout(x)
    assert isinstance(layout, afs.Layout)
    assert layout.shape == (2, 3, 4)
    assert layout.stride == (12, 4, 1)
    assert layout.storage_offset == 0
    assert layout.is_contiguous is True
    assert layout.data_ptr == x.data_ptr()


def test_describe_layout_of_a_transpose() -> None:
    x = torch.arange(24.0).view(2, 3, 4)
    layout = afs.describe_layout(x.transpose(1, 2))
    assert layout.shape == (2, 4, 3)
    assert layout.stride == (12, 1, 4)
    assert layout.storage_offset == 0
    assert layout.is_contiguous is False
    # Same memory: a transpose only changes how it is read.
    assert layout.data_ptr == x.data_ptr()


def test_describe_layout_of_a_slice() -> None:
    x = torch.arange(12.0).view(3, 4)
    layout = afs.describe_layout(x[1:, 1:3])
    assert layout.shape == (2, 2)
    assert layout.stride == (4, 1)
    assert layout.storage_offset == 5
    assert layout.is_contiguous is False
    assert layout.data_ptr == x.data_ptr() + 5 * x.element_size()


def test_describe_layout_of_seed_003_weights() -> None:
    # The source notebook transposes (1, 6, 6) attention weights: strides (36, 1, 6), then
    # .contiguous() copies them back to (36, 6, 1).
    weights = torch.softmax(torch.randn(1, 6, 6), dim=2)
    transposed = weights.transpose(1, 2)
    assert afs.describe_layout(transposed).stride == (36, 1, 6)
    assert afs.describe_layout(transposed).is_contiguous is False
    copied = transposed.contiguous()
    assert afs.describe_layout(copied).stride == (36, 6, 1)
    assert afs.describe_layout(copied).is_contiguous is True
    assert afs.describe_layout(copied).data_ptr != afs.describe_layout(transposed).data_ptr


def test_layout_fields_and_immutability() -> None:
    names = [field.name for field in dataclasses.fields(afs.Layout)]
    assert names == [
        "shape",
        "stride",
        "storage_offset",
        "is_contiguous",
        "data_ptr",
        "storage_ptr",
    ]
    layout = afs.describe_layout(torch.zeros(2, 2))
    with pytest.raises(dataclasses.FrozenInstanceError):
        layout.shape = (4,)  # type: ignore[misc]


def test_describe_layout_of_a_scalar() -> None:
    layout = afs.describe_layout(torch.tensor(3.0))
    assert layout.shape == ()
    assert layout.stride == ()
    assert layout.is_contiguous is True


# ---------------------------------------------------------------------------------------------
# split_heads and merge_heads
# ---------------------------------------------------------------------------------------------


def test_split_heads_shape_and_strides_for_seed_003() -> None:
    x = torch.zeros(1, 6, 400)
    heads = afs.split_heads(x, 8)
    layout = afs.describe_layout(heads)
    assert layout.shape == (1, 8, 6, 50)
    assert layout.stride == (2400, 50, 400, 1)
    assert layout.is_contiguous is False
    merged = afs.merge_heads(heads)
    assert afs.describe_layout(merged).shape == (1, 6, 400)
    assert afs.describe_layout(merged).stride == (2400, 400, 1)


def test_split_heads_puts_each_slice_in_its_head() -> None:
    # d_out = 6 split into h = 3 heads of d_h = 2: head i gets features 2i and 2i + 1.
    x = torch.arange(2 * 4 * 6.0).view(2, 4, 6)
    heads = afs.split_heads(x, 3)
    assert heads.shape == (2, 3, 4, 2)
    torch.testing.assert_close(heads[0, 0, 0], torch.tensor([0.0, 1.0]))
    torch.testing.assert_close(heads[0, 1, 0], torch.tensor([2.0, 3.0]))
    torch.testing.assert_close(heads[0, 2, 0], torch.tensor([4.0, 5.0]))
    torch.testing.assert_close(heads[0, 1, 3], torch.tensor([20.0, 21.0]))
    torch.testing.assert_close(heads[1, 2, 1], torch.tensor([34.0, 35.0]))


@FAST
@given(**sizes)
def test_split_then_merge_round_trip(b: int, t: int, h: int, d_h: int) -> None:
    x = torch.randn(b, t, h * d_h)
    heads = afs.split_heads(x, h)
    assert heads.shape == (b, h, t, d_h)
    for i in range(h):
        torch.testing.assert_close(heads[:, i], x[..., i * d_h : (i + 1) * d_h], rtol=0, atol=0)
    merged = afs.merge_heads(heads)
    assert merged.shape == (b, t, h * d_h)
    assert merged.is_contiguous()
    torch.testing.assert_close(merged, x, rtol=0, atol=0)


@FAST
@given(**sizes)
def test_merge_then_split_round_trip(b: int, t: int, h: int, d_h: int) -> None:
    heads = torch.randn(b, h, t, d_h)
    merged = afs.merge_heads(heads)
    assert merged.shape == (b, t, h * d_h)
    assert merged.is_contiguous()
    torch.testing.assert_close(afs.split_heads(merged, h), heads, rtol=0, atol=0)


@FAST
@given(**sizes)
def test_split_heads_is_a_view(b: int, t: int, h: int, d_h: int) -> None:
    x = torch.randn(b, t, h * d_h)
    heads = afs.split_heads(x, h)
    assert heads.data_ptr() == x.data_ptr()
    assert heads.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    # Only size-1 dimensions can make the swap of tokens and heads a no-op in memory.
    assert heads.is_contiguous() == (h == 1 or t == 1)
    # Writing through the view writes into x.
    heads[-1, -1, -1, -1] = 123.0
    assert x[-1, -1, -1] == 123.0


@FAST
@given(**sizes)
def test_merge_heads_copies_per_head_outputs(b: int, t: int, h: int, d_h: int) -> None:
    # Per-head outputs come from a matmul, contiguous as (b, h, t, d_h); putting the heads side
    # by side for each token needs a copy whenever there are several heads and tokens.
    heads = torch.randn(b, h, t, d_h)
    merged = afs.merge_heads(heads)
    assert merged.is_contiguous()
    assert (merged.data_ptr() != heads.data_ptr()) == (h > 1 and t > 1)
    for i in range(h):
        torch.testing.assert_close(merged[..., i * d_h : (i + 1) * d_h], heads[:, i])


def test_merge_heads_of_a_split_view_reads_the_original_memory() -> None:
    # Undoing the transpose of split_heads gives back x's own layout, so nothing is copied.
    x = torch.randn(2, 5, 12)
    merged = afs.merge_heads(afs.split_heads(x, 3))
    assert merged.data_ptr() == x.data_ptr()
    torch.testing.assert_close(merged, x, rtol=0, atol=0)


def test_view_alone_cannot_merge_heads() -> None:
    # Why merge_heads calls .contiguous(): view needs strides that fit the new shape.
    heads = torch.randn(2, 3, 5, 4)  # (b, h, t, d_h), as a matmul returns it
    with pytest.raises(RuntimeError):  # torch's error, matched by type
        heads.transpose(1, 2).view(2, 5, 12)
    assert afs.merge_heads(heads).shape == (2, 5, 12)


def test_split_heads_keeps_gradients_flowing() -> None:
    x = torch.randn(2, 4, 6, requires_grad=True)
    merged = afs.merge_heads(afs.split_heads(x, 3))
    (merged * torch.arange(6.0)).sum().backward()
    assert x.grad is not None
    torch.testing.assert_close(x.grad, torch.arange(6.0).expand(2, 4, 6))


def test_a_view_that_starts_later_shares_storage_but_not_data_ptr() -> None:
    proj = torch.arange(24.0).reshape(1, 6, 4)  # (b, t, d_out)
    head_1 = afs.split_heads(proj, 2)[0, 1]  # (t, d_h), starts 2 elements in
    assert head_1.data_ptr() != proj.data_ptr()
    assert afs.shares_storage(head_1, proj)
    layout = afs.describe_layout(head_1)
    assert layout.storage_offset == 2
    assert layout.data_ptr == proj.data_ptr() + 2 * proj.element_size()
    assert layout.storage_ptr == afs.describe_layout(proj).storage_ptr
    # A copy has storage of its own.
    assert not afs.shares_storage(head_1.contiguous(), proj)
    head_1[0, 0] = -1.0  # a write through the view is seen by proj
    assert proj[0, 0, 2] == -1.0


def test_shares_storage_compares_storages_not_first_elements() -> None:
    x = torch.arange(6.0)
    tail = x[3:]  # starts 3 elements into x's storage
    assert tail.data_ptr() == x.data_ptr() + 3 * x.element_size()
    assert afs.shares_storage(tail, x) and afs.shares_storage(x, tail)
    assert afs.describe_layout(tail).storage_ptr == x.untyped_storage().data_ptr()
    # Equal values in storage of their own are not shared memory.
    assert not afs.shares_storage(x.clone(), x)
    assert not afs.shares_storage(torch.arange(6.0), x)


def test_shares_storage_is_false_for_empty_storage() -> None:
    # Every empty allocation has address 0; two of them share no memory.
    assert torch.empty(0).untyped_storage().data_ptr() == 0
    assert not afs.shares_storage(torch.empty(0), torch.empty(0))
    x = torch.arange(4.0)
    assert afs.shares_storage(x[:0], x)  # an empty view of a real allocation


def test_shares_storage_rejects_non_tensors() -> None:
    with pytest.raises(TypeError, match=r"b: expected a torch.Tensor, got list"):
        afs.shares_storage(torch.zeros(2), [0.0, 0.0])
