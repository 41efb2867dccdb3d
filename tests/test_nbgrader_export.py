"""The nbgrader course: nbgrader's own generate_assignment and autograde give, per exercise,
the points `make grade` gives on the same notebooks."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import grader  # noqa: E402
import nbgrader_export  # noqa: E402
import student_edition  # noqa: E402

NBGRADER = "nbgrader==0.9.6"
# nbgrader and its Jupyter server live in an environment of their own (they are not what
# learners install); the course's environment is added to it, so its kernels import torch
# and the course package as a student's would.
NBGRADER_ENV = (
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    / "attention-from-scratch"
    / "nbgrader-0.9.6-env"
)  # outside the repository: the book build and the linters must not read it
CHAPTER = ROOT / "book" / "05_tensor_layout.ipynb"
BROKEN = "ch5-ex-slice-stride"


BIN = NBGRADER_ENV / ("Scripts" if os.name == "nt" else "bin")


def nbgrader_env() -> Path:
    python = BIN / ("python.exe" if os.name == "nt" else "python")
    if not (NBGRADER_ENV / ".ready").exists():
        shutil.rmtree(NBGRADER_ENV, ignore_errors=True)
        NBGRADER_ENV.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", str(NBGRADER_ENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", NBGRADER], check=True)
        purelib = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        ours = sysconfig.get_paths()["purelib"]
        Path(purelib, "course-environment.pth").write_text(
            f"import site; site.addsitedir({ours!r})\n", encoding="utf-8"
        )
        (NBGRADER_ENV / ".ready").touch()
    return python


def nbgrader(python: Path, course: Path, *args: str) -> None:
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
    python = nbgrader_env()
    course = tmp_path / "course"
    nbgrader_export.export(course)
    assert (course / "nbgrader_config.py").is_file()
    nbgrader(python, course, "generate_assignment", "ch5", "--force")
    source = nbformat.read(course / "source" / "ch5" / CHAPTER.name, as_version=4)
    release = nbformat.read(course / "release" / "ch5" / CHAPTER.name, as_version=4)
    # Nothing of a hidden check reaches the student version.
    hidden = (ROOT / "grading" / "hidden" / "ch5.py").read_text()
    released = nbformat.writes(release)
    assert "BEGIN HIDDEN TESTS" not in released
    assert [line for line in hidden.splitlines() if len(line) > 30 and line in released] == []
    students = {
        "full": source,
        "empty": release,
        "broken": broken(copy.deepcopy(source), "nbgrader"),
    }
    for student, nb in students.items():
        folder = course / "submitted" / student / "ch5"
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / CHAPTER.name)
    nbgrader(python, course, "autograde", "ch5", "--create", "--force")
    script = (
        "import json, sys\nfrom nbgrader.api import Gradebook\n"
        f"with Gradebook('sqlite:///{course / 'gradebook.db'}') as gb:\n"
        "    out = {s: {g.name: g.score for g in gb.find_submission_notebook("
        f"'{CHAPTER.stem}', 'ch5', s).grades if not g.name.endswith('-written')}}\n"
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

    # make grade on the book's own notebooks: the chapter, its student edition, one broken.
    book = nbformat.read(CHAPTER, as_version=4)
    folder = tmp_path / "make-grade"
    folder.mkdir()
    nbformat.write(book, folder / "full.ipynb")
    nbformat.write(student_edition.student_notebook(book), folder / "empty.ipynb")
    nbformat.write(broken(nbformat.read(CHAPTER, as_version=4), "book"), folder / "broken.ipynb")
    sandbox = "bwrap" if grader.sandbox_problem() is None else "none"
    rows = grader.grade_folder(folder, sandbox=sandbox, hidden_dir=ROOT / "grading" / "hidden")
    by_make_grade = {
        Path(row.submission).stem: {
            label: exercise.earned for label, exercise in row.exercises.items()
        }
        for row in rows
    }
    assert by_nbgrader == by_make_grade
    assert sum(by_nbgrader["full"].values()) > 0 == sum(by_nbgrader["empty"].values())
    assert by_nbgrader["broken"][BROKEN] == 0 < by_nbgrader["full"][BROKEN]
