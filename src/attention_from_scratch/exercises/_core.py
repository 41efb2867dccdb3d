"""Exercises, their checks and the self-check a student runs in a notebook.

Each exercise is declared once, in the module of its chapter (``exercises/chN.py``)::

    from ._core import Exercise

    sliding_window = Exercise("ch3-ex-sliding-window", chapter=3)

    @sliding_window.check(points=1, hint="`window_mask` must be a (6, 6) bool tensor.")
    def mask_shape(window_mask):
        assert window_mask.shape == (6, 6) and window_mask.dtype == torch.bool

A check is a function whose arguments are looked up by name in the notebook's namespace. It
passes when it returns without raising. A missing name, an answer still ``...`` or any
exception makes it fail with its hint. The book's exercise cells call :func:`check`, which
prints one line per check (:func:`format_result`). Where the exercises come from is
``_registry.py``; what a check reports is ``report.py``; how the grader (``tools/grade.py``)
runs the same checks in a kernel it does not trust is ``integrity.py``.
"""

from __future__ import annotations

import copy
import inspect
import math
import sys
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

from ._registry import LABEL_PATTERN, get_exercise, register
from .report import CheckResult, ExerciseResult, format_points, one_line

# Printed lines stay within the book's 79 columns.
WIDTH = 79

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Check:
    """One check of an exercise: a function, its points and the hint shown when it fails.

    Introduced in chapter 1.

    Args:
        name: the check function's name, unique within its exercise.
        function: the check; its parameters name the notebook variables it needs.
        points: points earned when it passes (a positive number).
        hint: what to look at when it fails, shown to the student.
        hidden: True for checks kept out of the students' package (grading only).
    """

    name: str
    function: Callable[..., Any]
    points: float
    hint: str
    hidden: bool = False

    @property
    def parameters(self) -> tuple[str, ...]:
        """The names the check looks up in the namespace, in order."""
        return tuple(inspect.signature(self.function).parameters)

    @property
    def title(self) -> str:
        """A readable name: the docstring's first line, or the function name in words."""
        doc = inspect.getdoc(self.function)
        if doc:
            return doc.splitlines()[0].strip()
        return self.name.replace("_", " ")


class Exercise:
    """An exercise of a chapter: its label, its checks and any points graded by a human.

    Introduced in chapter 1.

    Args:
        label: the label of the exercise in the book, ``chN-ex-name``.
        chapter: the chapter number ``N``; must match the label.
        manual_points: points a human grades (an explanation), 0 if none.
        rubric: guidance for the human grader, required when ``manual_points > 0``.

    Raises:
        ValueError: the label is malformed, disagrees with ``chapter``, or points are negative.
    """

    def __init__(
        self,
        label: str,
        chapter: int,
        manual_points: float = 0,
        rubric: str | None = None,
    ) -> None:
        if not isinstance(label, str):
            raise TypeError(f"label: expected a str, got {type(label).__name__}")
        match = LABEL_PATTERN.match(label)
        if match is None:
            raise ValueError(f"label: expected 'chN-ex-name' in lowercase, got {label!r}")
        if isinstance(chapter, bool) or not isinstance(chapter, int):
            raise TypeError(f"chapter: expected an int, got {type(chapter).__name__}")
        if int(match.group(1)) != chapter:
            raise ValueError(
                f"chapter: expected {match.group(1)} (from the label {label!r}), got {chapter}"
            )
        if not _is_number(manual_points) or manual_points < 0:
            raise ValueError(f"manual_points: expected a number >= 0, got {manual_points!r}")
        if manual_points > 0 and not rubric:
            raise ValueError(
                f"rubric: expected a rubric for a human grader when manual_points > 0, "
                f"got {rubric!r}"
            )
        self.label = label
        self.chapter = chapter
        self.manual_points = float(manual_points)
        self.rubric = rubric
        self.checks: list[Check] = []
        register(self)

    def check(self, points: float = 1, hint: str = "", hidden: bool = False) -> Callable[[F], F]:
        """Register a check on this exercise (a decorator).

        Args:
            points: the points the check is worth (a positive number).
            hint: shown to the student when the check fails; required.
            hidden: True in ``grading/hidden/chN.py`` for checks used only by the grader.

        Returns:
            A decorator that registers the function and returns it unchanged, so tests can
            call it directly.
        """
        if not _is_number(points) or points <= 0:
            raise ValueError(f"points: expected a number > 0, got {points!r}")
        if not isinstance(hint, str) or not hint.strip():
            raise ValueError(f"hint: expected a non-empty str, got {hint!r}")

        def register(function: F) -> F:
            kinds = {p.kind for p in inspect.signature(function).parameters.values()}
            if kinds - {inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY}:
                raise ValueError(
                    f"{function.__name__}: expected named parameters only (each is looked up "
                    f"in the notebook), got {inspect.signature(function)}"
                )
            new = Check(function.__name__, function, float(points), hint.strip(), bool(hidden))
            # Loading the same file again replaces a check instead of counting it twice.
            self.checks = [c for c in self.checks if c.name != new.name] + [new]
            return function

        return register

    @property
    def public_checks(self) -> list[Check]:
        """The checks shipped to students."""
        return [c for c in self.checks if not c.hidden]

    @property
    def points(self) -> float:
        """Auto-graded points of every check registered so far (hidden ones included)."""
        return float(sum(c.points for c in self.checks))

    @property
    def auto_graded(self) -> bool:
        """True when the exercise has at least one check."""
        return bool(self.checks)

    def run(self, namespace: Mapping[str, Any], hidden: bool = False) -> ExerciseResult:
        """Run the checks against ``namespace``; never raises.

        Args:
            namespace: the variables of the notebook (its globals).
            hidden: also run hidden checks (the grader does; the self-check does not).

        Returns:
            One :class:`ExerciseResult` with a :class:`CheckResult` per check.
        """
        checks = self.checks if hidden else self.public_checks
        return ExerciseResult(
            self.label,
            tuple(_run_one(c, namespace) for c in checks),
            manual_points=self.manual_points,
        )

    def __repr__(self) -> str:
        return (
            f"Exercise({self.label!r}, chapter={self.chapter}, "
            f"points={format_points(self.points)}, "
            f"manual_points={format_points(self.manual_points)})"
        )


def _is_number(value: object) -> bool:
    return (
        not isinstance(value, bool)
        and isinstance(value, (int, float))
        and math.isfinite(float(value))
    )


def _run_one(check: Check, namespace: Mapping[str, Any]) -> CheckResult:
    def failed(reason: str) -> CheckResult:
        return CheckResult(
            check.name, check.title, check.points, False, check.hint, reason, check.hidden
        )

    arguments: dict[str, Any] = {}
    for name, parameter in inspect.signature(check.function).parameters.items():
        if name in namespace:
            value = namespace[name]
        elif parameter.default is not inspect.Parameter.empty:
            value = parameter.default
        else:
            return failed(f"`{name}` is not defined: write it in the exercise's cell and run it.")
        if value is Ellipsis:
            return failed(f"`{name}` is still `...`: replace it with your answer and run it.")
        arguments[name] = value
    try:
        # A check that draws random numbers must not move the notebook's own random stream,
        # or the cells after an exercise would print different numbers once it is checked.
        with torch.random.fork_rng(devices=[]):
            check.function(**arguments)
    except Exception as error:  # the student's objects may raise anything
        if isinstance(error, AssertionError) and not str(error):
            return failed("")
        return failed(one_line(f"{type(error).__name__}: {error}"))
    return CheckResult(check.name, check.title, check.points, True, check.hint, "", check.hidden)


def answer_tensor(value: object, shape: tuple[int, ...]) -> torch.Tensor:
    """Return an answer as a detached CPU tensor, failing the check unless it is a tensor of
    the given shape (checks call this first, so a wrong type fails with the check's hint).

    Introduced in chapter 1.

    Args:
        value: the learner's answer.
        shape: the shape it must have.

    Returns:
        ``value`` detached and on the CPU; the learner's tensor itself is left as it is.
    """
    assert isinstance(value, torch.Tensor) and tuple(value.shape) == shape
    return value.detach().cpu()


def answer_module(value: object) -> torch.nn.Module:
    """Return a copy of a module answer on the CPU in evaluation mode, failing the check
    unless it is a module; the learner's module is neither moved nor changed.

    Introduced in chapter 2.

    Args:
        value: the learner's answer.

    Returns:
        A deep copy of ``value`` on the CPU, in evaluation mode.
    """
    assert isinstance(value, torch.nn.Module)
    return copy.deepcopy(value).cpu().eval()


def run_checks(label: str, namespace: Mapping[str, Any], hidden: bool = False) -> ExerciseResult:
    """Run an exercise's checks against a namespace without printing; never raises.

    Introduced in chapter 1.

    Args:
        label: the exercise label, ``chN-ex-name``.
        namespace: the variables to check (a notebook's globals).
        hidden: also run hidden checks that were loaded with :func:`load_hidden`.

    Returns:
        The :class:`ExerciseResult`; its ``error`` says why when the label is unknown.
    """
    try:
        exercise = get_exercise(label)
    except (KeyError, ValueError) as error:
        return ExerciseResult(str(label), error=one_line(str(error.args[0])))
    except Exception as error:  # a broken chapter module must not crash a student's notebook
        return ExerciseResult(
            str(label), error=one_line(f"the checks could not be loaded: {error}")
        )
    return exercise.run(namespace, hidden=hidden)


def format_result(result: ExerciseResult) -> str:
    """The lines :func:`check` prints: one per check, then a plain verdict.

    Introduced in chapter 1.

    Args:
        result: the result of :func:`run_checks`.

    Returns:
        Text wrapped to 79 columns.
    """
    wrap = textwrap.TextWrapper(width=WIDTH, subsequent_indent=" " * 8)
    lines = []
    if result.error:
        lines.append(f"{result.label}: cannot check this exercise: {result.error}")
        return "\n".join(wrap.fill(line) for line in lines)
    if not result.checks:
        lines.append(
            f"{result.label}: nothing to check automatically; your instructor reads this answer."
        )
        return "\n".join(wrap.fill(line) for line in lines)
    lines.append(f"{result.label}:")
    for c in result.checks:
        verdict = "pass" if c.passed else "FAIL"
        unit = "point" if c.points == 1 else "points"
        lines.append(wrap.fill(f"  {verdict}  {c.title} ({format_points(c.points)} {unit})"))
        if not c.passed:
            if c.reason:
                lines.append(wrap.fill(f"        {c.reason}"))
            lines.append(wrap.fill(f"        Hint: {c.hint}"))
    passed = sum(c.passed for c in result.checks)
    score = f"{format_points(result.earned)}/{format_points(result.possible)} points"
    wrap = textwrap.TextWrapper(width=WIDTH)
    if result.passed:
        lines.append(
            wrap.fill(
                (
                    "The check passes "
                    if len(result.checks) == 1
                    else f"All {len(result.checks)} checks pass "
                )
                + f"({score}). Well done!"
            )
        )
    else:
        lines.append(
            wrap.fill(
                f"{passed} of {len(result.checks)} checks pass "
                f"({score}): fix the ones "
                "marked FAIL and run this cell again."
            )
        )
    return "\n".join(lines)


def check(label: str, namespace: Mapping[str, Any] | None = None) -> ExerciseResult:
    """Check an exercise's answer and print which checks pass, with a hint for each failure.

    This is the call in every exercise's check cell: ``check("ch3-ex-sliding-window")``.
    It runs offline, uses only the package, and never raises.

    Introduced in chapter 1.

    Args:
        label: the exercise label, ``chN-ex-name``.
        namespace: the variables to check; by default the globals of the caller (the
            notebook).

    Returns:
        The :class:`ExerciseResult` (points earned and possible).
    """
    if namespace is None:
        frame = inspect.currentframe()
        caller = frame.f_back if frame is not None else None
        namespace = caller.f_globals if caller is not None else vars(sys.modules["__main__"])
        del frame, caller
    result = run_checks(label, namespace, hidden=False)
    print(format_result(result))
    return result
