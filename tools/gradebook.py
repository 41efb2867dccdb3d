"""A gradebook that an LMS imports: `make grade SUBMISSIONS=DIR ROSTER=roster.csv`.

The roster is the class list exported from the LMS, with one column added, `submission`: the
file name of each student's notebook in DIR (several names separated by `;` when a student
hands in one notebook per chapter). Every other column is copied through unchanged, so the
LMS finds its students by its own identifiers: Canvas by `ID`, `SIS User ID` or
`SIS Login ID` (keep `Student` and `Section` as its export has them), Moodle by the column
you choose when importing (`ID number`, `Email address`, ...).

`gradebook.csv` then has those columns and one per chapter graded, headed
`Attention from Scratch chN`, holding the auto-graded points the student earned in that
chapter's exercises. A roster row `Points Possible` (Canvas exports have one, under the
header) gets each chapter's possible points. A student with no graded notebook gets an empty
cell, which an LMS import leaves as it was, never a 0 typed for them.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from grader import Row  # tools/grader/, beside this file

SUBMISSION = "submission"
POINTS_POSSIBLE = "Points Possible"
COLUMN = "Attention from Scratch ch{}"
CHAPTER = re.compile(r"^ch(\d+)-ex-")
# The LMS identifiers that name a student for good, in the order they are preferred.
KEY_COLUMNS = ("ID", "SIS User ID", "SIS Login ID", "ID number", "Email address", "Username")


@dataclass(frozen=True)
class Roster:
    """The class list: its identity columns in order, and its rows."""

    columns: tuple[str, ...]
    rows: tuple[dict[str, str], ...]

    @staticmethod
    def read(path: str | Path) -> Roster:
        """Read a roster CSV (UTF-8, a byte-order mark allowed, as spreadsheets write it).

        Raises:
            ValueError: the file has no header or no `submission` column.
        """
        with Path(path).open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            header = [name.strip() for name in (reader.fieldnames or [])]
            if SUBMISSION not in header:
                raise ValueError(
                    f"ROSTER: expected a CSV whose header has a column {SUBMISSION!r} "
                    f"naming each student's notebook, got columns {header}"
                )
            rows = tuple(
                {key.strip(): (value or "").strip() for key, value in row.items() if key}
                for row in reader
            )
        return Roster(tuple(name for name in header if name != SUBMISSION), rows)

    def files(self, row: Mapping[str, str]) -> list[str]:
        """The notebook file names of one student."""
        return [name.strip() for name in row.get(SUBMISSION, "").split(";") if name.strip()]

    def student(self, row: Mapping[str, str]) -> str:
        """The key of one student's variant: the LMS's own identifier where the export has
        one (Canvas's `ID`, Moodle's `ID number`, ...), else the first column."""
        for name in (*KEY_COLUMNS, *self.columns):
            if row.get(name, "").strip():
                return f"{name}={row[name].strip()}"
        raise ValueError(f"ROSTER: a row with no identifier in any of {list(self.columns)}")

    def students_by_file(self) -> dict[str, str]:
        """Each notebook file name of the roster, with its student's key."""
        return {
            name: self.student(row)
            for row in self.rows
            if not self.is_points_possible(row)
            for name in self.files(row)
        }

    @staticmethod
    def is_points_possible(row: Mapping[str, str]) -> bool:
        """Canvas's second row, which holds each assignment's possible points."""
        return any(value == POINTS_POSSIBLE for value in row.values())


def _points(value: float) -> str:
    return f"{value:g}"


def by_chapter(row: Row) -> dict[int, tuple[float, float]]:
    """(earned, possible) auto-graded points per chapter of one graded notebook."""
    found: dict[int, tuple[float, float]] = {}
    for label, exercise in row.exercises.items():
        match = CHAPTER.match(label)
        if match is None:
            continue
        chapter = int(match.group(1))
        earned, possible = found.get(chapter, (0.0, 0.0))
        found[chapter] = (earned + exercise.earned, possible + exercise.possible)
    return found


def write_gradebook(path: str | Path, roster: Roster, graded: Iterable[Row]) -> list[str]:
    """Write ``path``; return warnings (a roster file not found, a notebook not in the roster).

    Args:
        path: the gradebook CSV to write.
        roster: the class list.
        graded: the grader's rows, one per submitted file.
    """
    graded_rows = {row.submission: row for row in graded}
    chapters = {name: by_chapter(row) for name, row in graded_rows.items()}
    possible: dict[int, float] = {}
    for points in chapters.values():
        for chapter, (_, most) in points.items():
            possible[chapter] = max(possible.get(chapter, 0.0), most)
    columns = [COLUMN.format(chapter) for chapter in sorted(possible)]
    warnings = []
    listed: set[str] = set()
    with Path(path).open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([*roster.columns, *columns])
        for student in roster.rows:
            identity = [student.get(name, "") for name in roster.columns]
            if roster.is_points_possible(student):
                writer.writerow(identity + [_points(possible[c]) for c in sorted(possible)])
                continue
            earned: dict[int, float] = {}
            for name in roster.files(student):
                listed.add(name)
                if name not in chapters:
                    warnings.append(f"{name}: in the roster, not among the submissions")
                    continue
                for chapter, (points, _) in chapters[name].items():
                    earned[chapter] = earned.get(chapter, 0.0) + points
            writer.writerow(
                identity + [_points(earned[c]) if c in earned else "" for c in sorted(possible)]
            )
    for name in sorted(set(graded_rows) - listed):
        warnings.append(f"{name}: graded, but no roster row names it")
    return warnings
