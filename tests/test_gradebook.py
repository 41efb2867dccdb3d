"""The LMS gradebook: the roster's columns copied through, one column per chapter graded."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "exercise_fixtures"
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(FIXTURES))

import gradebook  # noqa: E402
import grader  # noqa: E402
from make_fixture import write_fixture  # noqa: E402

# The first columns of a Canvas gradebook export, its "Points Possible" row, and the one
# column an instructor adds.
CANVAS = (
    "Student,ID,SIS User ID,SIS Login ID,Section,submission\n"
    "    Points Possible,,,,,\n"
    '"Lovelace, Ada",101,S1,ada,A,ada-ch3.ipynb;ada-ch4.ipynb\n'
    '"Turing, Alan",102,S2,alan,A,alan-ch3.ipynb\n'
    '"Hopper, Grace",103,S3,grace,B,\n'
)


IDENTITY = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]


def graded(name: str, points: dict[str, tuple[float, float]]) -> grader.Row:
    """A row as the grader returns it, with exercises' (earned, possible)."""
    exercises = {
        label: grader.ExerciseScore(earned, possible)
        for label, (earned, possible) in points.items()
    }
    return grader.Row(name, "bwrap", exercises=exercises)


def read(path: Path) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def test_a_canvas_roster_gets_one_column_per_chapter_and_its_points_possible(
    tmp_path: Path,
) -> None:
    (tmp_path / "roster.csv").write_text(CANVAS, encoding="utf-8")
    roster = gradebook.Roster.read(tmp_path / "roster.csv")
    rows = [
        graded("ada-ch3.ipynb", {"ch3-ex-a": (2, 2), "ch3-ex-b": (1, 3)}),
        graded("ada-ch4.ipynb", {"ch4-ex-a": (4, 4)}),
        graded("alan-ch3.ipynb", {"ch3-ex-a": (0, 2), "ch3-ex-b": (3, 3)}),
        graded("stray.ipynb", {"ch3-ex-a": (2, 2), "ch3-ex-b": (3, 3)}),
    ]
    warnings = gradebook.write_gradebook(tmp_path / "gradebook.csv", roster, rows)
    assert read(tmp_path / "gradebook.csv") == [
        [*IDENTITY, "Attention from Scratch ch3", "Attention from Scratch ch4"],
        ["Points Possible", "", "", "", "", "5", "4"],
        ["Lovelace, Ada", "101", "S1", "ada", "A", "3", "4"],
        ["Turing, Alan", "102", "S2", "alan", "A", "3", ""],
        # No notebook: left empty, so the import keeps what the LMS had.
        ["Hopper, Grace", "103", "S3", "grace", "B", "", ""],
    ]
    assert warnings == ["stray.ipynb: graded, but no roster row names it"]


def test_a_roster_file_that_was_not_submitted_is_reported(tmp_path: Path) -> None:
    (tmp_path / "roster.csv").write_text(
        "\ufeffID number,Email address,submission\n7,ada@example.org,missing.ipynb\n",
        encoding="utf-8",
    )
    roster = gradebook.Roster.read(tmp_path / "roster.csv")
    assert roster.columns == ("ID number", "Email address")  # the spreadsheet's BOM is gone
    warnings = gradebook.write_gradebook(tmp_path / "gradebook.csv", roster, [])
    assert warnings == ["missing.ipynb: in the roster, not among the submissions"]
    assert read(tmp_path / "gradebook.csv") == [
        ["ID number", "Email address"],
        ["7", "ada@example.org"],
    ]


def test_a_roster_without_the_submission_column_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "roster.csv").write_text("Student,ID\nAda,1\n", encoding="utf-8")
    with pytest.raises(
        ValueError, match=r"ROSTER: expected .* column 'submission'.*\['Student', 'ID'\]"
    ):
        gradebook.Roster.read(tmp_path / "roster.csv")


@pytest.mark.slow
def test_make_grade_with_a_roster_agrees_with_grades_csv(tmp_path: Path) -> None:
    folder = tmp_path / "submissions"
    folder.mkdir()
    write_fixture(folder / "ada.ipynb")
    write_fixture(folder / "alan.ipynb", double="doubled = base + 2\n")
    roster = tmp_path / "roster.csv"
    roster.write_text("Student,ID,submission\nAda,1,ada.ipynb\nAlan,2,alan.ipynb\n")
    sandbox = "bwrap" if grader.sandbox_problem() is None else "none"
    argv = [str(folder), "--sandbox", sandbox, "--timeout", "60", "--roster", str(roster)]
    argv += ["--grading", str(FIXTURES / "grading"), "--secret", str(tmp_path / "secret")]
    assert grader.main(argv) == 0
    with (folder / "grades.csv").open(newline="") as handle:
        totals = {row["submission"]: row["total"] for row in csv.DictReader(handle)}
    # Auto-graded points only: double is worth 3, total 1; Alan's cell defines no double.
    assert totals == {"ada.ipynb": "4", "alan.ipynb": "1"}
    assert read(folder / "gradebook.csv") == [
        ["Student", "ID", "Attention from Scratch ch0"],
        ["Ada", "1", "4"],
        ["Alan", "2", "1"],
    ]
