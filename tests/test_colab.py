"""Every chapter as a learner runs it in Colab: the newest torch already there, the course package
installed by the chapter's own first cell from the repository's git URL.

Run by ``nox -s colab`` (noxfile.py), which builds that environment: the newest torch and what
Colab preinstalls, without the course package. Each chapter then gets a fresh runtime, as in
Colab (the package uninstalled), and its first cell installs the package with the requirement it
would use there, ``git+<repository>@<branch>``, the repository replaced through the cell's
``ATTENTION_FROM_SCRATCH_PACKAGE`` by a git repository holding this checkout's files (committed or
not). Elsewhere the test skips: it installs packages into the Python that runs it.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GATE = "ATTENTION_FROM_SCRATCH_COLAB_TEST"
PACKAGE = "attention-from-scratch"

pytestmark = [
    pytest.mark.compat,
    pytest.mark.skipif(
        os.environ.get(GATE) != "1",
        reason="installs the package into this Python as Colab does: run `nox -s colab`",
    ),
]

# The chapters, in the order of _toc.yml (read without PyYAML, which the environment may lack).
NOTEBOOKS = [
    ROOT / f"{name}.ipynb"
    for name in re.findall(r"- file: (book/\d\d_\w+)", (ROOT / "_toc.yml").read_text("utf-8"))
]


def install_cell(notebook: Path) -> str:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return "".join(next(cell for cell in cells if cell["cell_type"] == "code")["source"])


def constants(source: str) -> dict[str, str]:
    """The cell's module-level string constants, e.g. REPOSITORY and BRANCH."""
    found = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name) and isinstance(node.value.value, str):
                    found[target.id] = node.value.value
    return found


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git repository whose branch holds this checkout's files, tracked or new, as they are
    now (what git ignores left out), so the test installs what is in the working tree."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.decode("utf-8")
    repo = tmp_path_factory.mktemp("colab") / "attention-from-scratch"
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, repo / name)
    branch = constants(install_cell(NOTEBOOKS[0]))["BRANCH"]
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.org"]
    git += ["-c", "commit.gpgsign=false", "-C", str(repo)]
    subprocess.run([*git, "init", "-q", "-b", branch], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "checkout"], check=True)
    return repo


def test_the_chapters_are_listed() -> None:
    assert len(NOTEBOOKS) == 7
    assert all(path.exists() for path in NOTEBOOKS)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_chapter_runs_after_its_first_cell_installs_the_package_from_git(
    notebook: Path, repository: Path, tmp_path: Path
) -> None:
    # The requirement the cell uses in Colab, with the repository's URL replaced by this one.
    cell = install_cell(notebook)
    assert "ATTENTION_FROM_SCRATCH_PACKAGE" in cell and "git+{REPOSITORY}@{BRANCH}" in cell
    requirement = f"git+{repository.as_uri()}@{constants(cell)['BRANCH']}"
    # A fresh runtime: torch there, the course package not.
    subprocess.run(
        [sys.executable, "-m", "pip", "uninstall", "--yes", "--quiet", PACKAGE], check=True
    )
    probe = "import importlib.util as u; print(u.find_spec('attention_from_scratch') is None)"
    before = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert before.stdout.split() == ["True"]
    import torch  # noqa: F401  (Colab has torch before any cell runs)

    work = tmp_path / "content"
    work.mkdir()
    shutil.copy(notebook, work / notebook.name)
    env = {key: value for key, value in os.environ.items() if key not in {"PYTHONPATH", GATE}}
    env.update(
        ATTENTION_FROM_SCRATCH_PACKAGE=requirement,
        ATTENTION_FROM_SCRATCH_OFFLINE="1",
        MPLBACKEND="Agg",
    )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbmake", "-p", "no:cacheprovider", "-q", notebook.name],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    # Installed by the cell, from that URL (pip's record of where a package came from).
    record = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from importlib import metadata; print(metadata.distribution({PACKAGE!r})"
            ".read_text('direct_url.json'))",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    origin = json.loads(record)
    assert origin["url"] == repository.as_uri()
    assert origin["vcs_info"]["vcs"] == "git"
    assert origin["vcs_info"]["requested_revision"] == constants(cell)["BRANCH"]
