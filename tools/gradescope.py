"""Build a Gradescope autograder: `make gradescope CHAPTERS="3 4"`.

Writes `_build/gradescope/autograder-ch3-ch4.zip` (for CHAPTERS="3 4"), to upload as a
Gradescope programming assignment's autograder. The zip holds:

- `setup.sh`: finds or installs Python 3.11 or newer, makes a virtual environment and installs
  the course package from the wheel in the zip (built here, from this checkout: the package
  at the commit the zip was built from) with the pinned versions of `requirements.txt`
  (Triton's too when a chosen chapter's exercises are kernels, which the grader compiles and
  launches itself);
- `run_autograder`: runs `run.py` (tools/gradescope_run.py), which grades the submitted
  notebook with the course's grader (`grade.py` and `grader/`) and writes `results.json`;
- `grading/chN.py`: the graded exercises of the chosen chapters (what the grader draws, its
  references and judges), and `grading/.secret`, the course's secret, so that each student's
  variant is the one `make grade` draws for them: students never see either;
- `autograder.json`: the chapters, the commit and the time limit per notebook.

Usage: python tools/gradescope.py 3 4 [--out DIR] [--timeout 600] [--secret grading/.secret]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from grader.config import DEFAULT_SECRET  # tools/grader/, beside this file
from grader.graded import GRADING, load_all, read_secret
from grader.spec import KernelExercise
from prerequisites import CPU_INDEX  # tools/prerequisites.py, beside this file

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tools"
DEFAULT_OUT = ROOT / "_build" / "gradescope"
# What a kernel that runs a chapter needs, at the versions the book is built with.
RUNTIME = (
    "torch",
    "numpy",
    "matplotlib",
    "pooch",
    "tqdm",
    "requests",
    "urllib3",
    "filelock",
    "ipykernel",
    "nbformat",
    "nbclient",
)
# What the grader needs besides, for chapters whose exercises are Triton kernels: it compiles
# and launches them itself (Gradescope's containers are Linux x86-64, where Triton has wheels).
KERNEL_RUNTIME = ("triton",)

SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, when the autograder image is built (it has the network then).
set -euo pipefail
cd /autograder/source
python=""
for candidate in python3.13 python3.12 python3.11 python3; do
  if command -v "$candidate" >/dev/null &&
     "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    python=$candidate
    break
  fi
done
if [ -z "$python" ]; then  # Ubuntu 22.04's python3 is 3.10
  apt-get update -qq
  apt-get install -y -qq python3.11 python3.11-venv
  python=python3.11
fi
if ! "$python" -m venv /autograder/venv; then
  apt-get update -qq
  apt-get install -y -qq "$(basename "$python")-venv"
  "$python" -m venv /autograder/venv
fi
/autograder/venv/bin/python -m pip install --quiet --upgrade pip
/autograder/venv/bin/python -m pip install --quiet --extra-index-url {cpu_index} \\
  {pins} ./{wheel}
# The kernels the grader starts: registered in the virtual environment itself.
/autograder/venv/bin/python -m ipykernel install --sys-prefix --name python3
"""

RUN = """#!/usr/bin/env bash
# Gradescope runs this for every submission; results.json is written by run.py.
set -euo pipefail
root="${AUTOGRADER_ROOT:-/autograder}"
exec "${AUTOGRADER_PYTHON:-/autograder/venv/bin/python}" "$root/source/run.py"
"""


def pins(
    requirements: Path = ROOT / "requirements.txt", names: tuple[str, ...] = RUNTIME
) -> list[str]:
    """The `name==version` pins of requirements.txt for what the kernels need (an environment
    marker, such as Triton's platforms, left out)."""
    found = {}
    for line in requirements.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+)==([^\s;]+)\s*(?:;.*)?$", line.strip())
        if match and match.group(1).lower() in names:
            found[match.group(1).lower()] = f"{match.group(1)}=={match.group(2)}"
    missing = [name for name in names if name not in found]
    if missing:
        raise ValueError(f"requirements.txt: expected pins for {missing}, found none")
    return [found[name] for name in names]


def commit() -> str:
    """The commit of this checkout, marked `+changes` when files differ from it."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()

    head = git("rev-parse", "HEAD") or "unknown"
    return head + ("+changes" if git("status", "--porcelain", "--untracked-files=no") else "")


def build_wheel(folder: Path) -> Path:
    """The course package as a wheel, built from a copy of this checkout's package (a build
    in the checkout itself would leave build/ and *.egg-info/ behind)."""
    source = folder / "source"
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("*.egg-info"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"]
    subprocess.run([*pip, "--wheel-dir", str(folder), str(source)], check=True)
    (wheel,) = folder.glob("attention_from_scratch-*.whl")
    return wheel


def build(
    chapters: list[int],
    out: Path = DEFAULT_OUT,
    timeout: float = 600,
    secret: Path = DEFAULT_SECRET,
) -> Path:
    """Write the autograder zip for ``chapters`` into ``out``; return its path.

    Raises:
        ValueError: a chapter has no exercises, or ``timeout`` is not positive.
    """
    chapters = sorted(set(chapters))
    exercises = load_all(GRADING)
    known = {exercise.chapter for exercise in exercises}
    if not chapters or not set(chapters) <= known:
        raise ValueError(
            f"CHAPTERS: expected chapter numbers with exercises, from {sorted(known)}, "
            f"got {chapters}"
        )
    if not timeout > 0:
        raise ValueError(f"timeout: expected a positive number of seconds, got {timeout}")
    out.mkdir(parents=True, exist_ok=True)
    path = out / ("autograder-" + "-".join(f"ch{c}" for c in chapters) + ".zip")
    config = {"chapters": chapters, "commit": commit(), "timeout": timeout}
    with tempfile.TemporaryDirectory() as folder:
        wheel = build_wheel(Path(folder))
        kernels = any(isinstance(e, KernelExercise) and e.chapter in chapters for e in exercises)
        setup = SETUP.format(
            cpu_index=CPU_INDEX,
            pins=" ".join(pins(names=RUNTIME + KERNEL_RUNTIME if kernels else RUNTIME)),
            wheel=wheel.name,
        )
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            _add(archive, "setup.sh", setup, executable=True)
            _add(archive, "run_autograder", RUN, executable=True)
            _add(archive, "autograder.json", json.dumps(config, indent=1) + "\n")
            _add(archive, "run.py", (TOOLS / "gradescope_run.py").read_text(encoding="utf-8"))
            for name in ("grade.py", "gradebook.py"):
                _add(archive, name, (TOOLS / name).read_text(encoding="utf-8"))
            for module in sorted((TOOLS / "grader").glob("*.py")):
                name = f"grader/{module.name}"
                _add(archive, name, module.read_text(encoding="utf-8"))
            for chapter in chapters:
                graded = GRADING / f"ch{chapter}.py"
                _add(archive, f"grading/{graded.name}", graded.read_text(encoding="utf-8"))
            _add(archive, "grading/.secret", read_secret(secret).decode("ascii") + "\n")
            archive.write(wheel, wheel.name)
    return path


def _add(archive: zipfile.ZipFile, name: str, text: str, executable: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
    info.external_attr = (0o755 if executable else 0o644) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", type=int, nargs="+", help="chapter numbers, e.g. 3 4")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--timeout", type=float, default=600, help="seconds per notebook")
    parser.add_argument(
        "--secret", type=Path, default=DEFAULT_SECRET, help="the course's secret (made if missing)"
    )
    args = parser.parse_args(argv)
    try:
        path = build(args.chapters, args.out, args.timeout, args.secret)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"Wrote {path}: upload it as the assignment's autograder (book/instructors.md).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
