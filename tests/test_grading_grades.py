"""The grader's parts that need no kernel: the data-only channel (what it writes, and how it
reads what a kernel could have written), the judging, each student's variant, the frozen
configuration and the rows. (Tests that grade notebooks in kernels are marked slow.)"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "exercise_fixtures"
sys.path.insert(0, str(ROOT / "tools"))

import grader  # noqa: E402
from grader import channel, kernel_side  # noqa: E402
from grader.grades import CheckScore  # noqa: E402
from grader.run import judged  # noqa: E402
from grader.spec import (  # noqa: E402
    Call,
    Case,
    Module,
    ModuleState,
    Other,
    Raised,
    Result,
    Seeded,
    Step,
    Tensor,
    call,
    problem_with_tensor,
    value_of,
)

GRADING = FIXTURES / "grading"
SECRET = "s" * 40


# ------------------------------------------------------------------------------ the channel


def run_in_process(calls: list[Call], namespace: dict[str, Any], folder: Path) -> Any:
    """Write the plan, run the kernel's side on ``namespace`` here, read what came back."""
    plan = channel.new_folder(folder)
    channel.write_plan(plan, calls)
    kernel_side._grader_run(str(plan), namespace)
    return channel.read_results(plan, calls)


def test_tensors_numbers_modules_and_errors_travel_as_data(tmp_path: Path) -> None:
    import torch

    namespace = {
        "double": lambda x: 2 * x,
        "pair": lambda x: (x.sum().item(), int(x.numel()), x > 0),
        "fail": lambda: 1 / 0,
        "make": lambda n: torch.nn.Linear(n, 2, bias=False),
        "draw": lambda generator: torch.rand(2, generator=generator),
    }
    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    weights = np.ones((4, 3), dtype=np.float32)
    calls = [
        call("double", x),
        call("pair", x),
        call("fail"),
        call("missing"),
        Call((Step("make", args=(3,)), Step(Result(0), "weight", called=False))),
        call("draw", Seeded(5)),
        call(
            "double",
            Module(
                "MultiHeadAttention",
                {"d_in": 3, "d_out": 4, "context_length": 4, "dropout": 0.0, "num_heads": 2},
                {"W_query.weight": weights},
            ),
        ),
    ]
    got = run_in_process(calls, namespace, tmp_path)
    (doubled,) = got[0]
    assert isinstance(doubled.value, Tensor) and doubled.value.dtype == "torch.float64"
    assert np.array_equal(doubled.value.array, 2 * x)
    total, count, positive = got[1][0].value
    assert (total, count) == (15.0, 6)
    assert positive.dtype == "torch.bool" and positive.array.sum() == 5
    assert got[2][0].value == Raised("ZeroDivisionError", "division by zero")
    assert got[3][0].value.type_name == "NameError"
    module, weight = got[4]
    assert isinstance(module.value, ModuleState) and module.value.name == "Linear"
    assert weight.value.shape == (2, 3)
    assert np.allclose(got[5][0].value.array, torch.rand(2, generator=torch.manual_seed(5)))
    # A module built in the kernel from the grader's weights: twice it is an error, but it
    # was built, with the weights the grader sent.
    assert got[6][0].value.type_name == "TypeError"


def test_a_detached_module_gives_the_same_outputs_and_no_gradient(tmp_path: Path) -> None:
    import torch

    def run(module: torch.nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, bool]:
        out = module(x.requires_grad_())
        (gradient,) = torch.autograd.grad(out.sum(), x, allow_unused=True)
        return out.detach(), gradient is not None

    weights = {
        f"W_{role}.weight": np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
        for role in ("query", "key", "value")
    }
    x = np.linspace(0, 1, 12, dtype=np.float32).reshape(1, 4, 3)
    calls = [
        call("run", Module("SelfAttentionV2", {"d_in": 3, "d_out": 2}, weights, detached=flag), x)
        for flag in (False, True)
    ]
    (plain,), (detached,) = run_in_process(calls, {"run": run}, tmp_path)
    assert plain.value[1] is True and detached.value[1] is False
    assert np.array_equal(plain.value[0].array, detached.value[0].array)


def test_a_raised_message_comes_back_as_its_first_line_without_paths(tmp_path: Path) -> None:
    def fail() -> None:
        raise ValueError('bad x in "/tmp/ipykernel_7/123.py", _grader_run\nline two')

    (steps,) = run_in_process([call("fail")], {"fail": fail}, tmp_path)
    assert steps[0].value == Raised("ValueError", 'bad x in "<path>", _grader_run')


def test_a_step_after_one_that_raised_says_so(tmp_path: Path) -> None:
    calls = [Call((Step("fail"), Step(Result(0), "anything")))]
    (steps,) = run_in_process(calls, {"fail": lambda: 1 / 0}, tmp_path)
    assert steps[0].value.type_name == "ZeroDivisionError"
    assert steps[1].value == Raised("NotRun", "an earlier step of this call raised")


def test_anything_else_comes_back_by_the_name_of_its_type(tmp_path: Path) -> None:
    class Anything:
        def __eq__(self, other: object) -> bool:
            return True

    (steps,) = run_in_process([call("f")], {"f": Anything}, tmp_path)
    assert steps[0].value == Other("Anything")


def written(tmp_path: Path, results: Any, files: dict[str, bytes] | None = None) -> Path:
    folder = channel.new_folder(tmp_path)
    (folder / "out").mkdir()
    text = results if isinstance(results, str) else json.dumps(results)
    (folder / "out" / "results.json").write_text(text)
    for name, data in (files or {}).items():
        (folder / "out" / name).write_bytes(data)
    return folder


@pytest.mark.parametrize(
    ("results", "message"),
    [
        ("not json", "not JSON"),
        ({"calls": "x"}, "without calls"),
        ({"calls": []}, "results for 0 calls, expected 1"),
        ({"calls": [{"steps": [{"value": {"kind": "int", "value": "1"}}]}]}, "int that is not"),
        ({"calls": [{"steps": [{"value": {"kind": "eval", "value": 1}}]}]}, "unknown kind"),
        (
            {
                "calls": [
                    {
                        "steps": [
                            {
                                "value": {
                                    "kind": "tensor",
                                    "file": "../x.npy",
                                    "dtype": "torch.float32",
                                }
                            }
                        ]
                    }
                ]
            },
            "bad name",
        ),
        ({"calls": [{"steps": [{}, {}]}]}, "more steps than it has"),
    ],
)
def test_malformed_results_are_refused(tmp_path: Path, results: Any, message: str) -> None:
    folder = written(tmp_path, results)
    with pytest.raises(channel.Unreadable, match=message):
        channel.read_results(folder, [call("f")])


def test_a_pickled_array_a_link_or_a_missing_folder_is_never_read(tmp_path: Path) -> None:
    leaf = {"kind": "tensor", "file": "r1.npy", "dtype": "torch.float32"}
    results = {"calls": [{"steps": [{"value": leaf}]}]}
    # An object array would need pickle to load: numpy refuses it without running it.
    buffer = np.array([object()], dtype=object)
    path = tmp_path / "obj.npy"
    np.save(path, buffer, allow_pickle=True)
    folder = written(tmp_path, results, {"r1.npy": path.read_bytes()})
    with pytest.raises(channel.Unreadable, match="not an array"):
        channel.read_results(folder, [call("f")])
    # A link planted where the results should be is not followed.
    other = written(tmp_path, results)
    (other / "out" / "r1.npy").symlink_to(path)
    with pytest.raises(channel.Unreadable, match="missing or too large"):
        channel.read_results(other, [call("f")])
    linked = channel.new_folder(tmp_path)
    os.symlink(other / "out", linked / "out")
    with pytest.raises(channel.Unreadable, match="not a folder"):
        channel.read_results(linked, [call("f")])
    with pytest.raises(channel.Unreadable, match="wrote no results"):
        channel.read_results(channel.new_folder(tmp_path), [call("f")])


# --------------------------------------------------------------------------------- judging


def test_a_check_passes_when_every_case_of_it_does() -> None:
    exercise = grader.load_chapter(0, GRADING)[0]
    good = Tensor(np.array([2.0]), "torch.float32")
    bad = Tensor(np.array([3.0]), "torch.float32")
    cases = [
        Case("twice", call("double"), lambda r: problem_with_tensor(value_of(r), np.array([2.0]))),
        Case("dtype", call("double"), lambda r: problem_with_tensor(value_of(r), np.array([2.0]))),
    ]
    from grader.spec import StepResult

    score = judged(exercise, cases, [[StepResult(good)], [StepResult(bad)]])
    assert (score.earned, score.possible) == (2.0, 3.0)
    assert [c.passed for c in score.checks] == [True, False]
    assert score.checks[1].reason == "the result is off by up to 1"
    unread = judged(exercise, cases, "the kernel wrote no results")
    assert unread.earned == 0 and unread.error == "the kernel wrote no results"
    # A judge that cannot read the result fails its case instead of crashing the grader.
    broken = [Case("twice", call("double"), lambda r: r[5])]
    assert "could not be read" in judged(exercise, broken, [[StepResult(good)]]).checks[0].reason


# ---------------------------------------------------------------------------- the variants


def test_a_students_variant_is_the_same_at_every_regrade_and_differs_between_students(
    tmp_path: Path,
) -> None:
    secret = grader.read_secret(tmp_path / "secret")
    assert grader.read_secret(tmp_path / "secret") == secret  # made once, then read
    assert oct((tmp_path / "secret").stat().st_mode & 0o777) == "0o600"
    a = grader.variant_seed(secret, "ID=1", "ch1-ex-self")
    assert a == grader.variant_seed(secret, "ID=1", "ch1-ex-self")
    assert a != grader.variant_seed(secret, "ID=2", "ch1-ex-self")
    assert a != grader.variant_seed(secret, "ID=1", "ch1-ex-temperature")
    assert a != grader.variant_seed(b"another course's secret, just as long", "ID=1", "ch1-ex-self")


def test_every_chapters_draws_are_reproducible_from_the_seed() -> None:
    for exercise in grader.load_all():
        if not exercise.checks:
            continue
        first = exercise.cases(np.random.default_rng(3))
        second = exercise.cases(np.random.default_rng(3))
        assert [c.call.shown for c in first] == [c.call.shown for c in second], exercise.label
        assert {c.check for c in first} == {c.name for c in exercise.checks}, exercise.label


# ------------------------------------------------------------------------ the configuration


def test_the_configuration_reads_back_and_is_frozen(tmp_path: Path) -> None:
    config = grader.GradingConfig.make(
        timeout=30, grading_dir=tmp_path, secret=SECRET, sandbox="none"
    )
    assert grader.GradingConfig.from_json(config.to_json()) == config
    assert config.grading_dir == str(tmp_path.resolve())
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
        ({"secret": "short"}, "secret: expected a str of at least 32 characters"),
    ],
)
def test_bad_options_are_refused_by_name(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        grader.GradingConfig.make(**{"secret": SECRET, **options})


def test_a_configuration_with_an_unknown_field_is_refused() -> None:
    data = json.loads(grader.GradingConfig.make(sandbox="none", secret=SECRET).to_json())
    with pytest.raises(ValueError, match="config: "):
        grader.GradingConfig.from_json(json.dumps({**data, "trusted": True}))


def test_grading_a_missing_folder_or_a_bad_option_fails_before_any_kernel(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    with pytest.raises(FileNotFoundError, match="SUBMISSIONS: expected a folder"):
        grader.grade_folder(tmp_path / "missing", sandbox="none", secret_path=secret)
    with pytest.raises(ValueError, match="sandbox: expected one of"):
        grader.grade_folder(tmp_path, sandbox="docker", secret_path=secret)
    assert not (tmp_path / "grades.csv").exists()


def test_rows_read_back_as_the_child_process_wrote_them() -> None:
    row = grader.Row(
        "a.ipynb",
        "bwrap",
        status="timeout after 20 s",
        notes="1 cell(s) raised",
        exercises={
            "ch0-ex-double": grader.ExerciseScore(
                1.0, 3.0, (CheckScore("twice", "doubles", 2.0, False, "a hint", "off"),), ""
            )
        },
        manual=(grader.ManualExercise("ch0-ex-explain", 2.0),),
        errors=("cell 3: RuntimeError: x",),
        total=1.0,
        possible=4.0,
    )
    assert grader.Row.from_dict(json.loads(json.dumps(row.to_dict()))) == row
