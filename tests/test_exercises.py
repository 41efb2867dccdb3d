"""The self-check: checks look answers up by name, fail with their hint, never raise; and the
book's exercises, as declared in the package and as the grader grades them, agree."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from attention_from_scratch.exercises import (
    Exercise,
    all_exercises,
    check,
    format_result,
    get_exercise,
    load_check_file,
    run_checks,
)

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "exercise_fixtures"
load_check_file(FIXTURES / "ch0.py")
sys.path.insert(0, str(ROOT / "tools"))

from grader.graded import load_all  # noqa: E402

BASE = torch.tensor([1.0, 2.0, 3.0])


def test_a_correct_answer_passes_and_says_so(capsys: pytest.CaptureFixture) -> None:
    result = check("ch0-ex-double", {"double": lambda x: 2 * x, "base": BASE})
    out = capsys.readouterr().out
    assert result.passed
    assert "pass  `double` keeps the shape of its input" in out
    assert "All 2 checks pass, on the inputs each one names" in out and "FAIL" not in out


@pytest.mark.parametrize(
    ("namespace", "reason"),
    [
        ({"base": BASE}, "`double` is not defined"),
        ({"double": ..., "base": BASE}, "`double` is still `...`"),
        ({"double": lambda x: "not a tensor", "base": BASE}, "expected a tensor, got str"),
    ],
)
def test_a_missing_or_wrong_answer_fails_with_its_hint(
    namespace: dict, reason: str, capsys: pytest.CaptureFixture
) -> None:
    result = check("ch0-ex-double", namespace)
    out = capsys.readouterr().out
    assert not result.passed
    assert reason in out
    assert "Hint: `double(base)` must hold 2, 4 and 6" in out
    assert "0 of 2 checks pass" in out


def test_partly_right_is_reported_check_by_check() -> None:
    result = check("ch0-ex-double", {"double": lambda x: x, "base": BASE})
    assert [c.passed for c in result.checks] == [True, False]


def test_check_reads_the_callers_globals(capsys: pytest.CaptureFixture) -> None:
    globals()["total"] = lambda x: float(x.sum())
    globals()["base"] = BASE
    try:
        result = check("ch0-ex-total")
    finally:
        del globals()["total"], globals()["base"]
    assert result.passed


def test_an_exercise_answered_in_words_has_nothing_to_check(
    capsys: pytest.CaptureFixture,
) -> None:
    result = check("ch0-ex-explain", {})
    assert not result.checks and not result.passed
    assert "your instructor reads this answer" in " ".join(capsys.readouterr().out.split())


def test_unknown_labels_are_reported_not_raised(capsys: pytest.CaptureFixture) -> None:
    assert check("ch0-ex-nothing-here", {}).error
    assert check("not a label", {}).error
    out = capsys.readouterr().out
    assert out.count("cannot check this exercise") == 2


def test_a_check_does_not_move_the_notebooks_random_stream() -> None:
    exercise = Exercise("ch0-ex-random", chapter=0)

    @exercise.check(hint="never fails")
    def draws(x):
        torch.rand(100)

    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    run_checks("ch0-ex-random", {"x": 1})
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"label": "Ch0-ex-bad", "chapter": 0}, ValueError, "chN-ex-name"),
        ({"label": "ch1-ex-bad", "chapter": 0}, ValueError, "expected 1"),
        ({"label": 3, "chapter": 0}, TypeError, "label: expected a str, got int"),
        ({"label": "ch0-ex-bad", "chapter": "0"}, TypeError, "chapter: expected an int"),
    ],
)
def test_bad_declarations_are_refused(kwargs: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        Exercise(**kwargs)


def test_checks_need_a_hint_and_named_parameters() -> None:
    exercise = Exercise("ch0-ex-declared", chapter=0)
    with pytest.raises(ValueError, match="hint"):
        exercise.check(hint=" ")
    with pytest.raises(ValueError, match="named parameters"):
        exercise.check(hint="h")(lambda *names: None)


# Every exercise of the book: each self-check must fail, with its hint, when the answer is
# missing, left as `...`, or one of a few plainly wrong values.
BOOK_CHECKS = [
    (exercise.label, c)
    for exercise in all_exercises()
    if exercise.chapter > 0
    for c in exercise.checks
]
WRONG_VALUES = [None, "wrong", torch.full((2, 2), float("nan")), lambda *args, **kwargs: None]


def test_the_book_declares_the_exercises_the_grader_grades() -> None:
    declared = {e.label for e in all_exercises() if e.chapter > 0}
    graded = {e.label for e in load_all()}
    assert declared
    assert graded <= declared, graded - declared
    # Every exercise the self-check can check is graded, automatically or by hand.
    checked = {e.label for e in all_exercises() if e.chapter > 0 and e.checks}
    assert checked <= graded, checked - graded


@pytest.mark.parametrize(
    ("label", "one_check"), BOOK_CHECKS, ids=[f"{lab}:{c.name}" for lab, c in BOOK_CHECKS]
)
def test_every_self_check_fails_for_a_wrong_answer_with_its_hint(label: str, one_check) -> None:
    exercise = get_exercise(label)
    for value in [..., *WRONG_VALUES]:
        namespace = dict.fromkeys(one_check.parameters, value)
        result = exercise.run(namespace)
        outcome = next(c for c in result.checks if c.name == one_check.name)
        assert not outcome.passed, f"{one_check.name} passed with every answer = {value!r}"
        # The printed report wraps long hints to the book's column: compare the words.
        assert outcome.hint and " ".join(outcome.hint.split()) in " ".join(
            format_result(result).split()
        )
    missing = next(c for c in exercise.run({}).checks if c.name == one_check.name)
    assert not missing.passed
