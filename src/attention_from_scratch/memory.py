"""Chapter 7: the peak memory of a computation, on the CPU as on CUDA.

``TorchDispatchMode`` is torch's hook that sees every operation below autograd; it is
imported here, once, and named without an underscore so that chapter 7's exercise checks can
build their own counters on it (``object`` where a torch release has moved it).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch

try:  # the one private torch module the package uses; see measure_peak_memory
    from torch.utils._python_dispatch import TorchDispatchMode
except ImportError:  # pragma: no cover - a torch release that moved it
    # measure_peak_memory then refuses to count on the CPU. (mypy reads the installed torch,
    # which has the class, and would refuse replacing it.)
    TorchDispatchMode = object  # type: ignore[misc,assignment]


def measure_peak_memory(
    fn: Callable[[], object],
    device: torch.device | str = "cpu",
) -> int:
    """The most bytes of tensor memory that ``fn()`` holds at once, beyond
    what existed before.

    On CUDA this is ``torch.cuda.max_memory_allocated`` minus the memory
    allocated before the call. On the CPU torch keeps no such counter, and
    its public profiler (``torch.profiler.profile(profile_memory=True)``)
    records the memory of each operation only as a net change once it ends,
    so it cannot say when the tensors of a computation are alive at the same
    time. Here every storage that an operation allocates during the call is
    counted while a Python object still refers to it (a view of a tensor
    that existed before the call, such as ``k.transpose(-2, -1)``, counts
    nothing), through a
    ``TorchDispatchMode`` (``torch.utils._python_dispatch``, the one private
    torch module the package uses, imported in one place; if a torch release
    moves it, this function raises a ``RuntimeError`` saying so). This is exact
    and repeatable for code written with tensor operations; scratch buffers
    that a single fused kernel uses internally are not visible this way (the
    CPU flash kernel of ``scaled_dot_product_attention`` keeps one tile per
    thread, about 546 KiB in float32 from 768 tokens on, in PyTorch 2.13). Run
    ``fn`` under ``torch.no_grad()`` to leave autograd's saved tensors out.

    Args:
        fn: the computation to measure, called once with no arguments.
        device: where ``fn`` computes; ``"cuda"`` switches to the CUDA
            allocator's counters.

    Returns:
        The peak number of extra bytes.

    Introduced in chapter 7.
    """
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    if TorchDispatchMode is object:  # pragma: no cover - depends on torch
        raise RuntimeError(
            "measure_peak_memory: expected torch.utils._python_dispatch."
            f"TorchDispatchMode to count CPU tensors, which torch "
            f"{torch.__version__} does not have; measure on CUDA "
            "(device='cuda'), or use a torch release that has it (2.5 to 2.13)"
        )
    live: _LiveTensors  # what the mode's __enter__ returns; torch leaves it unannotated
    with _LiveTensors() as live:
        fn()
    return live.peak


# torch leaves TorchDispatchMode's __init_subclass__ and __init__ unannotated.
class _LiveTensors(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Bytes of the storages that operations create and that are still alive."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # unannotated in torch
        self.refs: dict[int, int] = {}  # storage address -> live tensors using it
        self.sizes: dict[int, int] = {}
        self.current = 0
        self.peak = 0

    def _release(self, key: int) -> None:
        self.refs[key] -= 1
        if self.refs[key] == 0:
            del self.refs[key]
            self.current -= self.sizes.pop(key)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        # Storages the operation read: an output sharing one of them is a
        # view (or an in-place result) of its input, not new memory. If that
        # input existed before the call, its storage is not counted at all.
        inputs = {
            x.untyped_storage().data_ptr()
            for x in _tensors((*args, *kwargs.values()))
            if x.device.type != "meta"
        }
        for x in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(x, torch.Tensor) and x.device.type != "meta":
                storage = x.untyped_storage()
                key = storage.data_ptr()
                if key in inputs and key not in self.refs:
                    continue  # a view of memory that existed before the call
                if key not in self.refs:
                    # A view shares its base's storage, so it adds nothing.
                    self.refs[key] = 0
                    self.sizes[key] = storage.nbytes()
                    self.current += storage.nbytes()
                    self.peak = max(self.peak, self.current)
                self.refs[key] += 1
                weakref.finalize(x, self._release, key)
        return out


def _tensors(items: Sequence[object]) -> list[torch.Tensor]:
    """The tensors among ``items``, looking one level into lists and tuples
    (how operations receive a list of tensors, e.g. ``torch.cat``)."""
    found = []
    for item in items:
        if isinstance(item, torch.Tensor):
            found.append(item)
        elif isinstance(item, (list, tuple)):
            found.extend(x for x in item if isinstance(x, torch.Tensor))
    return found
