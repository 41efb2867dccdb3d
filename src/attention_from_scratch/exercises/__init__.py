"""The exercises of every chapter and the self-check students run.

Each chapter's exercises live in ``chN.py`` (declared with :class:`Exercise`, with their
public checks); a notebook checks an answer on the page's example with
``check("chN-ex-name")`` (``_core.py``). Nothing here grades: the graded exercises, their
references and the inputs they draw live in the repository's ``grading/chN.py``, which the
grader (``tools/grader``) runs in a process of its own.
"""

from __future__ import annotations

from ._core import Check, Exercise, answer_tensor, check, format_result, run_checks
from ._registry import all_exercises, chapter_of, get_exercise, load_chapter, load_check_file
from .results import CheckResult, ExerciseResult

__all__ = [
    "Check",
    "CheckResult",
    "Exercise",
    "ExerciseResult",
    "all_exercises",
    "answer_tensor",
    "chapter_of",
    "check",
    "format_result",
    "get_exercise",
    "load_chapter",
    "load_check_file",
    "run_checks",
]
