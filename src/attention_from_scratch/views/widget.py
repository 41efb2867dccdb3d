"""The base of every interactive view: one self-contained HTML output (introduced in chapter 1).

A :class:`View` is what a ``make_<name>(...)`` function returns. A notebook cell that ends in
one displays it: Jupyter, Colab and the built book all show the ``text/html`` it returns from
``_repr_html_``. That HTML carries everything it needs, because Colab shows each output in an
iframe of its own and the book must read offline:

- a ``<div class="afs-view">`` with a unique id (a view displayed twice is two views);
- a static fallback, a short text and a table, shown where scripts do not run and hidden by
  the script once the interactive view is drawn;
- the data, as ``<script type="application/json">``;
- the style (``js/views.css``) and the script (``js/common.js`` and ``js/<name>.js``), inlined.

Nothing is fetched from another site. The scripts are plain ES2019; each view file exports
``render({model, el})`` in the shape of an anywidget module, where ``model.get(key)`` reads a
key of the JSON data, so the same file could serve a Jupyter Book 2 ``{anywidget}`` directive.
"""

from __future__ import annotations

import hashlib
import html
import itertools
import json
import math
from collections.abc import Sequence
from importlib import resources
from typing import Any

#: The most script, style and data one view may inline, in bytes. A page of the book keeps
#: under about 100 KB of them, so a chapter holds two or three views at most.
MAX_VIEW_BYTES = 60_000

# Every output gets its own element id, even the same view displayed twice in one page.
_COUNTER = itertools.count()


def asset(name: str) -> str:
    """The text of one of the views' files, ``js/<name>``, as installed with the package.

    Args:
        name: a file name such as ``"common.js"`` or ``"explorer.js"``.

    Returns:
        The file's text (UTF-8); a script without its indentation and whole-line ``//``
        comments, which the page does not need (they stay in the package's files) and which
        would count against :data:`MAX_VIEW_BYTES`. No script continues a string over a line
        break, so this changes no string; the browser tests run the page's copy.
    """
    text = resources.files(__package__).joinpath("js", name).read_text(encoding="utf-8")
    if name.endswith(".js"):
        lines = (line.lstrip(" ") for line in text.splitlines(keepends=True))
        text = "".join(line for line in lines if not line.startswith("//"))
    return text


def _script_safe(text: str) -> str:
    # A "</script" or "<!--" inside an inline script would end it early: "<" never appears
    # raw in the JSON (\u003c is the same string), and the view files are tested not to hold it.
    return text.replace("<", "\\u003c")


def to_json(data: dict[str, Any]) -> str:
    """``data`` as compact JSON that is safe inside an inline ``<script>``.

    Raises:
        ValueError: a number is not finite (JSON has no NaN or infinity).
    """
    try:
        text = json.dumps(data, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    except ValueError as error:
        raise ValueError(f"data: expected finite numbers only, got {error}") from None
    return _script_safe(text)


def rounded(values: Any, digits: int = 6) -> Any:
    """Nested lists of floats rounded to ``digits`` decimals (``-0.0`` written as ``0``), to
    keep a view's JSON small; ints and strings pass through."""
    if isinstance(values, (list, tuple)):
        return [rounded(v, digits) for v in values]
    if isinstance(values, float):
        if not math.isfinite(values):
            return values  # to_json refuses it with a clear message
        value = round(values, digits)
        return 0 if value == 0 else value
    return values


def check_labels(tokens: object, max_tokens: int) -> list[str]:
    """``tokens`` as a list of str: one label per token, at most ``max_tokens`` of them."""
    if isinstance(tokens, str) or not isinstance(tokens, Sequence):
        raise TypeError(f"tokens: expected a list of str, got {type(tokens).__name__}")
    labels = list(tokens)
    for label in labels:
        if not isinstance(label, str):
            raise TypeError(f"tokens: expected a list of str, got an item {label!r}")
    if not 0 < len(labels) <= max_tokens:
        raise ValueError(f"tokens: expected 1 to {max_tokens} tokens, got {len(labels)}")
    return labels


class View:
    """One interactive view: a cell that ends in it displays it (introduced in chapter 1).

    Args:
        name: the view's script, ``js/<name>.js``, which registers ``AFSViews[name]``.
        data: what the script reads with ``model.get(key)``: JSON-able, finite numbers only.
        label: the view's accessible name, e.g. ``"Attention explorer"``.
        fallback: HTML shown where scripts do not run (a sentence and a table); the caller
            escapes any text in it.

    ``View.html()`` returns the HTML; ``len(view.html())`` is what it adds to a page.
    """

    def __init__(self, name: str, data: dict[str, Any], *, label: str, fallback: str) -> None:
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"name: expected a view name such as 'explorer', got {name!r}")
        if not isinstance(data, dict):
            raise TypeError(f"data: expected a dict, got {type(data).__name__}")
        if not resources.files(__package__).joinpath("js", f"{name}.js").is_file():
            raise ValueError(f"name: expected a view with a file js/{name}.js, got {name!r}")
        self.name = name
        self.data = data
        self.label = label
        self.fallback = fallback
        self._json = to_json(data)
        size = (
            len(self._json.encode())
            + len(fallback.encode())
            + sum(len(asset(part).encode()) for part in ("common.js", f"{name}.js", "views.css"))
        )
        if size > MAX_VIEW_BYTES:
            raise ValueError(
                f"data: expected a view of at most {MAX_VIEW_BYTES} bytes of script, style and "
                f"data, got {size}; show fewer tokens, layers or heads"
            )

    def __repr__(self) -> str:
        return f"View({self.name!r}, {len(self._json)} bytes of data)"

    def html(self, element_id: str | None = None) -> str:
        """The self-contained HTML of the view.

        Args:
            element_id: the id of the view's element; by default a new one each call, so that
                a view shown twice in a page is two independent views.
        """
        if element_id is None:
            digest = hashlib.sha1(self._json.encode()).hexdigest()[:8]
            element_id = f"afs-{self.name}-{digest}-{next(_COUNTER)}"
        script = asset("common.js") + "\n" + asset(f"{self.name}.js")
        boot = f"AFSViews.boot({json.dumps(element_id)}, {json.dumps(self.name)});"
        return (
            f'<div class="afs-view afs-view-{self.name}" id="{element_id}" role="group" '
            f'aria-label="{html.escape(self.label)}">'
            f"<style>{asset('views.css')}</style>"
            f'<div class="afs-fallback">{self.fallback}</div>'
            f'<div class="afs-mount"></div>'
            f'<script type="application/json" class="afs-data">{self._json}</script>'
            f"<script>{script}\n{boot}</script>"
            f"</div>"
        )

    def _repr_html_(self) -> str:
        return self.html()


def fallback_table(
    caption: str, columns: list[str], rows: list[list[str]], *, row_headers: bool = True
) -> str:
    """An accessible HTML table for a view's static fallback; every cell text is escaped.

    Args:
        caption: what the table shows.
        columns: the column headers.
        rows: one list of cell texts per row; the first cell is a row header when
            ``row_headers``.
    """
    head = "".join(f'<th scope="col">{html.escape(c)}</th>' for c in columns)
    body = []
    for row in rows:
        cells = []
        for index, cell in enumerate(row):
            if row_headers and index == 0:
                cells.append(f'<th scope="row">{html.escape(cell)}</th>')
            else:
                cells.append(f"<td>{html.escape(cell)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return (
        f'<div class="afs-scroll" tabindex="0" role="region" aria-label="{html.escape(caption)}">'
        f"<table><caption>{html.escape(caption)}</caption><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )
