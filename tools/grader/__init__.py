"""The course's grader, `make grade SUBMISSIONS=DIR` (`tools/grade.py` is its command line).

- ``config.py``: the frozen, typed configuration, checked once;
- ``sandbox.py``: the bubblewrap sandbox and limits each kernel runs in;
- ``run.py``: one notebook run in a fresh kernel with the grader's cells, and scored;
- ``folder.py``: a folder graded, each notebook in a process of its own;
- ``report.py``: the one row type, grades.csv and the feedback files;
- ``cli.py``: the command line.
"""

from __future__ import annotations

from .cli import main
from .config import DEFAULT_HIDDEN, SANDBOXES, GradingConfig, Limits
from .folder import grade_folder
from .report import ExerciseScore, ManualExercise, Row, feedback_text, write_csv
from .sandbox import ADVICE, SandboxUnavailable, sandbox_command, sandbox_problem

__all__ = [
    "ADVICE",
    "DEFAULT_HIDDEN",
    "SANDBOXES",
    "ExerciseScore",
    "GradingConfig",
    "Limits",
    "ManualExercise",
    "Row",
    "SandboxUnavailable",
    "feedback_text",
    "grade_folder",
    "main",
    "sandbox_command",
    "sandbox_problem",
    "write_csv",
]
