"""The exercises of every chapter: their checks, points and the self-check students run.

Each chapter's exercises live in ``chN.py`` (declared with :class:`Exercise`); a notebook
checks an answer with ``check("chN-ex-name")`` (``_core.py``). Hidden checks for grading are
not in this package: they live in the repository's ``grading/hidden/chN.py``. The grader's
side is ``integrity.py`` (it runs the checks in a kernel it does not trust) and
``report.py`` (the one format the kernel prints and the grader reads).
"""

from __future__ import annotations

from ._core import (
    Check,
    Exercise,
    answer_module,
    answer_tensor,
    check,
    format_result,
    run_checks,
)
from ._registry import (
    all_exercises,
    chapter_of,
    get_exercise,
    load_chapter,
    load_check_file,
    load_hidden,
)
from ._shortcuts import ShortcutTaken, call_refusing, refusing
from .report import CheckResult, ExerciseResult

__all__ = [
    "Check",
    "CheckResult",
    "Exercise",
    "ExerciseResult",
    "ShortcutTaken",
    "all_exercises",
    "answer_module",
    "answer_tensor",
    "call_refusing",
    "chapter_of",
    "check",
    "format_result",
    "get_exercise",
    "load_chapter",
    "load_check_file",
    "load_hidden",
    "refusing",
    "run_checks",
]
