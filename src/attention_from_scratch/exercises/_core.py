"""Exercises and the self-check students run in a notebook.

Each exercise is declared once, in the module of its chapter (``exercises/chN.py``), with its
*public* checks: the example the page gives, and what a right answer must do with it::

    from ._core import Exercise

    sliding_window = Exercise("ch3-ex-sliding-window", chapter=3)

    @sliding_window.check(hint="Row i hides the keys after i and before i - window.")
    def the_page_example(window_mask):
        \"\"\"the mask of the page's example\"\"\"
        assert torch.equal(window_mask(4, 1), EXPECTED)

A check is a function whose arguments are looked up by name in the notebook's namespace. It
passes when it returns without raising. A missing name, an answer still ``...`` or any
exception makes it fail with its hint. The book's exercise cells call :func:`check`, which
prints one line per check (:func:`format_result`).

These checks are for learning, not for marks: their inputs and expected values are public
(written out here, or properties any right answer has). Grading happens elsewhere: the
course's grader (the repository's ``tools/grader``, with the graded exercises in
``grading/chN.py``, neither in this package) runs a submitted notebook, calls its answers on
inputs it draws itself, and judges what comes back in a process of its own.
"""

from __future__ import annotations

import inspect
import sys
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

from ._registry import LABEL_PATTERN, get_exercise, register
from .results import CheckResult, ExerciseResult, one_line

# Printed lines stay within the book's 79 columns.
WIDTH = 79

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Check:
    """One public check of an exercise: a function and the hint shown when it fails.

    Introduced in chapter 1.

    Args:
        name: the check function's name, unique within its exercise.
        function: the check; its parameters name the notebook variables it needs.
        hint: what to look at when it fails, shown to the student.
    """

    name: str
    function: Callable[..., Any]
    hint: str

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
    """An exercise of a chapter: its label and its public checks.

    Introduced in chapter 1.

    Args:
        label: the label of the exercise in the book, ``chN-ex-name``.
        chapter: the chapter number ``N``; must match the label.
        unavailable: says why the checks cannot run on this machine (an optional dependency
            missing: chapter 8's Triton), or None when they can; asked each time the
            exercise is checked, whose result then says so instead of failing its checks.

    Raises:
        TypeError: the label or the chapter is of the wrong type.
        ValueError: the label is malformed or disagrees with ``chapter``.
    """

    def __init__(
        self,
        label: str,
        chapter: int,
        *,
        unavailable: Callable[[], str | None] | None = None,
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
        self.label = label
        self.chapter = chapter
        self.unavailable = unavailable
        self.checks: list[Check] = []
        register(self)

    def check(self, hint: str) -> Callable[[F], F]:
        """Register a public check on this exercise (a decorator).

        Args:
            hint: shown to the student when the check fails; required.

        Returns:
            A decorator that registers the function and returns it unchanged, so tests can
            call it directly.
        """
        if not isinstance(hint, str) or not hint.strip():
            raise ValueError(f"hint: expected a non-empty str, got {hint!r}")

        def register_check(function: F) -> F:
            kinds = {p.kind for p in inspect.signature(function).parameters.values()}
            if kinds - {inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY}:
                raise ValueError(
                    f"{function.__name__}: expected named parameters only (each is looked up "
                    f"in the notebook), got {inspect.signature(function)}"
                )
            new = Check(function.__name__, function, hint.strip())
            # Loading the same file again replaces a check instead of counting it twice.
            self.checks = [c for c in self.checks if c.name != new.name] + [new]
            return function

        return register_check

    @property
    def self_checked(self) -> bool:
        """True when the exercise has public checks (an answer in words has none)."""
        return bool(self.checks)

    def run(self, namespace: Mapping[str, Any]) -> ExerciseResult:
        """Run the public checks against ``namespace``; never raises.

        Args:
            namespace: the variables of the notebook (its globals).

        Returns:
            One :class:`ExerciseResult` with a :class:`CheckResult` per check, or with the
            reason the checks cannot run on this machine as its ``error``.
        """
        why = self.unavailable() if self.unavailable is not None else None
        if why:
            return ExerciseResult(self.label, error=one_line(why))
        return ExerciseResult(self.label, tuple(_run_one(c, namespace) for c in self.checks))

    def __repr__(self) -> str:
        return f"Exercise({self.label!r}, chapter={self.chapter}, checks={len(self.checks)})"


def _run_one(check: Check, namespace: Mapping[str, Any]) -> CheckResult:
    def failed(reason: str) -> CheckResult:
        return CheckResult(check.name, check.title, False, check.hint, reason)

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
    return CheckResult(check.name, check.title, True, check.hint)


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
    assert isinstance(value, torch.Tensor), f"expected a tensor, got {type(value).__name__}"
    assert tuple(value.shape) == shape, f"expected shape {shape}, got {tuple(value.shape)}"
    return value.detach().cpu()


def run_checks(label: str, namespace: Mapping[str, Any]) -> ExerciseResult:
    """Run an exercise's public checks against a namespace without printing; never raises.

    Introduced in chapter 1.

    Args:
        label: the exercise label, ``chN-ex-name``.
        namespace: the variables to check (a notebook's globals).

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
    return exercise.run(namespace)


def format_result(result: ExerciseResult) -> str:
    """The lines :func:`check` prints: one per check, then a plain verdict.

    Introduced in chapter 1.

    Args:
        result: the result of :func:`run_checks`.

    Returns:
        Text wrapped to 79 columns.
    """
    wrap = textwrap.TextWrapper(width=WIDTH, subsequent_indent=" " * 8)
    if result.error:
        return wrap.fill(f"{result.label}: cannot check this exercise: {result.error}")
    if not result.checks:
        return wrap.fill(
            f"{result.label}: nothing to check automatically; your instructor reads this answer."
        )
    lines = [f"{result.label}:"]
    for c in result.checks:
        lines.append(wrap.fill(f"  {'pass' if c.passed else 'FAIL'}  {c.title}"))
        if not c.passed:
            if c.reason:
                lines.append(wrap.fill(f"        {c.reason}"))
            lines.append(wrap.fill(f"        Hint: {c.hint}"))
    passed = sum(c.passed for c in result.checks)
    wrap = textwrap.TextWrapper(width=WIDTH)
    if result.passed:
        checks = "The check passes" if len(result.checks) == 1 else f"All {passed} checks pass"
        verdict = (
            f"{checks}, on the inputs each one names. Try your answer on inputs of your own too: "
            "a grader calls it on inputs it draws."
        )
    else:
        verdict = (
            f"{passed} of {len(result.checks)} checks pass: fix the ones marked FAIL and run "
            "this cell again."
        )
    lines.append(wrap.fill(verdict))
    return "\n".join(lines)


def check(label: str, namespace: Mapping[str, Any] | None = None) -> ExerciseResult:
    """Check an exercise's answer on the page's example and print which checks pass, with a
    hint for each failure.

    This is the call in every exercise's check cell: ``check("ch3-ex-sliding-window")``.
    It runs offline, uses only the package, and never raises.

    Introduced in chapter 1.

    Args:
        label: the exercise label, ``chN-ex-name``.
        namespace: the variables to check; by default the globals of the caller (the
            notebook).

    Returns:
        The :class:`ExerciseResult`.
    """
    if namespace is None:
        frame = inspect.currentframe()
        caller = frame.f_back if frame is not None else None
        namespace = caller.f_globals if caller is not None else vars(sys.modules["__main__"])
        del frame, caller
    result = run_checks(label, namespace)
    print(format_result(result))
    return result
