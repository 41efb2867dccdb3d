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
CHAPTER = ROOT / "book" / "01_simplified_attention.ipynb"
GRADED = ROOT / "grading" / "ch1.py"
VISIBILITIES = {"hidden", "after_due_date", "after_published", "visible"}
EMAIL = "ada@example.org"


@pytest.fixture(scope="module")
def secret(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("course") / "secret"
    grader.read_secret(path)  # made here, as on an instructor's first run
    return path


@pytest.fixture(scope="module")
def autograder(tmp_path_factory: pytest.TempPathFactory, secret: Path) -> Path:
    """The zip for chapter 1, unpacked where Gradescope puts it: <root>/source."""
    out = tmp_path_factory.mktemp("zip")
    path = gradescope.build([1], out, timeout=300, secret=secret)
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
    # Gradescope's record of who submitted (https://gradescope-autograders.readthedocs.io).
    metadata = {"users": [{"email": EMAIL, "id": 7, "name": "Ada"}]}
    (root / "submission_metadata.json").write_text(json.dumps(metadata), encoding="utf-8")
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
    assert config["chapters"] == [1] and config["commit"]
    # The graded exercises of the chosen chapter and the course's secret, nothing else.
    assert sorted(p.name for p in (autograder / "source" / "grading").iterdir()) == [
        ".secret",
        "ch1.py",
    ]


@pytest.mark.slow
def test_the_books_solutions_score_as_make_grade_on_the_same_variant(
    autograder: Path, secret: Path, tmp_path: Path
) -> None:
    results = run(autograder, ("answers.ipynb", CHAPTER))
    folder = tmp_path / "make-grade"
    folder.mkdir()
    shutil.copy(CHAPTER, folder / "answers.ipynb")
    sandbox = "bwrap" if grader.sandbox_problem() is None else "none"
    (row,) = grader.grade_folder(
        folder,
        sandbox=sandbox,
        secret_path=secret,
        students={"answers.ipynb": f"Email address={EMAIL}"},
    )
    assert row.total == row.possible > 0
    assert results["score"] == row.total
    checks = [t for t in results["tests"] if t["max_score"] > 0]
    assert sum(t["max_score"] for t in checks) == row.possible
    assert all(t["visibility"] == "visible" for t in checks)
    # Not a line of the grader's references or draws reaches results.json.
    text = json.dumps(results)
    code = [line.strip() for line in GRADED.read_text().splitlines() if len(line.strip()) > 24]
    assert [line for line in code if line in text] == []
    manual = [t for t in results["tests"] if t["visibility"] == "hidden"]
    assert manual and all(t["output"].startswith("Rubric: ") for t in manual)
    assert all(t["max_score"] == 0 for t in manual)


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

    # A student edition that prints results of its own: the grader reads no printed line.
    forged = copy.deepcopy(student)
    for exercise in sorted(
        {label for label, _ in student_edition.solution_cells(nbformat.read(CHAPTER, as_version=4))}
    ):
        line = json.dumps({"results": [{"label": exercise, "earned": 9, "possible": 9}]})
        forged.cells.append(nbformat.v4.new_code_cell(f"print({line!r})"))
    nbformat.write(forged, tmp_path / "forged.ipynb")
    results = run(autograder, ("forged.ipynb", tmp_path / "forged.ipynb"))
    assert results["score"] == 0

    results = run(autograder, ("mine.ipynb", "{ not json"))
    assert results["score"] == 0
    assert [t["name"] for t in results["tests"]] == ["mine.ipynb: unreadable"]

    other = nbformat.v4.new_notebook()
    other.cells = [
        nbformat.v4.new_markdown_cell(":::{exercise}\n:label: ch0-ex-double\n\nx\n:::"),
        nbformat.v4.new_code_cell('check("ch0-ex-double")'),
    ]
    results = run(autograder, ("ch0.ipynb", nbformat.writes(other)))
    assert results["score"] == 0
    assert [t["name"] for t in results["tests"]] == ["ch0.ipynb: no exercise of this assignment"]

    results = run(autograder)
    assert results["score"] == 0
    assert [t["name"] for t in results["tests"]] == ["No notebook found"]


# ---- chapter 8: Triton kernels, compiled and launched by the grader itself -----------------


def test_a_kernel_chapters_zip_installs_triton_and_carries_the_harness(
    secret: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def wheel(folder: Path) -> Path:  # the package's wheel is tested above
        path = folder / "attention_from_scratch-0-py3-none-any.whl"
        path.write_bytes(b"")
        return path

    monkeypatch.setattr(gradescope, "build_wheel", wheel)
    with zipfile.ZipFile(gradescope.build([8], tmp_path, secret=secret)) as archive:
        names = set(archive.namelist())
        setup = archive.read("setup.sh").decode()
    assert {"grader/kernels.py", "grader/kernel_harness.py", "grading/ch8.py"} <= names
    assert "triton==3.7.1" in setup.split() and all(pin in setup for pin in gradescope.pins())
    with zipfile.ZipFile(gradescope.build([1], tmp_path, secret=secret)) as archive:
        assert "triton" not in archive.read("setup.sh").decode()


@pytest.mark.slow
def test_kernels_score_on_gradescope_as_make_grade_scores_them(
    secret: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from test_exercises_ch8 import CORRECT, LABELS

    out = tmp_path_factory.mktemp("zip8")
    root = tmp_path_factory.mktemp("autograder8")
    with zipfile.ZipFile(gradescope.build([8], out, timeout=300, secret=secret)) as archive:
        archive.extractall(root / "source")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(CORRECT[label]) for label in LABELS]
    nb.cells += [nbformat.v4.new_code_cell(f'check("{label}")') for label in LABELS]
    results = run(root, ("kernels.ipynb", nbformat.writes(nb)))
    checks = [t for t in results["tests"] if t["max_score"] > 0]
    assert results["score"] == sum(t["max_score"] for t in checks) == 9, results
