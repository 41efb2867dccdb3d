"""The course's grader, `make grade SUBMISSIONS=DIR` (`tools/grade.py` is its command line).

- ``config.py``: the frozen, typed configuration, checked once;
- ``spec.py``: how a graded exercise is written (``grading/chN.py`` holds them);
- ``graded.py``: where they come from, and each student's variant;
- ``channel.py`` and ``kernel_side.py``: the data-only channel to the student's kernel;
- ``kernels.py`` and ``kernel_harness.py``: a Triton kernel exercise, read from the notebook's
  source, compiled for a GPU and launched in Triton's interpreter in a process of its own;
- ``sandbox.py``: the bubblewrap sandbox and limits each kernel runs in;
- ``run.py``: one notebook run in a fresh kernel, its answers called and judged;
- ``folder.py``: a folder graded, each notebook in a process of its own;
- ``grades.py``: the one row type, grades.csv and the feedback files;
- ``cli.py``: the command line.
"""

from __future__ import annotations

from .cli import main
from .config import DEFAULT_GRADING, DEFAULT_SECRET, SANDBOXES, GradingConfig, Limits
from .folder import grade_folder, grade_nbgrader
from .graded import load_all, load_chapter, read_secret, variant_rng, variant_seed
from .grades import ExerciseScore, ManualExercise, Row, feedback_text, write_csv
from .sandbox import ADVICE, SandboxUnavailable, sandbox_command, sandbox_problem

__all__ = [
    "ADVICE",
    "DEFAULT_GRADING",
    "DEFAULT_SECRET",
    "SANDBOXES",
    "ExerciseScore",
    "GradingConfig",
    "Limits",
    "ManualExercise",
    "Row",
    "SandboxUnavailable",
    "feedback_text",
    "grade_folder",
    "grade_nbgrader",
    "load_all",
    "load_chapter",
    "main",
    "read_secret",
    "sandbox_command",
    "sandbox_problem",
    "variant_rng",
    "variant_seed",
    "write_csv",
]
