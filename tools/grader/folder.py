"""Grade a folder: each notebook in a process of its own, a few at a time."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .config import (
    DEFAULT_GRADING,
    DEFAULT_MEMORY_GIB,
    DEFAULT_SECRET,
    DEFAULT_TIMEOUT,
    GradingConfig,
)
from .graded import read_secret
from .grades import Row, write_csv, write_feedback
from .sandbox import ADVICE, SandboxUnavailable, own_processes, sandbox_problem

# The command line that grades one notebook (`--one`) sits beside this package.
SCRIPT = Path(__file__).resolve().parent.parent / "grade.py"
# What the grader writes into the folder, never graded.
OUTPUTS = {"grades.csv", "feedback", "gradebook.csv"}


def kernel_threads(workers: int) -> dict[str, str]:
    """The environment of each child: where nobody chose a thread count, its kernel gets a
    share of the cores. torch's default, one thread per core in each of ``workers`` kernels,
    oversubscribes them, and OpenMP threads then spend their time waiting on each other."""
    if "OMP_NUM_THREADS" in os.environ:
        return dict(os.environ)
    share = max(1, (os.cpu_count() or 1) // max(1, workers))
    return {**os.environ, "OMP_NUM_THREADS": str(share)}


def run_child(
    path: Path,
    config: GradingConfig,
    student: str | None = None,
    env: dict[str, str] | None = None,
) -> Row:
    """Grade one notebook in a process of its own; a process that fails is a row too."""
    with tempfile.TemporaryDirectory(prefix="grade-result-") as scratch:
        out = Path(scratch) / "result.json"
        # The configuration, with the secret, goes through stdin, not the command line or the
        # environment.
        payload = json.dumps(
            {"config": config.to_json(), "path": str(path), "out": str(out), "student": student}
        )
        status, notes = f"timeout after {config.timeout:g} s", "the grader stopped it"
        try:
            child = subprocess.run(
                [sys.executable, str(SCRIPT), "--one"],
                input=payload,
                text=True,
                capture_output=True,
                # The notebook's time, then each exercise's calls (run.CALL_TIMEOUT each).
                timeout=config.timeout + 1200,
                check=False,
                env=env,
            )
            stderr = child.stderr.strip().splitlines()
            status, notes = "grader error", (stderr[-1] if stderr else "")[:200]
        except subprocess.TimeoutExpired:
            pass
        if out.is_file():
            return Row.from_dict(json.loads(out.read_text()))
    return Row(path.name, config.isolation, status=status, notes=notes)


def grade_one(payload: str) -> None:
    """The child's side of :func:`run_child`: grade the notebook named in ``payload``."""
    from .run import grade_notebook

    data = json.loads(payload)
    config = GradingConfig.from_json(data["config"])
    row = grade_notebook(Path(data["path"]), config, data.get("student"))
    Path(data["out"]).write_text(json.dumps(row.to_dict()))


def grade_folder(
    folder: str | Path,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    workers: int = 2,
    grading_dir: str | Path = DEFAULT_GRADING,
    secret_path: str | Path = DEFAULT_SECRET,
    students: Mapping[str, str] | None = None,
    sandbox: str = "bwrap",
    memory_gib: float = DEFAULT_MEMORY_GIB,
) -> list[Row]:
    """Grade every file of ``folder``; write grades.csv and feedback/; return the rows.

    Each notebook gets its student's variant: ``students`` maps a file name to its student's
    key (from the roster); a file it does not name is its own student.

    Raises:
        FileNotFoundError: ``folder`` is not a folder.
        ValueError: an option out of range (the sandbox, the timeout, the memory), named.
        SandboxUnavailable: ``sandbox="bwrap"`` where bubblewrap cannot run; the message
            says what to install, or how to grade elsewhere or without isolation.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"SUBMISSIONS: expected a folder, got {str(folder)!r}")
    processes = 0
    if sandbox == "bwrap":
        if problem := sandbox_problem():
            raise SandboxUnavailable(f"Cannot grade in a sandbox: {problem}\n{ADVICE}")
        # Per kernel; the process limit counts every process of this user (root is exempt).
        processes = own_processes() + 1024
    config = GradingConfig.make(
        timeout=timeout,
        grading_dir=grading_dir,
        secret=read_secret(Path(secret_path)).decode("ascii"),
        sandbox=sandbox,
        memory_gib=memory_gib,
        processes=processes,
    )
    files = sorted(
        p for p in folder.iterdir() if p.name not in OUTPUTS and not p.name.startswith(".")
    )
    notebooks = [p for p in files if p.suffix == ".ipynb" and p.is_file()]
    env = kernel_threads(workers)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        keys = students or {}
        graded = dict(
            zip(
                notebooks,
                pool.map(lambda p: run_child(p, config, keys.get(p.name), env), notebooks),
                strict=False,
            )
        )
    rows = []
    for path in files:
        if path in graded:
            rows.append(graded[path])
        else:
            kind = "a folder" if path.is_dir() else f"a {path.suffix or 'file'} file"
            rows.append(
                Row(
                    path.name,
                    config.isolation,
                    status="not a notebook",
                    notes=f"{kind}, not .ipynb",
                )
            )
    write_csv(folder / "grades.csv", rows)
    write_feedback(folder / "feedback", rows)
    return rows


def grade_nbgrader(course: str | Path, assignment: str, **options: object) -> list[Row]:
    """Grade an nbgrader course's submissions of one assignment outside the students' reach.

    nbgrader keeps each student's notebooks in ``course/submitted/<student>/<assignment>/``;
    each is graded as :func:`grade_folder` grades, on that student's variant (keyed by the
    nbgrader student id), and ``grades.csv`` and ``feedback/`` are written to
    ``course/grades/<assignment>/`` (a notebook's row is named ``<student>/<file>``, its
    feedback file ``<student>--<file>.md``).

    Raises:
        FileNotFoundError: ``course`` has no submissions of ``assignment``.
    """
    course = Path(course)
    found = sorted(course.glob(f"submitted/*/{assignment}/*.ipynb"))
    if not found:
        raise FileNotFoundError(
            f"SUBMISSIONS: expected nbgrader submissions in {course}/submitted/<student>/"
            f"{assignment}/, found none"
        )
    out = course / "grades" / assignment
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="nbgrader-") as scratch:
        students = {}
        for path in found:
            student = path.parent.parent.name
            name = f"{student}--{path.name}"
            shutil.copy2(path, Path(scratch) / name)
            students[name] = f"nbgrader={student}"
        rows = grade_folder(scratch, students=students, **options)  # type: ignore[arg-type]
    # Feedback files keep the flat names (`<student>--<file>.md`); rows name the student.
    write_feedback(out / "feedback", rows)
    named = [
        Row.from_dict({**row.to_dict(), "submission": row.submission.replace("--", "/", 1)})
        for row in rows
    ]
    write_csv(out / "grades.csv", named)
    return named
