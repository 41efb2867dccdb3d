"""Each chapter runs on its own, as it would when opened alone in Colab.

For every notebook the test makes an environment that has the course's dependencies but not the
course package, copies the notebook alone into an empty folder and executes it there. The
notebook's first cell must then install the package; it is pointed at a wheel built from this
repository (the ``ATTENTION_FROM_SCRATCH_PACKAGE`` variable that the install cell reads), so
the test exercises the real install path without a network, and never imports the source tree.

Every chapter's install cell is the same (checked below), and the grader runs every chapter
alone in an empty folder of its own (tests/test_grading.py), so the install path runs here for
one chapter that stands for the others: chapter 4, which also reads GloVe (offline here). The
weekly Colab session (`nox -s colab`) runs all seven.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import nbformat
import pytest
from book_info import ROOT, chapter_notebooks

sys.path.insert(0, str(ROOT / "tools"))
import student_edition

pytestmark = pytest.mark.slow

NOTEBOOKS = chapter_notebooks()
ALONE = [path for path in NOTEBOOKS if path.name[:2] == "04"]
INSTALL_VARIABLE = "ATTENTION_FROM_SCRATCH_PACKAGE"


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # Build from a copy so the build leaves nothing in the working tree.
    source = tmp_path_factory.mktemp("source") / "repo"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(".venv", "_build", ".git", "*.egg-info", "__pycache__"),
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(source),
        ],
        check=True,
    )
    (built,) = out.glob("attention_from_scratch-*.whl")
    return built


@pytest.fixture(scope="session")
def dependencies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder that exposes every installed package except the course package itself."""
    folder = tmp_path_factory.mktemp("deps")
    site = Path(sysconfig.get_paths()["purelib"])
    for entry in site.iterdir():
        name = entry.name.lower()
        if "attention_from_scratch" in name or entry.suffix == ".pth":
            continue
        (folder / entry.name).symlink_to(entry)
    return folder


def fresh_environment(where: Path, dependencies: Path) -> Path:
    """A virtual environment without the course package; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "course_dependencies.pth").write_text(f"{dependencies}\n", encoding="utf-8")
    return python


def test_the_fresh_environment_lacks_the_package(tmp_path: Path, dependencies: Path) -> None:
    python = fresh_environment(tmp_path / "env", dependencies)
    found = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.util as u; print(u.find_spec('attention_from_scratch') is None,"
            " u.find_spec('torch') is not None)",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert found == ["True", "True"]


def test_every_chapter_installs_the_package_with_the_same_first_code_cell() -> None:
    install = {
        path.name: next(
            c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"
        )
        for path in NOTEBOOKS
    }
    assert len(ALONE) == 1 and all(INSTALL_VARIABLE in source for source in install.values())
    assert len(set(install.values())) == 1, sorted(install)


@pytest.mark.parametrize("notebook", ALONE, ids=[path.stem for path in ALONE])
def test_notebook_runs_alone_after_installing_the_wheel(
    notebook: Path, tmp_path: Path, wheel: Path, dependencies: Path
) -> None:
    python = fresh_environment(tmp_path / "env", dependencies)
    work = tmp_path / "colab"
    work.mkdir()
    shutil.copy(notebook, work / notebook.name)
    env = {
        key: value for key, value in os.environ.items() if key not in {"PYTHONPATH", "VIRTUAL_ENV"}
    }
    env.update(
        ATTENTION_FROM_SCRATCH_PACKAGE=str(wheel),
        ATTENTION_FROM_SCRATCH_OFFLINE="1",
        MPLBACKEND="Agg",
    )
    run = subprocess.run(
        [str(python), "-m", "pytest", "--nbmake", "-p", "no:cacheprovider", "-q", notebook.name],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    location = subprocess.run(
        [str(python), "-c", "import attention_from_scratch as a; print(a.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(location).is_relative_to(tmp_path / "env"), location
    assert not Path(location).is_relative_to(ROOT), location


def test_the_wheel_students_install_holds_nothing_of_the_grader_or_the_solutions(
    wheel: Path,
) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        text = "\n".join(
            archive.read(name).decode("utf-8", errors="replace")
            for name in names
            if name.endswith((".py", ".js", ".css", ".txt", ".json", ".md"))
        )
    assert not [name for name in names if name.startswith(("grading/", "tools/", "tests/"))]
    # No line of code of the graded exercises (their draws and references; the hints, which
    # students see when a check fails, are strings and may be shared with the self-checks) ...
    graded = [
        line.strip()
        for path in (ROOT / "grading").glob("ch*.py")
        for line in path.read_text(encoding="utf-8").splitlines()
        if len(line.strip()) > 40
        and not line.strip().startswith(("import ", "from ", '"', "'", 'f"', "#"))
    ]
    assert graded and [line for line in graded if line in text] == []
    # ... and no solution of any chapter: at most one of a solution cell's own long lines may
    # also be in the package (a plain loop over the three projections, say).
    wheel_lines = {line.strip() for line in text.splitlines()}
    for notebook in NOTEBOOKS:
        nb = nbformat.read(notebook, as_version=4)
        own = student_edition.solution_lines(nb)
        for label, cell in student_edition.solution_cells(nb):
            lines = {line.strip() for line in cell.source.splitlines()} & own
            found = sorted(line for line in lines if len(line) > 30 and line in wheel_lines)
            assert len(found) <= 1, (notebook.name, label, found)
