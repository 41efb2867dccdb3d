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

Usage: python tools/student_edition.py [--out _build/student]
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


def build(out: Path = DEFAULT_OUT, root: Path = ROOT) -> list[Path]:
    """Write the student notebooks and the zip into ``out``; return the notebooks' paths."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for source in chapter_notebooks(root):
        nb = nbformat.read(source, as_version=4)
        student = student_notebook(nb)
        found = leaks(student, solution_lines(nb))
        if found:
            raise SystemExit(f"{source.name}: the student edition would show {found[:3]}")
        target = out / source.name
        nbformat.write(student, target)
        written.append(target)
    with zipfile.ZipFile(out / ZIP_NAME, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in written:
            info = zipfile.ZipInfo(f"{FOLDER_IN_ZIP}/{path.name}", date_time=ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes())
    return written


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    written = build(args.out)
    print(f"Wrote {len(written)} notebooks and {args.out / ZIP_NAME}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
