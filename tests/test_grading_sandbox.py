"""The grader against hostile submissions: each one sealed off, none able to forge a result.

One folder mixes honest notebooks of the made-up chapter 0 with hostile ones (rewriting a
classmate, forging full marks in seven ways, reading the grader's references and secret,
writing into the instructor's files, leaving a process behind, reaching a server on
127.0.0.1, flooding its output); it is graded once, in the sandbox, and every test below
reads that one run (marked slow: a few minutes on two cores). The grader detects nothing:
its verdicts come from numbers it judges in its own process, so no forger can change them.
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
# A distinctive argument, so the test can find a left-over process by its command line.
LINGER = "4242.4242"
HONEST = "def double(x):\n    return x * 2\n"
WRONG = "def double(x):\n    return x\n"

# Each forger answers `ch0-ex-double` wrongly and tries to earn its 3 points anyway.
FORGERS = {
    # An answer that claims to equal anything.
    "forge_always_equal": """
class Anything:
    def __eq__(self, other):
        return True
    __hash__ = object.__hash__
def double(x):
    return Anything()
""",
    # Patch torch (and numpy) in the kernel so that every comparison there says "equal".
    "forge_torch": """
import numpy, torch
torch.equal = torch.allclose = lambda *args, **kwargs: True
torch.Tensor.__eq__ = lambda self, other: torch.ones_like(self, dtype=torch.bool)
numpy.allclose = numpy.array_equal = lambda *args, **kwargs: True
"""
    + WRONG,
    # Print what an old grader's report looked like, full marks.
    "forge_report": """
for label in ("ch0-ex-double", "ch0-ex-total"):
    print('{"label": "%s", "earned": 3, "possible": 3, "checks": []}' % label)
"""
    + WRONG,
    # Switch off tracing and profiling, which an in-kernel checker would rely on.
    "forge_tracer": """
import sys, threading
sys.settrace(None)
sys.setprofile(None)
threading.settrace(lambda *args: None)
"""
    + WRONG,
    # Replace what a cell the grader runs would call: numpy.save writes the input unchanged.
    "forge_channel": """
import numpy
real_save = numpy.save
numpy.save = lambda file, array, *args, **kwargs: real_save(file, array * 0 + 1, *args, **kwargs)
"""
    + WRONG,
    # Rewrite every result file the kernel is about to send back, from a thread of its own.
    "forge_results": """
import json, pathlib, threading, time
def forge():
    for _ in range(600):
        for path in pathlib.Path("/").glob("tmp*/grade-*/grader-*/out/results.json"):
            try:
                path.write_text(json.dumps({"calls": []}))
            except OSError:
                pass
        time.sleep(0.05)
threading.Thread(target=forge, daemon=True).start()
"""
    + WRONG,
    # Hook every cell the grader runs, and answer its calls from a table of the page's example.
    "forge_hook": """
def hook(info):
    globals()["double"] = lambda x: x.new_tensor([2.0, 4.0, 6.0])
get_ipython().events.register("pre_run_cell", hook)
"""
    + WRONG,
}


def peeker(paths: list[Path]) -> str:
    """Read the grader's references, tools and secret; answer right only if it could."""
    return f"""
found = []
for path in {[str(p) for p in paths]!r}:
    try:
        found.append(open(path).read())
    except OSError:
        pass
if found:
    def double(x):
        return x * 2
else:
    def double(x):
        return x
"""


def rewriter(folder: Path) -> str:
    """Blank the answers of every other notebook it can find in the submissions folder."""
    return f"""
import pathlib
for path in pathlib.Path({str(folder)!r}).glob("*.ipynb"):
    if "rewriter" not in path.name:
        try:
            text = path.read_text()
            path.write_text(text.replace("x * 2", "x * 0"))
        except OSError:
            pass
def double(x):
    return x * 2
"""


def intruder(folder: Path, grading: Path, home_file: Path) -> str:
    """Write into the instructor's folder, outputs, graded exercises and home directory."""
    targets = [
        folder / "grades.csv",
        folder / "feedback" / "intruder.md",
        folder / "planted.txt",
        grading / "ch0.py",
        grading / ".secret",
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
def double(x):
    return x * 2
"""


LINGERER = f"""
import subprocess
subprocess.Popen(["sleep", "{LINGER}"], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
def double(x):
    return x * 2
"""


# Sends the grader 40 MiB of output, beyond the 32 MiB it keeps, then answers honestly.
FLOODER = """
import sys
for _ in range(40):
    sys.stdout.write("x" * 2**20 + "\\n")
def double(x):
    return x * 2
"""


def caller(port: int) -> str:
    """Try to reach the test's server on 127.0.0.1, then answer honestly."""
    return f"""
import urllib.request
try:
    urllib.request.urlopen("http://127.0.0.1:{port}/from-a-submission", timeout=3)
except OSError:
    pass
def double(x):
    return x * 2
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
    grading = base / "grading"
    shutil.copytree(FIXTURES / "grading", grading)
    secret = grading / ".secret"
    grader.read_secret(secret)
    home_file = Path.home() / f".planted-by-a-submission-{os.getpid()}"
    # The victim is graded last (names are sorted), after the rewriter has run.
    write_fixture(folder / "aa_rewriter.ipynb", double=rewriter(folder))
    write_fixture(folder / "ab_intruder.ipynb", double=intruder(folder, grading, home_file))
    write_fixture(folder / "ac_lingerer.ipynb", double=LINGERER)
    write_fixture(folder / "ad_caller.ipynb", double=caller(server))
    write_fixture(folder / "ae_flooder.ipynb", double=FLOODER)
    private = [grading / "ch0.py", secret, ROOT / "tools" / "grader" / "spec.py"]
    write_fixture(folder / "af_peeker.ipynb", double=peeker(private))
    for name, code in FORGERS.items():
        write_fixture(folder / f"{name}.ipynb", double=code)
    write_fixture(folder / "zz_victim.ipynb")
    before = snapshot(folder)
    grading_before = snapshot(grading)
    rows = grader.grade_folder(
        folder, timeout=60, workers=2, grading_dir=grading, secret_path=secret
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
        "grading_changed": snapshot(grading) != grading_before,
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
    assert (row["ch0-ex-double"], row["total"], row["status"]) == ("3", "4", "ok")
    # No submission (nor anything else) changed a file of the folder but the grader's outputs.
    assert hostile["changed"] == []


@pytest.mark.slow
@needs_sandbox
@pytest.mark.parametrize("name", FORGERS)
def test_a_forger_scores_0_without_any_detection(hostile: dict[str, Any], name: str) -> None:
    row = hostile["csv"][f"{name}.ipynb"]
    assert row["ch0-ex-double"] == "0", row["notes"]
    # Nothing was detected, nothing needed to be: the row is an ordinary one.
    assert row["status"] == "ok"


@pytest.mark.slow
@needs_sandbox
def test_a_submission_cannot_read_the_references_the_tools_or_the_secret(
    hostile: dict[str, Any],
) -> None:
    assert hostile["csv"]["af_peeker.ipynb"]["ch0-ex-double"] == "0"


@pytest.mark.slow
@needs_sandbox
def test_a_submission_cannot_write_to_the_instructors_files(hostile: dict[str, Any]) -> None:
    assert "written by a submission" not in hostile["grades"]
    assert not hostile["grading_changed"]
    assert not hostile["home_file"]
    assert "planted.txt" not in hostile["changed"]
    assert {p.name for p in hostile["feedback"]} == {
        Path(name).stem + ".md" for name in hostile["csv"]
    }
    # Its own honest answer still counts: the attempts failed quietly inside its sandbox.
    assert hostile["csv"]["ab_intruder.ipynb"]["total"] == "4"


@pytest.mark.slow
@needs_sandbox
def test_no_process_of_a_submission_outlives_its_grading(hostile: dict[str, Any]) -> None:
    assert hostile["lingering"] == []
    assert hostile["csv"]["ac_lingerer.ipynb"]["total"] == "4"


@pytest.mark.slow
@needs_sandbox
def test_a_submission_reaches_no_network(hostile: dict[str, Any]) -> None:
    assert Recorder.hits == []
    assert hostile["csv"]["ad_caller.ipynb"]["total"] == "4"


@pytest.mark.slow
@needs_sandbox
def test_output_beyond_the_budget_is_dropped_and_counted(hostile: dict[str, Any]) -> None:
    row = hostile["csv"]["ae_flooder.ipynb"]
    assert (row["total"], row["status"]) == ("4", "ok")
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
    folder = tmp_path / "submissions"
    folder.mkdir()
    (tmp_path / "good.ipynb").rename(folder / "good.ipynb")
    (tmp_path / "notes.txt").rename(folder / "notes.txt")
    grader.grade_folder(
        folder,
        timeout=60,
        workers=1,
        grading_dir=FIXTURES / "grading",
        secret_path=tmp_path / "secret",
        sandbox="none",
    )
    tmp_path = folder
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
