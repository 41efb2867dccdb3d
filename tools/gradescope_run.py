"""Gradescope's side of the autograder: grade the submitted notebook, write results.json.

`tools/gradescope.py` puts this file into the autograder zip as `run.py`, beside the course's
grader (`grade.py` and its package `grader/`), the graded exercises of the chosen chapters and
the course's secret (`grading/`) and `autograder.json`. Gradescope runs `run_autograder`,
which runs this with the Python that `setup.sh` installed. It grades every `.ipynb` of
`/autograder/submission/` exactly as `make grade` does, each student on their own variant
(keyed by their e-mail address, as a roster with an `Email address` column keys it), and
writes `/autograder/results/results.json` in Gradescope's format:

- one test per graded check, `visible`, with the reason and the hint as output when it fails
  (the inputs it drew are described, the grader's code and references never leave the zip);
- each exercise graded by hand as a test worth 0 automatic points, `hidden` from students,
  its rubric as output for the graders;
- a notebook that cannot be read or run, or holds another chapter's exercises, a test that
  says so and scores 0.

`AUTOGRADER_ROOT` replaces `/autograder` (the tests run it in a temporary folder).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).resolve().parent
sys.path.insert(0, str(SOURCE))

import grader  # noqa: E402  (beside this file in the zip)

VISIBLE, HIDDEN = "visible", "hidden"
CHAPTER = re.compile(r"^ch(\d+)-ex-")


def _test(name: str, score: float, max_score: float, visibility: str, output: str) -> dict:
    return {
        "name": name,
        "score": score,
        "max_score": max_score,
        "visibility": visibility,
        "output": output,
    }


def tests_of(row: grader.Row, chapters: set[int], rubrics: dict[str, str]) -> list[dict]:
    """The Gradescope tests of one graded notebook (a row of `grader.grade_folder`)."""
    name = row.submission
    tests = []
    if row.status != "ok":
        tests.append(
            _test(
                f"{name}: {row.status}",
                0,
                0,
                VISIBLE,
                f"{row.status}: {row.notes}".strip(": ")
                + ". Exercises that were checked before it still count.",
            )
        )
    if row.status == "ok" and not row.exercises:
        tests.append(
            _test(
                f"{name}: no exercise of this assignment",
                0,
                0,
                VISIBLE,
                f"This assignment grades chapter(s) {sorted(chapters)}; "
                "did you upload the right notebook?",
            )
        )
    for label, exercise in row.exercises.items():
        match = CHAPTER.match(label)
        if match is None or int(match.group(1)) not in chapters:
            tests.append(
                _test(
                    f"{label}: not part of this assignment",
                    0,
                    0,
                    VISIBLE,
                    f"This assignment grades chapter(s) {sorted(chapters)}; "
                    "did you upload the right notebook?",
                )
            )
            continue
        if exercise.error:
            tests.append(
                _test(
                    f"{label}: not checked",
                    0,
                    exercise.possible,
                    VISIBLE,
                    exercise.error,
                )
            )
            continue
        for check in exercise.checks:
            score = check.points if check.passed else 0
            output = ""
            if not check.passed:
                output = "\n".join(p for p in (check.reason, f"Hint: {check.hint}") if p)
            tests.append(_test(f"{label}: {check.title}", score, check.points, VISIBLE, output))
    for item in row.manual:
        label = item.label
        tests.append(
            _test(
                f"{label}: graded by hand ({item.points:g} points)",
                0,
                0,
                HIDDEN,
                f"Rubric: {rubrics.get(label, '')}",
            )
        )
    return tests


def results(
    rows: list[grader.Row], chapters: set[int], rubrics: dict[str, str], isolation: str
) -> dict[str, Any]:
    """results.json for the graded notebooks (none: a result that says what to upload)."""
    tests: list[dict] = []
    for row in rows:
        tests += tests_of(row, chapters, rubrics)
    if not rows:
        tests.append(
            _test(
                "No notebook found",
                0,
                0,
                VISIBLE,
                "Upload the chapter's .ipynb file (in Colab: File, Download, Download .ipynb).",
            )
        )
    return {
        "score": sum(test["score"] for test in tests),
        "output": f"Graded as `make grade` grades. Isolation: {isolation}.",
        "stdout_visibility": HIDDEN,
        "tests": tests,
    }


def rubrics_of(chapters: set[int]) -> dict[str, str]:
    """The rubric of every exercise graded by hand in these chapters."""
    return {
        exercise.label: exercise.rubric
        for chapter in sorted(chapters)
        for exercise in grader.load_chapter(chapter, SOURCE / "grading")
        if exercise.manual_points
    }


def student_of(root: Path) -> str | None:
    """The submitter's key, from Gradescope's submission metadata (None without one)."""
    try:
        metadata = json.loads((root / "submission_metadata.json").read_text(encoding="utf-8"))
        (user, *_) = metadata["users"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if isinstance(user, dict) and user.get("email"):
        return f"Email address={user['email']}"
    if isinstance(user, dict) and user.get("id") is not None:
        return f"Gradescope={user['id']}"
    return None


def main() -> int:
    root = Path(os.environ.get("AUTOGRADER_ROOT", "/autograder"))
    config = json.loads((SOURCE / "autograder.json").read_text(encoding="utf-8"))
    chapters = set(config["chapters"])
    notebooks = sorted((root / "submission").rglob("*.ipynb"))
    problem = grader.sandbox_problem()
    sandbox = "bwrap" if problem is None else "none"
    isolation = (
        "each kernel in its bubblewrap sandbox"
        if problem is None
        else "Gradescope's container, new for each submission and discarded after it "
        f"(no bubblewrap inside it: {problem})"
    )
    with tempfile.TemporaryDirectory(prefix="submission-") as folder:
        for index, path in enumerate(notebooks):
            target = Path(folder) / path.name
            if target.exists():  # the same name in two subfolders of the submission
                target = target.with_name(f"{path.stem}-{index}.ipynb")
            shutil.copy(path, target)
        rows = []
        if notebooks:
            student = student_of(root)
            rows = grader.grade_folder(
                folder,
                timeout=config["timeout"],
                workers=1,
                grading_dir=SOURCE / "grading",
                secret_path=SOURCE / "grading" / ".secret",
                students={path.name: student for path in Path(folder).iterdir()}
                if student
                else None,
                sandbox=sandbox,
            )
    out = root / "results" / "results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(results(rows, chapters, rubrics_of(chapters), isolation), indent=1),
        encoding="utf-8",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
