"""Grade one notebook: run it in a fresh kernel, then call its answers on inputs the grader
draws, and judge what comes back in the grader's own process (a Triton kernel exercise's
answer is read from the notebook's source and run elsewhere: ``kernels.py``).

The notebook runs top to bottom in its kernel (in its sandbox), every error allowed; its own
check cells, the students' self-checks, are left out. Then, for each auto-graded exercise of
its chapters, the grader draws the student's variant of the inputs (``graded.py``), writes
them with the calls to make into a fresh folder (``channel.py``), and runs one more cell that
makes those calls and writes back what they returned, as arrays and numbers. The judges of
``grading/chN.py`` compare that with the grader's own references, here. Nothing the kernel
prints is read, and nothing it wrote is imported or unpickled, so a patched torch, a forged
report or an object that claims to equal anything changes no verdict.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from . import channel
from .channel import tail
from .config import GradingConfig
from .graded import load_chapter, variant_rng
from .grades import CheckScore, ExerciseScore, ManualExercise, Row
from .kernels import grade_kernels
from .sandbox import sandboxed_kernel_manager
from .spec import Case, GradedExercise, KernelExercise

LABEL = r"ch\d+-ex-[a-z0-9]+(?:-[a-z0-9]+)*"
# A check cell: optional comment lines, then exactly `check("label")`.
CHECK_CELL = re.compile(rf"^(?:\s*#[^\n]*\n)*\s*check\(\s*[\"']({LABEL})[\"']\s*\)\s*;?\s*$")
# The label of an exercise in the book (`:label:`) or in the student edition's title.
EXERCISE_LABEL = re.compile(
    rf"^(?::label:\s*|\*\*Exercise\*\* \(`)({LABEL})(?:`\))?\s*$", re.MULTILINE
)
FILE_CHAPTER = re.compile(r"^0*(\d+)_")
GRADER_TAG = "grader-call"
# Seconds the calls of one exercise may take in the kernel.
CALL_TIMEOUT = 120
# The error a cell stopped at its deadline is recorded with.
TIMED_OUT = "CellTimeoutError"


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


class OutputBudget:
    """Counts the bytes of output a notebook produced; what is beyond the budget is dropped."""

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
        return False


def execute(
    nb: Any,
    path: Path,
    config: GradingConfig,
    budget: OutputBudget,
    exercises: dict[str, list[Case]],
) -> tuple[str, str, dict[str, list[list[Any]] | str]]:
    """Run the notebook in a fresh kernel (in its sandbox when configured), every error
    allowed, then one cell per exercise that calls its answers; return the status, why when
    it could not run, and each exercise's results (or why there are none).

    ``nb`` ends with the outputs of the first run. A kernel that dies during an exercise's
    calls (out of memory, a crash in the answer) costs only that exercise: the notebook runs
    again in a fresh kernel for the exercises after it."""
    import copy

    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    workdir = Path(tempfile.mkdtemp(prefix="grade-"))
    results: dict[str, list[list[Any]] | str] = {}
    original = copy.deepcopy(nb)
    first = True
    try:
        pending = list(exercises)
        while True:
            run = nb if first else copy.deepcopy(original)
            folders = _plan_calls(run, workdir, {label: exercises[label] for label in pending})
            try:
                _run_kernel(run, path, config, budget, workdir)
            except CellTimeoutError:
                return f"timeout after {config.timeout:g} s", "the kernel ignored the interrupt", {}
            except DeadKernelError as error:
                if not _reached_calls(run):
                    if first:  # the notebook's own cells killed it: nothing to grade
                        return "kernel died", str(error)[:200], {}
                    for label in pending:  # a rerun died before the calls: give up
                        results[label] = "the kernel died before its calls ran"
                    return "ok", "", results
                finished = [label for label in pending if _has_results(folders[label])]
                _read(results, folders, exercises, finished)
                crashed = next((label for label in pending if label not in finished), None)
                if crashed is None:
                    return "ok", "", results
                results[crashed] = "the kernel died while its calls ran (out of memory?)"
                pending = pending[pending.index(crashed) + 1 :]
                first = False
                if not pending:
                    return "ok", "", results
                continue
            except Exception as error:  # e.g. the kernel could not start
                lines = tail(workdir / "kernel.log").strip().splitlines()
                why = (lines[-1] if lines else f"{type(error).__name__}: {error}")[:200]
                return "not run", why, {}
            _read(results, folders, exercises, pending)
            return "ok", "", results
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _plan_calls(nb: Any, workdir: Path, exercises: dict[str, list[Case]]) -> dict[str, Path]:
    """Write each exercise's calls into a fresh folder, and append the cell that makes them."""
    from nbformat.v4 import new_code_cell

    folders = {}
    for label, cases in exercises.items():
        folders[label] = channel.new_folder(workdir)
        channel.write_plan(folders[label], [case.call for case in cases])
        cell = new_code_cell(channel.call_cell(folders[label]))
        cell.metadata["tags"] = [GRADER_TAG]
        nb.cells.append(cell)
    return folders


def _has_results(folder: Path) -> bool:
    return (folder / "out" / "results.json").is_file()


def _reached_calls(nb: Any) -> bool:
    """Whether the kernel got as far as the grader's cells (it ran the first of them)."""
    return any(
        cell.get("execution_count") is not None
        for cell in nb.cells
        if GRADER_TAG in cell.get("metadata", {}).get("tags", [])
    )


def _read(
    results: dict[str, list[list[Any]] | str],
    folders: dict[str, Path],
    exercises: dict[str, list[Case]],
    labels: list[str],
) -> None:
    for label in labels:
        calls = [case.call for case in exercises[label]]
        try:
            results[label] = channel.read_results(folders[label], calls)
        except channel.Unreadable as error:
            results[label] = str(error)


def _run_kernel(
    nb: Any, path: Path, config: GradingConfig, budget: OutputBudget, workdir: Path
) -> None:
    """Execute ``nb`` in a fresh kernel, in a fresh scratch folder holding the submission."""
    from nbclient import NotebookClient

    scratch = workdir / "scratch"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    shutil.copy2(path, scratch / path.name)
    options: dict[str, Any] = {}
    if config.sandbox == "bwrap":
        options["kernel_manager_class"] = sandboxed_kernel_manager(workdir, config)
    deadline = time.monotonic() + config.timeout

    class Client(NotebookClient):
        def output(self, outs, msg, display_id, cell_index):  # type: ignore[no-untyped-def]
            return super().output(outs, msg, display_id, cell_index) if budget.keep(msg) else None

    def timeout(cell: Any) -> int:
        # The notebook's cells share config.timeout; a cell still running at the deadline
        # is interrupted, and so is each later one, at once. Each exercise's calls have
        # CALL_TIMEOUT seconds of their own, so an endless loop in one exercise costs
        # only that exercise.
        if GRADER_TAG in cell.metadata.get("tags", []):
            return CALL_TIMEOUT
        return max(1, int(deadline - time.monotonic()))

    Client(
        nb,
        kernel_name="python3",
        allow_errors=True,
        timeout_func=timeout,
        interrupt_on_timeout=True,
        # One interrupt, then the next cell: the cell is recorded with this error.
        error_on_timeout={"ename": TIMED_OUT, "evalue": "the cell ran out of time"},
        resources={"metadata": {"path": str(scratch)}},
        **options,
    ).execute()


def judged(
    exercise: GradedExercise, cases: list[Case], results: list[list[Any]] | str
) -> ExerciseScore:
    """The score of one exercise: a check passes when every one of its cases does."""
    if isinstance(results, str):
        return ExerciseScore(0.0, exercise.points, error=results[:300])
    reasons: dict[str, str] = {}
    for case, steps in zip(cases, results, strict=True):
        if case.check in reasons:
            continue
        try:
            problem = case.judge(steps)
        except Exception as error:  # a judge that cannot read the result fails the case
            problem = f"the result could not be read ({type(error).__name__}: {error})"
        if problem:
            shown = f" (for {case.call.shown})" if case.call.shown else ""
            reasons[case.check] = (problem + shown)[:300]
    checks = tuple(
        CheckScore(
            check.name,
            check.title,
            check.points,
            check.name not in reasons,
            check.hint,
            reasons.get(check.name, ""),
        )
        for check in exercise.checks
    )
    return ExerciseScore(sum(c.points for c in checks if c.passed), exercise.points, checks)


def grade_notebook(path: Path, config: GradingConfig, student: str | None = None) -> Row:
    """Run one submission and call its answers; return its row.

    Args:
        path: the notebook.
        config: how to grade.
        student: whose variant to draw (the roster's student); the file's name by default.
    """
    import nbformat

    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as error:  # any unreadable file is a row in the CSV, not a crash
        notes = f"{type(error).__name__}: {error}"[:200]
        return Row(path.name, config.isolation, status="unreadable", notes=notes)

    chapters = chapters_of(nb, path.name)
    declared = [
        exercise
        for chapter in sorted(chapters)
        for exercise in load_chapter(chapter, Path(config.grading_dir))
    ]
    auto = {e.label: e for e in declared if e.checks}
    manual = tuple(ManualExercise(e.label, e.manual_points) for e in declared if e.manual_points)
    possible = sum(e.points for e in auto.values())
    if not chapters:
        return Row(
            path.name,
            config.isolation,
            status="no exercises",
            notes="no exercise label found and the file name names no chapter",
            exercises={
                label: ExerciseScore(0.0, e.points, error="not graded") for label, e in auto.items()
            },
            manual=manual,
            total=0.0,
            possible=possible,
        )
    secret = config.secret.encode("ascii")
    # The roster's student, else the student of a per-student edition, else the file.
    edition = nb.metadata.get("attention_from_scratch", {})
    edition_student = edition.get("student") if isinstance(edition, dict) else None
    key = student or (edition_student if isinstance(edition_student, str) else None) or path.name
    cases = {label: e.cases(variant_rng(secret, key, label)) for label, e in auto.items()}
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
            if CHECK_CELL.match(cell.source):
                cell.source = ""  # the self-check: the grader checks on its own

    # A kernel exercise is graded from the notebook's source, in processes of its own
    # (kernels.py), never by a call in the notebook's kernel.
    kernel_exercises = {
        label: (exercise, cases[label])
        for label, exercise in auto.items()
        if isinstance(exercise, KernelExercise)
    }
    cells = [cell.source for cell in nb.cells if cell.cell_type == "code"]
    calls = {label: found for label, found in cases.items() if label not in kernel_exercises}
    budget = OutputBudget(config.output_bytes)
    status, notes, results = execute(nb, path, config, budget, calls)
    if kernel_exercises:
        results.update(grade_kernels(cells, kernel_exercises, config))
    interrupted = any(
        output.get("ename") in (TIMED_OUT, "KeyboardInterrupt")
        for cell in nb.cells
        if GRADER_TAG not in cell.get("metadata", {}).get("tags", [])
        for output in cell.get("outputs", [])
    )
    if status == "ok" and interrupted:
        status = f"timeout after {config.timeout:g} s"
    scores = {
        label: judged(exercise, cases[label], results.get(label, "its calls did not run"))
        for label, exercise in auto.items()
    }
    errors = []
    for index, cell in enumerate(nb.cells, start=1):
        if GRADER_TAG in cell.get("metadata", {}).get("tags", []):
            continue
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                evalue = str(output.get("evalue", ""))[:120]
                errors.append(f"cell {index}: {output.get('ename')}: {evalue}")
    extra = []
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
