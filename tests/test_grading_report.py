"""The grader's parts that need no kernel: the report the kernel prints and the grader reads,
the grader's scoring of it, the grader's side of the checks run in this process, and the
frozen configuration. (Tests that grade notebooks in kernels are in tests/test_grading*.py,
marked slow.)"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import importlib.util
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "exercise_fixtures"
sys.path.insert(0, str(ROOT / "tools"))

import grader  # noqa: E402
from grader import run  # noqa: E402

from attention_from_scratch.exercises import (  # noqa: E402
    CheckResult,
    ExerciseResult,
    get_exercise,
    integrity,
    load_check_file,
    report,
)
from attention_from_scratch.exercises.report import GraderReport, SetupReport  # noqa: E402

load_check_file(FIXTURES / "ch0.py")
HIDDEN = str(FIXTURES / "hidden")
CHECKS = [str(FIXTURES / "ch0.py")]
LABELS = ["ch0-ex-double", "ch0-ex-total"]


def result(passed: bool = True, points: float = 1.0, name: str = "doubled_shape") -> CheckResult:
    return CheckResult(name, "doubled shape", points, passed, "a hint", "", False)


def good_report() -> GraderReport:
    exercise = ExerciseResult(
        "ch0-ex-total", (CheckResult("total_value", "total value", 1.0, True, "h"),)
    )
    return GraderReport((exercise,), (), {"torch": 7})


# ------------------------------------------------------------------------------ the format


def test_a_report_reads_back_as_it_was_written() -> None:
    written = GraderReport(
        (
            ExerciseResult("ch0-ex-double", (result(), result(False, 2.0, "doubled_values"))),
            ExerciseResult("ch0-ex-total", error="loading checks failed: boom"),
        ),
        ("exercises._core.run_checks",),
        {"torch": -3, "builtins": 12},
    )
    assert GraderReport.from_json(written.to_json()) == written
    setup = SetupReport("", {"sys.modules": 5})
    assert SetupReport.from_json(setup.to_json()) == setup


def test_earned_points_are_computed_never_read() -> None:
    data = json.loads(good_report().to_json())
    data["results"][0]["checks"][0]["passed"] = False
    data["results"][0]["earned"] = 99
    read = GraderReport.from_json(json.dumps(data))
    assert read.results[0].earned == 0.0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: "not json", "one line of JSON"),
        (lambda d: d["results"], "expected a JSON object"),
        (lambda d: {k: v for k, v in d.items() if k != "findings"}, "expected the fields"),
        (lambda d: {**d, "earned": 9}, "expected the fields"),
        (lambda d: {**d, "results": {}}, "results: expected a list"),
        (lambda d: {**d, "findings": [3]}, "findings: expected a str"),
        (lambda d: {**d, "fingerprints": {"torch": "7"}}, "fingerprints"),
        (lambda d: set_check(d, "passed", "yes"), "passed: expected true or false"),
        (lambda d: set_check(d, "passed", 1), "passed: expected true or false"),
        (lambda d: set_check(d, "points", True), "points: expected a finite number"),
        (lambda d: set_check(d, "points", float("nan")), "points: expected a finite number"),
        (lambda d: set_check(d, "hint", None), "hint: expected a str"),
    ],
)
def test_a_malformed_report_is_refused_with_what_is_wrong(change: Any, message: str) -> None:
    data = json.loads(good_report().to_json())
    changed = change(data)
    line = changed if isinstance(changed, str) else json.dumps(changed)
    with pytest.raises(ValueError, match=message):
        GraderReport.from_json(line)


def set_check(data: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    data["results"][0]["checks"][0][key] = value
    return data


# ------------------------------------------------------------------ the grader's reading of it


def read(lines: list[str], labels: list[str] | None = None, prints: Any = None) -> tuple:
    auto = {label: get_exercise(label) for label in LABELS}
    return run.read_report(lines, labels or ["ch0-ex-total"], auto, prints or {"torch": 7})


def test_an_honest_report_is_scored_by_the_graders_own_checks() -> None:
    findings, scored = read([good_report().to_json()])
    assert findings == []
    score = scored["ch0-ex-total"]
    assert (score.earned, score.possible) == (1.0, 1.0)
    # Title and hint are the grader's own, not the ones the kernel printed.
    assert score.checks[0].hint == get_exercise("ch0-ex-total").checks[0].hint


def forged(**changes: Any) -> str:
    exercise = ExerciseResult(
        changes.get("label", "ch0-ex-total"),
        (
            CheckResult(
                changes.get("name", "total_value"), "t", changes.get("points", 1.0), True, "h"
            ),
        ),
    )
    return GraderReport((exercise,), changes.get("findings", ()), {"torch": 7}).to_json()


@pytest.mark.parametrize(
    ("lines", "finding"),
    [
        ([], "did not report"),
        ([forged(), forged()], "imitating"),
        (['{"results": [{"label": "ch0-ex-total", "earned": 9}]}'], "not the grader's"),
        ([forged(points=9.0)], "that it does not have"),
        ([forged(name="made_up")], "that it does not have"),
        ([forged(label="ch0-ex-double")], "another exercise"),
        ([forged(findings=("exercises._core.check",))], "exercises._core.check"),
    ],
)
def test_a_forged_or_malformed_report_earns_nothing(lines: list[str], finding: str) -> None:
    findings, _ = read(lines)
    assert any(finding in f for f in findings), findings


def test_a_changed_fingerprint_is_a_finding() -> None:
    findings, _ = read([forged()], prints={"torch": 8})
    assert findings == ["torch changed"]


# ------------------------------------------------- the grader's side, run in this process


def grader_check(namespace: dict[str, Any]) -> GraderReport:
    """What a check cell prints, from a fresh copy of the module as the cell loads it."""
    spec = importlib.util.spec_from_file_location("_grader_test_copy", integrity.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["_grader_test_copy"] = module
    try:
        spec.loader.exec_module(module)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            module.grader_check(LABELS, "M:", HIDDEN, CHECKS, namespace)
    finally:
        sys.modules.pop("_grader_test_copy", None)
    (line,) = [line for line in out.getvalue().splitlines() if line.startswith("M:")]
    return GraderReport.from_json(line[2:])


def answers() -> dict[str, Any]:
    return {
        "__builtins__": builtins,
        "doubled": torch.tensor([2.0, 4.0, 6.0]),
        "total": 6.0,
    }


@pytest.fixture(scope="module", autouse=True)
def setup_cell() -> SetupReport:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        integrity.grader_setup("S:", [0], HIDDEN, CHECKS)
    return SetupReport.from_json(out.getvalue().strip()[2:])


def test_the_setup_cell_loads_the_checks_and_fingerprints(setup_cell: SetupReport) -> None:
    assert setup_cell.error == ""
    assert {"torch", "builtins", "the import system"} <= set(setup_cell.fingerprints)


def test_fresh_checks_give_full_marks_and_find_nothing_changed() -> None:
    checked = grader_check(answers())
    assert checked.findings == ()
    assert [(r.label, r.earned, r.possible) for r in checked.results] == [
        ("ch0-ex-double", 4.0, 4.0),
        ("ch0-ex-total", 1.0, 1.0),
    ]


def test_a_patched_result_class_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    def to_dict(self: CheckResult) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "passed": True}

    monkeypatch.setattr(report.CheckResult, "to_dict", to_dict)
    checked = grader_check({**answers(), "doubled": None})
    assert "report.CheckResult" in checked.findings
    # The fresh checks still fail the wrong answer.
    assert checked.results[0].earned == 0.0


def test_a_check_loaded_from_files_is_found_by_the_grader() -> None:
    module = load_check_file(FIXTURES / "ch0.py")
    assert module.__name__.startswith(integrity.CHECK_MODULE_PREFIX)


# ------------------------------------------------------------------------- the configuration


def test_the_configuration_reads_back_and_is_frozen(tmp_path: Path) -> None:
    config = grader.GradingConfig.make(
        timeout=30, hidden_dir=tmp_path, check_files=[tmp_path / "c.py"], sandbox="none"
    )
    assert grader.GradingConfig.from_json(config.to_json()) == config
    assert config.check_files == (str((tmp_path / "c.py").resolve()),)
    assert config.isolation == "none: not isolated"
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.timeout = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"timeout": 0}, "timeout: expected a number of seconds > 0, got 0"),
        ({"timeout": float("inf")}, "timeout: expected"),
        ({"timeout": "600"}, "timeout: expected"),
        ({"timeout": True}, "timeout: expected"),
        ({"sandbox": "docker"}, r"sandbox: expected one of \('bwrap', 'none'\), got 'docker'"),
        ({"memory_gib": -1}, "memory_gib: expected a number of GiB > 0, got -1"),
        ({"processes": -5}, r"limits.processes: expected an int >= 0, got -5"),
    ],
)
def test_bad_options_are_refused_by_name(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        grader.GradingConfig.make(**options)


def test_a_configuration_with_an_unknown_field_is_refused() -> None:
    data = json.loads(grader.GradingConfig.make(sandbox="none").to_json())
    with pytest.raises(ValueError, match="config: "):
        grader.GradingConfig.from_json(json.dumps({**data, "trusted": True}))


def test_grading_a_missing_folder_or_a_bad_option_fails_before_any_kernel(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="SUBMISSIONS: expected a folder"):
        grader.grade_folder(tmp_path / "missing", sandbox="none")
    with pytest.raises(ValueError, match="sandbox: expected one of"):
        grader.grade_folder(tmp_path, sandbox="docker")
    assert not (tmp_path / "grades.csv").exists()


def test_rows_read_back_as_the_child_process_wrote_them() -> None:
    row = grader.Row(
        "a.ipynb",
        "bwrap",
        status="timeout after 20 s",
        notes="1 cell(s) raised",
        exercises={"ch0-ex-double": grader.ExerciseScore(1.0, 4.0, (result(),), "")},
        manual=(grader.ManualExercise("ch0-ex-explain", 2.0),),
        errors=("cell 3: RuntimeError: x",),
        total=1.0,
        possible=5.0,
    )
    assert grader.Row.from_dict(json.loads(json.dumps(row.to_dict()))) == row
