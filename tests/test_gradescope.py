"""The Gradescope autograder: the zip's run_autograder writes results.json as Gradescope
documents it, and scores a notebook as `make grade` does."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import grader  # noqa: E402
import gradescope  # noqa: E402
import student_edition  # noqa: E402

pytestmark = pytest.mark.skipif(
    sys.platform == "win32", reason="Gradescope runs its autograders in Linux containers"
)
CHAPTER = ROOT / "book" / "05_tensor_layout.ipynb"
HIDDEN = ROOT / "grading" / "hidden" / "ch5.py"
VISIBILITIES = {"hidden", "after_due_date", "after_published", "visible"}


@pytest.fixture(scope="module")
def autograder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The zip for chapter 5, unpacked where Gradescope puts it: <root>/source."""
    out = tmp_path_factory.mktemp("zip")
    path = gradescope.build([5], out, timeout=300)
    root = tmp_path_factory.mktemp("autograder")
    with zipfile.ZipFile(path) as archive:
        archive.extractall(root / "source")
        modes = {info.filename: info.external_attr >> 16 for info in archive.infolist()}
    assert modes["run_autograder"] & 0o111 and modes["setup.sh"] & 0o111
    return root


def run(root: Path, *notebooks: tuple[str, str | Path]) -> dict:
    """Put the notebooks in <root>/submission, run run_autograder, return results.json."""
    shutil.rmtree(root / "submission", ignore_errors=True)
    shutil.rmtree(root / "results", ignore_errors=True)
    (root / "submission").mkdir()
    for name, content in notebooks:
        target = root / "submission" / name
        if isinstance(content, Path):
            shutil.copy(content, target)
        else:
            target.write_text(content, encoding="utf-8")
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", str(root / "source" / "run_autograder")],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    # The fields Gradescope documents, with their types.
    assert isinstance(results["score"], (int, float)) and isinstance(results["tests"], list)
    for test in results["tests"]:
        assert set(test) == {"name", "score", "max_score", "visibility", "output"}
        assert isinstance(test["name"], str) and isinstance(test["output"], str)
        assert 0 <= test["score"] <= test["max_score"] or test["max_score"] == 0 == test["score"]
        assert test["visibility"] in VISIBILITIES
    assert results["score"] == sum(test["score"] for test in results["tests"])
    return results


def test_setup_installs_the_zips_own_wheel_at_the_books_pins(autograder: Path) -> None:
    setup = (autograder / "source" / "setup.sh").read_text()
    (wheel,) = (autograder / "source").glob("attention_from_scratch-*.whl")
    assert f"./{wheel.name}" in setup
    assert "torch==" in setup and all(pin in setup for pin in gradescope.pins())
    assert subprocess.run(["bash", "-n", str(autograder / "source" / "setup.sh")]).returncode == 0
    # The grader's command line travels with its package.
    assert (autograder / "source" / "grade.py").is_file()
    assert (autograder / "source" / "grader" / "run.py").is_file()
    config = json.loads((autograder / "source" / "autograder.json").read_text())
    assert config["chapters"] == [5] and config["commit"]


@pytest.mark.slow
def test_the_books_solutions_score_as_make_grade_and_hidden_checks_stay_hidden(
    autograder: Path, tmp_path: Path
) -> None:
    results = run(autograder, ("answers.ipynb", CHAPTER))
    folder = tmp_path / "make-grade"
    folder.mkdir()
    shutil.copy(CHAPTER, folder / "answers.ipynb")
    sandbox = "bwrap" if grader.sandbox_problem() is None else "none"
    (row,) = grader.grade_folder(folder, sandbox=sandbox, hidden_dir=HIDDEN.parent)
    assert row.total == row.possible > 0
    assert results["score"] == row.total
    checks = [t for t in results["tests"] if t["max_score"] > 0]
    assert sum(t["max_score"] for t in checks) == row.possible
    hidden = [t for t in checks if t["visibility"] == "after_published"]
    assert hidden and all(t["output"] == "" for t in hidden)
    # Not a line of a hidden check's code reaches results.json.
    text = json.dumps(results)
    code = [line.strip() for line in HIDDEN.read_text().splitlines() if len(line.strip()) > 24]
    assert [line for line in code if line in text] == []
    manual = [t for t in results["tests"] if t["visibility"] == "hidden"]
    assert all(t["output"].startswith("Rubric: ") and t["max_score"] == 0 for t in manual)


@pytest.mark.slow
def test_a_student_edition_an_unreadable_file_and_another_chapter_score_zero(
    autograder: Path, tmp_path: Path
) -> None:
    student = student_edition.student_notebook(nbformat.read(CHAPTER, as_version=4))
    nbformat.write(student, tmp_path / "student.ipynb")
    results = run(autograder, ("student.ipynb", tmp_path / "student.ipynb"))
    assert results["score"] == 0
    failed = [t for t in results["tests"] if t["visibility"] == "visible" and t["max_score"]]
    assert failed and all("Hint: " in t["output"] for t in failed)

    # A student edition that forges full marks, as `make grade` is forged: it scores 0 too.
    forged = copy.deepcopy(student)
    for exercise in sorted(
        {label for label, _ in student_edition.solution_cells(nbformat.read(CHAPTER, as_version=4))}
    ):
        line = json.dumps({"results": [{"label": exercise, "earned": 9, "possible": 9}]})
        forged.cells.append(nbformat.v4.new_code_cell(f"print('GRADER-0:' + {line!r})"))
    nbformat.write(forged, tmp_path / "forged.ipynb")
    results = run(autograder, ("forged.ipynb", tmp_path / "forged.ipynb"))
    assert results["score"] == 0

    results = run(autograder, ("mine.ipynb", "{ not json"))
    assert results["score"] == 0
    assert [t["name"] for t in results["tests"]] == ["mine.ipynb: unreadable"]

    other = nbformat.v4.new_notebook()
    other.cells = [
        nbformat.v4.new_markdown_cell(":::{exercise}\n:label: ch4-ex-divisible\n\nx\n:::"),
        nbformat.v4.new_code_cell('check("ch4-ex-divisible")'),
    ]
    results = run(autograder, ("ch4.ipynb", nbformat.writes(other)))
    assert results["score"] == 0
    assert "ch4-ex-divisible: not part of this assignment" in [t["name"] for t in results["tests"]]

    results = run(autograder)
    assert results["score"] == 0
    assert [t["name"] for t in results["tests"]] == ["No notebook found"]
