"""The book on other versions of torch than the one requirements.txt pins (README.md, "Other
torch versions"; CONTRIBUTING.md, "The torch range").

    nox -s compat      the unit tests and every chapter on the oldest torch pyproject.toml
                       admits and on the newest release, one session each
    nox -s colab       every chapter in an environment built the way Colab has it: the newest
                       torch preinstalled, the course package installed by the chapter's own
                       first cell, from the repository's URL form pointed at this checkout
    nox -s portability chapters 6 and 7, whose claims rest on training and random draws, under
                       every stand-in for another machine (tools/portability.py): other seeds,
                       thread counts and CPU kernels, oneDNN off

Add ``-R`` (``--reuse-existing-virtualenvs --no-install``) to run again without installing.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
# The oldest torch that `torch>=2.5` in pyproject.toml admits, at its last patch release
# (tests/test_compat_sessions.py keeps the two in step).
OLDEST_TORCH = "2.5.1"
NEWEST = "newest"
# The chapters, in the order of _toc.yml (tests/test_compat_sessions.py checks it).
NOTEBOOKS = sorted(str(path.relative_to(ROOT)) for path in ROOT.glob("book/[0-9][0-9]_*.ipynb"))
# The chapters' word vectors come from their labelled stand-in, as in CI; figures draw off-screen.
ENV = {"ATTENTION_FROM_SCRATCH_OFFLINE": "1", "MPLBACKEND": "Agg"}
# What Colab has preinstalled that the chapters use, besides torch: the course package's other
# dependencies are left for its install to bring, as they would be there.
COLAB_PREINSTALLED = ["numpy", "matplotlib", "requests", "tqdm", "ipykernel"]

nox.options.sessions = ["compat"]
nox.options.default_venv_backend = "venv"


def torch_requirement(version: str) -> list[str]:
    """pip arguments for one torch: a pinned release, or the newest one pip can install."""
    return ["--upgrade", "torch"] if version == NEWEST else [f"torch=={version}"]


def pinned_requirements(session: nox.Session) -> str:
    """requirements.txt without its torch and its editable package: every other package is the
    version that builds the book (the book's tools too, which some unit tests use), so a
    failure here is torch's."""
    lines = []
    for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        requirement = line.split("#")[0].strip()
        if requirement and not requirement.startswith("-") and not requirement.startswith("torch="):
            lines.append(requirement)
    path = Path(session.create_tmp()) / "requirements-without-torch.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def oldest_admitted_torch() -> str:
    """The lower bound of torch in pyproject.toml's dependencies, e.g. "2.5"."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (bound,) = [
        match.group(1)
        for dependency in pyproject["project"]["dependencies"]
        if (match := re.fullmatch(r"torch>=([\d.]+)", dependency.replace(" ", "")))
    ]
    return bound


def report_torch(session: nox.Session) -> None:
    session.run("python", "-c", "import torch; print('torch', torch.__version__)", silent=False)


@nox.session
@nox.parametrize("torch", [OLDEST_TORCH, NEWEST], ids=["oldest", "newest"])
def compat(session: nox.Session, torch: str) -> None:
    """The unit tests and every chapter (nbmake) on one torch, every other package pinned."""
    if not OLDEST_TORCH.startswith(oldest_admitted_torch() + "."):
        session.error(f"OLDEST_TORCH {OLDEST_TORCH} is not pyproject.toml's lower bound")
    session.install(*torch_requirement(torch), "-r", pinned_requirements(session), "-e", ".")
    report_torch(session)
    # What the chapters will see. A CUDA build of torch on a machine without a GPU is a note,
    # not a problem, so the doctor exits 0 there; any problem fails the session.
    session.run("python", "-m", "attention_from_scratch", "doctor", env=ENV)
    # One run, so that a failing unit test does not hide how the chapters fare (or the reverse).
    session.run(
        "python",
        "-m",
        "pytest",
        "-q",
        "-m",
        "not book and not slow",
        "--nbmake",
        "tests",
        *NOTEBOOKS,
        *session.posargs,
        env=ENV,
    )


@nox.session
def colab(session: nox.Session) -> None:
    """Every chapter as Colab runs it: newest torch preinstalled, then each chapter's first
    cell installs the package from a git URL of this checkout (tests/test_colab.py)."""
    session.install("--upgrade", "torch", *COLAB_PREINSTALLED, "pytest", "nbmake")
    # Colab starts without the course package; a reused environment must too.
    session.run("python", "-m", "pip", "uninstall", "--yes", "attention-from-scratch")
    report_torch(session)
    session.run(
        "python",
        "-m",
        "pytest",
        "-q",
        "--noconftest",
        "-p",
        "no:cacheprovider",
        "-m",
        "compat",
        "tests/test_colab.py",
        *session.posargs,
        env={**ENV, "ATTENTION_FROM_SCRATCH_COLAB_TEST": "1"},
    )


@nox.session
def portability(session: nox.Session) -> None:
    """Chapters 6 and 7 under every condition of tools/portability.py, in the pinned
    environment: every hidden guard must hold on each."""
    session.install("-r", "requirements.txt")
    report_torch(session)
    session.run("python", "tools/portability.py", "check", "06", "07", *session.posargs, env=ENV)
