"""Grade an exercise against answers defined in this process, for the exercises' unit tests.

The same plan, runner and judges as ``make grade``, without a kernel: the runner that the
grader sends to a student's kernel runs here on a namespace of answers, and the grader reads
back what it wrote. Only for answers the tests themselves wrote.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from grader import channel, kernel_harness, kernel_side, kernels  # noqa: E402
from grader.graded import load_chapter  # noqa: E402
from grader.grades import ExerciseScore  # noqa: E402
from grader.run import judged  # noqa: E402
from grader.spec import GradedExercise, KernelExercise, Launch  # noqa: E402


def graded_exercise(label: str, folder: Path = ROOT / "grading") -> GradedExercise:
    """The grader's side of one exercise."""
    chapter = int(label[2:].split("-", 1)[0])
    (exercise,) = [e for e in load_chapter(chapter, folder) if e.label == label]
    return exercise


def grade(
    label: str,
    answers: Mapping[str, Any] | str,
    seed: int = 0,
    folder: Path = ROOT / "grading",
) -> ExerciseScore:
    """The score the grader gives ``answers`` (a namespace, or code that defines one) on the
    variant drawn from ``seed``."""
    if isinstance(answers, str):
        namespace: dict[str, Any] = {}
        exec(answers, namespace)
    else:
        namespace = dict(answers)
    exercise = graded_exercise(label, folder)
    cases = exercise.cases(np.random.default_rng(seed))
    with tempfile.TemporaryDirectory(prefix="grade-local-") as scratch:
        plan = channel.new_folder(Path(scratch))
        channel.write_plan(plan, [case.call for case in cases])
        kernel_side._grader_run(str(plan), namespace)
        try:
            results: list[list[Any]] | str = channel.read_results(plan, [c.call for c in cases])
        except channel.Unreadable as error:
            results = str(error)
    return judged(exercise, cases, results)


def grade_kernel(
    label: str, source: str | list[str], seed: int = 0, folder: Path = ROOT / "grading"
) -> ExerciseScore:
    """The score the grader gives the kernel defined in ``source`` (a cell, or the cells of a
    notebook) on the variant drawn from ``seed``: extracted and judged as ``make grade`` does,
    launched in the interpreter of this process (``TRITON_INTERPRET=1``, tests/conftest.py)
    instead of a sandboxed one, and not compiled for a GPU (the slow tests do that)."""
    exercise = graded_exercise(label, folder)
    assert isinstance(exercise, KernelExercise)
    cases = exercise.cases(np.random.default_rng(seed))
    launches = [case.call for case in cases if isinstance(case.call, Launch)]
    found = kernels.extract([source] if isinstance(source, str) else source)
    results: list[list[Any]] | str
    why = kernels.problem(found, exercise)
    if why:
        results = why
    else:
        with tempfile.TemporaryDirectory(prefix="grade-kernel-") as scratch:
            plan = kernels.prepare(Path(scratch), found, exercise, launches)
            kernel_harness._harness_main("run", str(plan))
            try:
                results = channel.read_results(plan, launches)
            except channel.Unreadable as error:
                results = str(error)
    return judged(exercise, cases, results)


def full_marks(score: ExerciseScore) -> bool:
    return score.earned == score.possible and not score.error


def failures(score: ExerciseScore) -> str:
    """The failed checks with their reasons, for an assertion message."""
    return "; ".join(f"{c.name}: {c.reason}" for c in score.checks if not c.passed) or score.error
