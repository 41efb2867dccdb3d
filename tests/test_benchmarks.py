"""Every script under benchmarks/ runs, in its small mode, and prints the ratios it promises."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
RATIO = r"\d+\.\d+x"


def run(script: str, *arguments: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *arguments],
        cwd=BENCHMARKS,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_every_benchmark_script_has_a_smoke_test() -> None:
    tested = {
        "attention_paths.py",
        "straightforward_layer.py",
        "grading_sandbox.py",
        "fused_attention.py",
    }
    assert {path.name for path in BENCHMARKS.glob("*.py")} == tested


def test_attention_paths_prints_each_comparison_as_a_ratio() -> None:
    out = run("attention_paths.py", "--smoke")
    assert re.search(r"loop/matrix = \d+x", out)
    assert re.search(rf"explicit/fused = {RATIO} \(outputs equal: True\)", out)
    assert len(re.findall(rf"fused/reference = {RATIO} \(max \|diff\| 0\.0e\+00\)", out)) == 2
    assert len(re.findall(rf"explicit/tiled = {RATIO}", out)) == 2


def test_straightforward_layer_names_its_setting_and_prints_ratios() -> None:
    out = run("straightforward_layer.py", "--smoke")
    assert re.search(r"device: \w+, torch \d+\.\d+", out)
    assert len(re.findall(rf"ratio {RATIO} \(max \|diff\|", out)) == 2


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="the sandbox needs bubblewrap")
def test_grading_sandbox_times_both_modes() -> None:
    # One notebook in each mode: the smallest run that still prints both and their ratio.
    out = run("grading_sandbox.py", "--copies", "1", "--rounds", "1", "--workers", "1")
    assert re.search(rf"\(ratio {RATIO}\)", out)


def without_the_interpreter() -> dict[str, str]:
    """This environment less TRITON_INTERPRET (the script decides for itself), with this
    checkout's package first on the path."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    return env


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks what it says without a GPU")
def test_fused_attention_needs_a_gpu_and_says_so() -> None:
    out = run("fused_attention.py", env=without_the_interpreter())
    assert out.strip() == (
        "This benchmark needs an NVIDIA GPU with CUDA; none is visible, nothing run."
    )


@pytest.mark.slow
def test_fused_attention_smoke_run_names_versions_and_prints_ratios() -> None:
    pytest.importorskip("triton", reason="Triton is optional: it has no wheel here")
    out = run("fused_attention.py", "--smoke", env=without_the_interpreter())
    assert re.search(r"torch \d+\.\d+\S*, Triton \d+\.\d+", out)
    if not torch.cuda.is_available():
        assert "these times are not speeds" in out
    # Both masks; every path agrees with SDPA and is given as a fraction of its throughput.
    assert len(re.findall(r"triton   : fwd .* \(max \|diff\| \d\.\de-0[6-9]\)", out)) == 2
    assert len(re.findall(rf"triton/sdpa throughput: fwd {RATIO}, fwd\+bwd {RATIO}", out)) == 2
    assert len(re.findall(rf"tiled/sdpa throughput: fwd {RATIO}$", out, re.MULTILINE)) == 2
