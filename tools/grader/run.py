"""Grade one notebook: run it in a fresh kernel with the grader's cells, and score it.

A setup cell, before any of the submission's cells, loads the checks and prints fingerprints
of what they rely on; each check cell (`check("chN-ex-name")`) is replaced by one that loads
a fresh copy of the checks from their read-only files, runs them, compares what the
submission could have changed, and prints one report behind a marker that only that cell
knew (`attention_from_scratch.exercises.integrity`). The reports are
`attention_from_scratch.exercises.report`'s types, read back here; the grader scores each
exercise itself from the checks it loaded on its side.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import stat
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from attention_from_scratch import exercises
from attention_from_scratch.exercises import CheckResult, Exercise, ExerciseResult, integrity
from attention_from_scratch.exercises.report import GraderReport, SetupReport

from .config import GradingConfig
from .report import ExerciseScore, ManualExercise, Row
from .sandbox import sandboxed_kernel_manager

LABEL = r"ch\d+-ex-[a-z0-9]+(?:-[a-z0-9]+)*"
# A check cell: optional comment lines, then exactly `check("label")`.
CHECK_CELL = re.compile(rf"^(?:\s*#[^\n]*\n)*\s*check\(\s*[\"']({LABEL})[\"']\s*\)\s*;?\s*$")
# The label of an exercise in the book (`:label:`) or in the student edition's title.
EXERCISE_LABEL = re.compile(
    rf"^(?::label:\s*|\*\*Exercise\*\* \(`)({LABEL})(?:`\))?\s*$", re.MULTILINE
)
FILE_CHAPTER = re.compile(r"^0*(\d+)_")
# What starts every line the grader's cells print (then the cell's own random marker).
MARKER = "GRADER-"


def chapters_of(nb: Any, name: str) -> set[int]:
    """Chapters a submission belongs to: from its exercise labels, else its file name."""
    chapters = set()
    for cell in nb.cells:
        labels = EXERCISE_LABEL.findall(cell.source) if cell.cell_type == "markdown" else []
        match = CHECK_CELL.match(cell.source) if cell.cell_type == "code" else None
        labels += [match.group(1)] if match else []
        chapters.update(int(label[2:].split("-", 1)[0]) for label in labels)
    if not chapters and (match := FILE_CHAPTER.match(name)):
        chapters.add(int(match.group(1)))
    return chapters


def new_marker() -> str:
    """A marker no submission can guess, for one cell."""
    return MARKER + secrets.token_hex(16) + ":"


def setup_source(nonce: str, chapters: Iterable[int], config: GradingConfig) -> str:
    """The setup cell. It runs before any cell of the submission, so the module it imports
    is still the package's."""
    return (
        f'__import__({integrity.__name__!r}, fromlist=["_"]).grader_setup('
        f"{nonce!r}, {sorted(chapters)!r}, {config.hidden_dir!r}, {list(config.check_files)!r})"
    )


def check_source(labels: Sequence[str], nonce: str, config: GradingConfig) -> str:
    """A check cell. It loads a fresh copy of the grader's side of the checks from its file
    (read-only in the sandbox): the copy the submission imported, and anything it did to
    it, takes no part."""
    name = "_grader_" + secrets.token_hex(8)
    return "\n".join(
        [
            "def _grader_cell(namespace):",
            "    import importlib.util, sys",
            f"    spec = importlib.util.spec_from_file_location({name!r}, {integrity.__file__!r})",
            "    module = importlib.util.module_from_spec(spec)",
            f"    sys.modules[{name!r}] = module",
            "    try:",
            "        spec.loader.exec_module(module)",
            f"        module.grader_check({list(labels)!r}, {nonce!r},",
            f"            {config.hidden_dir!r}, {list(config.check_files)!r}, namespace)",
            "    finally:",
            f"        sys.modules.pop({name!r}, None)",
            "_grader_cell(globals())",
            "del _grader_cell",
        ]
    )


def marker_lines(cell: Any, nonce: str) -> list[str]:
    """What follows ``nonce`` on every line of the cell's standard output that starts so."""
    # A long line may arrive in several stream messages: join them before splitting lines.
    text = "".join(
        output.get("text", "")
        for output in cell.get("outputs", [])
        if output.get("output_type") == "stream" and output.get("name") == "stdout"
    )
    return [line[len(nonce) :] for line in text.splitlines() if line.startswith(nonce)]


def score(reported: ExerciseResult, exercise: Exercise) -> tuple[ExerciseScore | None, str]:
    """The grader's own score of one reported exercise, or why the report cannot be right."""
    expected = {c.name: c for c in exercise.checks}
    checks, earned = [], 0.0
    for result in reported.checks:
        check = expected.pop(result.name, None)
        if check is None or result.points != check.points:
            return None, f"results for checks of {exercise.label} that it does not have"
        earned += check.points if result.passed else 0.0
        checks.append(
            CheckResult(
                check.name,
                check.title,
                check.points,
                result.passed,
                check.hint,
                result.reason[:300],
                check.hidden,
            )
        )
    error = reported.error[:300]
    if expected and not error:
        return None, f"results missing checks of {exercise.label}"
    return ExerciseScore(earned, exercise.points, tuple(checks), error), ""


def tail(path: Path, size: int = 4096) -> str:
    """The end of a file the kernel could write, never following a link it may have put there."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            return ""
        end = os.lseek(handle, 0, os.SEEK_END)
        os.lseek(handle, max(0, end - size), os.SEEK_SET)
        return os.read(handle, size).decode(errors="replace")
    finally:
        os.close(handle)


class OutputBudget:
    """Counts the bytes of output a notebook produced; what is beyond the budget is dropped
    (except the grader's own lines)."""

    def __init__(self, budget: int) -> None:
        self.left = budget
        self.dropped = 0

    def keep(self, msg: dict[str, Any]) -> bool:
        """Whether to keep one message from the kernel (trimmed to the grader's lines)."""
        content = msg.get("content", {})
        size = len(str(content))
        if size <= self.left:
            self.left -= size
            return True
        self.dropped += 1
        text = content.get("text") if msg.get("msg_type") == "stream" else None
        if isinstance(text, str) and MARKER in text:
            # Keep the grader's own lines, which may arrive in one message with the flood.
            lines = [line for line in text.splitlines() if line.startswith(MARKER)]
            content["text"] = "".join(line[: 2**20] + "\n" for line in lines[:4])
            return True
        return False


def execute(nb: Any, path: Path, config: GradingConfig, budget: OutputBudget) -> tuple[str, str]:
    """Run the notebook in a fresh kernel (in its sandbox when configured), every error
    allowed; return the status and, when it could not run, why."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    deadline = time.monotonic() + config.timeout
    workdir = Path(tempfile.mkdtemp(prefix="grade-"))
    try:
        scratch = workdir / "scratch"
        scratch.mkdir()
        shutil.copy2(path, scratch / path.name)
        options: dict[str, Any] = {}
        if config.sandbox == "bwrap":
            options["kernel_manager_class"] = sandboxed_kernel_manager(workdir, config)

        class Client(NotebookClient):
            def output(self, outs, msg, display_id, cell_index):  # type: ignore[no-untyped-def]
                return (
                    super().output(outs, msg, display_id, cell_index) if budget.keep(msg) else None
                )

        client = Client(
            nb,
            kernel_name="python3",
            allow_errors=True,
            timeout_func=lambda cell: max(1, int(deadline - time.monotonic())),
            interrupt_on_timeout=False,
            resources={"metadata": {"path": str(scratch)}},
            **options,
        )
        try:
            client.execute()
        except CellTimeoutError:
            return f"timeout after {config.timeout:g} s", ""
        except DeadKernelError:
            return "kernel died", ""
        except Exception as error:  # e.g. the kernel could not start
            lines = tail(workdir / "kernel.log").strip().splitlines()
            return "not run", (lines[-1] if lines else f"{type(error).__name__}: {error}")[:200]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return "ok", ""


def grade_notebook(path: Path, config: GradingConfig) -> Row:
    """Run one submission and its checks; return its row."""
    import nbformat

    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as error:  # any unreadable file is a row in the CSV, not a crash
        notes = f"{type(error).__name__}: {error}"[:200]
        return Row(path.name, config.isolation, status="unreadable", notes=notes)

    for check_file in config.check_files:
        exercises.load_check_file(check_file)
    chapters = chapters_of(nb, path.name)
    for chapter in sorted(chapters):
        exercises.load_chapter(chapter)
    if config.hidden_dir:
        exercises.load_hidden(config.hidden_dir, chapters)
    declared = [e for e in exercises.all_exercises() if e.chapter in chapters]
    auto = {e.label: e for e in declared if e.auto_graded}
    manual = tuple(ManualExercise(e.label, e.manual_points) for e in declared if e.manual_points)
    possible = sum(e.points for e in auto.values())
    scores = {
        label: ExerciseScore(0.0, e.points, error="its check did not run")
        for label, e in auto.items()
    }
    if not chapters:
        return Row(
            path.name,
            config.isolation,
            status="no exercises",
            notes="no exercise label found and the file name names no chapter",
            exercises=scores,
            manual=manual,
            total=0.0,
            possible=possible,
        )

    # One marker per cell, each seen by the kernel only when its cell runs.
    setup_nonce = new_marker()
    setup = nbformat.v4.new_code_cell(setup_source(setup_nonce, chapters, config))
    cells = [setup]
    grading: list[tuple[Any, str, list[str]]] = []
    checked: set[str] = set()
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
            match = CHECK_CELL.match(cell.source)
            if match and match.group(1) in auto:
                nonce = new_marker()
                cell.source = check_source([match.group(1)], nonce, config)
                grading.append((cell, nonce, [match.group(1)]))
                checked.add(match.group(1))
        cells.append(cell)
    rest = [label for label in auto if label not in checked]
    if rest:
        nonce = new_marker()
        last = nbformat.v4.new_code_cell(check_source(rest, nonce, config))
        cells.append(last)
        grading.append((last, nonce, rest))
    nb.cells = cells

    budget = OutputBudget(config.output_bytes)
    status, notes = execute(nb, path, config, budget)
    finished = status == "ok"

    baseline: SetupReport | None = None
    setup_lines = marker_lines(setup, setup_nonce)
    if len(setup_lines) == 1:
        try:
            baseline = SetupReport.from_json(setup_lines[0])
        except ValueError:
            baseline = None
    if (baseline is None or baseline.error) and (setup.get("outputs") or finished):
        status = "checks not loaded"
        notes = (baseline.error if baseline else "")[:200]
    fingerprints = baseline.fingerprints if baseline else {}
    tampered: list[str] = []
    for cell, nonce, labels in grading:
        lines = marker_lines(cell, nonce)
        if not lines and not finished:
            continue  # the notebook stopped before this cell: its exercises did not run
        findings, scored = read_report(lines, labels, auto, fingerprints)
        if findings:
            for label in labels:
                scores[label] = ExerciseScore(
                    0.0,
                    auto[label].points,
                    error="its checks were tampered with: " + "; ".join(findings)[:300],
                )
            tampered += findings
        else:
            scores.update(scored)
    errors = []
    for index, cell in enumerate(nb.cells[1:], start=1):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error" and all(cell is not g[0] for g in grading):
                evalue = str(output.get("evalue", ""))[:120]
                errors.append(f"cell {index}: {output.get('ename')}: {evalue}")
    extra = []
    if tampered:
        status = "checks tampered with"
        extra.append("; ".join(dict.fromkeys(tampered)))
    if errors:
        extra.append(f"{len(errors)} cell(s) raised")
    if budget.dropped:
        extra.append(f"{budget.dropped} output(s) over {config.output_bytes} bytes dropped")
    if extra:
        notes = "; ".join([n for n in [notes] if n] + extra)[:400]
    return Row(
        path.name,
        config.isolation,
        status=status,
        notes=notes,
        exercises=scores,
        manual=manual,
        errors=tuple(errors),
        total=sum(score.earned for score in scores.values()),
        possible=possible,
    )


def read_report(
    lines: list[str],
    labels: list[str],
    auto: dict[str, Exercise],
    fingerprints: dict[str, int] | Any,
) -> tuple[list[str], dict[str, ExerciseScore]]:
    """What a check cell printed behind its marker: what was tampered with (a report
    missing, repeated or malformed, a difference, a changed fingerprint, results for other
    checks), and the scores of its exercises."""
    if not lines:
        return ["the grader's check cell did not report"], {}
    if len(lines) > 1:
        return ["a line imitating the grader's was printed"], {}
    try:
        report = GraderReport.from_json(lines[0])
    except ValueError as error:
        return [f"a report that is not the grader's ({error})"[:120]], {}
    findings = [finding[:120] for finding in report.findings][:10]
    for key, value in fingerprints.items():
        if report.fingerprints.get(key) != value:
            findings.append(f"{key} changed")
    scored: dict[str, ExerciseScore] = {}
    for item in report.results:
        if item.label not in labels or item.label in scored:
            findings.append("a result for another exercise")
            continue
        result, problem = score(item, auto[item.label])
        if problem:
            findings.append(problem)
        elif result is not None:
            scored[item.label] = result
    return findings, scored
