"""Grade a folder of submitted notebooks: `make grade SUBMISSIONS=DIR`.

Each `*.ipynb` in DIR runs in a fresh kernel (its own process and temporary folder, with a
per-notebook timeout), with every error allowed so a raising cell costs only its exercise.
Each check cell of the submission (`check("chN-ex-name")`) is replaced by a call that runs
the exercise's public and hidden checks right there and prints one JSON line behind a random
marker chosen for this run; exercises whose check cell was deleted are checked at the end.
The checks come from the installed package and `grading/hidden/`, never from the submission.

Writes DIR/grades.csv (one row per file: `submission`, one column per auto-graded exercise,
`total`, `possible`, `status`, `notes`) and DIR/feedback/<name>.md for each notebook.

Usage: python tools/grade.py DIR [--timeout 600] [--workers 2] [--hidden grading/hidden]
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_HIDDEN = ROOT / "grading" / "hidden"
DEFAULT_TIMEOUT = 600
OUTPUTS = {"grades.csv", "feedback"}
LABEL = r"ch\d+-ex-[a-z0-9]+(?:-[a-z0-9]+)*"
# A check cell: optional comment lines, then exactly `check("label")`.
CHECK_CELL = re.compile(rf"^(?:\s*#[^\n]*\n)*\s*check\(\s*[\"']({LABEL})[\"']\s*\)\s*;?\s*$")
# The label of an exercise in the book (`:label:`) or in the student edition's title.
EXERCISE_LABEL = re.compile(
    rf"^(?::label:\s*|\*\*Exercise\*\* \(`)({LABEL})(?:`\))?\s*$", re.MULTILINE
)
FILE_CHAPTER = re.compile(r"^0*(\d+)_")


def _points(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


# ---------------------------------------------------------------- one notebook (child process)


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


def _call(labels: Sequence[str], nonce: str, **extra: Any) -> str:
    arguments = "".join(f", {key}={value!r}" for key, value in extra.items())
    return (
        '__import__("attention_from_scratch.exercises._core", fromlist=["_"])'
        f".report_for_grader({list(labels)!r}, {nonce!r}{arguments})"
    )


def _parse_marker(cell: Any, nonce: str) -> list[dict[str, Any]] | None:
    # A long line may arrive in several stream messages: join them before splitting lines.
    text = "".join(
        output.get("text", "")
        for output in cell.get("outputs", [])
        if output.get("output_type") == "stream" and output.get("name") == "stdout"
    )
    for line in text.splitlines():
        if line.startswith(nonce):
            return json.loads(line[len(nonce) :])
    return None


def grade_notebook(path: Path, config: dict[str, Any]) -> dict[str, Any]:
    """Run one submission and its checks; return its row, feedback data and cell errors."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    from attention_from_scratch.exercises import _core

    result: dict[str, Any] = {
        "submission": path.name,
        "status": "ok",
        "notes": "",
        "exercises": {},
        "manual": [],
        "errors": [],
        "total": None,
        "possible": None,
    }
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as error:  # any unreadable file is a row in the CSV, not a crash
        result["status"] = "unreadable"
        result["notes"] = f"{type(error).__name__}: {error}"[:200]
        return result

    for check_file in config["check_files"]:
        _core.load_check_file(check_file)
    chapters = chapters_of(nb, path.name)
    for chapter in sorted(chapters):
        _core.load_chapter(chapter)
    if config["hidden_dir"]:
        _core.load_hidden(config["hidden_dir"], chapters)
    exercises = [e for e in _core.all_exercises() if e.chapter in chapters]
    auto = [e for e in exercises if e.auto_graded]
    result["manual"] = [
        {"label": e.label, "points": e.manual_points} for e in exercises if e.manual_points
    ]
    result["possible"] = sum(e.points for e in auto)
    result["exercises"] = {
        e.label: {
            "earned": 0.0,
            "possible": e.points,
            "checks": [],
            "error": "its check did not run",
        }
        for e in auto
    }
    if not chapters:
        result["status"] = "no exercises"
        result["notes"] = "no exercise label found and the file name names no chapter"
        result["total"] = 0.0
        return result

    nonce = config["nonce"]
    cells = []
    setup = nbformat.v4.new_code_cell(
        _call([], nonce, hidden_dir=config["hidden_dir"], check_files=config["check_files"])
    )
    cells.append(setup)
    grading_cells = []
    checked: set[str] = set()
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
            match = CHECK_CELL.match(cell.source)
            if match and match.group(1) in result["exercises"]:
                cell.source = _call([match.group(1)], nonce)
                grading_cells.append(cell)
                checked.add(match.group(1))
        cells.append(cell)
    rest = [label for label in result["exercises"] if label not in checked]
    if rest:
        last = nbformat.v4.new_code_cell(_call(rest, nonce))
        cells.append(last)
        grading_cells.append(last)
    nb.cells = cells

    deadline = time.monotonic() + config["timeout"]
    with tempfile.TemporaryDirectory(prefix="grade-") as workdir:
        shutil.copy2(path, Path(workdir) / path.name)
        client = NotebookClient(
            nb,
            kernel_name="python3",
            allow_errors=True,
            timeout_func=lambda cell: max(1, int(deadline - time.monotonic())),
            interrupt_on_timeout=False,
            resources={"metadata": {"path": workdir}},
        )
        try:
            client.execute()
        except CellTimeoutError:
            result["status"] = f"timeout after {config['timeout']:g} s"
        except DeadKernelError:
            result["status"] = "kernel died"
        except Exception as error:  # e.g. the kernel could not start
            result["status"] = "not run"
            result["notes"] = f"{type(error).__name__}: {error}"[:200]

    setup_report = _parse_marker(setup, nonce)
    if setup.get("outputs") and setup_report is None:
        result["status"] = "checks not loaded"
    for cell in grading_cells:
        for item in _parse_marker(cell, nonce) or []:
            if item["label"] in result["exercises"]:
                result["exercises"][item["label"]] = item
    for index, cell in enumerate(nb.cells[1:], start=1):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error" and cell not in grading_cells:
                evalue = str(output.get("evalue", ""))[:120]
                result["errors"].append(f"cell {index}: {output.get('ename')}: {evalue}")
    if result["errors"]:
        result["notes"] = f"{len(result['errors'])} cell(s) raised"
    result["total"] = sum(float(e["earned"]) for e in result["exercises"].values())
    return result


# ---------------------------------------------------------------- the folder (parent process)


def _run_child(path: Path, config: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="grade-result-") as scratch:
        out = Path(scratch) / "result.json"
        # The configuration (and its marker) goes through stdin, not the command line or the
        # environment, which the submission's kernel could read.
        payload = json.dumps({**config, "path": str(path), "out": str(out)})
        status, notes = f"timeout after {config['timeout']:g} s", "the grader stopped it"
        try:
            child = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "--one"],
                input=payload,
                text=True,
                capture_output=True,
                timeout=config["timeout"] + 120,
                check=False,
            )
            stderr = child.stderr.strip().splitlines()
            status, notes = "grader error", (stderr[-1] if stderr else "")[:200]
        except subprocess.TimeoutExpired:
            pass
        if out.is_file():
            return json.loads(out.read_text())
    return {
        "submission": path.name,
        "status": status,
        "notes": notes,
        "exercises": {},
        "manual": [],
        "errors": [],
        "total": None,
        "possible": None,
    }


def grade_folder(
    folder: str | Path,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    workers: int = 2,
    hidden_dir: str | Path | None = DEFAULT_HIDDEN,
    check_files: Iterable[str | Path] = (),
) -> list[dict[str, Any]]:
    """Grade every file of ``folder``; write grades.csv and feedback/; return the rows."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"SUBMISSIONS: expected a folder, got {str(folder)!r}")
    config = {
        "timeout": float(timeout),
        "hidden_dir": str(Path(hidden_dir).resolve()) if hidden_dir else None,
        "check_files": [str(Path(p).resolve()) for p in check_files],
        "nonce": "GRADER-" + secrets.token_hex(16) + ":",
    }
    files = sorted(
        p for p in folder.iterdir() if p.name not in OUTPUTS and not p.name.startswith(".")
    )
    notebooks = [p for p in files if p.suffix == ".ipynb" and p.is_file()]
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        graded = dict(
            zip(notebooks, pool.map(lambda p: _run_child(p, config), notebooks), strict=False)
        )
    rows = []
    for path in files:
        if path in graded:
            rows.append(graded[path])
        else:
            kind = "a folder" if path.is_dir() else f"a {path.suffix or 'file'} file"
            rows.append(
                {
                    "submission": path.name,
                    "status": "not a notebook",
                    "notes": f"{kind}, not .ipynb",
                    "exercises": {},
                    "manual": [],
                    "errors": [],
                    "total": None,
                    "possible": None,
                }
            )
    write_csv(folder / "grades.csv", rows)
    feedback = folder / "feedback"
    feedback.mkdir(exist_ok=True)
    for row in rows:
        if row["submission"].endswith(".ipynb"):
            name = Path(row["submission"]).stem + ".md"
            (feedback / name).write_text(feedback_text(row), encoding="utf-8")
    return rows


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """One row per file; one column per auto-graded exercise seen in any submission."""
    labels: list[str] = []
    for row in rows:
        labels += [label for label in row["exercises"] if label not in labels]
    order = {label: i for i, label in enumerate(labels)}
    labels.sort(key=lambda label: (int(label[2:].split("-", 1)[0]), order[label]))
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["submission", *labels, "total", "possible", "status", "notes"])
        for row in rows:
            points = [
                _points(row["exercises"][label]["earned"]) if label in row["exercises"] else ""
                for label in labels
            ]
            writer.writerow(
                [
                    row["submission"],
                    *points,
                    _points(row["total"]),
                    _points(row["possible"]),
                    row["status"],
                    row["notes"],
                ]
            )


def feedback_text(row: dict[str, Any]) -> str:
    """The Markdown feedback for one submission."""
    lines = [f"# Feedback: {row['submission']}", ""]
    if row["possible"] is not None:
        lines.append(f"Auto-graded points: {_points(row['total'])} of {_points(row['possible'])}.")
    if row["status"] != "ok":
        lines.append(f"Status: {row['status']}. {row['notes']}".strip())
    lines.append("")
    for label, exercise in row["exercises"].items():
        lines.append(
            f"## {label}: {_points(exercise['earned'])} of {_points(exercise['possible'])}"
        )
        lines.append("")
        if exercise.get("error"):
            lines.append(f"- Not checked: {exercise['error']}.")
        for check in exercise.get("checks", []):
            if check["passed"]:
                lines.append(f"- pass: {check['title']}")
            else:
                lines.append(f"- FAIL: {check['title']}")
                if check["reason"]:
                    lines.append(f"  - {check['reason']}")
                lines.append(f"  - Hint: {check['hint']}")
        lines.append("")
    if row["manual"]:
        lines.append("## Graded by your instructor")
        lines.append("")
        for item in row["manual"]:
            lines.append(f"- {item['label']}: {_points(item['points'])} points")
        lines.append("")
    if row["errors"]:
        lines.append("## Cells that raised an error")
        lines.append("")
        lines += [f"- {error}" for error in row["errors"]]
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: grade a folder, or (internally) one notebook."""
    if argv is None:
        argv = sys.argv[1:]
    if list(argv) == ["--one"]:
        config = json.loads(sys.stdin.read())
        result = grade_notebook(Path(config["path"]), config)
        Path(config["out"]).write_text(json.dumps(result))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("submissions", type=Path, help="folder of submitted .ipynb files")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds each")
    parser.add_argument("--workers", type=int, default=2, help="notebooks run in parallel")
    parser.add_argument("--hidden", type=Path, default=DEFAULT_HIDDEN, help="hidden checks")
    parser.add_argument("--checks", type=Path, action="append", default=[], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    rows = grade_folder(
        args.submissions,
        timeout=args.timeout,
        workers=args.workers,
        hidden_dir=args.hidden,
        check_files=args.checks,
    )
    for row in rows:
        print(
            f"{row['submission']}: {_points(row['total']) or '-'} / "
            f"{_points(row['possible']) or '-'} ({row['status']})"
        )
    print(f"Wrote {args.submissions / 'grades.csv'} and {args.submissions / 'feedback'}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
