"""What the grader writes: one row per submitted file, grades.csv and the feedback files."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class CheckScore:
    """One graded check of one submission, as the grader judged it."""

    name: str
    title: str
    points: float
    passed: bool
    hint: str
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary."""
        return {
            "name": self.name,
            "title": self.title,
            "points": self.points,
            "passed": self.passed,
            "hint": self.hint,
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CheckScore:
        """The result written by :meth:`to_dict`."""
        return cls(
            str(data["name"]),
            str(data["title"]),
            float(data["points"]),
            bool(data["passed"]),
            str(data["hint"]),
            str(data["reason"]),
        )


def points_text(value: float | None) -> str:
    """Points as grades.csv writes them: ``4``, ``0.5``, or empty for none."""
    return "" if value is None else f"{value:g}"


@dataclass(frozen=True)
class ExerciseScore:
    """The grader's score of one auto-graded exercise of a submission.

    Args:
        earned: the points earned.
        possible: the points possible.
        checks: one result per check, as the grader judged it.
        error: why the exercise was not checked ("" when it was).
    """

    earned: float
    possible: float
    checks: tuple[CheckScore, ...] = ()
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary."""
        return {
            "earned": self.earned,
            "possible": self.possible,
            "checks": [check.to_dict() for check in self.checks],
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ExerciseScore:
        """The score written by :meth:`to_dict`."""
        return cls(
            float(data["earned"]),
            float(data["possible"]),
            tuple(CheckScore.from_dict(check) for check in data["checks"]),
            str(data["error"]),
        )


@dataclass(frozen=True)
class ManualExercise:
    """An exercise of the submission's chapters graded by a human, and its points."""

    label: str
    points: float


@dataclass(frozen=True)
class Row:
    """One submitted file, graded: a row of grades.csv and its feedback.

    Args:
        submission: the file's name.
        isolation: how its kernel was isolated (``bwrap``, or ``none: not isolated``).
        status: ``ok``, or what went wrong (``timeout after 600 s``, ``unreadable``, ...).
        notes: details of the status, cells that raised, output dropped.
        exercises: the score of each auto-graded exercise of its chapters, by label.
        manual: the exercises of its chapters graded by a human.
        errors: the cells that raised, ``cell N: Name: message``.
        total: the points earned (None when the file was not graded).
        possible: the points possible (None when the file was not graded).
    """

    submission: str
    isolation: str
    status: str = "ok"
    notes: str = ""
    exercises: Mapping[str, ExerciseScore] = field(default_factory=dict)
    manual: tuple[ManualExercise, ...] = ()
    errors: tuple[str, ...] = ()
    total: float | None = None
    possible: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary (the process that grades a notebook sends this)."""
        return {
            "submission": self.submission,
            "isolation": self.isolation,
            "status": self.status,
            "notes": self.notes,
            "exercises": {label: score.to_dict() for label, score in self.exercises.items()},
            "manual": [{"label": m.label, "points": m.points} for m in self.manual],
            "errors": list(self.errors),
            "total": self.total,
            "possible": self.possible,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Row:
        """The row written by :meth:`to_dict`."""
        return cls(
            submission=str(data["submission"]),
            isolation=str(data["isolation"]),
            status=str(data["status"]),
            notes=str(data["notes"]),
            exercises={
                label: ExerciseScore.from_dict(score) for label, score in data["exercises"].items()
            },
            manual=tuple(ManualExercise(m["label"], float(m["points"])) for m in data["manual"]),
            errors=tuple(str(error) for error in data["errors"]),
            total=None if data["total"] is None else float(data["total"]),
            possible=None if data["possible"] is None else float(data["possible"]),
        )


def write_csv(path: Path, rows: Sequence[Row]) -> None:
    """One row per file; one column per auto-graded exercise seen in any submission."""
    labels: list[str] = []
    for row in rows:
        labels += [label for label in row.exercises if label not in labels]
    order = {label: i for i, label in enumerate(labels)}
    labels.sort(key=lambda label: (int(label[2:].split("-", 1)[0]), order[label]))
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            ["submission", *labels, "total", "possible", "status", "notes", "isolation"]
        )
        for row in rows:
            points = [
                points_text(row.exercises[label].earned) if label in row.exercises else ""
                for label in labels
            ]
            writer.writerow(
                [
                    row.submission,
                    *points,
                    points_text(row.total),
                    points_text(row.possible),
                    row.status,
                    row.notes,
                    row.isolation,
                ]
            )


def feedback_text(row: Row) -> str:
    """The Markdown feedback for one submission."""
    lines = [f"# Feedback: {row.submission}", ""]
    if row.possible is not None:
        lines.append(
            f"Auto-graded points: {points_text(row.total)} of {points_text(row.possible)}."
        )
    if row.status != "ok":
        lines.append(f"Status: {row.status}. {row.notes}".strip())
    if row.isolation != "bwrap":
        lines.append("Graded without isolation: the instructor chose to trust every submission.")
    lines.append("")
    for label, exercise in row.exercises.items():
        lines.append(
            f"## {label}: {points_text(exercise.earned)} of {points_text(exercise.possible)}"
        )
        lines.append("")
        if exercise.error:
            lines.append(f"- Not checked: {exercise.error}.")
        for check in exercise.checks:
            if check.passed:
                lines.append(f"- pass: {check.title}")
            else:
                lines.append(f"- FAIL: {check.title}")
                if check.reason:
                    lines.append(f"  - {check.reason}")
                lines.append(f"  - Hint: {check.hint}")
        lines.append("")
    if row.manual:
        lines.append("## Graded by your instructor")
        lines.append("")
        for item in row.manual:
            lines.append(f"- {item.label}: {points_text(item.points)} points")
        lines.append("")
    if row.errors:
        lines.append("## Cells that raised an error")
        lines.append("")
        lines += [f"- {error}" for error in row.errors]
        lines.append("")
    return "\n".join(lines)


def write_feedback(folder: Path, rows: Sequence[Row]) -> None:
    """``folder/<name>.md`` for every notebook among the rows."""
    folder.mkdir(exist_ok=True)
    for row in rows:
        if row.submission.endswith(".ipynb"):
            name = Path(row.submission).stem + ".md"
            (folder / name).write_text(feedback_text(row), encoding="utf-8")
