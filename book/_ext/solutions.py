"""Publish the book with or without the exercises' solutions.

Each exercise's solution sits between ``solution-start`` and
``solution-end`` and shows as a closed dropdown. An instructor who grades
the exercises may publish the book without them: ``make book
SOLUTIONS=hidden`` sets the environment variable ``BOOK_SOLUTIONS=hidden``,
and this extension then leaves the solutions out of everything the site
serves:

- every solution, its code and its output, from the pages, once
  sphinx-exercise has gathered each into one node;
- the notebooks behind each page's download button (``_sources``), which it
  replaces with the student edition's (stubs instead of solutions);
- the Colab and Binder launch buttons, which it points at the student
  edition's branch instead of the repository's own notebooks.

``shown`` (the default) keeps them.

Written here because sphinx-exercise's own ``hide_solutions`` (1.2.1) fails
on the gated ``solution-start``/``solution-end`` form the chapters use (an
unknown ``solution_end_node`` reaches the HTML writer).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx_exercise.nodes import (
    solution_end_node,
    solution_node,
    solution_start_node,
)
from student_edition import student_urls  # book/_ext/, beside this file

ROOT = Path(__file__).resolve().parents[2]

VARIABLE = "BOOK_SOLUTIONS"
CHOICES = ("shown", "hidden")


def solutions_choice() -> str:
    """``shown`` or ``hidden``, from the environment."""
    choice = os.environ.get(VARIABLE, "shown").strip() or "shown"
    if choice not in CHOICES:
        raise ValueError(
            f"{VARIABLE}: expected one of {', '.join(CHOICES)}, got {choice!r}"
        )
    return choice


def _record(app: Sphinx, config: Config) -> None:
    # A config value of the HTML builder: a build with the other choice
    # rewrites every page instead of keeping the pages of the last one.
    # A misspelt choice stops the build here.
    config.book_solutions = solutions_choice()


def _remove_solutions(
    app: Sphinx, doctree: nodes.document, docname: str
) -> None:
    if app.config.book_solutions != "hidden":
        return
    for kind in (solution_node, solution_start_node, solution_end_node):
        for node in list(doctree.findall(kind)):
            node.parent.remove(node)


def _student_launch_buttons(
    app: Sphinx,
    pagename: str,
    templatename: str,
    context: dict[str, Any],
    doctree: nodes.document | None,
) -> None:
    # Runs after the theme has made the buttons (its handler has priority 501).
    if app.config.book_solutions != "hidden":
        return
    notebook = Path(pagename).name + ".ipynb"
    colab, binder = student_urls(app, notebook)
    for group in context.get("header_buttons", []):
        if group.get("label") != "launch-buttons":
            continue
        for button in group.get("buttons", []):
            if button.get("text") == "Colab":
                button["url"] = colab
            elif button.get("text") == "Binder":
                button["url"] = binder


def _student_sources(app: Sphinx, exception: Exception | None) -> None:
    """Replace each chapter notebook behind a download button by its student
    edition."""
    if exception is not None or app.config.book_solutions != "hidden":
        return
    import nbformat

    # tools/student_edition.py, loaded by path: an extension of this folder
    # has the same name.
    spec = importlib.util.spec_from_file_location(
        "_tools_student_edition", ROOT / "tools" / "student_edition.py"
    )
    assert spec is not None and spec.loader is not None
    tools = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = tools
    spec.loader.exec_module(tools)
    for path in Path(app.outdir, "_sources").rglob("*.ipynb"):
        notebook = nbformat.read(path, as_version=4)
        nbformat.write(tools.student_notebook(notebook), path)


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_config_value("book_solutions", "shown", "html")
    app.connect("config-inited", _record)
    app.connect("doctree-resolved", _remove_solutions)
    app.connect("html-page-context", _student_launch_buttons, priority=600)
    app.connect("build-finished", _student_sources)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
