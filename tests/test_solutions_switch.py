"""`make book SOLUTIONS=hidden`: the book published without the exercises' solutions, in its
pages, behind its download buttons and in what its launch buttons open."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import student_edition  # noqa: E402

CHAPTER = ROOT / "book" / "01_simplified_attention.ipynb"
# The book's own tools: installed by requirements.txt (`make test`), not by the package's
# `test` extra that the operating-system matrix of the GitHub CI installs.
pytest.importorskip("jupyter_book", reason="building the book needs requirements.txt")


def build_page(out: Path, solutions: str) -> subprocess.CompletedProcess[str]:
    # The command beside this Python (jupyter-book.exe on Windows).
    command = shutil.which("jupyter-book", path=str(Path(sys.executable).parent))
    assert command is not None, "jupyter-book is not installed beside this Python"
    build = [command, "build", str(CHAPTER), "--path-output", str(out)]
    return subprocess.run(
        [*build, "--config", str(ROOT / "_config.yml")],
        cwd=ROOT,
        env={**os.environ, "BOOK_SOLUTIONS": solutions},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def page_text(out: Path) -> tuple[str, BeautifulSoup]:
    html = out / "_build" / "_page" / CHAPTER.stem / "html" / f"{CHAPTER.stem}.html"
    soup = BeautifulSoup(html.read_text(encoding="utf-8"), "html.parser")
    lines = {line.strip() for line in soup.get_text("\n").splitlines()}
    return "\n".join(sorted(lines)), soup


@pytest.mark.slow
def test_hidden_solutions_leave_no_solution_line_and_keep_every_exercise(
    tmp_path: Path,
) -> None:
    done = build_page(tmp_path, "hidden")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    text, soup = page_text(tmp_path)
    nb = nbformat.read(CHAPTER, as_version=4)
    inside = {id(cell) for _, cell in student_edition.solution_cells(nb)}
    # A solution line that the rest of the chapter quotes (an exercise statement's inline
    # code, say) is no leak.
    elsewhere = "\n".join(cell.source for cell in nb.cells if id(cell) not in inside)
    solution_lines = {line for line in student_edition.solution_lines(nb) if line not in elsewhere}
    assert solution_lines, "the chapter has no solution to hide"
    assert sorted(solution_lines & set(text.splitlines())) == []
    labels = {label for label, _ in student_edition.solution_cells(nb)}
    assert all(soup.find(id=label) is not None for label in labels)
    assert soup.select(".solution") == []
    # The notebook behind the download button is the student edition's.
    (source,) = (tmp_path / "_build" / "_page").rglob(f"_sources/**/{CHAPTER.name}")
    served = nbformat.read(source, as_version=4)
    assert [c.source for c in served.cells] == [
        c.source for c in student_edition.student_notebook(nb).cells
    ]
    served_text = nbformat.writes(served)
    assert [line for line in solution_lines if line in served_text] == []
    # Colab and Binder open the student edition's branch, not the repository's notebooks.
    launches = [
        a["href"]
        for a in soup.find_all("a", href=True)
        if "colab.research.google.com" in a["href"] or "mybinder.org" in a["href"]
    ]
    assert len(launches) >= 2
    assert all("student-edition" in href and "/main/" not in href for href in launches)


def test_a_misspelt_choice_stops_the_build_with_what_was_expected(tmp_path: Path) -> None:
    done = build_page(tmp_path, "none")
    assert done.returncode != 0
    assert "BOOK_SOLUTIONS: expected one of shown, hidden, got 'none'" in done.stdout + done.stderr
