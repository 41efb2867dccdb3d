"""nbgrader's own environment, for tests/test_nbgrader_export.py.

nbgrader and its Jupyter server live in an environment of their own (they are not what
learners install), made once per user in the cache folder, outside the repository (the book
build and the linters must not read it). The course's environment is added to it, so its
kernels import torch and the course package as a student's would.

Making it is mostly a wait on the network, so tests/conftest.py starts it in the background
as soon as the test is selected (:func:`start`): other tests use the cores meanwhile, and the
test itself waits for it (:func:`python`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import sysconfig
import threading
from pathlib import Path

NBGRADER = "nbgrader==0.9.6"
NBGRADER_ENV = (
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    / "attention-from-scratch"
    / "nbgrader-0.9.6-env"
)
BIN = NBGRADER_ENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")

_background: list[threading.Thread] = []


def install(output: int | None = None) -> None:
    """Make the environment unless a complete one is there (``output``: where the commands'
    output goes; by default the test's). Test processes side by side may call it at once: a
    lock file lets one install while the others wait."""
    NBGRADER_ENV.parent.mkdir(parents=True, exist_ok=True)
    with open(NBGRADER_ENV.parent / ".nbgrader-env.lock", "w") as lock:
        if os.name == "posix":  # Windows runs the tests one at a time
            import fcntl

            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if (NBGRADER_ENV / ".ready").exists():
            return
        shutil.rmtree(NBGRADER_ENV, ignore_errors=True)
        for command in (
            [sys.executable, "-m", "venv", str(NBGRADER_ENV)],
            [str(PYTHON), "-m", "pip", "install", "--quiet", NBGRADER],
        ):
            subprocess.run(command, check=True, stdout=output, stderr=output)
        (NBGRADER_ENV / ".ready").touch()


def _install_quietly() -> None:
    # Into no test's output; a failure here is reported by the test, which installs again.
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        install(subprocess.DEVNULL)


def start() -> None:
    """Start making the environment in a background thread (once per process)."""
    if not _background and not (NBGRADER_ENV / ".ready").exists():
        _background.append(threading.Thread(target=_install_quietly, daemon=True))
        _background[0].start()


def python() -> Path:
    """The environment's Python, once it is made, pointed at this checkout's environment."""
    for thread in _background:
        thread.join()
    install()  # at once where the background made it; else here, failing with the reason
    purelib = subprocess.run(
        [str(PYTHON), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # The environment is shared by every checkout of this user: point it, each time, at the
    # environment (and so the course package) of the checkout under test.
    ours = sysconfig.get_paths()["purelib"]
    Path(purelib, "course-environment.pth").write_text(
        f"import site; site.addsitedir({ours!r})\n", encoding="utf-8"
    )
    return PYTHON
