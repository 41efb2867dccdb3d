"""The branch that Colab and Binder open (tools/student_branch.py): the student notebooks at its
root, under the names the book links, and a Binder environment with the course package."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest
from book_info import ROOT, chapter_notebooks, load_config

sys.path.insert(0, str(ROOT / "tools"))

import student_branch

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def branch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("student-branch")
    student_branch.layout(out, COMMIT)
    return out


def test_notebooks_sit_at_the_root_under_the_chapters_names(branch: Path) -> None:
    notebooks = sorted(path.name for path in branch.glob("*.ipynb"))
    assert notebooks == sorted(path.name for path in chapter_notebooks())
    assert not list(branch.glob("*.zip"))


def test_each_notebook_installs_the_package_first(branch: Path) -> None:
    url = load_config()["repository"]["url"]
    for path in branch.glob("*.ipynb"):
        first = next(c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
        assert f'REPOSITORY = "{url}"' in first.source, path.name
        assert '"-m", "pip", "install"' in first.source, path.name


def test_binder_installs_the_package_at_the_published_commit(branch: Path) -> None:
    url = load_config()["repository"]["url"]
    requirements = (branch / "binder" / "requirements.txt").read_text(encoding="utf-8")
    lines = [line for line in requirements.splitlines() if not line.startswith("#")]
    assert lines == [
        "--extra-index-url https://download.pytorch.org/whl/cpu",
        f"attention-from-scratch @ git+{url}@{COMMIT}",
    ]
    runtime = (branch / "binder" / "runtime.txt").read_text(encoding="utf-8")
    assert runtime == (ROOT / "binder" / "runtime.txt").read_text(encoding="utf-8")
    assert COMMIT in (branch / "README.md").read_text(encoding="utf-8")


def test_a_commit_that_is_not_a_commit_id_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="commit: expected a hexadecimal commit id, got 'main'"):
        student_branch.layout(tmp_path / "out", "main")
