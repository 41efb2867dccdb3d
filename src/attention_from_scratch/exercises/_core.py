"""Exercises, their checks and the self-check a student runs in a notebook.

Each exercise is declared once, in the module of its chapter (``exercises/chN.py``)::

    from ._core import Exercise

    sliding_window = Exercise("ch3-ex-sliding-window", chapter=3)

    @sliding_window.check(points=1, hint="`window_mask` must be a (6, 6) bool tensor.")
    def mask_shape(window_mask):
        assert window_mask.shape == (6, 6) and window_mask.dtype == torch.bool

A check is a function whose arguments are looked up by name in the notebook's namespace. It
passes when it returns without raising. A missing name, an answer still ``...`` or any
exception makes it fail with its hint. The book's exercise cells call :func:`check`; the
grader (``tools/grade.py``) calls :func:`grader_check` in a fresh copy of this module, which
also runs the checks that instructors keep hidden in ``grading/hidden/chN.py``.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import importlib.util
import inspect
import json
import math
import pkgutil
import re
import sys
import textwrap
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import torch

# The package of the checks, named in full: the grader also runs a fresh copy of this module
# under another name (see "The grader's side" below).
PACKAGE = "attention_from_scratch.exercises"
LABEL_PATTERN = re.compile(r"^ch(\d+)-ex-[a-z0-9]+(?:-[a-z0-9]+)*$")
# Printed lines stay within the book's 79 columns.
WIDTH = 79

F = TypeVar("F", bound=Callable[..., Any])

# Every exercise declared so far, by label. A chapter module registers its exercises when it
# is imported; importing it again (a reload) replaces them.
_REGISTRY: dict[str, Exercise] = {}
# Files of checks already loaded by path (hidden checks, test fixtures), so each runs once.
_LOADED_FILES: dict[Path, Any] = {}


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


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check.

    Introduced in chapter 1.

    Args:
        name: the check's function name.
        title: its readable name.
        points: the points it is worth.
        passed: whether it passed.
        hint: its hint (shown when it failed).
        reason: why it failed, in one line ("" when it passed).
        hidden: whether it is a hidden (grading-only) check.
    """

    name: str
    title: str
    points: float
    passed: bool
    hint: str
    reason: str = ""
    hidden: bool = False

    @property
    def earned(self) -> float:
        """``points`` when the check passed, else 0."""
        return self.points if self.passed else 0.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary of every field."""
        return {
            "name": self.name,
            "title": self.title,
            "points": self.points,
            "passed": self.passed,
            "hint": self.hint,
            "reason": self.reason,
            "hidden": self.hidden,
        }


@dataclass(frozen=True)
class ExerciseResult:
    """The outcome of checking one exercise: what :func:`check` returns.

    Introduced in chapter 1.

    Args:
        label: the exercise's label, e.g. ``"ch3-ex-sliding-window"``.
        checks: one result per check that ran.
        manual_points: points a human grades (not included in ``possible``).
        error: why the exercise could not be checked at all ("" when it could).
    """

    label: str
    checks: tuple[CheckResult, ...] = ()
    manual_points: float = 0.0
    error: str = ""

    @property
    def earned(self) -> float:
        """Auto-graded points earned."""
        return float(sum(c.earned for c in self.checks))

    @property
    def possible(self) -> float:
        """Auto-graded points possible."""
        return float(sum(c.points for c in self.checks))

    @property
    def passed(self) -> bool:
        """True when there were checks and every one passed."""
        return not self.error and bool(self.checks) and all(c.passed for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary, used by the grader."""
        return {
            "label": self.label,
            "earned": self.earned,
            "possible": self.possible,
            "manual_points": self.manual_points,
            "error": self.error,
            "checks": [c.to_dict() for c in self.checks],
        }

    def __repr__(self) -> str:
        return (
            f"ExerciseResult({self.label!r}, earned={_fmt(self.earned)}, "
            f"possible={_fmt(self.possible)})"
        )

    def _ipython_display_(self) -> None:
        # `check(...)` is the last line of its cell: the lines are already printed, so the
        # notebook should not echo the result object below them.
        return None


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
        _REGISTRY[label] = self

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
            f"Exercise({self.label!r}, chapter={self.chapter}, points={_fmt(self.points)}, "
            f"manual_points={_fmt(self.manual_points)})"
        )


def _is_number(value: object) -> bool:
    return (
        not isinstance(value, bool)
        and isinstance(value, (int, float))
        and math.isfinite(float(value))
    )


def _fmt(points: float) -> str:
    return f"{points:g}"


def _one_line(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
        return failed(_one_line(f"{type(error).__name__}: {error}"))
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


def chapter_of(label: str) -> int:
    """The chapter number in a label.

    Introduced in chapter 1.

    Args:
        label: an exercise label, ``chN-ex-name``.

    Returns:
        ``N``.

    Raises:
        ValueError: the label is not of the form ``chN-ex-name``.
    """
    match = LABEL_PATTERN.match(label) if isinstance(label, str) else None
    if match is None:
        raise ValueError(f"label: expected 'chN-ex-name' in lowercase, got {label!r}")
    return int(match.group(1))


def load_chapter(chapter: int) -> list[Exercise]:
    """Import the checks of one chapter (``attention_from_scratch.exercises.chN``).

    Introduced in chapter 1.

    Args:
        chapter: the chapter number.

    Returns:
        Its exercises in the order they were declared (an empty list if it has none, or if
        it has no module).
    """
    name = f"{PACKAGE}.ch{chapter}"
    if name not in sys.modules:
        with contextlib.suppress(ModuleNotFoundError):
            importlib.import_module(name)
    return [e for e in _REGISTRY.values() if e.chapter == chapter]


def get_exercise(label: str) -> Exercise:
    """The exercise with this label, importing its chapter's module if needed.

    Introduced in chapter 1.

    Args:
        label: the exercise label, ``chN-ex-name``.

    Returns:
        The registered :class:`Exercise`.

    Raises:
        ValueError: the label is malformed.
        KeyError: no exercise has this label.
    """
    chapter = chapter_of(label)
    if label not in _REGISTRY:
        load_chapter(chapter)
    if label not in _REGISTRY:
        raise KeyError(f"label: expected a known exercise, got {label!r}")
    return _REGISTRY[label]


def all_exercises() -> list[Exercise]:
    """Every exercise of the package (and any loaded check files), by chapter then order.

    Introduced in chapter 1.

    Returns:
        The registered exercises, sorted by chapter; within a chapter, in declaration order.
    """
    package_dir = Path(__file__).parent
    for module in pkgutil.iter_modules([str(package_dir)]):
        match = re.fullmatch(r"ch(\d+)", module.name)
        if match:
            load_chapter(int(match.group(1)))
    order = {label: i for i, label in enumerate(_REGISTRY)}
    return sorted(_REGISTRY.values(), key=lambda e: (e.chapter, order[e.label]))


def load_check_file(path: str | Path) -> Any:
    """Import a file of checks by path, once (hidden checks, or checks used by tests).

    Introduced in chapter 1.

    Args:
        path: a Python file that declares exercises or adds checks to them.

    Returns:
        The imported module.

    Raises:
        FileNotFoundError: the file does not exist.
    """
    path = Path(path).resolve()
    if path in _LOADED_FILES:
        return _LOADED_FILES[path]
    if not path.is_file():
        raise FileNotFoundError(f"path: expected a Python file of checks, got {str(path)!r}")
    module_name = f"_attention_from_scratch_checks_{len(_LOADED_FILES)}_{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"path: expected an importable Python file, got {str(path)!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    _LOADED_FILES[path] = module
    return module


def load_hidden(directory: str | Path, chapters: Iterable[int] | None = None) -> None:
    """Load the hidden checks ``chN.py`` found in ``directory`` (e.g. ``grading/hidden``).

    Introduced in chapter 1.

    Args:
        directory: the folder of hidden check files; a missing folder loads nothing.
        chapters: only these chapters, or every ``chN.py`` in the folder when None.
    """
    directory = Path(directory)
    if not directory.is_dir():
        return
    wanted = None if chapters is None else set(chapters)
    for path in sorted(directory.glob("ch*.py")):
        match = re.fullmatch(r"ch(\d+)", path.stem)
        if match and (wanted is None or int(match.group(1)) in wanted):
            load_chapter(int(match.group(1)))
            load_check_file(path)


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
        return ExerciseResult(str(label), error=_one_line(str(error.args[0])))
    except Exception as error:  # a broken chapter module must not crash a student's notebook
        return ExerciseResult(
            str(label), error=_one_line(f"the checks could not be loaded: {error}")
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
        lines.append(wrap.fill(f"  {verdict}  {c.title} ({_fmt(c.points)} {unit})"))
        if not c.passed:
            if c.reason:
                lines.append(wrap.fill(f"        {c.reason}"))
            lines.append(wrap.fill(f"        Hint: {c.hint}"))
    passed = sum(c.passed for c in result.checks)
    wrap = textwrap.TextWrapper(width=WIDTH)
    if result.passed:
        lines.append(
            wrap.fill(
                (
                    "The check passes "
                    if len(result.checks) == 1
                    else f"All {len(result.checks)} checks pass "
                )
                + f"({_fmt(result.earned)}/{_fmt(result.possible)} points). Well done!"
            )
        )
    else:
        lines.append(
            wrap.fill(
                f"{passed} of {len(result.checks)} checks pass "
                f"({_fmt(result.earned)}/{_fmt(result.possible)} points): fix the ones "
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


# ------------------------------------------------------------------------ the grader's side
#
# `tools/grade.py` runs a submission in a kernel that the submission's own code controls, so
# nothing the submission could have changed is trusted when an exercise is checked:
#
# - before any of its cells, `grader_setup` loads the checks into the kernel and prints
#   fingerprints of what the checks rely on (torch, the standard library, builtins, the
#   kernel's output stream and input hooks) behind a marker that only that cell knew;
# - each check cell loads a fresh copy of this module from its read-only file and calls its
#   `grader_check`: it builds fresh copies of the exercises' modules, runs those (not the
#   ones the submission could reach), compares every function, class and registry entry the
#   submission could reach with the fresh copies, checks the builtins, and prints the
#   results, what differed, and the fingerprints again, behind that cell's own marker.
#
# The grader scores an exercise 0 and flags the row when anything differs, when a check
# cell prints its marker twice or not at all, or when the results name other checks.

_CHECK_FILES = "_attention_from_scratch_checks_"
# Builtins the checks and this module call; each must still be the interpreter's own.
_BUILTIN_FUNCTIONS = [
    "__build_class__",
    "__import__",
    "abs",
    "all",
    "any",
    "callable",
    "compile",
    "delattr",
    "dir",
    "eval",
    "exec",
    "format",
    "getattr",
    "globals",
    "hasattr",
    "hash",
    "id",
    "isinstance",
    "issubclass",
    "iter",
    "len",
    "max",
    "min",
    "next",
    "open",
    "print",
    "repr",
    "round",
    "setattr",
    "sorted",
    "sum",
    "vars",
]
# Modules whose functions and classes the checks rely on, fingerprinted by identity.
_WATCHED = [
    "builtins",
    "contextlib",
    "copy",
    "dataclasses",
    "functools",
    "importlib",
    "importlib.util",
    "inspect",
    "json",
    "math",
    "re",
    "sys",
    "textwrap",
    "types",
    "torch",
    "torch.nn",
    "torch.nn.functional",
    "torch.overrides",
    "torch.random",
]
# What the kernel itself sets anew for each cell it runs, or after a cell raised, and what
# torch rewraps itself once its compiler is imported (torch.manual_seed).
_PER_CELL = (
    "input",
    "excepthook",
    "displayhook",
    "last_type",
    "last_value",
    "last_exc",
    "manual_seed",
)
_SIMPLE = (type(None), bool, int, float, complex, str, bytes)


def _ours(name: str) -> bool:
    return name == PACKAGE or name.startswith(PACKAGE + ".") or name.startswith(_CHECK_FILES)


def grader_setup(
    nonce: str,
    chapters: Iterable[int],
    hidden_dir: str | None = None,
    check_files: Iterable[str] = (),
) -> None:
    """Load the checks of ``chapters`` and print the fingerprints of what they rely on.

    The grader runs this in a submission's kernel before any of the submission's cells.

    Introduced in chapter 1.

    Args:
        nonce: the marker that starts the printed line, chosen by the grader for this cell.
        chapters: the chapters whose exercises the submission answers.
        hidden_dir: the folder of hidden checks, or None.
        check_files: extra files of checks to load first (used by tests).
    """
    error = ""
    try:
        for path in check_files:
            load_check_file(path)
        for chapter in chapters:
            load_chapter(chapter)
        if hidden_dir is not None:
            load_hidden(hidden_dir, chapters)
    except Exception as failure:  # report it: a broken hidden file must not look like 0 points
        error = _one_line(f"{type(failure).__name__}: {failure}")
    print(nonce + json.dumps({"error": error, "fingerprints": _fingerprints()}), flush=True)


def grader_check(
    labels: Iterable[str],
    nonce: str,
    hidden_dir: str | None,
    check_files: Iterable[str],
    namespace: Mapping[str, Any],
) -> None:
    """Check exercises with fresh checks and report what the submission changed.

    The grader calls this in a fresh copy of this module, loaded from its file by the check
    cell itself, so no function or class that the submission could reach takes part.

    Introduced in chapter 1.

    Args:
        labels: the exercises to check.
        nonce: the marker that starts the printed line, known only to this cell.
        hidden_dir: the folder of hidden checks, or None.
        check_files: extra files of checks (used by tests).
        namespace: the notebook's variables.
    """
    labels = list(labels)
    chapters = sorted({chapter_of(label) for label in labels})
    error, findings, live = "", [], None
    try:
        live, fresh = _load_fresh(chapters, hidden_dir, list(check_files))
    except Exception as failure:  # report it: a broken hidden file must not look like 0 points
        error = _one_line(f"{type(failure).__name__}: {failure}")
    results = []
    for label in labels:
        if error:
            result = ExerciseResult(label, error=f"loading checks failed: {error}")
        else:
            result = run_checks(label, namespace, hidden=True)
        results.append(result.to_dict())
    if live is not None:
        try:
            findings = _tampering(live, fresh, labels, namespace)
        except Exception as failure:  # a comparison that raises was given something odd
            findings = [_one_line(f"the checks could not be compared: {failure}", 100)]
    report = {"results": results, "findings": findings, "fingerprints": _fingerprints()}
    print(nonce + json.dumps(report), flush=True)


def _load_fresh(
    chapters: list[int], hidden_dir: str | None, check_files: list[str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Load fresh copies of the exercises' modules, bound to this module; return the modules
    the kernel had before (by name) and the fresh ones (by file)."""
    here = Path(__file__).parent
    live = {name: module for name, module in sys.modules.items() if _ours(name)}
    package = types.ModuleType(PACKAGE)
    package.__path__ = [str(here)]
    package.__file__ = str(here / "__init__.py")
    for name, value in globals().items():
        if not name.startswith("_"):  # the package re-exports public names of this module
            setattr(package, name, value)
    for name in live:
        del sys.modules[name]
    sys.modules[PACKAGE] = package
    sys.modules[PACKAGE + "._core"] = sys.modules[__name__]
    try:
        for chapter in chapters:
            path = here / f"ch{chapter}.py"
            if path.is_file():
                name = f"{PACKAGE}.ch{chapter}"
                spec = importlib.util.spec_from_file_location(name, path)
                assert spec is not None and spec.loader is not None
                module = importlib.util.module_from_spec(spec)
                sys.modules[name] = module
                spec.loader.exec_module(module)
        for path in check_files:
            load_check_file(path)
        if hidden_dir is not None:
            load_hidden(hidden_dir, chapters)
        fresh = {
            str(getattr(module, "__file__", name)): module
            for name, module in sys.modules.items()
            if _ours(name) and name not in (PACKAGE, PACKAGE + "._core")
        }
    finally:
        for name in [name for name in sys.modules if _ours(name)]:
            del sys.modules[name]
        sys.modules.update(live)
    return live, fresh


def _describe(value: Any, depth: int = 0) -> Any:
    """What identifies a function, class or value: code objects compare by their bytecode."""
    if isinstance(value, types.FunctionType):
        return (
            "function",
            value.__qualname__,
            value.__code__,
            repr(value.__defaults__),
            repr(value.__kwdefaults__),
        )
    if isinstance(value, (staticmethod, classmethod)):
        return (type(value).__name__, _describe(value.__func__, depth))
    if isinstance(value, property):
        return ("property", *(_describe(f, depth) for f in (value.fget, value.fset, value.fdel)))
    if isinstance(value, type) and depth == 0:
        members = tuple(
            (key, _describe(member, depth + 1))
            for key, member in sorted(vars(value).items())
            if key not in ("__module__", "__dict__", "__weakref__", "__doc__")
        )
        bases = tuple(base.__qualname__ for base in value.__bases__)
        return ("class", value.__qualname__, bases, members)
    if isinstance(value, type):
        return ("class", value.__module__, value.__qualname__)
    if isinstance(value, types.ModuleType):
        return ("module", value.__name__)
    if isinstance(value, re.Pattern):
        return ("pattern", value.pattern)
    if isinstance(value, _SIMPLE) or (
        isinstance(value, tuple) and all(isinstance(item, _SIMPLE) for item in value)
    ):
        return ("value", repr(value))
    return ("object", type(value).__qualname__)


def _differences(
    theirs: Mapping[str, Any], mine: Mapping[str, Any], where: str, skip: Iterable[str] = ()
) -> list[str]:
    skipped = set(skip)
    names = (set(theirs) | set(mine)) - skipped
    missing = object()
    return [
        f"{where}.{name}"
        for name in sorted(names)
        if not (name.startswith("__") and name.endswith("__"))
        and _describe(theirs.get(name, missing)) != _describe(mine.get(name, missing))
    ]


def _describe_exercise(exercise: Any, core: Mapping[str, Any]) -> Any:
    if type(exercise) is not core.get("Exercise"):
        return ("not an Exercise",)
    fields = vars(exercise)
    checks = fields.get("checks")
    if type(checks) is not list:
        return ("checks are not a list",)
    return (
        tuple(sorted(fields)),
        tuple(repr(fields.get(key)) for key in ("label", "chapter", "manual_points", "rubric")),
        tuple(
            (
                type(c) is core.get("Check"),
                c.name,
                repr(c.points),
                c.hint,
                c.hidden,
                _describe(c.function),
                c.function.__globals__.get("__file__")
                if isinstance(c.function, types.FunctionType)
                else None,
            )
            for c in checks
        ),
    )


def _tampering(
    live: Mapping[str, Any], fresh: Mapping[str, Any], labels: list[str], namespace: Any
) -> list[str]:
    """What differs between the machinery the submission could reach and the fresh copy."""
    core, package = live.get(PACKAGE + "._core"), live.get(PACKAGE)
    if not isinstance(core, types.ModuleType) or not isinstance(package, types.ModuleType):
        return ["the exercises' modules were replaced"]
    theirs = vars(core)
    found = _differences(theirs, globals(), "exercises._core", skip=("_REGISTRY", "_LOADED_FILES"))
    found += [
        f"exercises.{name}"
        for name, value in vars(package).items()
        if name in theirs and not name.startswith("_") and value is not theirs[name]
    ]
    registry = theirs.get("_REGISTRY")
    for label in labels:
        if label in _REGISTRY:
            other = registry.get(label) if type(registry) is dict else None
            if _describe_exercise(other, theirs) != _describe_exercise(_REGISTRY[label], globals()):
                found.append(f"the checks of {label}")
    by_file = {str(getattr(m, "__file__", name)): m for name, m in live.items()}
    for path, module in fresh.items():
        other = by_file.get(path)
        if not isinstance(other, types.ModuleType):
            found.append(f"the module of checks {Path(path).name} is missing")
        else:
            found += _differences(vars(other), vars(module), Path(path).stem)
    found += _builtins_tampering(globals().get("__builtins__"), "builtins")
    if hasattr(namespace, "get"):
        found += _builtins_tampering(namespace.get("__builtins__"), "the notebook's builtins")
    return list(dict.fromkeys(found))


def _builtins_tampering(space: Any, where: str) -> list[str]:
    """The builtins the checks call must be the interpreter's own functions and types."""
    table = vars(space) if isinstance(space, types.ModuleType) else space
    if not isinstance(table, dict):
        return [f"{where} were replaced"]
    found = []
    length = table.get("len")
    owner = getattr(length, "__self__", None)
    if owner is None or not (space is owner or table is getattr(owner, "__dict__", None)):
        found.append(f"{where} were replaced")
    for name in _BUILTIN_FUNCTIONS:
        value = table.get(name)
        if (
            value.__class__ is not length.__class__
            or getattr(value, "__name__", None) != name
            or (name != "open" and getattr(value, "__self__", None) is not owner)
        ):
            found.append(f"{where}.{name}")
    kinds = {
        "bool": True.__class__,
        "int": (0).__class__,
        "float": (0.0).__class__,
        "str": "".__class__,
        "list": [].__class__,
        "dict": {}.__class__,
        "tuple": ().__class__,
        "set": {0}.__class__,
        "type": (0).__class__.__class__,
        "object": (0).__class__.__mro__[-1],
        "Exception": AssertionError.__mro__[1],
        "AssertionError": AssertionError,
    }
    found += [f"{where}.{name}" for name, kind in kinds.items() if table.get(name) is not kind]
    return found


def _members(items: Iterable[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """Callables and classes with their code objects and members, by name."""
    found: list[tuple[str, Any]] = []
    for key, value in items:
        if isinstance(value, types.ModuleType) or not callable(value):
            continue
        found.append((key, value))
        found.append((key + ".__code__", getattr(value, "__code__", None)))
        if isinstance(value, type) and value.__module__.startswith("attention_from_scratch"):
            for member, item in vars(value).items():
                if not (callable(item) or isinstance(item, property)):
                    continue
                found.append((f"{key}.{member}", item))
                found.append((f"{key}.{member}.__code__", getattr(item, "__code__", None)))
    return found


def _fingerprint(items: Iterable[tuple[str, Any]]) -> int:
    return hash(tuple(sorted((str(key), id(value)) for key, value in items)))


def _fingerprints() -> dict[str, int]:
    """Identities of what the checks rely on and the submission could replace, hashed."""
    prints = {}
    modules = sys.modules
    for name in _WATCHED:
        module = modules.get(name)
        prints[name] = _fingerprint(
            (key, value)
            for key, value in (vars(module) if module is not None else {}).items()
            if not key.startswith("_") and callable(value) and key not in _PER_CELL
        )
    prints["sys.modules"] = _fingerprint((name, modules.get(name)) for name in _WATCHED)
    for cls in (torch.Tensor, torch.nn.Module, type(sys.stdout)):
        prints[cls.__qualname__] = _fingerprint(vars(cls).items())
    layers = [v for v in vars(torch.nn).values() if isinstance(v, type)]
    prints["torch.nn's classes"] = _fingerprint(
        (f"{cls.__qualname__}.{key}", value)
        for cls in layers
        for key, value in vars(cls).items()
        if callable(value) or isinstance(value, property)
    )
    # The course package: its functions (and their code) and classes (and their members).
    for name, module in list(modules.items()):
        if name.split(".")[0] == "attention_from_scratch" and not _ours(name):
            prints[name] = _fingerprint(_members(vars(module).items()))
    prints["sys.stdout"] = _fingerprint(
        [("stdout", sys.stdout), ("print", print), ("dumps", json.dumps)]
    )
    prints["the import system"] = _fingerprint(
        list(enumerate(sys.meta_path)) + [(f"hook {i}", h) for i, h in enumerate(sys.path_hooks)]
    )
    shell = getattr(modules.get("IPython"), "get_ipython", lambda: None)()
    hooks: list[tuple[str, Any]] = []
    if shell is not None:
        for event in ("pre_execute", "pre_run_cell"):
            hooks += [(f"{event} {i}", f) for i, f in enumerate(shell.events.callbacks[event])]
        for kind in ("input_transformers_cleanup", "input_transformers_post", "ast_transformers"):
            hooks += [(f"{kind} {i}", f) for i, f in enumerate(getattr(shell, kind, []))]
        hooks.append(("class", type(shell)))
        for name in ("run_cell", "run_cell_async", "transform_cell", "run_ast_nodes", "run_code"):
            hooks += [(name, getattr(type(shell), name, None)), (name + "!", vars(shell).get(name))]
    kernel = getattr(shell, "kernel", None)
    if kernel is not None:
        hooks.append(("kernel", type(kernel)))
        hooks += [(f"handler {k}", v) for k, v in getattr(kernel, "shell_handlers", {}).items()]
        session = getattr(kernel, "session", None)
        hooks += [
            ("session", type(session)),
            ("send", getattr(session, "__dict__", {}).get("send")),
        ]
        for name in ("do_execute", "execute_request", "send_response"):
            hooks += [
                (name, getattr(type(kernel), name, None)),
                (name + "!", vars(kernel).get(name)),
            ]
    prints["the kernel's input hooks"] = _fingerprint(hooks)
    return prints
