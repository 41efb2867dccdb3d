"""Publish the book with or without the exercises' solutions.

Each exercise's solution sits between ``solution-start`` and
``solution-end`` and shows as a closed dropdown. An instructor who grades
the exercises may publish the book without them: ``make book
SOLUTIONS=hidden`` sets the environment variable ``BOOK_SOLUTIONS=hidden``,
and this extension then removes every solution, its code and its output
from the pages, once sphinx-exercise has gathered each into one node.
``shown`` (the default) keeps them.

Written here because sphinx-exercise's own ``hide_solutions`` (1.2.1) fails
on the gated ``solution-start``/``solution-end`` form the chapters use (an
unknown ``solution_end_node`` reaches the HTML writer).
"""

from __future__ import annotations

import os
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx_exercise.nodes import (
    solution_end_node,
    solution_node,
    solution_start_node,
)

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


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_config_value("book_solutions", "shown", "html")
    app.connect("config-inited", _record)
    app.connect("doctree-resolved", _remove_solutions)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
