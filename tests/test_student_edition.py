"""The student edition (`make student`): stubs instead of solutions, no solution line anywhere,
visible check cells, and 0 auto-graded points when handed in untouched."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "exercise_fixtures"
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(FIXTURES))

import grader  # noqa: E402
import student_edition  # noqa: E402
from make_fixture import DOUBLE_SOLUTION, TOTAL_SOLUTION, fixture_notebook  # noqa: E402

SANDBOX = "bwrap" if grader.sandbox_problem() is None else "none"  # none on macOS and Windows

CHAPTERS = student_edition.chapter_notebooks(ROOT)


@pytest.fixture(scope="module")
def edition(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("student")
    student_edition.build(out)
    return out


def every_text(nb: object) -> set[str]:
    """Every stripped line of every cell's source, metadata, outputs and attachments, and of
    the notebook's metadata, decoded from JSON so quotes and backslashes read as written."""
    lines: set[str] = set()

    def add(value: object) -> None:
        if isinstance(value, str):
            lines.update(line.strip() for line in value.splitlines())
        elif isinstance(value, dict):
            for item in value.values():
                add(item)
        elif isinstance(value, list):
            for item in value:
                add(item)

    add(json.loads(nbformat.writes(nb)))
    return lines


def reference_solution_lines(path: Path) -> set[str]:
    """Lines of code in solutions (at least 8 characters) found nowhere outside them."""
    nb = nbformat.read(path, as_version=4)
    inside, outside, label = [], [], None
    for cell in nb.cells:
        source = cell.source.strip()
        if cell.cell_type == "markdown" and "{solution-start}" in source:
            label = True
        elif cell.cell_type == "markdown" and "{solution-end}" in source:
            label = None
        elif label and cell.cell_type == "code":
            inside += cell.source.splitlines()
            outside += cell.metadata.get("exercise", {}).get("stub", "").splitlines()
        elif not label:
            outside += cell.source.splitlines()
    outside_set = {line.strip() for line in outside}
    return {line.strip() for line in inside if len(line.strip()) >= 8} - outside_set


def test_the_fixture_becomes_stubs_and_visible_checks() -> None:
    student = student_edition.student_notebook(fixture_notebook())
    sources = [cell.source for cell in student.cells]
    assert "def double(x):\n    # Twice x, of its shape and dtype.\n    return ..." in "\n".join(
        sources
    )
    assert not any(DOUBLE_SOLUTION.strip() in s or TOTAL_SOLUTION.strip() in s for s in sources)
    assert not any("Doubling every entry" in s for s in sources)  # explanation removed
    assert not any("{solution-" in s or "{exercise}" in s for s in sources)
    assert "**Exercise** (`ch0-ex-double`)\n\nStore the answer.\n" in sources
    checks = [c for c in student.cells if "exercise-check" in c.metadata.get("tags", [])]
    assert [c.source for c in checks] == [
        '# Run this cell to check your answer.\ncheck("ch0-ex-double")',
        '# Run this cell to check your answer.\ncheck("ch0-ex-total")',
    ]
    assert all("remove-cell" not in c.metadata["tags"] for c in checks)
    assert all("exercise" not in c.metadata for c in student.cells)


def test_hidden_cells_that_guard_the_book_are_left_out() -> None:
    nb = fixture_notebook()
    guard = nbformat.v4.new_code_cell("assert doubled[0] == 2  # a number the text quotes")
    guard.metadata["tags"] = ["remove-cell"]
    nb.cells.append(guard)
    student = student_edition.student_notebook(nb)
    assert not any("a number the text quotes" in c.source for c in student.cells)
    checks = [c for c in student.cells if "exercise-check" in c.metadata.get("tags", [])]
    assert len(checks) == 2  # the check cells, also hidden in the book, stay


def test_a_missing_stub_gets_the_default_one() -> None:
    nb = fixture_notebook()
    for cell in nb.cells:
        cell.metadata.pop("exercise", None)
    student = student_edition.student_notebook(nb)
    assert sum(c.source == student_edition.DEFAULT_STUB for c in student.cells) == 2


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_no_line_of_any_solution_is_in_the_student_edition(edition: Path, path: Path) -> None:
    lines = reference_solution_lines(path)
    student = nbformat.read(edition / path.name, as_version=4)
    assert lines & every_text(student) == set()
    for cell in student.cells:
        assert "attachments" not in cell
        assert cell.get("outputs", []) == []


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_the_student_edition_keeps_the_install_cell_and_every_check(
    edition: Path, path: Path
) -> None:
    reference = nbformat.read(path, as_version=4)
    student = nbformat.read(edition / path.name, as_version=4)
    first_code = next(c for c in reference.cells if c.cell_type == "code")
    assert next(c for c in student.cells if c.cell_type == "code").source == first_code.source

    def checks(nb: object) -> list[str]:
        return [
            c.source.splitlines()[-1]
            for c in nb.cells
            if "exercise-check" in c.metadata.get("tags", [])
        ]

    assert checks(student) == checks(reference)


def test_the_zip_holds_one_notebook_per_chapter(edition: Path) -> None:
    with zipfile.ZipFile(edition / student_edition.ZIP_NAME) as archive:
        names = archive.namelist()
    assert names == [f"attention-from-scratch-student/{p.name}" for p in CHAPTERS]


@pytest.mark.slow
def test_the_untouched_student_edition_earns_no_points(edition: Path, tmp_path: Path) -> None:
    for path in CHAPTERS:
        (tmp_path / path.name).write_bytes((edition / path.name).read_bytes())
    graded = grader.grade_folder(
        tmp_path, workers=2, sandbox=SANDBOX, secret_path=tmp_path.parent / "secret"
    )
    rows = {row.submission: row for row in graded}
    for path in CHAPTERS:
        row = rows[path.name]
        assert row.status == "ok", (path.name, row.notes)
        assert row.total == 0, path.name


def test_a_roster_gives_each_student_an_edition_that_names_them(tmp_path: Path) -> None:
    roster = tmp_path / "roster.csv"
    roster.write_text(
        "Student,ID,submission\n"
        ",Points Possible,\n"
        "Ada Lovelace,1815,ada.ipynb\n"
        "Alan Turing,1912,alan.ipynb\n",
        encoding="utf-8",
    )
    out = tmp_path / "student"
    assert student_edition.main(["--out", str(out), "--roster", str(roster)]) == 0
    folders = sorted(p.name for p in (out / "students").iterdir())
    assert folders == ["ID-1815", "ID-1912"]
    for folder, key in (("ID-1815", "ID=1815"), ("ID-1912", "ID=1912")):
        for path in CHAPTERS:
            mine = nbformat.read(out / "students" / folder / path.name, as_version=4)
            shared = nbformat.read(out / path.name, as_version=4)
            assert mine.metadata["attention_from_scratch"] == {"student": key}
            assert key in mine.cells[0].source
            assert [c.source for c in mine.cells[1:]] == [c.source for c in shared.cells]
        with zipfile.ZipFile(out / "students" / folder / student_edition.ZIP_NAME) as archive:
            assert len(archive.namelist()) == len(CHAPTERS)


def test_the_grader_draws_an_editions_student_when_no_roster_names_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from grader import run

    drawn: list[str] = []
    real = run.variant_rng
    monkeypatch.setattr(
        run, "variant_rng", lambda secret, key, label: drawn.append(key) or real(secret, key, label)
    )
    monkeypatch.setattr(run, "execute", lambda *args: ("ok", "", {}))
    nb = student_edition.for_student(fixture_notebook(), "ID=1815")
    path = tmp_path / "handed-in.ipynb"
    nbformat.write(nb, path)
    config = grader.GradingConfig.make(
        grading_dir=FIXTURES / "grading", secret="s" * 40, sandbox="none"
    )
    run.grade_notebook(path, config)
    run.grade_notebook(path, config, student="ID=1912")  # the roster's word wins
    nbformat.write(fixture_notebook(), path)
    run.grade_notebook(path, config)  # no edition, no roster: the file's name
    assert drawn == ["ID=1815"] * 2 + ["ID=1912"] * 2 + ["handed-in.ipynb"] * 2
