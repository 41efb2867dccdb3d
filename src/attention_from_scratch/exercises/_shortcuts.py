"""Closing the shortcut: run a learner's answer with the calls it was asked to build refused.

An exercise that asks for a softmax, a multi-head layer or a rotation teaches nothing if the
answer hands the work to ``torch.softmax``, ``scaled_dot_product_attention`` or the course's
own class. A check calls the answer inside :func:`refusing`; any call to a refused function
raises :class:`ShortcutTaken`, whose message tells the learner what to write instead::

    with refusing(torch.softmax, torch.Tensor.softmax, F.softmax, write="softmax"):
        weights = softmax(scores)

Two mechanisms, because two kinds of function can be refused:

- torch's functions and tensor methods (``torch.softmax``, ``Tensor.softmax``,
  ``F.scaled_dot_product_attention``, ...) reach a :class:`~torch.overrides.TorchFunctionMode`
  before they run, whichever alias called them (``nn.Softmax`` calls ``F.softmax``);
- Python functions and classes (the course's ``merge_heads``, ``RotaryEmbedding``, torch's
  ``nn.MultiheadAttention``) are refused by their code objects, seen by a profiling hook
  when any of them starts, however the answer reached it (an import, a subclass, a copy).

A refused call fails the answer even when the answer catches the exception and goes on, and
so does an attempt to switch the refusals off (replacing the hook, starting a thread, leaving
torch's function modes, looking for the refusals' state through the garbage collector).
Calls below torch's Python layer (``torch.ops.aten``) are seen only when their overloads are
listed: a check that must close those too compares the answer's work with what it asks.
"""

from __future__ import annotations

import _thread
import contextlib
import gc
import inspect
import sys
import threading
import types
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
import torch.overrides
from torch.overrides import TorchFunctionMode
from torch.utils import _python_dispatch

#: The package's attention, by full name, with the chapter that introduces each: a check may
#: not import a later chapter's module (the package's chapter order), so it refuses these by
#: name (``refusing(..., named=later_attention(chapter))``).
PACKAGE_ATTENTION = {
    "trainable.SelfAttentionV1.forward": 2,
    "trainable.SelfAttentionV2.forward": 2,
    "causal.CausalAttention.forward": 3,
    "causal.CrossAttention.forward": 3,
    "multihead.MultiHeadAttentionWrapper.forward": 4,
    "multihead.MultiHeadAttention.forward": 4,
    "multihead.MultiHeadAttention.attend": 4,
    "multihead.WideMultiHeadAttention.forward": 4,
    "training.TinyCausalModel.forward": 6,
    "cached.CachedAttention.forward": 7,
    "cached.CachedAttention.attend": 7,
    "grouped.GroupedQueryAttention.attend": 7,
    "tiled.tiled_attention": 7,
    "tiled.TiledAttention.forward": 7,
}


#: Names of torch's ready-made attention below ``F.scaled_dot_product_attention``: its
#: ``torch.ops.aten`` operator and the kernels it dispatches to (math, flash, efficient, ...),
#: each reachable on its own, and the multi-head one. A torch without a name lacks it.
TORCH_ATTENTION_NAMES = (
    "scaled_dot_product_attention",
    "_scaled_dot_product_attention_math",
    "_scaled_dot_product_attention_math_for_mps",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_fused_attention_overrideable",
    "_native_multi_head_attention",
)


def torch_attention() -> tuple[Any, ...]:
    """torch's ready-made attention, every entry point this torch has, for :func:`refusing`:
    ``F.scaled_dot_product_attention`` (the same object as ``torch._C._nn``'s),
    ``F.multi_head_attention_forward``, ``nn.MultiheadAttention``, the private ``torch._*``
    aliases, and the ``torch.ops.aten`` operators with each of their overloads (calls below
    torch's Python layer reach the refusal only under these).

    Introduced in chapter 3.
    """
    functional = torch.nn.functional
    aten = [
        getattr(torch.ops.aten, name)
        for name in TORCH_ATTENTION_NAMES
        if hasattr(torch.ops.aten, name)
    ]
    return (
        functional.scaled_dot_product_attention,
        functional.multi_head_attention_forward,
        torch.nn.MultiheadAttention,
        *(getattr(torch, name) for name in TORCH_ATTENTION_NAMES if hasattr(torch, name)),
        *aten,
        *(getattr(op, overload) for op in aten for overload in op.overloads()),
    )


def later_attention(chapter: int) -> tuple[str, ...]:
    """The full names of the package's attention introduced after ``chapter``.

    Introduced in chapter 1.
    """
    return tuple(
        f"attention_from_scratch.{name}"
        for name, introduced in PACKAGE_ATTENTION.items()
        if introduced > chapter
    )


class ShortcutTaken(RuntimeError):
    """An answer called a function that its exercise asks the learner to write.

    Introduced in chapter 1.
    """


def _display_name(function: Any) -> str:
    """How a learner would write the function: ``torch.softmax``, ``Tensor.softmax``."""
    module = getattr(function, "__module__", None) or ""
    qualname = getattr(function, "__qualname__", None) or getattr(function, "__name__", "")
    owner, _, name = qualname.rpartition(".")
    if owner == "_VariableFunctionsClass":
        return f"torch.{name}"
    if owner in ("TensorBase", "Tensor"):
        return f"Tensor.{name}"
    if module == "torch._C._nn":
        return f"torch.nn.functional.{name}"
    return f"{module}.{qualname}" if module else str(qualname)


def _own_function(member: Any) -> types.FunctionType | None:
    """The function a member runs, decorators unwrapped: a decorator's wrapper (such as
    ``@torch.no_grad()``'s) shares its code with every function it decorates, so refusing
    that code would refuse all of them."""
    function = inspect.unwrap(getattr(member, "__func__", member))
    return function if isinstance(function, types.FunctionType) else None


def _code_objects(target: Any) -> dict[types.CodeType, str]:
    """The code objects of a Python function, or of every function a class defines."""
    if isinstance(target, type):
        found: dict[types.CodeType, str] = {}
        name = f"{target.__module__}.{target.__qualname__}"
        for klass in target.__mro__:
            if klass.__module__ in ("builtins", "torch.nn.modules.module"):
                continue  # object, nn.Module: every module inherits these
            for member in vars(klass).values():
                if isinstance(member, property):
                    member = member.fget
                if (function := _own_function(member)) is not None:
                    found[function.__code__] = name
        return found
    function = _own_function(target)
    if function is not None:
        return {function.__code__: f"{function.__module__}.{function.__qualname__}"}
    return {}


class _Refusals:
    """What the body tried: the first refused call, which fails the answer even if the
    answer caught the exception and went on."""

    def __init__(self, write: str) -> None:
        self.write = write
        self.first: str | None = None
        self.armed = True  # off while the block restores the hook it replaced

    def refuse(self, name: str) -> ShortcutTaken:
        self.first = self.first or name
        return ShortcutTaken(_message(self.write, name))


class _RefuseTorch(TorchFunctionMode):
    def __init__(self, refused: dict[Any, str], refusals: _Refusals) -> None:
        super().__init__()
        self.refused = refused
        self.refusals = refusals

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = self.refused.get(func)
        if name is not None:
            raise self.refusals.refuse(name)
        return func(*args, **(kwargs or {}))


def _message(write: str, name: str) -> str:
    return f"this exercise asks you to write {write} yourself, but your answer called {name}"


def _escapes() -> tuple[dict[Any, str], dict[types.CodeType, str]]:
    """What would switch the refusals off: replacing the profiling hook, starting a thread
    (each thread has its own hook), or finding the refusals' state in the heap. Built-ins are
    seen when called ("c_call"), Python functions by their code. (Leaving torch's function
    modes is caught apart: torch itself pops and pushes modes while it runs one.)"""
    builtins = {
        sys.setprofile: "sys.setprofile",
        sys.settrace: "sys.settrace",
        _thread.start_new_thread: "a new thread",
        # The refusals' own state can be reached only through the garbage collector.
        gc.get_objects: "gc.get_objects",
        gc.get_referrers: "gc.get_referrers",
        gc.get_referents: "gc.get_referents",
    }
    if (function := getattr(_thread, "start_joinable_thread", None)) is not None:
        builtins[function] = "a new thread"
    codes = {}
    for name in ("setprofile", "settrace"):
        if (function := getattr(threading, name, None)) is not None:
            codes[function.__code__] = f"threading.{name}"
    return builtins, codes


def _mode_active(mode: TorchFunctionMode) -> bool:
    stack = getattr(torch.overrides, "_get_current_function_mode_stack", None)
    return stack is None or any(entry is mode for entry in stack())


def torch_modes_on() -> list[Any]:
    """torch's function and dispatch modes now on (``torch.set_default_device``'s excepted):
    a mode left on by a notebook or an answer could change what a check's comparisons return.

    Introduced in chapter 1.
    """
    function_modes = getattr(torch.overrides, "_get_current_function_mode_stack", list)
    dispatch_modes = getattr(_python_dispatch, "_get_current_dispatch_mode_stack", list)
    device_mode = getattr(getattr(torch.utils, "_device", None), "DeviceContext", ())
    return [
        mode for mode in [*function_modes(), *dispatch_modes()] if not isinstance(mode, device_mode)
    ]


def _torch_functions_enabled() -> bool:
    """False while ``torch._C.DisableTorchFunction`` is in force: torch's function modes
    (the refusals of torch functions among them) are then skipped."""
    enabled = getattr(torch._C, "_is_torch_function_enabled", None)
    return enabled is None or bool(enabled())


_DISABLERS = tuple(
    kind
    for kind in (
        getattr(torch._C, "DisableTorchFunction", None),
        getattr(torch._C, "DisableTorchFunctionSubclass", None),
    )
    if isinstance(kind, type)
)


@contextlib.contextmanager
def refusing(
    *shortcuts: Callable[..., Any] | type, write: str, named: Iterable[str] = ()
) -> Iterator[None]:
    """Run the body with each of ``shortcuts`` refused: calling one raises ShortcutTaken.

    Introduced in chapter 1.

    Args:
        shortcuts: torch functions or tensor methods (``torch.softmax``,
            ``torch.Tensor.softmax``, ``torch.nn.functional.scaled_dot_product_attention``),
            Python functions, or classes (every function the class and its bases define,
            ``nn.Module``'s own excepted).
        write: what the exercise asks the learner to write, for the message, e.g.
            ``"softmax"``.
        named: Python functions refused by their full name, ``"module.qualname"`` (e.g.
            ``"attention_from_scratch.layout.split_heads"``): for a check that may not
            import the function's module (the package's chapter order).

    Raises:
        ShortcutTaken: inside the body, when a refused function is called.
        TypeError: ``write`` is not a non-empty string, or a shortcut is not callable.
    """
    if not isinstance(write, str) or not write.strip():
        raise TypeError(f"write: expected a non-empty str, got {write!r}")
    codes: dict[types.CodeType, str] = {}
    torch_functions: dict[Any, str] = {}
    for shortcut in shortcuts:
        if not callable(shortcut):
            raise TypeError(f"shortcuts: expected callables or classes, got {shortcut!r}")
        found = _code_objects(shortcut)
        if found:
            codes.update(found)
        if not isinstance(shortcut, type):
            # A Python function that torch dispatches (F.softmax) is refused both ways.
            torch_functions[shortcut] = _display_name(shortcut)
    refusals = _Refusals(write)
    escapes, escape_codes = _escapes()
    codes.update(escape_codes)
    previous = sys.getprofile()

    names = frozenset(named)

    def profile(frame: types.FrameType, event: str, arg: Any) -> None:
        if not refusals.armed:
            return
        if event == "call":
            if frame.f_code in codes:
                raise refusals.refuse(codes[frame.f_code])
            if names:
                name = f"{frame.f_globals.get('__name__')}.{frame.f_code.co_qualname}"
                if name in names:
                    raise refusals.refuse(name)
        if event == "c_call":
            if arg in escapes:
                raise refusals.refuse(escapes[arg])
            if isinstance(getattr(arg, "__self__", None), _DISABLERS):
                # Noted, not raised: raising would keep its __exit__ from restoring torch.
                refusals.refuse("torch._C.DisableTorchFunction")
        if previous is not None:
            previous(frame, event, arg)

    if not _torch_functions_enabled():
        # Switched off before the check began (in an earlier cell, say): nothing torch runs
        # here could be refused.
        raise ShortcutTaken(_message(write, "torch._C.DisableTorchFunction, still in force"))
    mode = _RefuseTorch(torch_functions, refusals)
    sys.setprofile(profile)
    try:
        with mode:
            yield
            hooked = (
                sys.getprofile() is profile and _mode_active(mode) and _torch_functions_enabled()
            )
    finally:
        refusals.armed = False
        sys.setprofile(previous)
    # Reached only when the body returned: an answer that caught a refusal and went on, or
    # that removed the hook, still took the shortcut.
    if refusals.first is not None:
        raise ShortcutTaken(_message(write, refusals.first))
    if not hooked:
        raise ShortcutTaken(_message(write, "something that removed the check's hooks"))


def call_refusing(
    answer: Callable[..., Any],
    *args: Any,
    shortcuts: Iterable[Callable[..., Any] | type] = (),
    write: str,
    named: Iterable[str] = (),
) -> Any:
    """Call a learner's answer inside :func:`refusing` and return what it returned, checked
    to be plain: the one way every chapter's checks call an answer.

    No torch mode that could change what the check computes may be on, before the call or
    after it. A tensor subclass could compute its values later, outside the refusal, and an
    int, list or tuple subclass could compare equal to anything, so the result (and each
    item of a list or tuple result) must be of the plain type.

    Introduced in chapter 1.

    Args:
        answer: the learner's function.
        args: what to call it with.
        shortcuts: what the answer may not call (see :func:`refusing`).
        write: what the exercise asks the learner to write, for the message.
        named: Python functions refused by their full name (see :func:`refusing`).

    Returns:
        What the answer returned.

    Raises:
        AssertionError: the answer is not callable, a torch mode is on, or the result is
            not plain (the check fails, with its hint).
        ShortcutTaken: the answer called a refused function.
    """
    assert callable(answer), "the answer must be a function"
    assert not torch_modes_on(), "a torch mode is switched on in the notebook; switch it off"
    with refusing(*shortcuts, write=write, named=named):
        got = answer(*args)
    assert not torch_modes_on(), "the answer left a torch mode switched on; return a plain result"
    if isinstance(got, (list, tuple)):
        assert type(got) in (list, tuple), (
            f"expected a list or a tuple, got the subclass {type(got).__name__}"
        )
    for item in (got, *(got if isinstance(got, (list, tuple)) else ())):
        if isinstance(item, torch.Tensor):
            assert type(item) is torch.Tensor, (
                f"expected a plain torch.Tensor, got the subclass {type(item).__name__}"
            )
        elif isinstance(item, int):
            assert type(item) in (int, bool), (
                f"expected a plain int, got the subclass {type(item).__name__}"
            )
    return got
