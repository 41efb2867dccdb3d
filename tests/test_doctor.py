"""The doctor: what it reports, and each known set-up problem simulated, with its remedy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attention_from_scratch import doctor
from attention_from_scratch.word_vectors import CACHE_ENV, OFFLINE_ENV


@pytest.fixture
def environ(tmp_path: Path) -> dict[str, str]:
    """An environment with a writable cache, downloads allowed."""
    return {CACHE_ENV: str(tmp_path / "cache")}


def problems(environ: dict[str, str]) -> list[doctor.Problem]:
    return list(doctor.examine(environ).problems)


def test_a_healthy_cpu_machine_has_no_problem_and_prints_nothing_in_a_chapter(
    environ: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(doctor, "pick_device", lambda: torch.device("cpu"))
    report = doctor.examine(environ)
    assert report.problems == ()
    assert report.build == "CPU only" and report.device.startswith("cpu (")
    assert report.cache == f"{environ[CACHE_ENV]}" and report.offline == "downloads allowed"
    assert doctor.format_report(report, problems_only=True) == ""
    text = doctor.format_report(report)
    assert f"torch:         {torch.__version__} (CPU only)" in text
    assert text.endswith("No known problem.")


def test_an_old_torch_is_named_with_the_upgrade(
    environ: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch, "__version__", "2.4.1+cpu")
    (problem,) = [p for p in problems(environ) if "older" in p.what]
    assert "torch 2.4.1+cpu is older than 2.5" in problem.what
    assert 'pip install --upgrade "torch>=2.5"' in problem.remedy


def test_a_cuda_build_without_a_driver_says_the_chapters_run_on_the_cpu(
    environ: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(doctor, "pick_device", lambda: torch.device("cpu"))
    report = doctor.examine(environ)
    assert report.build == "CUDA 12.8"
    # A note, not a problem: nothing needs fixing, so the command exits 0.
    assert [p for p in report.problems if "CUDA" in p.what] == []
    (note,) = [p for p in report.notes if "CUDA" in p.what]
    assert "sees no GPU" in note.what and "runs on the CPU" in note.what
    assert "GPU runtime" in note.remedy
    text = doctor.format_report(report)
    assert "Note: this torch is built for CUDA 12.8" in text and "Problem:" not in text
    monkeypatch.setattr(doctor, "examine", lambda: report)
    assert doctor.main(["doctor"]) == 0


def test_mps_suggests_the_cpu_fallback_unless_it_is_set(
    environ: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(doctor, "pick_device", lambda: torch.device("mps"))
    (problem,) = [p for p in problems(environ) if "MPS" in p.what]
    assert "PYTORCH_ENABLE_MPS_FALLBACK=1" in problem.remedy
    fallback = {**environ, "PYTORCH_ENABLE_MPS_FALLBACK": "1"}
    assert [p for p in problems(fallback) if "MPS" in p.what] == []


def test_a_cache_that_cannot_be_written_names_the_variable_to_set(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")  # nothing can be created below a file, even by root
    (problem,) = [p for p in problems({CACHE_ENV: str(blocker / "cache")}) if "cache" in p.what]
    assert str(blocker / "cache") in problem.what
    assert CACHE_ENV in problem.remedy


def test_an_offline_setting_it_does_not_understand_is_reported(
    environ: dict[str, str],
) -> None:
    (problem,) = [p for p in problems({**environ, OFFLINE_ENV: "maybe"}) if "OFFLINE" in p.what]
    assert "'maybe'" in problem.what
    assert doctor.examine({**environ, OFFLINE_ENV: "1"}).offline == "downloads off"


def test_check_setup_prints_only_the_problems_on_stderr(
    environ: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    examine = doctor.examine
    monkeypatch.setattr(doctor, "examine", lambda: examine({**environ, OFFLINE_ENV: "x"}))
    doctor.check_setup()
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("Problem: ") and "What to do:" in captured.err
    assert "torch:" not in captured.err


def test_the_command_line_prints_the_report() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "attention_from_scratch", "doctor"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    assert "torch:" in done.stdout and "device:" in done.stdout
    assert (done.returncode == 1) == ("Problem:" in done.stdout)
