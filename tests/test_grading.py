"""The grader (`make grade`): fresh kernels, timeouts, a CSV row per file, answers judged
outside the kernel, and full marks for the book's own chapters.

The reference chapters are graded once per test session (two at a time) and shared by every
test that needs them; that run also proves each chapter runs top to bottom without a cell
raising. Every test here that grades (a kernel running a notebook) is marked slow; the parts
of the grader that need no kernel are tested in tests/test_grading_grades.py.
"""

from __future__ import annotations

import csv
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "exercise_fixtures"
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(FIXTURES))

import exercise_table  # noqa: E402
import grader  # noqa: E402
import student_edition  # noqa: E402
from make_fixture import write_fixture  # noqa: E402

from attention_from_scratch.exercises import all_exercises  # noqa: E402

GRADING = FIXTURES / "grading"

CHAPTERS = student_edition.chapter_notebooks(ROOT)
# Each kernel in its sandbox where bubblewrap runs (Linux); elsewhere (macOS and Windows CI)
# without isolation. tests/test_grading_sandbox.py tests the sandbox itself.
SANDBOX = "bwrap" if grader.sandbox_problem() is None else "none"
MUTATED = "mutated.ipynb"


def read_csv(path: Path) -> dict[str, dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return {row["submission"]: row for row in csv.DictReader(handle)}


# ------------------------------------------------------------------- small fixture submissions


FORGER = """\
import torch

class Anything:
    def __eq__(self, other):
        return True

def double(x):
    return Anything()

# What a forger might try on the old in-kernel checks: none of it reaches the grader.
torch.allclose = lambda *args, **kwargs: True
torch.equal = lambda *args, **kwargs: True
import sys
sys.settrace(None)
print('{"label": "ch0-ex-double", "earned": 3, "possible": 3}')
"""


@pytest.fixture(scope="module")
def fixture_grades(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("submissions")
    write_fixture(folder / "good.ipynb")
    write_fixture(folder / "wrong.ipynb", double="def double(x):\n    return (x * 2).float()\n")
    write_fixture(folder / "raising.ipynb", double="raise RuntimeError('not yet')\n")
    write_fixture(folder / "loop.ipynb", total="while True:\n    pass\n")
    write_fixture(folder / "forged.ipynb", double=FORGER)
    # An answer that kills its kernel when the grader calls it (a crash, running out of
    # memory): it costs only its own exercise.
    write_fixture(
        folder / "crasher.ipynb",
        double="import os\n\ndef double(x):\n    os._exit(1)\n",
    )
    (folder / "notes.txt").write_text("not a notebook")
    (folder / "broken.ipynb").write_text("{ this is not json")
    grader.grade_folder(
        folder,
        sandbox=SANDBOX,
        timeout=20,
        workers=2,
        grading_dir=GRADING,
        secret_path=folder.parent / "secret",
    )
    return folder


@pytest.mark.slow
def test_a_correct_submission_gets_every_point(fixture_grades: Path) -> None:
    row = read_csv(fixture_grades / "grades.csv")["good.ipynb"]
    assert (row["ch0-ex-double"], row["ch0-ex-total"]) == ("3", "1")
    assert (row["total"], row["possible"], row["status"]) == ("4", "4", "ok")


@pytest.mark.slow
def test_a_wrong_answer_loses_only_its_points(fixture_grades: Path) -> None:
    row = read_csv(fixture_grades / "grades.csv")["wrong.ipynb"]
    # Twice the values, but float32 where float64 came in: the dtype check fails.
    assert (row["ch0-ex-double"], row["ch0-ex-total"], row["total"]) == ("2", "1", "3")


@pytest.mark.slow
def test_a_raising_answer_loses_only_its_exercise(fixture_grades: Path) -> None:
    row = read_csv(fixture_grades / "grades.csv")["raising.ipynb"]
    assert (row["ch0-ex-double"], row["ch0-ex-total"], row["total"]) == ("0", "1", "1")
    assert row["notes"] == "1 cell(s) raised"
    feedback = (fixture_grades / "feedback" / "raising.md").read_text()
    assert "RuntimeError: not yet" in feedback
    assert "name 'double' is not defined" in feedback


@pytest.mark.slow
def test_an_infinite_loop_is_stopped_and_reported(fixture_grades: Path) -> None:
    rows = read_csv(fixture_grades / "grades.csv")
    row = rows["loop.ipynb"]
    assert row["status"] == "timeout after 20 s"
    # What the notebook defined before the loop is still graded; the loop's exercise is not.
    assert (row["ch0-ex-double"], row["ch0-ex-total"]) == ("3", "0")
    assert rows["good.ipynb"]["status"] == "ok"


@pytest.mark.slow
def test_an_answer_that_kills_the_kernel_loses_only_its_exercise(fixture_grades: Path) -> None:
    row = read_csv(fixture_grades / "grades.csv")["crasher.ipynb"]
    assert (row["ch0-ex-double"], row["ch0-ex-total"], row["status"]) == ("0", "1", "ok")
    feedback = (fixture_grades / "feedback" / "crasher.md").read_text()
    assert "the kernel died while its calls ran" in feedback


@pytest.mark.slow
def test_a_forger_earns_nothing_without_any_detection(fixture_grades: Path) -> None:
    """An object equal to anything, a patched torch, a disabled tracer and a printed result
    change nothing: the grader reads only the numbers that come back, and judges them in its
    own process."""
    row = read_csv(fixture_grades / "grades.csv")["forged.ipynb"]
    assert (row["ch0-ex-double"], row["ch0-ex-total"], row["total"]) == ("0", "1", "1")
    assert row["status"] == "ok"
    feedback = (fixture_grades / "feedback" / "forged.md").read_text()
    assert "should be a tensor, got a Anything" in feedback


@pytest.mark.slow
def test_unreadable_and_non_notebook_files_are_rows_not_crashes(fixture_grades: Path) -> None:
    rows = read_csv(fixture_grades / "grades.csv")
    assert rows["broken.ipynb"]["status"] == "unreadable"
    assert rows["notes.txt"]["status"] == "not a notebook"
    assert rows["broken.ipynb"]["total"] == rows["notes.txt"]["total"] == ""


@pytest.mark.slow
def test_the_csv_has_the_documented_columns(fixture_grades: Path) -> None:
    with (fixture_grades / "grades.csv").open(newline="") as handle:
        header = next(csv.reader(handle))
    assert header == [
        "submission",
        "ch0-ex-double",
        "ch0-ex-total",
        "total",
        "possible",
        "status",
        "notes",
        "isolation",
    ]


@pytest.mark.slow
def test_feedback_lists_checks_reasons_hints_and_human_graded_exercises(
    fixture_grades: Path,
) -> None:
    feedback = (fixture_grades / "feedback" / "wrong.md").read_text()
    assert "- pass: doubles any tensor" in feedback
    assert "- FAIL: keeps the dtype" in feedback
    assert "should have dtype torch.float64, got torch.float32 (for float64)" in feedback
    assert "Hint: Return a tensor of the input's dtype." in feedback
    assert "ch0-ex-explain: 2 points" in feedback
    assert sorted(p.name for p in (fixture_grades / "feedback").iterdir()) == [
        "broken.md",
        "crasher.md",
        "forged.md",
        "good.md",
        "loop.md",
        "raising.md",
        "wrong.md",
    ]


@pytest.mark.slow
def test_the_submission_files_are_left_untouched(tmp_path: Path) -> None:
    folder = tmp_path / "submissions"
    folder.mkdir()
    answer = "def double(x):\n    return x * 2\n\nopen('x', 'w').close()\n"
    path = write_fixture(folder / "a.ipynb", double=answer)
    before = path.read_bytes()
    grader.grade_folder(
        folder,
        timeout=20,
        workers=1,
        grading_dir=GRADING,
        secret_path=tmp_path / "secret",
        sandbox=SANDBOX,
    )
    assert path.read_bytes() == before
    # The file the submission wrote landed in its temporary copy, not next to it.
    assert not (folder / "x").exists()


# ------------------------------------------------------------------ the book's own chapters


def auto_graded() -> set[str]:
    return {exercise.label for exercise in grader.load_all() if exercise.checks}


def mutate(nb: Any) -> tuple[str, str]:
    """Give the last auto-graded exercise a raising answer and the one before a wrong one."""
    auto = auto_graded()
    labels = [label for label, _ in student_edition.solution_cells(nb) if label in auto]
    labels = list(dict.fromkeys(labels))
    wrong, raising = labels[-2], labels[-1]
    for label, cell in student_edition.solution_cells(nb):
        if cell.cell_type != "code":
            continue
        if label == wrong:
            # The student edition's stub: a function that returns `...`.
            cell.source = cell.metadata.get("exercise", {}).get("stub", "")
        elif label == raising:
            cell.source = "raise RuntimeError('not done')\n"
    return wrong, raising


def lightest_chapter_with_two_exercises() -> Path | None:
    auto = auto_graded()
    for path in CHAPTERS:  # the first chapters are the quickest to run
        nb = nbformat.read(path, as_version=4)
        labels = {label for label, _ in student_edition.solution_cells(nb)} & auto
        if len(labels) >= 2:
            return path
    return None


@pytest.fixture(scope="session")
def chapter_grades(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("chapters")
    for path in CHAPTERS:
        shutil.copy(path, folder / path.name)
    mutated = {}
    source = lightest_chapter_with_two_exercises()
    if source is not None:
        nb = nbformat.read(source, as_version=4)
        mutated = dict(zip(("wrong", "raising"), mutate(nb), strict=True))
        mutated["source"] = source.name
        nbformat.write(nb, folder / MUTATED)
    secret = tmp_path_factory.mktemp("secret") / "secret"
    rows = grader.grade_folder(folder, timeout=600, workers=2, sandbox=SANDBOX, secret_path=secret)
    return {
        "rows": {row.submission: row for row in rows},
        "csv": read_csv(folder / "grades.csv"),
        "mutated": mutated,
    }


@pytest.mark.slow
@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_chapter_gets_full_marks_without_a_cell_raising(
    chapter_grades: dict[str, Any], path: Path
) -> None:
    row = chapter_grades["rows"][path.name]
    assert row.status == "ok", row.notes
    assert row.errors == ()
    failed = {
        label: [c.hint for c in e.checks if not c.passed] or e.error
        for label, e in row.exercises.items()
        if e.earned != e.possible
    }
    assert failed == {}
    assert row.total == row.possible


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_exercise_of_a_chapter_is_declared_and_graded(path: Path) -> None:
    """Each exercise in the book is declared in the package (its self-check, if any) and
    graded by the grader (automatically, by hand, or both)."""
    nb = nbformat.read(path, as_version=4)
    labels = {label for label, _ in student_edition.solution_cells(nb)}
    assert labels <= {e.label for e in all_exercises()}
    graded = {e.label: e for e in grader.load_all()}
    assert labels <= set(graded), labels - set(graded)
    assert all(graded[label].points + graded[label].manual_points > 0 for label in labels)


@pytest.mark.slow
def test_a_wrong_and_a_raising_answer_lose_exactly_their_points(
    chapter_grades: dict[str, Any],
) -> None:
    mutated = chapter_grades["mutated"]
    assert mutated, "no chapter has two auto-graded exercises yet"
    reference = chapter_grades["rows"][mutated["source"]].exercises
    row = chapter_grades["rows"][MUTATED].exercises
    for label, exercise in reference.items():
        expected = 0 if label in (mutated["wrong"], mutated["raising"]) else exercise.possible
        assert row[label].earned == expected, label
    assert any("RuntimeError: not done" in e for e in chapter_grades["rows"][MUTATED].errors)


# ----------------------------------------------------------------------- the instructors' page


def test_the_instructors_table_matches_the_exercises() -> None:
    page = (ROOT / "book" / "instructors.md").read_text(encoding="utf-8")
    assert exercise_table.page_with_table(page, exercise_table.table()) == page, (
        "run `python tools/exercise_table.py` to update book/instructors.md"
    )


def test_the_instructors_page_fits_a_phone() -> None:
    """Tables of four short columns; prose lines short enough not to matter."""
    page = (ROOT / "book" / "instructors.md").read_text(encoding="utf-8")
    # Inline code does not wrap: a long span would run off a 390-pixel screen.
    spans = re.findall(r"(?<!`)`([^`\n]+)`(?!`)", page)
    assert [span for span in spans if len(span) > 32] == []
    for line in page.splitlines():
        if line.startswith("|"):
            assert line.count("|") <= 5, line
            cells = [cell.strip(" `*") for cell in line.strip("|").split("|")]
            assert sum(len(cell) for cell in cells) <= 40, line
