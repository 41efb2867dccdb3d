"""Two pieces of HTML that axe-core flags against WCAG 2.1, written accessibly.

- myst-nb's "Show code cell source" toggle (a ``<summary>``) is labelled
  "Toggle hidden content" with ``aria-label``, so a speech-input user who
  says the words on the screen cannot activate it
  (``label-content-name-mismatch``). Without the label, its name is the
  visible text, "Show code cell source" or "Hide code cell source".
- docutils lists the references as ``<div role="list">`` of
  ``role="doc-biblioentry"`` entries: the role is deprecated in DPUB-ARIA 1.1
  (``aria-deprecated-role``), and it is not a list item, so the list has no
  item a screen reader can count (``aria-required-children``). Each entry
  becomes a ``listitem``.

Both replace one node's HTML visitor; the rest of the output is unchanged.
"""

from __future__ import annotations

from html import escape
from typing import Any

from docutils import nodes
from myst_nb.sphinx_ import HideCodeCellNode, depart_HideCellInput
from sphinx.application import Sphinx


def visit_hide_cell_input(self: Any, node: HideCodeCellNode) -> None:
    classes = " ".join(node["classes"])
    show, hide = escape(node["prompt_show"]), escape(node["prompt_hide"])
    self.body.append(f'<details class="admonition hide {classes}">\n')
    self.body.append("<summary>\n")
    self.body.append(f'<p class="collapsed admonition-title">{show}</p>\n')
    self.body.append(f'<p class="expanded admonition-title">{hide}</p>\n')
    self.body.append("</summary>\n")


def visit_citation(self: Any, node: nodes.citation) -> None:
    type(self).visit_citation(self, node)
    self.body[-1] = self.body[-1].replace(
        'role="doc-biblioentry"', 'role="listitem"'
    )


def depart_citation(self: Any, node: nodes.citation) -> None:
    type(self).depart_citation(self, node)


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_node(
        HideCodeCellNode,
        override=True,
        html=(visit_hide_cell_input, depart_HideCellInput),
    )
    app.add_node(
        nodes.citation, override=True, html=(visit_citation, depart_citation)
    )
    return {"parallel_read_safe": True, "parallel_write_safe": True}
