"""Every script under benchmarks/ runs, in its small mode, and prints the ratios it promises."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
RATIO = r"\d+\.\d+x"


def run(script: str, *arguments: str) -> str:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *arguments],
        cwd=BENCHMARKS,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_every_benchmark_script_has_a_smoke_test() -> None:
    tested = {"attention_paths.py", "straightforward_layer.py", "grading_sandbox.py"}
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
