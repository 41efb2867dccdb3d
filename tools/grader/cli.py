"""The grader's command line: `python tools/grade.py DIR` (`make grade SUBMISSIONS=DIR`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import gradebook  # tools/gradebook.py, beside this package

from .config import DEFAULT_GRADING, DEFAULT_MEMORY_GIB, DEFAULT_SECRET, DEFAULT_TIMEOUT, SANDBOXES
from .folder import grade_folder, grade_nbgrader, grade_one
from .grades import points_text
from .sandbox import SandboxUnavailable

DESCRIPTION = "Grade a folder of submitted notebooks: `make grade SUBMISSIONS=DIR`."


def parser() -> argparse.ArgumentParser:
    """The options of `tools/grade.py`."""
    options = argparse.ArgumentParser(description=DESCRIPTION)
    options.add_argument(
        "submissions",
        type=Path,
        help="folder of submitted .ipynb files (with --nbgrader: the nbgrader course folder)",
    )
    options.add_argument(
        "--nbgrader",
        metavar="ASSIGNMENT",
        help="grade an nbgrader course's submissions of ASSIGNMENT (e.g. ch3) and write "
        "COURSE/grades/ASSIGNMENT/",
    )
    options.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds each")
    options.add_argument("--workers", type=int, default=2, help="notebooks run in parallel")
    options.add_argument(
        "--grading", type=Path, default=DEFAULT_GRADING, help="the graded exercises, chN.py"
    )
    options.add_argument(
        "--secret",
        type=Path,
        default=DEFAULT_SECRET,
        help="the course's secret, which seeds each student's variant (made if missing)",
    )
    options.add_argument(
        "--sandbox",
        choices=SANDBOXES,
        default="bwrap",
        help="bwrap: each kernel in its own sandbox (Linux); none: no isolation",
    )
    options.add_argument(
        "--memory", type=float, default=DEFAULT_MEMORY_GIB, help="GiB of memory per kernel"
    )
    options.add_argument(
        "--roster",
        type=Path,
        default=None,
        help="the LMS's class list with a `submission` column: also write gradebook.csv",
    )
    return options


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: grade a folder, or (internally, `--one`) one notebook."""
    if argv is None:
        argv = sys.argv[1:]
    if list(argv) == ["--one"]:
        grade_one(sys.stdin.read())
        return 0
    args = parser().parse_args(argv)
    # A roster that cannot be read is refused before hours of grading, not after.
    roster = gradebook.Roster.read(args.roster) if args.roster is not None else None
    options = {
        "timeout": args.timeout,
        "workers": args.workers,
        "grading_dir": args.grading,
        "secret_path": args.secret,
        "sandbox": args.sandbox,
        "memory_gib": args.memory,
    }
    try:
        if args.nbgrader:
            rows = grade_nbgrader(args.submissions, args.nbgrader, **options)
            written = args.submissions / "grades" / args.nbgrader
        else:
            students = roster.students_by_file() if roster is not None else None
            rows = grade_folder(args.submissions, students=students, **options)
            written = args.submissions
    except (SandboxUnavailable, FileNotFoundError) as error:
        print(error, file=sys.stderr)
        return 2
    for row in rows:
        print(
            f"{row.submission}: {points_text(row.total) or '-'} / "
            f"{points_text(row.possible) or '-'} ({row.status})"
        )
    print(f"Wrote {written / 'grades.csv'} and {written / 'feedback'}/")
    if roster is not None:
        book = args.submissions / "gradebook.csv"
        for warning in gradebook.write_gradebook(book, roster, rows):
            print(f"gradebook: {warning}")
        print(f"Wrote {book}, for the LMS's grade import")
    return 0
