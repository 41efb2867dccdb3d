"""How a graded exercise is written: what the grader draws, how it calls the student's code,
and how it judges what comes back (CONTRIBUTING.md, "Grading outside the student's reach").

A chapter's graded exercises live in ``grading/chN.py``, beside the repository's tools and never
in the package students install. Each is a :class:`GradedExercise`: its label, its checks
(name, points, hint) and :meth:`GradedExercise.cases`, which draws the inputs of one grading
run from a random generator and returns :class:`Case` s. A case is one :class:`Call` of the
student's code and a *judge*, a function of what the call returned that says what is wrong
(a short reason) or nothing when it is right; a check passes when every case of it does. The
judge runs in the grader's process, with the expected values the grader computed there from its
own references; the student's kernel only runs the call and sends back tensors and numbers
(``channel.py``), so nothing it does to itself changes a verdict.

What a call may pass to the student's code (:data:`Argument`): numbers, strings, ``None``,
tuples and lists of them, arrays (``numpy`` or ``torch``, rebuilt as CPU tensors of the same
dtype), a :class:`Seeded` ``torch.Generator``, a :class:`Module` of the course package rebuilt
from its class, keyword arguments and weights, and the :class:`Result` of an earlier step of
the same call. What comes back (:data:`Returned`): the same kinds, tensors as
:class:`Tensor` (an array with torch's dtype name), modules as :class:`ModuleState`, anything
else as :class:`Other`; a step that raised gives :class:`Raised`.

A :class:`KernelExercise` (chapter 8) asks for a ``@triton.jit`` kernel instead, with a fixed
signature. Its cases are :class:`Launch` es, never run in the student's kernel: the grader
reads the kernel's source out of the notebook (``kernels.py``), compiles it for a GPU and
launches it in Triton's interpreter in a fresh sandboxed process (``kernel_harness.py``), on
:class:`Input` s it drew and into :class:`Output` s it allocated. A judge reads what came back
with :func:`launched`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeAlias

import numpy as np

# ---- what a call sends ------------------------------------------------------------------------


@dataclass(frozen=True)
class Seeded:
    """A ``torch.Generator`` seeded with ``seed``, built in the kernel."""

    seed: int


@dataclass(frozen=True)
class Module:
    """A module of the course package (``attention_from_scratch.<name>``) built in the kernel
    with ``kwargs``, its parameters and buffers then set from ``state``, in ``training`` mode
    or in evaluation mode. ``detached`` makes it detach its tensor inputs from autograd before
    its forward (a layer run for inference): it computes the same outputs, but no gradient
    reaches its input, so only what an edit of the input changes shows what it depends on."""

    name: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    state: dict[str, np.ndarray] = field(default_factory=dict)
    training: bool = False
    detached: bool = False


@dataclass(frozen=True)
class Result:
    """What step ``index`` of the same call returned (an object the student made, which stays
    in the kernel: a module, a cache, a function)."""

    index: int


Argument: TypeAlias = Any  # numbers, str, None, arrays, Seeded, Module, Result, tuples, lists


@dataclass(frozen=True)
class Step:
    """One call in the kernel: ``target(*args, **kwargs)``, or ``target.method(...)``.

    ``target`` is a name the notebook defines (``"window_mask"``) or a :class:`Result`.
    ``called=False`` reads the target (or its attribute ``method``) instead of calling it.
    ``send_back`` says whether what it returns comes back to the grader; ``arguments_after``
    also sends back the arguments as they are after the call (to see whether the student's
    code changed them).
    """

    target: str | Result
    method: str | None = None
    args: tuple[Argument, ...] = ()
    kwargs: dict[str, Argument] = field(default_factory=dict)
    send_back: bool = True
    arguments_after: bool = False
    called: bool = True


@dataclass(frozen=True)
class Call:
    """Steps run in order in the student's kernel; ``shown`` describes it in the feedback."""

    steps: tuple[Step, ...]
    shown: str = ""


def call(name: str, *args: Argument, shown: str = "", **kwargs: Argument) -> Call:
    """A call of one function the notebook defines."""
    return Call((Step(name, None, tuple(args), dict(kwargs)),), shown)


def read(name: str, shown: str = "") -> Call:
    """The value of one name the notebook defines."""
    return Call((Step(name, called=False),), shown)


# ---- what a kernel launch sends ----------------------------------------------------------------

#: What surrounds each output of a launch, which the kernel must leave as it is.
SENTINEL = 1234.5


@dataclass(frozen=True)
class Input:
    """An array a kernel reads (float32 or int32, contiguous), inside a buffer with ``pad``
    elements of ``fill`` before and after it (NaN by default: a load past the array's end
    reads NaN). The kernel must leave the buffer as it was. ``traced`` records, for each
    program, which of the buffer's elements its loads addressed (lanes switched off by a mask
    included) and which a live lane read."""

    array: np.ndarray
    pad: int
    fill: float | int = math.nan
    traced: bool = False


@dataclass(frozen=True)
class Output:
    """A float32 array a kernel writes, NaN until it does, inside a buffer with ``pad``
    elements of :data:`SENTINEL` before and after it."""

    shape: tuple[int, ...]
    pad: int


@dataclass(frozen=True)
class Launch:
    """One launch of the student's kernel: ``kernel[grid](*args, **constexprs)`` in Triton's
    interpreter. ``args`` are :class:`Input`, :class:`Output`, ints (``i32``) and floats
    (``fp32``), in the order of the kernel's parameters before its ``constexprs``; ``shown``
    describes it in the feedback."""

    grid: tuple[int, int, int]
    args: tuple[Input | Output | int | float, ...]
    constexprs: dict[str, int]
    shown: str = ""


# ---- what comes back --------------------------------------------------------------------------


@dataclass(frozen=True)
class Tensor:
    """A tensor the student's code returned: its values and torch's name of its dtype."""

    array: np.ndarray
    dtype: str  # "torch.float32", "torch.bool", ...

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape)


@dataclass(frozen=True)
class ModuleState:
    """A module the student's code returned: its class name, its mode and its state dict."""

    name: str
    training: bool
    state: dict[str, Tensor]


@dataclass(frozen=True)
class Other:
    """A value of a kind the channel does not carry, by the name of its type."""

    type_name: str


@dataclass(frozen=True)
class Raised:
    """The step raised: the exception's type name and the start of its message."""

    type_name: str
    message: str


Returned: TypeAlias = Any  # Tensor, int, float, bool, str, None, list, ModuleState, Other, Raised


@dataclass(frozen=True)
class StepResult:
    """What one step gave: ``value`` (a :data:`Returned`) and, when asked, its tensor
    arguments after the call."""

    value: Returned
    arguments: tuple[Returned, ...] = ()


# ---- an exercise ------------------------------------------------------------------------------

#: A judge gets the results of its call's steps and returns what is wrong, or None.
Judge: TypeAlias = Callable[[Sequence[StepResult]], str | None]


@dataclass(frozen=True)
class Check:
    """A graded check: its name, the points it earns, a title and the hint shown when it fails.

    A hint names what to look at, never the answer.
    """

    name: str
    points: float
    title: str
    hint: str

    def __post_init__(self) -> None:
        if not (isinstance(self.points, int | float) and math.isfinite(self.points)):
            raise ValueError(f"points: expected a finite number, got {self.points!r}")
        if self.points <= 0:
            raise ValueError(f"points: expected a number > 0, got {self.points!r}")
        if not self.hint.strip() or not self.title.strip():
            raise ValueError(f"{self.name}: expected a title and a hint")


@dataclass(frozen=True)
class Case:
    """One call of the student's code for one check, and its judge."""

    check: str
    call: Call | Launch
    judge: Judge


class GradedExercise:
    """An auto-graded exercise as the grader sees it; subclasses set the class attributes and
    write :meth:`cases`.

    Attributes:
        label: the exercise's label in the book, ``chN-ex-name``.
        checks: its graded checks, each with its points.
        manual_points: points a person grades (an answer in words), 0 if none.
        rubric: what that person looks for (never shown to students).
    """

    label: ClassVar[str]
    checks: ClassVar[tuple[Check, ...]] = ()
    manual_points: ClassVar[float] = 0
    rubric: ClassVar[str] = ""

    @property
    def chapter(self) -> int:
        return int(self.label[2:].split("-", 1)[0])

    @property
    def points(self) -> float:
        """Auto-graded points."""
        return float(sum(check.points for check in self.checks))

    def cases(self, rng: np.random.Generator) -> list[Case]:
        """The cases of one grading run, drawn from ``rng`` (the student's variant)."""
        raise NotImplementedError


class KernelExercise(GradedExercise):
    """An exercise whose answer is a ``@triton.jit`` kernel (:class:`Launch` cases).

    Attributes:
        kernel: the kernel's name in the notebook.
        parameters: its parameters, in order, as the exercise fixes them.
        constexprs: those of them annotated ``tl.constexpr`` (given as keywords at launch).
    """

    kernel: ClassVar[str]
    parameters: ClassVar[tuple[str, ...]]
    constexprs: ClassVar[tuple[str, ...]] = ()


# ---- judging helpers --------------------------------------------------------------------------


@dataclass(frozen=True)
class Launched:
    """What one launch left: each :class:`Output` as the kernel wrote it (its shape, NaN where
    it wrote nothing), and for each traced :class:`Input`, whether each program's loads
    addressed each element of its buffer (``addressed``, masked lanes included) and whether a
    live lane read it (``read``), both ``(gx, gy, gz, pad + size + pad)``."""

    outputs: tuple[np.ndarray, ...]
    addressed: tuple[np.ndarray, ...]
    read: tuple[np.ndarray, ...]


def launched(
    results: Sequence[StepResult],
    launch: Launch,
    names: Sequence[str] = (),
    trespass: bool = True,
) -> Launched | str:
    """The outputs and traces of a launch, or why there are none: it raised (a compile error
    comes before any launch), or, where ``trespass`` is True, it touched memory that is not
    its own (:func:`trespassed`; ``names`` are the kernel's parameters, for the reason)."""
    value = results[0].value if results else Raised("NotRun", "the kernel was not launched")
    if isinstance(value, Raised):
        return f"the kernel raised {value.type_name}: {value.message}"
    outputs = [arg for arg in launch.args if isinstance(arg, Output)]
    inputs = [arg for arg in launch.args if isinstance(arg, Input)]
    traced = [arg for arg in inputs if arg.traced]
    if not isinstance(value, list) or len(value) != len(outputs) + len(inputs) + len(traced) + 1:
        return f"the launch sent back {describe(value)}"
    if not all(isinstance(item, Tensor) for item in value):
        return "the launch sent back something other than arrays"
    arrays = [item.array for item in value]
    buffers = arrays[: len(outputs) + len(inputs)]
    tensors: list[Input | Output] = [*outputs, *inputs]
    for spec, array in zip(tensors, buffers, strict=True):
        size = math.prod(spec.shape) if isinstance(spec, Output) else spec.array.size
        if array.shape != (size + 2 * spec.pad,):
            return f"a tensor's buffer came back with {array.shape} elements"
    strays = arrays[-1]
    if strays.shape != (*launch.grid, 2, 3):
        return f"the strays came back with shape {strays.shape}"
    if trespass:
        why = trespassed(launch, buffers, strays, names)
        if why:
            return why
    shaped = []
    for output, array in zip(outputs, buffers, strict=False):
        shaped.append(array[output.pad : output.pad + math.prod(output.shape)])
        shaped[-1] = shaped[-1].reshape(output.shape)
    addressed, read = [], []
    for spec, array in zip(traced, arrays[len(buffers) : -1], strict=True):
        expected = (*launch.grid, spec.array.size + 2 * spec.pad)
        if array.shape != expected:
            return f"a trace came back with shape {array.shape}, not {expected}"
        addressed.append(array != 0)
        read.append(array & 2 != 0)
    return Launched(tuple(shaped), tuple(addressed), tuple(read))


def trespassed(
    launch: Launch, buffers: Sequence[np.ndarray], strays: np.ndarray, names: Sequence[str]
) -> str | None:
    """Why a launch touched memory that is not its own, or None: a store around an output, or
    into an input or around it; a store, or a read, outside what the kernel was given.

    Args:
        launch: the launch.
        buffers: each output's buffer, then each input's, as the launch left them.
        strays: ``(gx, gy, gz, 2, 3)``, for each program its reads then its stores: how many
            live lanes addressed memory outside every tensor (outside every output, for a
            store), then where the first one did: the argument whose buffer holds it (-1: none
            does) and its offset from that tensor's first element, in elements.
        names: the kernel's parameters, to name a tensor (argument N where missing).
    """
    outputs = [(i, arg) for i, arg in enumerate(launch.args) if isinstance(arg, Output)]
    inputs = [(i, arg) for i, arg in enumerate(launch.args) if isinstance(arg, Input)]
    tensors: list[tuple[int, Input | Output]] = [*outputs, *inputs]  # as the buffers came

    def name(arg: int) -> str:
        return names[arg] if arg < len(names) else f"argument {arg + 1}"

    for (index, spec), array in zip(tensors, buffers, strict=True):
        pad = spec.pad
        inner = array[pad : array.size - pad]
        around = np.concatenate([array[:pad], array[array.size - pad :]])
        fill = SENTINEL if isinstance(spec, Output) else spec.fill
        changed = _changed(around, np.full_like(around, fill))
        if changed and isinstance(spec, Output):
            return (
                f"the kernel wrote {changed} number(s) just outside its output tensor, "
                "into memory that is not its own: a store whose mask lets lanes past the end"
            )
        if changed:
            return (
                f"the kernel wrote {changed} number(s) just outside {name(index)}, "
                "into memory that is not its own"
            )
        changed = 0 if isinstance(spec, Output) else _changed(inner, spec.array.reshape(-1))
        if changed:
            return (
                f"the kernel changed {changed} number(s) of its input {name(index)}: "
                "an input is read, never written"
            )
    for kind, verb, what in ((1, "stores", "its outputs"), (0, "loads", "the tensors it got")):
        programs = np.argwhere(strays[..., kind, 0] > 0)
        if programs.size:
            x, y, z = (int(i) for i in programs[0])
            lanes, arg, offset = (int(i) for i in strays[x, y, z, kind])
            where = _place(arg, offset, launch, name)
            program = (x, y) if launch.grid[2] == 1 else (x, y, z)
            return f"program {program} {verb} {lanes} number(s) outside {what}, the first {where}"
    return None


def _changed(got: np.ndarray, expected: np.ndarray) -> int:
    """How many numbers differ (NaN equals NaN)."""
    same = got == expected
    if got.dtype.kind == "f":
        same |= np.isnan(got) & np.isnan(expected)
    return int((~same).sum())


def _place(arg: int, offset: int, launch: Launch, name: Callable[[int], str]) -> str:
    """Where a stray lane addressed, in words, from the argument whose buffer holds it."""
    spec = launch.args[arg] if 0 <= arg < len(launch.args) else None
    if not isinstance(spec, Input | Output):
        return "far from every tensor"
    size = spec.array.size if isinstance(spec, Input) else math.prod(spec.shape)
    if offset < 0:
        return f"{-offset} element(s) before {name(arg)}"
    if offset >= size:
        return f"{offset - size + 1} element(s) past the end of {name(arg)}"
    return f"inside {name(arg)}"


def value_of(results: Sequence[StepResult], index: int = -1) -> Returned:
    """What step ``index`` returned (the last step by default)."""
    return results[index].value


def problem_with_tensor(
    got: Returned,
    expected: np.ndarray,
    *,
    atol: float = 1e-5,
    rtol: float = 1e-4,
    dtype: str | None = None,
    what: str = "the result",
) -> str | None:
    """Why ``got`` is not a tensor close to ``expected`` (shape, dtype when given, values), or
    None when it is. NaNs must sit where the expected ones do."""
    if isinstance(got, Raised):
        return f"it raised {got.type_name}: {got.message}"
    if not isinstance(got, Tensor):
        return f"{what} should be a tensor, got {describe(got)}"
    if got.shape != tuple(expected.shape):
        return f"{what} should have shape {tuple(expected.shape)}, got {got.shape}"
    if dtype is not None and got.dtype != dtype:
        return f"{what} should have dtype {dtype}, got {got.dtype}"
    if expected.dtype == np.bool_ or got.array.dtype == np.bool_:
        if not np.array_equal(got.array.astype(bool), expected.astype(bool)):
            wrong = int((got.array.astype(bool) != expected.astype(bool)).sum())
            return f"{what} has {wrong} wrong entries"
        return None
    actual = got.array.astype(np.float64)
    target = np.asarray(expected, dtype=np.float64)
    if not np.array_equal(np.isnan(actual), np.isnan(target)):
        return f"{what} has NaN where it should not, or a number where NaN is expected"
    if not np.allclose(actual, target, atol=atol, rtol=rtol, equal_nan=True):
        gap = float(np.nanmax(np.abs(actual - target))) if actual.size else 0.0
        return f"{what} is off by up to {gap:.3g}"
    return None


def describe(value: Returned) -> str:
    """A few words on what came back, for a reason."""
    if isinstance(value, Raised):
        return f"an exception ({value.type_name}: {value.message})"
    if isinstance(value, Tensor):
        return f"a {value.dtype} tensor of shape {value.shape}"
    if isinstance(value, ModuleState):
        return f"a {value.name} module"
    if isinstance(value, Other):
        return f"a {value.type_name}"
    if isinstance(value, list):
        return f"a sequence of {len(value)}"
    return f"{type(value).__name__} {value!r}"[:80]


# ---- shared by the chapters' checks -----------------------------------------------------------

ROLES = ("W_query", "W_key", "W_value")
# How a dtype of the inputs is named in feedback.
FLOAT = {np.float16: "torch.float16", np.float32: "torch.float32", np.float64: "torch.float64"}


def softmax(scores: np.ndarray) -> np.ndarray:
    """The stable softmax along the last axis, in float64 (-inf gives weight 0)."""
    shifted = scores - scores.max(axis=-1, keepdims=True)
    exps = np.exp(shifted)
    return exps / exps.sum(axis=-1, keepdims=True)


def raised(results: Sequence[StepResult]) -> str | None:
    """Why the call stopped, if one of its steps raised."""
    for result in results:
        if isinstance(result.value, Raised):
            return f"it raised {result.value.type_name}: {result.value.message}"
    return None
