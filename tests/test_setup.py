"""The set-up that README.md promises: supported Pythons, prerequisites checked before anything
is installed, the build of torch chosen for the machine, and a book cache that notices a change
of the package."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from book_info import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import prerequisites

# The Makefile is the entry point on Linux and macOS (README.md); Windows runs the tests directly.
POSIX_MAKE = pytest.mark.skipif(os.name == "nt", reason="the Makefile needs a POSIX shell")

README = (ROOT / "README.md").read_text(encoding="utf-8")
PYPROJECT = (ROOT / "pyproject.toml").read_text(encoding="utf-8")


def test_readme_pyproject_and_checks_agree_on_the_supported_pythons() -> None:
    oldest = re.search(r'requires-python = ">=3\.(\d+)"', PYPROJECT).group(1)
    assert (3, int(oldest)) == prerequisites.OLDEST
    classifiers = sorted(int(v) for v in re.findall(r"Python :: 3\.(\d+)\"", PYPROJECT))
    assert (3, classifiers[0]) == prerequisites.OLDEST
    assert (3, classifiers[-1]) == prerequisites.NEWEST
    assert f"Python 3.{oldest} to 3.{classifiers[-1]}" in README
    binder = (ROOT / "binder" / "runtime.txt").read_text(encoding="utf-8").strip()
    assert tuple(int(v) for v in binder[7:].split(".")[:2]) >= prerequisites.OLDEST


@pytest.mark.parametrize("version", [(3, 10, 14), (3, 14, 0)])
def test_an_unsupported_python_is_refused_with_a_clear_message(
    version: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setattr(sys, "version_info", version)
    with pytest.raises(SystemExit) as stop:
        prerequisites.main(["prerequisites.py", "book"])
    assert stop.value.code == 2
    message = capsys.readouterr().err
    assert f"got {version[0]}.{version[1]}" in message and "PYTHON=" in message


def test_make_test_names_missing_node_and_npm(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(SystemExit):
        prerequisites.main(["prerequisites.py", "test"])
    message = capsys.readouterr().err
    assert "node and npm not found" in message and "Node.js" in message
    # The README lists the same prerequisite.
    assert "Node.js" in README and "npm" in README


@pytest.mark.parametrize(
    ("choice", "gpu", "reachable", "expected"),
    [
        ("cpu", True, True, prerequisites.CPU_INDEX),
        ("pypi", False, True, ""),
        ("cuda", False, True, ""),
        ("auto", False, True, prerequisites.CPU_INDEX),
        ("auto", True, True, ""),
        ("auto", False, False, ""),
    ],
)
def test_torch_build_follows_the_machine_and_the_override(
    choice: str, gpu: bool, reachable: bool, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prerequisites.platform, "system", lambda: "Linux")
    monkeypatch.setattr(
        shutil,
        "which",
        lambda name: "/usr/bin/nvidia-smi" if gpu and name == "nvidia-smi" else None,
    )
    monkeypatch.setattr(prerequisites, "reachable", lambda url: reachable)
    options = prerequisites.torch_index(choice)
    assert (expected in options) if expected else options == ""


def test_a_bad_torch_choice_is_refused(capsys) -> None:
    with pytest.raises(SystemExit):
        prerequisites.torch_index("rocm")
    assert "TORCH: expected auto, cpu, cuda or pypi, got 'rocm'" in capsys.readouterr().err


def make_dry_run(folder: Path, target: str) -> str:
    result = subprocess.run(
        ["make", "-n", "-C", str(folder), target, "PYTHON=python3"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "MAKEFLAGS": ""},
    )
    return result.stdout


@POSIX_MAKE
def test_book_drops_the_execution_cache_when_the_package_changes(tmp_path: Path) -> None:
    for name in ("Makefile", "requirements.txt", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "tools", tmp_path / "tools", ignore=shutil.ignore_patterns("node_*"))
    module = tmp_path / "src" / "attention_from_scratch" / "simplified.py"
    module.parent.mkdir(parents=True)
    module.write_text("x = 1\n", encoding="utf-8")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / ".installed").touch()
    (tmp_path / "_build").mkdir()
    stamp = tmp_path / "_build" / ".package-stamp"
    stamp.touch()
    # The package is older than the last build: the cache stays.
    past = time.time() - 60
    os.utime(module, (past, past))
    assert "rm -rf _build/.jupyter_cache" not in make_dry_run(tmp_path, "book")
    # The package changed since: the chapters run again.
    module.write_text("x = 2\n", encoding="utf-8")
    os.utime(stamp, (past, past))
    assert "rm -rf _build/.jupyter_cache" in make_dry_run(tmp_path, "book")


@POSIX_MAKE
def test_clean_removes_everything_the_build_and_tests_create() -> None:
    commands = make_dry_run(ROOT, "clean")
    for leftover in ("_build", ".venv", ".hypothesis", "egg-info", "node_modules", "__pycache__"):
        assert leftover in commands


def test_kernel_configuration_is_installed_with_the_environment() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "cp tools/ipython_kernel_config.py $(VENV)/etc/ipython/" in makefile
    config = (ROOT / "tools" / "ipython_kernel_config.py").read_text(encoding="utf-8")
    assert 'c.IPKernelApp.log_level = "ERROR"' in config


def test_contributing_names_files_and_commands_that_exist() -> None:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    for path in re.findall(r"`((?:tests|tools|src|book)/[\w/.-]+\.(?:py|md|toml|ipynb))", text):
        if "chN" not in path:  # `chN.py` names the pattern, not a file
            assert (ROOT / path).exists(), path
    requirements = (ROOT / "requirements.txt").read_text(encoding="utf-8")
    for tool in re.findall(r"^\s*(?:\$ )?(jupyter nbconvert|nbstripout)", text, re.MULTILINE):
        assert tool.split()[-1] in requirements, tool
