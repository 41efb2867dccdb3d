"""The exercises of every chapter: their checks, points and the self-check students run.

Each chapter's exercises live in ``chN.py`` (declared with :class:`Exercise`); a notebook
checks an answer with ``check("chN-ex-name")``. Hidden checks for grading are not in this
package: they live in the repository's ``grading/hidden/chN.py``.
"""

from __future__ import annotations

from ._core import (
    Check,
    CheckResult,
    Exercise,
    ExerciseResult,
    all_exercises,
    answer_module,
    answer_tensor,
    chapter_of,
    check,
    format_result,
    get_exercise,
    load_chapter,
    load_check_file,
    load_hidden,
    run_checks,
)
from ._shortcuts import ShortcutTaken, refusing

__all__ = [
    "Check",
    "CheckResult",
    "Exercise",
    "ExerciseResult",
    "ShortcutTaken",
    "all_exercises",
    "answer_module",
    "answer_tensor",
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
