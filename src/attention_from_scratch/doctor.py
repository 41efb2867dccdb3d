"""What this machine gives the course, and what to fix: ``python -m attention_from_scratch doctor``.

Set-up trouble is the commonest reason a chapter does not run. The doctor reports Python,
torch (version and build), the device every chapter will use, where the course package was
installed from, and the word-vector cache; then each known problem with what to do about it.
The first cell of every chapter calls :func:`check_setup`, which prints only the problems.

Not a chapter's idea but an entry point, like the package's ``__init__``: it may import any
module, and none imports it.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import torch

from .device import pick_device
from .word_vectors import CACHE_ENV, OFFLINE_ENV, default_cache_dir

#: The oldest torch the package admits (pyproject.toml's ``torch>=``).
OLDEST_TORCH = (2, 5)
_YES = ("1", "true", "yes", "on")
_NO = ("", "0", "false", "no", "off")


@dataclass(frozen=True)
class Problem:
    """A known set-up problem and what to do about it.

    Introduced with the doctor (set-up, before chapter 1).
    """

    what: str
    remedy: str


@dataclass(frozen=True)
class Report:
    """What the doctor found: one field a line of its report.

    Introduced with the doctor (set-up, before chapter 1).
    """

    python: str
    torch: str
    build: str
    device: str
    package: str
    cache: str
    offline: str
    problems: tuple[Problem, ...]
    #: Worth knowing, with nothing to fix (the exit status stays 0).
    notes: tuple[Problem, ...] = ()


def _version_tuple(version: str) -> tuple[int, int]:
    parts = version.split("+")[0].split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return (0, 0)


def _build() -> str:
    if getattr(torch.version, "hip", None):
        return f"ROCm {torch.version.hip}"
    if torch.version.cuda:
        return f"CUDA {torch.version.cuda}"
    return "CPU only"


def _device_line(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    if device.type == "mps":
        return f"mps (Apple silicon, {platform.machine()})"
    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def _package_line() -> str:
    try:
        version = metadata.version("attention-from-scratch")
    except metadata.PackageNotFoundError:
        version = "not installed as a distribution"
    here = Path(__file__).resolve().parent
    return f"{version}, from {here}"


def _writable(folder: Path) -> bool:
    """Whether a file can be created in ``folder`` (made if missing), as a download would."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def examine(environ: Mapping[str, str] | None = None) -> Report:
    """Look at this machine and return what the doctor reports.

    Introduced with the doctor (set-up, before chapter 1).

    Args:
        environ: the environment variables to read (default: ``os.environ``).

    Returns:
        A :class:`Report`; ``problems`` is empty when nothing needs fixing, and ``notes`` holds
        what is worth knowing but may be just as the learner wants it.
    """
    environ = os.environ if environ is None else environ
    problems, notes = [], []
    if _version_tuple(torch.__version__) < OLDEST_TORCH:
        oldest = ".".join(map(str, OLDEST_TORCH))
        problems.append(
            Problem(
                f"torch {torch.__version__} is older than {oldest}, the oldest the course "
                "supports (scaled_dot_product_attention's enable_gqa, torch.nn.attention)",
                f'upgrade it: pip install --upgrade "torch>={oldest}"',
            )
        )
    device = pick_device()
    if torch.version.cuda and not torch.cuda.is_available():
        notes.append(
            Problem(
                f"this torch is built for CUDA {torch.version.cuda} but sees no GPU (no "
                "NVIDIA driver, or no GPU): every chapter runs on the CPU",
                "in Colab, pick a GPU runtime (Runtime, Change runtime type); locally, the "
                "CPU-only build of torch is a far smaller install",
            )
        )
    if device.type == "mps" and environ.get("PYTORCH_ENABLE_MPS_FALLBACK", "") != "1":
        problems.append(
            Problem(
                "the chapters run on Apple's MPS, which lacks some operations and float64",
                "if a cell stops with an MPS error, start Jupyter with "
                "PYTORCH_ENABLE_MPS_FALLBACK=1 so those operations run on the CPU",
            )
        )
    cache_env = environ.get(CACHE_ENV, "").strip()
    cache = Path(cache_env).expanduser() if cache_env else default_cache_dir()
    if not _writable(cache):
        problems.append(
            Problem(
                f"the word-vector cache {cache} cannot be written: chapter 4 cannot download "
                "its vectors there",
                f"set {CACHE_ENV} to a folder you can write, or copy the vectors into it",
            )
        )
    offline = environ.get(OFFLINE_ENV, "").strip().lower()
    if offline not in _YES + _NO:
        problems.append(
            Problem(
                f"{OFFLINE_ENV} is {offline!r}, which the course does not understand",
                f"set {OFFLINE_ENV} to 1 (no downloads) or 0, or unset it",
            )
        )
    return Report(
        python=f"{platform.python_version()} ({sys.executable})",
        torch=torch.__version__,
        build=_build(),
        device=_device_line(device),
        package=_package_line(),
        cache=f"{cache}{'' if cache_env else ' (the default)'}",
        offline="downloads off" if offline in _YES else "downloads allowed",
        problems=tuple(problems),
        notes=tuple(notes),
    )


def format_report(report: Report, *, problems_only: bool = False) -> str:
    """The report as the doctor prints it.

    Introduced with the doctor (set-up, before chapter 1).

    Args:
        report: what :func:`examine` returned.
        problems_only: leave out the facts; print only the problems and notes (nothing when
            there are none).
    """
    lines = []
    if not problems_only:
        lines += [
            f"Python:        {report.python}",
            f"torch:         {report.torch} ({report.build})",
            f"device:        {report.device}",
            f"course:        {report.package}",
            f"word vectors:  {report.cache}; {report.offline}",
        ]
        if not report.problems:
            lines.append("No known problem.")
    for problem in report.problems:
        lines.append(f"Problem: {problem.what}.")
        lines.append(f"  What to do: {problem.remedy}.")
    for note in report.notes:
        lines.append(f"Note: {note.what}.")
        lines.append(f"  If you want another device: {note.remedy}.")
    return "\n".join(lines)


def check_setup() -> None:
    """Print the known set-up problems and notes of this machine, if any (the chapters' first
    cell).

    Introduced with the doctor (set-up, before chapter 1).
    """
    text = format_report(examine(), problems_only=True)
    if text:
        print(text, file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m attention_from_scratch doctor``: print the report; exit 1 on a problem (a
    note, which needs nothing done, leaves the exit status 0)."""
    parser = argparse.ArgumentParser(
        prog="python -m attention_from_scratch", description=__doc__.splitlines()[0]
    )
    parser.add_argument("command", choices=["doctor"])
    parser.parse_args(argv)
    report = examine()
    print(format_report(report))
    return 1 if report.problems else 0
