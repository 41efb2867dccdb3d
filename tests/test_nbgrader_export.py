"""The nbgrader course: nbgrader's own generate_assignment, autograde and generate_feedback on
the export; on the book's own notebooks (full marks, the untouched release, one exercise
broken) they give, per exercise, the points `make grade` gives, and so does grading the course's
submissions outside the kernel (`tools/grade.py --nbgrader`); nothing of the grader's side
reaches a release or a feedback file."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import grader  # noqa: E402
import nbgrader_env  # noqa: E402
import nbgrader_export  # noqa: E402
import student_edition  # noqa: E402

CHAPTER = ROOT / "book" / "01_simplified_attention.ipynb"
ASSIGNMENT = "ch1"
BROKEN = "ch1-ex-temperature"
GRADED = ROOT / "grading" / "ch1.py"


def nbgrader(python: Path, course: Path, *args: str) -> str:
    # nbgrader starts alembic by name: its environment's scripts come first on the PATH.
    env = {**os.environ, "PATH": f"{python.parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [str(python), "-m", "nbgrader", *args],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return done.stdout + done.stderr


def graders_lines(text: str) -> list[str]:
    """Lines of the grader's side of the chapter (its draws, references, rubrics) in a text."""
    lines = [line.strip() for line in GRADED.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if len(line) > 30 and line in text]


def broken(nb: nbformat.NotebookNode, marker: str) -> nbformat.NotebookNode:
    """The notebook with the first answer cell of BROKEN raising instead of answering."""
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if marker == "nbgrader" and grade_id == f"{BROKEN}-answer-1":
            cell.source = 'raise RuntimeError("not done")'
            return nb
    inside = False
    for cell in nb.cells:
        if cell.cell_type == "markdown" and f"solution-start}} {BROKEN}" in cell.source:
            inside = True
        elif inside and cell.cell_type == "code":
            cell.source = 'raise RuntimeError("not done")'
            return nb
    raise AssertionError(f"no answer cell of {BROKEN}")


@pytest.mark.slow
def test_nbgrader_scores_each_exercise_as_make_grade_does(tmp_path: Path) -> None:
    python = nbgrader_env.python()  # made in the background since the session began
    course = tmp_path / "course"
    nbgrader_export.export(course, [1])
    assert (course / "nbgrader_config.py").is_file()
    nbgrader(python, course, "generate_assignment", ASSIGNMENT, "--force")
    source = nbformat.read(course / "source" / ASSIGNMENT / CHAPTER.name, as_version=4)
    release = nbformat.read(course / "release" / ASSIGNMENT / CHAPTER.name, as_version=4)
    # Nothing of the grader's side reaches the student version; it has no hidden test at all.
    released = nbformat.writes(release)
    assert "BEGIN HIDDEN TESTS" not in released and graders_lines(released) == []
    students = {
        "full": source,
        "empty": release,
        "broken": broken(copy.deepcopy(source), "nbgrader"),
    }
    for student, nb in students.items():
        folder = course / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / CHAPTER.name)
    log = nbgrader(python, course, "autograde", ASSIGNMENT, "--create", "--force")
    # An untouched release raises no false alarm (jupyter/nbgrader#1961).
    assert "has changed" not in log
    script = (
        "import json, sys\nfrom nbgrader.api import Gradebook\n"
        f"with Gradebook('sqlite:///{course / 'gradebook.db'}') as gb:\n"
        "    out = {s: {g.name: g.score for g in gb.find_submission_notebook("
        f"'{CHAPTER.stem}', '{ASSIGNMENT}', s).grades if not g.name.endswith('-written')}}\n"
        "        for s in sys.argv[1:]}\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run(
        [str(python), "-c", script, *students],
        capture_output=True,
        text=True,
        check=True,
    )
    by_nbgrader = json.loads(done.stdout)
    # The feedback nbgrader writes for students prints every test cell: nothing of ours.
    nbgrader(python, course, "generate_feedback", ASSIGNMENT, "--force")
    for feedback in course.glob(f"feedback/*/{ASSIGNMENT}/*.html"):
        assert graders_lines(feedback.read_text(encoding="utf-8")) == [], feedback

    # make grade on the book's own notebooks: the chapter, its student edition, one broken.
    book = nbformat.read(CHAPTER, as_version=4)
    folder = tmp_path / "make-grade"
    folder.mkdir()
    nbformat.write(book, folder / "full.ipynb")
    nbformat.write(student_edition.student_notebook(book), folder / "empty.ipynb")
    nbformat.write(broken(nbformat.read(CHAPTER, as_version=4), "book"), folder / "broken.ipynb")
    sandbox = "bwrap" if grader.sandbox_problem() is None else "none"
    secret = tmp_path / "secret"
    rows = grader.grade_folder(folder, sandbox=sandbox, secret_path=secret)
    by_make_grade = {
        Path(row.submission).stem: {
            label: exercise.earned for label, exercise in row.exercises.items()
        }
        for row in rows
    }
    assert by_nbgrader == by_make_grade
    assert sum(by_nbgrader["full"].values()) > 0 == sum(by_nbgrader["empty"].values())
    assert by_nbgrader["broken"][BROKEN] == 0 < by_nbgrader["full"][BROKEN]
    # The points that count: the course's submissions graded outside the students' kernels.
    outside = grader.grade_nbgrader(course, ASSIGNMENT, sandbox=sandbox, secret_path=secret)
    by_grader = {
        row.submission.split("/")[0]: {
            label: exercise.earned for label, exercise in row.exercises.items()
        }
        for row in outside
    }
    assert by_grader == by_make_grade
    assert (course / "grades" / ASSIGNMENT / "grades.csv").is_file()


def test_a_kernel_chapters_answer_cells_hold_the_stubs_kernel_then_the_solutions() -> None:
    """Chapter 8's answers are Triton kernels, which `tools/grade.py --nbgrader` reads from
    the cells: the source version's last definition is the book's solution (which earns full
    marks: tests/test_exercises_ch8.py), the release's is the stub's, whose signature the
    grader accepts."""
    import re

    from grader import kernels

    chapter = nbformat.read(ROOT / "book" / "08_fused_attention.ipynb", as_version=4)
    book = kernels.extract([cell.source for cell in chapter.cells if cell.cell_type == "code"])
    source = nbgrader_export.nbgrader_notebook(chapter, 8)
    cells = [cell.source for cell in source.cells if cell.cell_type == "code"]
    # What nbgrader's ClearSolutions leaves of each answer cell in the release.
    solution = re.compile(r"### BEGIN SOLUTION\n.*?### END SOLUTION", re.DOTALL)
    release = [solution.sub("# YOUR CODE HERE", cell) for cell in cells]
    points = [cell.metadata.get("nbgrader", {}).get("points") for cell in source.cells]
    assert sum(p for p in points if p) == 9
    exported = kernels.extract(cells)
    for exercise in grader.load_chapter(8):
        assert kernels.problem(kernels.extract(release), exercise) is None, exercise.label
        assert exported.sources[exercise.kernel] == book.sources[exercise.kernel]
