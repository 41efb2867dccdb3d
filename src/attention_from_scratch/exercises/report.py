"""What a check reports: the results a learner reads, and the line the grader parses.

:func:`~attention_from_scratch.exercises.check` returns an :class:`ExerciseResult`. When
``tools/grade.py`` grades a notebook, the kernel prints a :class:`SetupReport` before the
submission's cells and a :class:`GraderReport` in each check cell, each as one JSON line
(:meth:`to_json`); the grader reads them back with :meth:`from_json`. Both sides import this
one module, so the format is written once. ``from_json`` trusts nothing: the line was printed
in a kernel that the submission's code controls, so any field of the wrong type, or a field
missing or unexpected, raises ``ValueError``.

This module imports only the standard library: the grader loads a fresh copy of it from its
file, away from anything the submission could have changed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

CHECK_FIELDS = ("name", "title", "points", "passed", "hint", "reason", "hidden")
EXERCISE_FIELDS = ("label", "earned", "possible", "manual_points", "error", "checks")


def format_points(points: float) -> str:
    """Points as the book prints them: ``2``, ``0.5``.

    Introduced in chapter 1.
    """
    return f"{points:g}"


def one_line(text: object, limit: int = 200) -> str:
    """``text`` on one line, cut to ``limit`` characters (a reason, an error).

    Introduced in chapter 1.
    """
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
        return {name: getattr(self, name) for name in CHECK_FIELDS}

    @classmethod
    def from_dict(cls, data: object) -> CheckResult:
        """The result written by :meth:`to_dict`.

        Raises:
            ValueError: a field is missing, unexpected or of the wrong type.
        """
        fields = _fields(data, CHECK_FIELDS, "a check's result")
        return cls(
            _text(fields["name"], "name"),
            _text(fields["title"], "title"),
            _number(fields["points"], "points"),
            _flag(fields["passed"], "passed"),
            _text(fields["hint"], "hint"),
            _text(fields["reason"], "reason"),
            _flag(fields["hidden"], "hidden"),
        )


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
        """A JSON-ready dictionary (``earned`` and ``possible`` included, for reading)."""
        return {
            "label": self.label,
            "earned": self.earned,
            "possible": self.possible,
            "manual_points": self.manual_points,
            "error": self.error,
            "checks": [c.to_dict() for c in self.checks],
        }

    @classmethod
    def from_dict(cls, data: object) -> ExerciseResult:
        """The result written by :meth:`to_dict`; ``earned`` and ``possible`` are recomputed
        from the checks, never read.

        Raises:
            ValueError: a field is missing, unexpected or of the wrong type.
        """
        fields = _fields(data, EXERCISE_FIELDS, "an exercise's result")
        checks = fields["checks"]
        if type(checks) is not list:
            raise ValueError(f"checks: expected a list, got {type(checks).__name__}")
        return cls(
            _text(fields["label"], "label"),
            tuple(CheckResult.from_dict(item) for item in checks),
            _number(fields["manual_points"], "manual_points"),
            _text(fields["error"], "error"),
        )

    def __repr__(self) -> str:
        return (
            f"ExerciseResult({self.label!r}, earned={format_points(self.earned)}, "
            f"possible={format_points(self.possible)})"
        )

    def _ipython_display_(self) -> None:
        # `check(...)` is the last line of its cell: the lines are already printed, so the
        # notebook should not echo the result object below them.
        return None


@dataclass(frozen=True)
class SetupReport:
    """What the grader's setup cell prints before any cell of the submission.

    Introduced in chapter 1.

    Args:
        error: why the checks could not be loaded ("" when they were).
        fingerprints: hashed identities of what the checks rely on, by name.
    """

    error: str
    fingerprints: Mapping[str, int]

    def to_json(self) -> str:
        """One line of JSON."""
        return json.dumps({"error": self.error, "fingerprints": dict(self.fingerprints)})

    @classmethod
    def from_json(cls, line: str) -> SetupReport:
        """The report printed by :meth:`to_json`.

        Raises:
            ValueError: the line is not such a report.
        """
        fields = _fields(_parse(line), ("error", "fingerprints"), "a setup report")
        return cls(_text(fields["error"], "error"), _prints(fields["fingerprints"]))


@dataclass(frozen=True)
class GraderReport:
    """What each of the grader's check cells prints: results, differences, fingerprints.

    Introduced in chapter 1.

    Args:
        results: one result per exercise the cell checked, from fresh checks.
        findings: what differed between the checks the submission could reach and fresh
            copies (empty when nothing did).
        fingerprints: hashed identities of what the checks rely on, by name.
    """

    results: tuple[ExerciseResult, ...]
    findings: tuple[str, ...]
    fingerprints: Mapping[str, int]

    def to_json(self) -> str:
        """One line of JSON."""
        return json.dumps(
            {
                "results": [result.to_dict() for result in self.results],
                "findings": list(self.findings),
                "fingerprints": dict(self.fingerprints),
            }
        )

    @classmethod
    def from_json(cls, line: str) -> GraderReport:
        """The report printed by :meth:`to_json`.

        Raises:
            ValueError: the line is not such a report.
        """
        fields = _fields(_parse(line), ("results", "findings", "fingerprints"), "a report")
        results, findings = fields["results"], fields["findings"]
        if type(results) is not list:
            raise ValueError(f"results: expected a list, got {type(results).__name__}")
        if type(findings) is not list:
            raise ValueError(f"findings: expected a list, got {type(findings).__name__}")
        return cls(
            tuple(ExerciseResult.from_dict(item) for item in results),
            tuple(_text(item, "findings") for item in findings),
            _prints(fields["fingerprints"]),
        )


def _parse(line: object) -> object:
    if not isinstance(line, str):
        raise ValueError(f"line: expected a str, got {type(line).__name__}")
    try:
        return json.loads(line)
    except ValueError as error:
        raise ValueError(f"line: expected one line of JSON, got {line[:60]!r}") from error


def _fields(data: object, names: tuple[str, ...], what: str) -> dict[str, Any]:
    if type(data) is not dict:
        raise ValueError(f"{what}: expected a JSON object, got {type(data).__name__}")
    if set(data) != set(names):
        raise ValueError(f"{what}: expected the fields {list(names)}, got {sorted(data)}")
    return data


def _text(value: object, name: str) -> str:
    if type(value) is not str:
        raise ValueError(f"{name}: expected a str, got {type(value).__name__}")
    return value


def _flag(value: object, name: str) -> bool:
    if type(value) is not bool:
        raise ValueError(f"{name}: expected true or false, got {value!r}")
    return value


def _number(value: object, name: str) -> float:
    if type(value) not in (int, float) or not math.isfinite(value):  # type: ignore[arg-type]
        raise ValueError(f"{name}: expected a finite number, got {value!r}")
    return float(value)  # type: ignore[arg-type]


def _prints(value: object) -> dict[str, int]:
    if type(value) is not dict or any(
        type(key) is not str or type(item) is not int for key, item in value.items()
    ):
        raise ValueError("fingerprints: expected an object of names and integers")
    return dict(value)
