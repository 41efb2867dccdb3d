"""Chapter 5: how a tensor's shape, strides and storage relate, and the two reshapes that
multi-head attention needs.

Dimension names used here: ``b`` batch, ``t`` tokens, ``h`` heads, ``d_h`` size of one head,
``d_out = h * d_h``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ._checks import check_positive_int, check_tensor


@dataclass(frozen=True)
class Layout:
    """What PyTorch knows about where a tensor's numbers sit in memory.

    Attributes:
        shape: the size of each dimension.
        stride: how many storage elements to skip to move one step along each dimension.
        storage_offset: the storage index of element ``[0, 0, ...]``.
        is_contiguous: whether the elements, read in row-major order, sit one after another
            in storage; ``view`` needs strides compatible with the new shape, which a
            contiguous tensor always has.
        data_ptr: the memory address of element ``[0, 0, ...]``: the start of the storage
            plus ``storage_offset`` elements. Two views of one storage that start at
            different elements have different ``data_ptr``, so it cannot tell whether
            tensors share memory.
        storage_ptr: the memory address of the storage itself; tensors with the same
            ``storage_ptr`` share memory (see :func:`shares_storage`).

    Introduced in chapter 5.
    """

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    storage_offset: int
    is_contiguous: bool
    data_ptr: int
    storage_ptr: int


def describe_layout(x: torch.Tensor) -> Layout:
    """Return the :class:`Layout` of ``x``: shape, strides, offset, contiguity and address.

    Args:
        x: any tensor, of any shape.

    Returns:
        Its :class:`Layout`. ``data_ptr`` is ``storage_ptr`` plus ``storage_offset`` times the
        element size; compare ``storage_ptr`` (or call :func:`shares_storage`) to tell whether
        two tensors share memory.

    Introduced in chapter 5.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x: expected a torch.Tensor, got {type(x).__name__}")
    return Layout(
        shape=tuple(x.shape),
        stride=tuple(x.stride()),
        # torch types it int | SymInt; it is an int outside tracing.
        storage_offset=x.storage_offset(),  # type: ignore[arg-type]
        is_contiguous=x.is_contiguous(),
        data_ptr=x.data_ptr(),
        storage_ptr=x.untyped_storage().data_ptr(),
    )


def shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a`` and ``b`` are windows onto the same allocation of memory.

    Compares the storages' addresses, not ``data_ptr()``: a view that starts further into the
    storage (a slice, one head of a split) has a different ``data_ptr`` but the same memory.
    It says nothing about which elements each reads: two heads of one split share a storage,
    yet a write through one is seen only by views that read that element. Storage of zero
    bytes holds nothing to share (every empty allocation has address 0), so it gives False.

    Args:
        a: any tensor.
        b: any tensor.

    Returns:
        True when both tensors use the same non-empty storage on the same device.

    Introduced in chapter 5.
    """
    for name, x in (("a", a), ("b", b)):
        if not isinstance(x, torch.Tensor):
            got = type(x).__name__
            raise TypeError(f"{name}: expected a torch.Tensor, got {got}")
    storage_a, storage_b = a.untyped_storage(), b.untyped_storage()
    if a.device != b.device or 0 in (storage_a.nbytes(), storage_b.nbytes()):
        return False  # empty storage holds nothing to share
    return storage_a.data_ptr() == storage_b.data_ptr()


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Split the last dimension into heads and move the head dimension forward.

    ``view`` reinterprets ``d_out`` as ``(h, d_h)`` without copying; ``transpose`` then swaps
    the token and head dimensions so that one batched matmul treats every head separately. The
    result is a non-contiguous view of ``x``.

    Args:
        x: projected queries, keys or values, shape ``(b, t, d_out)``.
        num_heads: the number of heads ``h``; it must divide ``d_out``.

    Returns:
        A view of shape ``(b, h, t, d_h)`` with ``d_h = d_out // h``.

    Introduced in chapter 4; explained in chapter 5.
    """
    x = check_tensor("x", x, ranks=(3,), shape_names=("(b, t, d_out)",))
    num_heads = check_positive_int("num_heads", num_heads)
    b, t, d_out = x.shape
    if d_out % num_heads:
        expected = f"a divisor of the last dimension d_out={d_out}"
        raise ValueError(f"num_heads: expected {expected}, got {num_heads}")
    x = x.view(b, t, num_heads, d_out // num_heads)  # (b, t, h, d_h)
    return x.transpose(1, 2)  # (b, h, t, d_h)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """Undo :func:`split_heads`: put the heads side by side again.

    Per-head outputs, such as ``weights @ values``, are laid out head by head, so the numbers
    of one token are not adjacent in memory and ``view`` cannot merge ``(h, d_h)`` into
    ``d_out``. ``.contiguous()`` copies them into row-major order first (``reshape`` would do
    the same copy implicitly). It copies nothing when the layout already fits, e.g. for
    ``merge_heads(split_heads(x))``, which shares memory with ``x``.

    Args:
        x: per-head outputs, shape ``(b, h, t, d_h)``.

    Returns:
        A contiguous tensor of shape ``(b, t, d_out)`` with ``d_out = h * d_h``.

    Introduced in chapter 4; explained in chapter 5.
    """
    x = check_tensor("x", x, ranks=(4,), shape_names=("(b, h, t, d_h)",))
    b, h, t, d_h = x.shape
    x = x.transpose(1, 2).contiguous()  # (b, t, h, d_h)
    return x.view(b, t, h * d_h)  # (b, t, d_out)
