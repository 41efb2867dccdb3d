"""The grader against hostile submissions: each one sealed off, forged results caught.

One folder mixes honest notebooks of the made-up chapter 0 with hostile ones (rewriting a
classmate, forging full marks in eight ways, writing into the instructor's files, leaving a
process behind, reaching a server on 127.0.0.1, flooding its output); it is graded once, in
the sandbox, and every test below reads that one run (marked slow: a few minutes on two
cores).
"""

from __future__ import annotations

import csv
import http.server
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "exercise_fixtures"
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(FIXTURES))

import grader  # noqa: E402
from make_fixture import write_fixture  # noqa: E402

PROBLEM = grader.sandbox_problem()
# Where bubblewrap cannot run (macOS, Windows, a Linux without it) the grader refuses, which
# the last tests check; the attacks are tried where it can.
needs_sandbox = pytest.mark.skipif(PROBLEM is not None, reason=f"no sandbox here: {PROBLEM}")
TAMPERED = "checks tampered with"
# A distinctive argument, so the test can find a left-over process by its command line.
LINGER = "4242.4242"
WRONG = "doubled = None\n"

# Each forger answers `ch0-ex-double` wrongly and tries to earn its 4 points anyway.
FORGERS = {
    # Replace the function the grader's check cell calls through.
    "forge_run_checks": """
import attention_from_scratch.exercises._core as core
real = core.run_checks
def run_checks(label, namespace, hidden=False):
    result = real(label, namespace, hidden)
    return core.ExerciseResult(result.label, tuple(
        core.CheckResult(c.name, c.title, c.points, True, c.hint, "", c.hidden)
        for c in result.checks))
core.run_checks = run_checks
""",
    # Wrap every check function so that whatever it raises is swallowed.
    "forge_wrap_checks": """
import dataclasses, functools
import attention_from_scratch.exercises._registry as registry
def lenient(function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        try:
            function(*args, **kwargs)
        except Exception:
            pass
    return wrapper
for exercise in registry._REGISTRY.values():
    exercise.checks = [
        dataclasses.replace(c, function=lenient(c.function)) for c in exercise.checks]
""",
    # Swap the code of each check function for code that passes.
    "forge_code_objects": """
import attention_from_scratch.exercises._registry as registry
for exercise in registry._REGISTRY.values():
    for c in exercise.checks:
        c.function.__code__ = (lambda doubled: None).__code__
""",
    # Put a counterfeit exercise, with checks that always pass, into the registry.
    "forge_registry": """
import attention_from_scratch.exercises._core as core
import attention_from_scratch.exercises._registry as registry
old = registry._REGISTRY["ch0-ex-double"]
new = object.__new__(core.Exercise)
new.__dict__.update(old.__dict__)
new.checks = [core.Check(c.name, lambda doubled: None, c.points, c.hint, c.hidden)
              for c in old.checks]
registry._REGISTRY["ch0-ex-double"] = new
""",
    # Replace a result class with one that reports every check as passed.
    "forge_result_class": """
import attention_from_scratch.exercises._core as core
class ExerciseResult(core.ExerciseResult):
    def to_dict(self):
        data = super().to_dict()
        for c in data["checks"]:
            c["passed"], c["reason"] = True, ""
        data["earned"] = data["possible"]
        return data
core.ExerciseResult = ExerciseResult
""",
    # Patch the report a check cell prints so that every check reads as passed.
    "forge_report": """
import attention_from_scratch.exercises.report as report
real = report.CheckResult.to_dict
def to_dict(self):
    return {**real(self), "passed": True, "reason": ""}
report.CheckResult.to_dict = to_dict
""",
    # Patch torch so that the value check passes for a tensor of the right shape.
    "forge_torch": """
import torch
torch.equal = lambda *args, **kwargs: True
doubled = torch.zeros(3)
""",
    # Print a line imitating the grader's, with the marker read from the cell being run.
    "forge_imitation": """
import json, re
def imitate(info):
    found = re.findall(r"['\\"](GRADER-[0-9a-f]+:)['\\"]", info.raw_cell or "")
    labels = re.findall(r"ch0-ex-[a-z]+", info.raw_cell or "")
    if found:
        print(found[-1] + json.dumps([
            {"label": label, "earned": 4.0, "possible": 4.0, "manual_points": 0.0,
             "error": "", "checks": []} for label in labels]))
get_ipython().events.register("pre_run_cell", imitate)
""",
}


def rewriter(folder: Path) -> str:
    """Blank the answers of every other notebook it can find in the submissions folder."""
    return f"""
import pathlib
for path in pathlib.Path({str(folder)!r}).glob("*.ipynb"):
    if "rewriter" not in path.name:
        try:
            text = path.read_text()
            path.write_text(text.replace("base * 2", "base * 0"))
        except OSError:
            pass
doubled = base * 2
"""


def intruder(folder: Path, hidden: Path, home_file: Path) -> str:
    """Write into the instructor's folder, outputs, hidden checks and home directory."""
    targets = [
        folder / "grades.csv",
        folder / "feedback" / "intruder.md",
        folder / "planted.txt",
        hidden / "ch0.py",
        home_file,
    ]
    return f"""
import pathlib
for target in {[str(t) for t in targets]!r}:
    try:
        pathlib.Path(target).parent.mkdir(parents=True, exist_ok=True)
        with open(target, "a") as handle:
            handle.write("written by a submission\\n")
    except OSError:
        pass
doubled = base * 2
"""


LINGERER = f"""
import subprocess
subprocess.Popen(["sleep", "{LINGER}"], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
doubled = base * 2
"""


# Sends the grader 40 MiB of output, beyond the 32 MiB it keeps, then answers honestly.
FLOODER = """
import sys
for _ in range(40):
    sys.stdout.write("x" * 2**20 + "\\n")
doubled = base * 2
"""


def caller(port: int) -> str:
    """Try to reach the test's server on 127.0.0.1, then answer honestly."""
    return f"""
import urllib.request
try:
    urllib.request.urlopen("http://127.0.0.1:{port}/from-a-submission", timeout=3)
except OSError:
    pass
doubled = base * 2
"""


class Recorder(http.server.BaseHTTPRequestHandler):
    """Count every request the server receives."""

    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        Recorder.hits.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"reached")

    def log_message(self, *args: Any) -> None:
        return None


def lingering_processes() -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if LINGER in command:
            found.append(f"{entry.name}: {command}")
    return found


def read_csv(path: Path) -> dict[str, dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return {row["submission"]: row for row in csv.DictReader(handle)}


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


@pytest.fixture(scope="module")
def server() -> Iterator[int]:
    Recorder.hits = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_address[1]
    httpd.shutdown()


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory, server: int) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("class")
    folder = base / "submissions"
    folder.mkdir()
    hidden = base / "hidden"
    shutil.copytree(FIXTURES / "hidden", hidden)
    home_file = Path.home() / f".planted-by-a-submission-{os.getpid()}"
    # The victim is graded last (names are sorted), after the rewriter has run.
    write_fixture(folder / "aa_rewriter.ipynb", double=rewriter(folder))
    write_fixture(folder / "ab_intruder.ipynb", double=intruder(folder, hidden, home_file))
    write_fixture(folder / "ac_lingerer.ipynb", double=LINGERER)
    write_fixture(folder / "ad_caller.ipynb", double=caller(server))
    write_fixture(folder / "ae_flooder.ipynb", double=FLOODER)
    for name, code in FORGERS.items():
        answer = "" if "doubled =" in code else WRONG
        write_fixture(folder / f"{name}.ipynb", double=code + answer)
    write_fixture(folder / "zz_victim.ipynb")
    before = snapshot(folder)
    hidden_before = snapshot(hidden)
    rows = grader.grade_folder(
        folder, timeout=60, workers=2, hidden_dir=hidden, check_files=[FIXTURES / "ch0.py"]
    )
    after = snapshot(folder)
    outputs = {"grades.csv"} | {k for k in after if k.startswith("feedback/")}
    yield {
        "rows": {row.submission: row for row in rows},
        "csv": read_csv(folder / "grades.csv"),
        "changed": sorted(
            k
            for k in set(before) | set(after)
            if k not in outputs and before.get(k) != after.get(k)
        ),
        "feedback": (folder / "feedback").iterdir(),
        "grades": (folder / "grades.csv").read_text(),
        "hidden_changed": snapshot(hidden) != hidden_before,
        "home_file": home_file.exists(),
        "lingering": lingering_processes(),
    }
    home_file.unlink(missing_ok=True)
    for line in lingering_processes():  # leave no process behind on today's grader either
        subprocess.run(["kill", "-9", line.split(":", 1)[0]], check=False)


@pytest.mark.slow
@needs_sandbox
def test_an_honest_notebook_keeps_its_full_marks_next_to_a_rewriter(
    hostile: dict[str, Any],
) -> None:
    row = hostile["csv"]["zz_victim.ipynb"]
    assert (row["ch0-ex-double"], row["total"], row["status"]) == ("4", "5", "ok")
    # No submission (nor anything else) changed a file of the folder but the grader's outputs.
    assert hostile["changed"] == []


@pytest.mark.slow
@needs_sandbox
@pytest.mark.parametrize("name", FORGERS)
def test_forged_results_score_0_and_are_flagged(hostile: dict[str, Any], name: str) -> None:
    row = hostile["csv"][f"{name}.ipynb"]
    assert row["ch0-ex-double"] == "0"
    assert row["status"] == TAMPERED, row["notes"]
    assert row["notes"], "the notes say what was tampered with"


@pytest.mark.slow
@needs_sandbox
def test_a_submission_cannot_write_to_the_instructors_files(hostile: dict[str, Any]) -> None:
    assert "written by a submission" not in hostile["grades"]
    assert not hostile["hidden_changed"]
    assert not hostile["home_file"]
    assert "planted.txt" not in hostile["changed"]
    assert {p.name for p in hostile["feedback"]} == {
        Path(name).stem + ".md" for name in hostile["csv"]
    }
    # Its own honest answer still counts: the attempts failed quietly inside its sandbox.
    assert hostile["csv"]["ab_intruder.ipynb"]["total"] == "5"


@pytest.mark.slow
@needs_sandbox
def test_no_process_of_a_submission_outlives_its_grading(hostile: dict[str, Any]) -> None:
    assert hostile["lingering"] == []
    assert hostile["csv"]["ac_lingerer.ipynb"]["total"] == "5"


@pytest.mark.slow
@needs_sandbox
def test_a_submission_reaches_no_network(hostile: dict[str, Any]) -> None:
    assert Recorder.hits == []
    assert hostile["csv"]["ad_caller.ipynb"]["total"] == "5"


@pytest.mark.slow
@needs_sandbox
def test_output_beyond_the_budget_is_dropped_and_counted(hostile: dict[str, Any]) -> None:
    row = hostile["csv"]["ae_flooder.ipynb"]
    assert (row["total"], row["status"]) == ("5", "ok")
    assert "dropped" in row["notes"]


@pytest.mark.slow
@needs_sandbox
def test_every_row_says_it_was_isolated(hostile: dict[str, Any]) -> None:
    assert {row["isolation"] for row in hostile["csv"].values()} == {"bwrap"}


# --------------------------------------------------------- no sandbox: refuse, or say so


def test_grading_without_bwrap_is_refused_with_what_to_do(tmp_path: Path) -> None:
    write_fixture(tmp_path / "good.ipynb")
    empty = tmp_path / "bin"
    empty.mkdir()
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "grade.py"), str(tmp_path)],
        env={**os.environ, "PATH": str(empty)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    message = done.stderr
    assert "bubblewrap" in message and "SANDBOX=none" in message
    assert "container" in message and "JupyterHub" in message
    assert not (tmp_path / "grades.csv").exists()


@pytest.mark.slow
def test_opting_out_labels_every_row_as_not_isolated(tmp_path: Path) -> None:
    write_fixture(tmp_path / "good.ipynb")
    (tmp_path / "notes.txt").write_text("not a notebook")
    grader.grade_folder(
        tmp_path,
        timeout=60,
        workers=1,
        hidden_dir=None,
        check_files=[FIXTURES / "ch0.py"],
        sandbox="none",
    )
    rows = read_csv(tmp_path / "grades.csv")
    assert {row["isolation"] for row in rows.values()} == {"none: not isolated"}
    assert rows["good.ipynb"]["total"] == "4"
    feedback = (tmp_path / "feedback" / "good.md").read_text()
    assert "without isolation" in feedback


def test_make_grade_passes_the_sandbox_choice() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "SANDBOX ?= bwrap" in makefile
    recipe = makefile[makefile.index("\ngrade:") :].split("\n\n", 1)[0]
    assert "--sandbox $(SANDBOX)" in recipe and "--memory $(MEMORY)" in recipe
