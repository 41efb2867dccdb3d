"""What a self-check reports: the results a learner reads.

:func:`~attention_from_scratch.exercises.check` returns an :class:`ExerciseResult`, one
:class:`CheckResult` per public check. The grader keeps records of its own (the repository's
``tools/grader``); nothing here is read back by it.
"""

from __future__ import annotations

from dataclasses import dataclass


def one_line(text: object, limit: int = 200) -> str:
    """``text`` on one line, cut to ``limit`` characters (a reason, an error).

    Introduced in chapter 1.
    """
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one public check.

    Introduced in chapter 1.

    Args:
        name: the check's function name.
        title: its readable name.
        passed: whether it passed.
        hint: its hint (shown when it failed).
        reason: why it failed, in one line ("" when it passed).
    """

    name: str
    title: str
    passed: bool
    hint: str
    reason: str = ""


@dataclass(frozen=True)
class ExerciseResult:
    """The outcome of self-checking one exercise: what :func:`check` returns.

    Introduced in chapter 1.

    Args:
        label: the exercise's label, e.g. ``"ch3-ex-sliding-window"``.
        checks: one result per public check.
        error: why the exercise could not be checked at all ("" when it could).
    """

    label: str
    checks: tuple[CheckResult, ...] = ()
    error: str = ""

    @property
    def passed(self) -> bool:
        """True when there were checks and every one passed."""
        return not self.error and bool(self.checks) and all(c.passed for c in self.checks)

    def __repr__(self) -> str:
        passed = sum(c.passed for c in self.checks)
        return f"ExerciseResult({self.label!r}, passed={passed} of {len(self.checks)})"

    def _ipython_display_(self) -> None:
        # `check(...)` is the last line of its cell: the lines are already printed, so the
        # notebook should not echo the result object below them.
        return None
