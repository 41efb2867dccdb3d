"""Export the exercises as an nbgrader course: `make nbgrader`.

Writes `_build/nbgrader/`, a course directory that nbgrader (0.9) uses as it is:

    nbgrader_config.py
    source/chN/<chapter>.ipynb      one assignment per chapter

Each chapter notebook is the student edition's (tools/student_edition.py: the same cells,
guards left out, the same stubs), with nbgrader's cell metadata:

- each solution code cell is an nbgrader *solution* cell: the stub, then the book's solution
  between `### BEGIN SOLUTION` and `### END SOLUTION` (nbgrader keeps the stub and removes
  the solution when it generates the student version);
- each check cell is an *autograder test* cell worth the exercise's auto-graded points: it
  runs the public self-check, the page's example, and fails when a check fails. It holds no
  hidden test, so nbgrader's feedback, which prints every test cell, shows nothing students
  could not already read (and autograding an untouched release prints no checksum warning,
  jupyter/nbgrader#1961);
- each exercise answered in words gets a *manually graded answer* cell worth its manual
  points, whose hidden solution is the rubric (nbgrader shows it to graders only).

nbgrader runs its tests in the student's own kernel, which the student's code controls: those
points check the page's example and can be forged. The points that count come from the
course's grader, which calls the answers on inputs of its own outside the student's reach:
`python tools/grade.py --nbgrader chN COURSE_DIR` grades the course's submitted notebooks
(book/instructors.md).

The exercises, stubs, checks and points are read from the same sources as the book, the
student edition and `make grade`; nothing is written twice.

Usage: python tools/nbgrader_export.py [--out _build/nbgrader] [CHAPTER ...]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

import nbformat
import student_edition  # tools/student_edition.py, beside this file
from student_edition import CHECK_COMMENT, DEFAULT_STUB, SOLUTION_END, SOLUTION_START

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "_build" / "nbgrader"
COURSE_ID = "attention-from-scratch"
CHECK = re.compile(r"check\(\s*[\"'](ch\d+-ex-[a-z0-9-]+)[\"']\s*\)")
FILE_CHAPTER = re.compile(r"^0*(\d+)_")

CONFIG = f'''# nbgrader's configuration for the course exported by tools/nbgrader_export.py.
c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "{COURSE_ID}"
# The stub above each solution stays; this line replaces the solution itself.
c.ClearSolutions.code_stub = {{"python": "# YOUR CODE HERE: replace each ... above."}}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
# Some chapters train a small model: leave each cell a few minutes.
c.ExecutePreprocessor.timeout = 600
'''

TEST_CELL = """{comment}from attention_from_scratch.exercises import check

assert check("{label}").passed, "a check of the page's example fails: see above"
"""


def _metadata(grade_id: str, *, solution: bool, grade: bool, points: float = 0) -> dict:
    data: dict[str, Any] = {
        "grade_id": grade_id,
        "solution": solution,
        "grade": grade,
        "locked": not solution,
        "schema_version": 3,
    }
    if grade:
        data["points"] = points
    return {"nbgrader": data}


def nbgrader_notebook(nb: Any, chapter: int) -> Any:
    """The nbgrader source version of one chapter (the input is not changed)."""
    from grader.graded import load_chapter  # tools/grader/, beside this file

    graded = {exercise.label: exercise for exercise in load_chapter(chapter)}
    student = student_edition.student_notebook(nb)
    # The student edition replaced each solution by its stubs, in order: pair them back up
    # with the solutions' code cells, read from the book's notebook.
    solutions: list[tuple[str, str, str]] = []  # (label, stub, solution)
    label = None
    for cell in nb.cells:
        if cell.cell_type == "markdown" and (match := SOLUTION_START.match(cell.source)):
            label = match.group(1)
        elif cell.cell_type == "markdown" and SOLUTION_END.match(cell.source):
            label = None
        elif label is not None and cell.cell_type == "code":
            if "remove-cell" in cell.metadata.get("tags", []):
                continue  # a hidden guard of the book build: the student edition drops it
            stub = cell.metadata.get("exercise", {}).get("stub") or DEFAULT_STUB
            solutions.append((label, stub, cell.source))
    cells, pending, answered = [], iter(solutions), {}
    for cell in student.cells:
        if cell.cell_type == "code" and cell.source in {stub for _, stub, _ in solutions}:
            label, stub, solution = next(pending)
            assert cell.source == stub, f"{label}: the stubs are out of order"
            answered[label] = answered.get(label, 0) + 1
            source = f"{stub.rstrip()}\n### BEGIN SOLUTION\n{solution.rstrip()}\n### END SOLUTION"
            cell.source = source
            cell.metadata.update(
                _metadata(f"{label}-answer-{answered[label]}", solution=True, grade=False)
            )
            cells.append(cell)
            continue
        match = CHECK.search(cell.source) if cell.cell_type == "code" else None
        if match and "exercise-check" in cell.metadata.get("tags", []):
            exercise = graded[match.group(1)]
            if not exercise.points:  # answered in words only: nothing to score here
                cells.append(cell)
                continue
            cell.source = TEST_CELL.format(comment=CHECK_COMMENT, label=exercise.label)
            cell.metadata.update(
                _metadata(exercise.label, solution=False, grade=True, points=exercise.points)
            )
            cells.append(cell)
            continue
        cells.append(cell)
        if cell.cell_type == "markdown" and cell.source.startswith("**Your answer**"):
            exercise = graded[re.search(r"\((ch\d+-ex-[a-z0-9-]+)\)", cell.source)[1]]
            if exercise.manual_points:
                written = nbformat.v4.new_markdown_cell(
                    "### BEGIN SOLUTION\n"
                    f"Rubric for graders ({exercise.manual_points:g} points): {exercise.rubric}\n"
                    "### END SOLUTION"
                )
                written.metadata.update(
                    _metadata(
                        f"{exercise.label}-written",
                        solution=True,
                        grade=True,
                        points=exercise.manual_points,
                    )
                )
                cells.append(nbformat.v4.new_markdown_cell("Explain in words:"))
                cells.append(written)
    student.cells = cells
    return student


def export(out: Path = DEFAULT_OUT, chapters: list[int] | None = None) -> list[Path]:
    """Write the course directory (every chapter, or ``chapters``); return the source
    notebooks written."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "nbgrader_config.py").write_text(CONFIG, encoding="utf-8")
    written = []
    for path in student_edition.chapter_notebooks(ROOT):
        chapter = int(FILE_CHAPTER.match(path.name)[1])
        if chapters is not None and chapter not in chapters:
            continue
        notebook = nbgrader_notebook(nbformat.read(path, as_version=4), chapter)
        target = out / "source" / f"ch{chapter}" / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook, target)
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("chapters", type=int, nargs="*", help="chapter numbers (default: all)")
    args = parser.parse_args(argv)
    written = export(args.out, args.chapters or None)
    print(f"Wrote an nbgrader course with {len(written)} assignments to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
