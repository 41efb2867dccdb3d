"""Build the student edition: `make student` writes _build/student/.

For every chapter notebook listed in _toc.yml it writes a copy in which:

- each solution (the cells between `solution-start` and `solution-end`) is replaced by the stub
  in its code cells' metadata `exercise.stub` (a default stub where there is none), and the
  explanations (markdown) inside solutions are removed;
- each check cell (tag `exercise-check`) is shown, under the comment "Run this cell to check
  your answer"; other hidden cells (tag `remove-cell`: checks that the numbers the book's text
  quotes are still the printed ones) are left out, as they test the book, not the student;
- no outputs, execution counts, exercise metadata or attachments of solution cells remain.

Then it refuses to finish if any non-trivial line of a solution is still in the edition, and
zips the notebooks into attention-from-scratch-student.zip for hand-out.

With a roster (the LMS's class list, as `make grade ROSTER=` reads it), it also writes one
edition per student into `students/<key>/`, each with its zip: the same notebooks, each
headed by a cell that names its student and carrying the student's key in its metadata
(`attention_from_scratch.student`), so that `make grade` draws that student's variant for it
even without the roster.

Usage: python tools/student_edition.py [--out _build/student] [--roster roster.csv]
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import yaml

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "_build" / "student"
ZIP_NAME = "attention-from-scratch-student.zip"
FOLDER_IN_ZIP = "attention-from-scratch-student"
DEFAULT_STUB = "# Write your answer here.\n"
CHECK_COMMENT = "# Run this cell to check your answer.\n"
# Where a per-student edition keeps its student's key, in the notebook's metadata.
METADATA_KEY = "attention_from_scratch"
SOLUTION_START = re.compile(r"^\s*(?:```|:::)\{solution-start\}\s*(\S+)")
SOLUTION_END = re.compile(r"^\s*(?:```|:::)\{solution-end\}")
# `:::{exercise}` with its `:label:` and other options, the statement, then `:::`.
EXERCISE = re.compile(
    r"^\s*:::\{exercise\}[^\n]*\n((?:\s*:[\w-]+:[^\n]*\n)*)(.*?)\n?:::\s*$", re.DOTALL
)
# A zip's entries carry this date, so the same notebooks always give the same file.
ZIP_DATE = (2026, 1, 1, 0, 0, 0)


def chapter_notebooks(root: Path = ROOT) -> list[Path]:
    """The notebooks listed in _toc.yml, in reading order."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))

    def walk(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            if "file" in node:
                yield node["file"]
            for value in node.values():
                yield from walk(value)
        elif isinstance(node, list):
            for item in node:
                yield from walk(item)

    paths = [root / f"{name}.ipynb" for name in walk(toc)]
    return [p for p in paths if p.is_file()]


def solution_cells(nb: Any) -> Iterator[tuple[str, Any]]:
    """Each cell inside a solution (markdown or code), with its exercise label."""
    label = None
    for cell in nb.cells:
        if cell.cell_type == "markdown" and (match := SOLUTION_START.match(cell.source)):
            label = match.group(1)
        elif cell.cell_type == "markdown" and SOLUTION_END.match(cell.source):
            label = None
        elif label is not None:
            yield label, cell


def _strip(cell: Any) -> None:
    cell.metadata.pop("exercise", None)
    cell.pop("attachments", None)
    if cell.cell_type == "code":
        cell.outputs = []
        cell.execution_count = None


def student_notebook(nb: Any) -> Any:
    """The student copy of a chapter notebook (the input is not changed)."""
    nb = copy.deepcopy(nb)
    cells = []
    label = None
    for cell in nb.cells:
        if cell.cell_type == "markdown" and (match := SOLUTION_START.match(cell.source)):
            label = match.group(1)
            cells.append(
                nbformat.v4.new_markdown_cell(
                    f"**Your answer** ({label}): write it in the cell below."
                )
            )
            continue
        if cell.cell_type == "markdown" and SOLUTION_END.match(cell.source):
            label = None
            continue
        if label is not None:
            if cell.cell_type != "code":
                continue  # explanations belong to the solution
            if "remove-cell" in cell.metadata.get("tags", []):
                continue  # a hidden guard of the book build, not an answer to write
            stub = cell.metadata.get("exercise", {}).get("stub") or DEFAULT_STUB
            cells.append(nbformat.v4.new_code_cell(stub))
            continue
        tags = cell.metadata.get("tags", [])
        if "remove-cell" in tags and "exercise-check" not in tags:
            continue  # a hidden guard of the book build (e.g. a quoted number's check)
        _strip(cell)
        if cell.cell_type == "markdown" and (match := EXERCISE.match(cell.source)):
            # Jupyter and Colab show directives as raw text: give the statement a plain title
            # (the grader reads the label from it).
            found = re.search(r":label:\s*(\S+)", match.group(1))
            title = f"**Exercise** (`{found.group(1)}`)" if found else "**Exercise**"
            cell.source = f"{title}\n\n{match.group(2).strip()}\n"
        tags = cell.metadata.get("tags", [])
        if cell.cell_type == "code" and "exercise-check" in tags:
            cell.metadata["tags"] = [t for t in tags if t not in {"remove-cell", "remove-input"}]
            cell.metadata.pop("jupyter", None)
            if not cell.source.startswith(CHECK_COMMENT):
                cell.source = CHECK_COMMENT + cell.source
        cells.append(cell)
    nb.cells = cells
    # Only what a kernel needs; nothing else of the book's metadata travels.
    nb.metadata = {k: v for k, v in nb.metadata.items() if k in {"kernelspec", "language_info"}}
    return nb


def solution_lines(nb: Any) -> set[str]:
    """Lines of the solutions that appear nowhere else in the chapter (long enough to tell)."""
    elsewhere = set()
    inside = {id(cell) for _, cell in solution_cells(nb)}
    for cell in nb.cells:
        if id(cell) not in inside:
            elsewhere.update(line.strip() for line in cell.source.splitlines())
        stub = cell.metadata.get("exercise", {}).get("stub", "")
        elsewhere.update(line.strip() for line in stub.splitlines())
    lines = set()
    for _, cell in solution_cells(nb):
        for line in cell.source.splitlines():
            line = line.strip()
            if len(line) >= 8 and line not in elsewhere:
                lines.add(line)
    return lines


def leaks(student: Any, lines: set[str]) -> list[str]:
    """Solution lines found as a line anywhere in the student notebook (cells, metadata)."""
    found = set()
    for cell in student.cells:
        texts = [cell.source, json.dumps(cell.metadata), json.dumps(cell.get("outputs", []))]
        for text in texts:
            found.update(line.strip() for line in text.splitlines())
            found.update(line.strip() for line in text.split("\\n"))
    found.update(line.strip() for line in json.dumps(student.metadata).split("\\n"))
    return sorted(lines & found)


def for_student(nb: Any, key: str) -> Any:
    """A copy of a student notebook for one student: a first cell naming them, and their key
    in the notebook's metadata (what ``make grade`` keys their variant by)."""
    nb = copy.deepcopy(nb)
    nb.metadata.setdefault(METADATA_KEY, {})["student"] = key
    header = nbformat.v4.new_markdown_cell(
        f"This notebook is {key}'s edition: hand it in as it is, under any file name. "
        "The grader tries your answers on inputs drawn for you."
    )
    nb.cells.insert(0, header)
    return nb


def write_zip(path: Path, notebooks: list[Path]) -> None:
    """The notebooks in one zip, in a folder of their own, the same bytes for the same input."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for notebook in notebooks:
            info = zipfile.ZipInfo(f"{FOLDER_IN_ZIP}/{notebook.name}", date_time=ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, notebook.read_bytes())


def build(out: Path = DEFAULT_OUT, root: Path = ROOT, students: list[str] = ()) -> list[Path]:
    """Write the student notebooks and the zip into ``out`` (and one edition per student key
    under ``out/students/``); return the notebooks' paths."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    editions: list[Any] = []
    for source in chapter_notebooks(root):
        nb = nbformat.read(source, as_version=4)
        student = student_notebook(nb)
        found = leaks(student, solution_lines(nb))
        if found:
            raise SystemExit(f"{source.name}: the student edition would show {found[:3]}")
        target = out / source.name
        nbformat.write(student, target)
        written.append(target)
        editions.append(student)
    write_zip(out / ZIP_NAME, written)
    for key in students:
        folder = out / "students" / slug(key)
        folder.mkdir(parents=True, exist_ok=True)
        theirs = []
        for path, student in zip(written, editions, strict=True):
            nbformat.write(for_student(student, key), folder / path.name)
            theirs.append(folder / path.name)
        write_zip(folder / ZIP_NAME, theirs)
    return written


def slug(key: str) -> str:
    """A folder name for a student's key (``ID=1234`` -> ``ID-1234``)."""
    return re.sub(r"[^A-Za-z0-9._@-]+", "-", key).strip("-") or "student"


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--roster", type=Path, help="the LMS's class list: also one edition per student"
    )
    args = parser.parse_args(argv)
    students: list[str] = []
    if args.roster is not None:
        sys.path.insert(0, str(ROOT / "tools"))
        import gradebook

        roster = gradebook.Roster.read(args.roster)
        students = [
            roster.student(row) for row in roster.rows if not roster.is_points_possible(row)
        ]
    written = build(args.out, students=students)
    print(f"Wrote {len(written)} notebooks and {args.out / ZIP_NAME}")
    if students:
        print(f"and an edition for each of {len(students)} students in {args.out / 'students'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
