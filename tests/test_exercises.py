"""The exercise machinery: checks look answers up by name, fail with their hint, never raise."""

from __future__ import annotations

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
    load_hidden,
    run_checks,
)

FIXTURES = Path(__file__).parent / "exercise_fixtures"
load_check_file(FIXTURES / "ch0.py")


def test_a_correct_answer_earns_every_point_and_says_so(capsys: pytest.CaptureFixture) -> None:
    namespace = {"doubled": torch.tensor([2.0, 4.0, 6.0])}
    result = check("ch0-ex-double", namespace)
    out = capsys.readouterr().out
    assert (result.earned, result.possible, result.passed) == (3.0, 3.0, True)
    assert "All 2 checks pass" in out
    assert "FAIL" not in out


def test_a_single_passing_check_is_reported_in_the_singular(
    capsys: pytest.CaptureFixture,
) -> None:
    result = check("ch0-ex-total", {"total": 6.0})
    out = capsys.readouterr().out
    assert result.passed
    assert "The check passes (1/1 points). Well done!" in out
    assert "All 1 checks" not in out


@pytest.mark.parametrize(
    ("namespace", "reason"),
    [
        ({}, "`doubled` is not defined"),
        ({"doubled": ...}, "`doubled` is still `...`"),
        ({"doubled": "not a tensor"}, "Hint: `doubled` must be a tensor of shape (3,)."),
    ],
)
def test_a_missing_or_wrong_answer_fails_with_its_hint(
    namespace: dict, reason: str, capsys: pytest.CaptureFixture
) -> None:
    result = check("ch0-ex-double", namespace)
    out = capsys.readouterr().out
    assert result.earned == 0.0 and result.possible == 3.0
    assert reason in out
    assert "Hint: `doubled` must hold 2, 4 and 6" in out
    assert "0 of 2 checks pass" in out


def test_partly_right_earns_part_of_the_points(capsys: pytest.CaptureFixture) -> None:
    result = check("ch0-ex-double", {"doubled": torch.tensor([1.0, 2.0, 3.0])})
    assert (result.earned, result.possible) == (1.0, 3.0)
    assert [c.passed for c in result.checks] == [True, False]


def test_check_reads_the_callers_globals(capsys: pytest.CaptureFixture) -> None:
    globals()["total"] = 6.0
    try:
        result = check("ch0-ex-total")
    finally:
        del globals()["total"]
    assert result.passed


def test_unknown_labels_are_reported_not_raised(capsys: pytest.CaptureFixture) -> None:
    assert check("ch0-ex-nothing-here", {}).error
    assert check("not a label", {}).error
    out = capsys.readouterr().out
    assert out.count("cannot check this exercise") == 2


def test_a_check_does_not_move_the_notebooks_random_stream() -> None:
    exercise = Exercise("ch0-ex-random", chapter=0)

    @exercise.check(points=1, hint="never fails")
    def draws(x):
        torch.rand(100)

    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    run_checks("ch0-ex-random", {"x": 1})
    assert torch.equal(torch.rand(3), expected)


def test_hidden_checks_run_only_for_the_grader(capsys: pytest.CaptureFixture) -> None:
    load_hidden(FIXTURES / "hidden")
    namespace = {"doubled": torch.tensor([2, 4, 6])}  # int64: fails the hidden dtype check
    public = check("ch0-ex-double", namespace)
    graded = run_checks("ch0-ex-double", namespace, hidden=True)
    assert "dtype" not in capsys.readouterr().out
    assert (public.earned, public.possible) == (3.0, 3.0)
    assert (graded.earned, graded.possible) == (3.0, 4.0)
    assert get_exercise("ch0-ex-double").points == 4.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"label": "Ch0-ex-bad", "chapter": 0}, "chN-ex-name"),
        ({"label": "ch1-ex-bad", "chapter": 0}, "expected 1"),
        ({"label": "ch0-ex-bad", "chapter": 0, "manual_points": 1}, "rubric"),
        ({"label": "ch0-ex-bad", "chapter": 0, "manual_points": -1}, "manual_points"),
    ],
)
def test_bad_declarations_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Exercise(**kwargs)


def test_checks_need_points_a_hint_and_named_parameters() -> None:
    exercise = Exercise("ch0-ex-declared", chapter=0)
    with pytest.raises(ValueError, match="points"):
        exercise.check(points=0, hint="h")
    with pytest.raises(ValueError, match="hint"):
        exercise.check(points=1, hint=" ")
    with pytest.raises(ValueError, match="named parameters"):
        exercise.check(points=1, hint="h")(lambda *names: None)


# Every exercise of the book (and hidden checks): each check must fail, with its hint, when the
# answer is missing, left as `...`, or one of a few plainly wrong values.
ROOT = Path(__file__).resolve().parent.parent
load_hidden(ROOT / "grading" / "hidden")
BOOK_CHECKS = [
    (exercise.label, c)
    for exercise in all_exercises()
    if exercise.chapter > 0
    for c in exercise.checks
]
WRONG_VALUES = [None, "wrong", torch.full((2, 2), float("nan"))]


def test_the_book_declares_exercises() -> None:
    assert {e.chapter for e in all_exercises() if e.chapter > 0}


@pytest.mark.parametrize(
    ("label", "one_check"), BOOK_CHECKS, ids=[f"{lab}:{c.name}" for lab, c in BOOK_CHECKS]
)
def test_every_check_fails_for_a_wrong_answer_with_its_hint(label: str, one_check) -> None:
    exercise = get_exercise(label)
    for value in [..., *WRONG_VALUES]:
        namespace = dict.fromkeys(one_check.parameters, value)
        result = exercise.run(namespace, hidden=True)
        outcome = next(c for c in result.checks if c.name == one_check.name)
        assert not outcome.passed, f"{one_check.name} passed with every answer = {value!r}"
        # The printed report wraps long hints to the book's column: compare the words.
        assert outcome.hint and " ".join(outcome.hint.split()) in " ".join(
            format_result(result).split()
        )
    missing = next(c for c in exercise.run({}, hidden=True).checks if c.name == one_check.name)
    assert not missing.passed
