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

Introduced in chapter 1.
"""

from __future__ import annotations

import contextlib
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

from torch.overrides import TorchFunctionMode


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


def _code_objects(target: Any) -> dict[types.CodeType, str]:
    """The code objects of a Python function, or of every function a class defines."""
    if isinstance(target, type):
        found: dict[types.CodeType, str] = {}
        for klass in target.__mro__:
            if klass.__module__ in ("builtins", "torch.nn.modules.module"):
                continue  # object, nn.Module: every module inherits these
            for member in vars(klass).values():
                function = getattr(member, "__func__", member)
                if isinstance(function, types.FunctionType):
                    found[function.__code__] = f"{target.__module__}.{target.__qualname__}"
                elif isinstance(member, property) and member.fget is not None:
                    found[member.fget.__code__] = f"{target.__module__}.{target.__qualname__}"
        return found
    function = getattr(target, "__func__", target)
    if isinstance(function, types.FunctionType):
        return {function.__code__: f"{function.__module__}.{function.__qualname__}"}
    return {}


class _RefuseTorch(TorchFunctionMode):
    def __init__(self, refused: dict[Any, str], write: str) -> None:
        super().__init__()
        self.refused = refused
        self.write = write

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = self.refused.get(func)
        if name is not None:
            raise ShortcutTaken(_message(self.write, name))
        return func(*args, **(kwargs or {}))


def _message(write: str, name: str) -> str:
    return f"this exercise asks you to write {write} yourself, but your answer called {name}"


@contextlib.contextmanager
def refusing(*shortcuts: Callable[..., Any] | type, write: str) -> Iterator[None]:
    """Run the body with each of ``shortcuts`` refused: calling one raises ShortcutTaken.

    Introduced in chapter 1.

    Args:
        shortcuts: torch functions or tensor methods (``torch.softmax``,
            ``torch.Tensor.softmax``, ``torch.nn.functional.scaled_dot_product_attention``),
            Python functions, or classes (every function the class and its bases define,
            ``nn.Module``'s own excepted).
        write: what the exercise asks the learner to write, for the message, e.g.
            ``"softmax"``.

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
    previous = sys.getprofile()

    def profile(frame: types.FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code in codes:
            raise ShortcutTaken(_message(write, codes[frame.f_code]))
        if previous is not None:
            previous(frame, event, arg)

    sys.setprofile(profile)
    try:
        with _RefuseTorch(torch_functions, write):
            yield
    finally:
        sys.setprofile(previous)
