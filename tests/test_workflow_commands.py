"""Every command that a GitHub workflow or .ci/run runs calls what exists: the make targets, nox
sessions, scripts and modules it names, the marks it selects tests by, and the imports and
attributes of its `python -c` snippets (ci.yml once called `grade.sandbox_problem()` after
tools/grade.py had stopped exporting it)."""

from __future__ import annotations

import os
from pathlib import Path

import commands
import pytest
from book_info import ROOT
from commands import problems, script_lines

SCRIPTS = [
    *sorted((ROOT / ".github" / "workflows").glob("*.yml")),
    pytest.param(
        ROOT / ".ci" / "run",
        marks=pytest.mark.skipif(os.name == "nt", reason="a POSIX script, run by make"),
    ),
]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_every_command_calls_what_exists(script: Path) -> None:
    lines = script_lines(script)
    assert lines
    found = [(line, problem) for line, env in lines for problem in problems(line, env)]
    assert found == []


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "python -c \"import sys; sys.path.insert(0, 'tools'); import grader; "
            'sys.exit(grader.sandbox_problems())"',
            "grader.sandbox_problems does not exist",
        ),
        (
            'python -c "from attention_from_scratch import Glove"',
            "attention_from_scratch.Glove does not exist",
        ),
        ('python -c "import sys, torch; torch.cuda.is_availible()"', "is_availible"),
        ('python -c "import gradr"', "gradr does not exist"),
        ('python -c "print(1"', "does not compile"),
        ("python tools/student_editions.py", "no script tools/student_editions.py"),
        ("python -m pip install -r requirement.txt", "no file requirement.txt"),
        ("python -m attention_from_scratch.doctors", "no module"),
        ('python -m pytest -m "not book and not slw"', "mark slw is not registered"),
        ("python -m pytest -m gpu -rs tests", "mark gpu is not registered"),
        ("python -m pytest --nbmake $NOTEBOOKS", "no file book/08_missing.ipynb"),
        (
            "python -m pytest tests --deselect tests/test_workflows.py::test_gone",
            "no test tests/test_workflows.py::test_gone",
        ),
        ('nox -s "compat(middle)"', "compat(middle)"),
        ("nox -s colab && nox -s portabilty", "portabilty"),
        ("sudo apt-get update -qq && make tests", "make tests"),
    ],
)
def test_a_command_that_calls_what_is_gone_is_caught(
    line: str, expected: str, tmp_path: Path
) -> None:
    # A workflow with the one broken step, read as the real ones are.
    workflow = tmp_path / "broken.yml"
    workflow.write_text(
        "env:\n  NOTEBOOKS: book/01_simplified_attention.ipynb book/08_missing.ipynb\n"
        "jobs:\n  test:\n    steps:\n      - run: |\n          python -m pytest -m slow\n"
        f"          {line}\n",
        encoding="utf-8",
    )
    (good, env), (broken, _) = script_lines(workflow)
    assert problems(good, env) == []
    found = problems(broken, env)
    assert len(found) == 1 and expected in found[0], found


@pytest.mark.parametrize(
    ("line", "found"),
    [('nox -s "compat(oldest)" && nox -s colab', []), ("nox -s compat(middle)", ["middle"])],
)
def test_nox_sessions_are_read_off_the_noxfile_where_nox_is_not_installed(
    line: str, found: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(commands, "NOX", False)
    problems_found = problems(line)
    assert len(problems_found) == len(found)
    assert all(word in problem for word, problem in zip(found, problems_found, strict=True))
