"""Emit each inline script of a page once.

Sphinx 7 stores a script added with ``app.add_js_file(None, body=...)``
twice when the call comes after the HTML builder was created
(sphinx-togglebutton and sphinx-thebe add theirs then): once as given, with
``filename=None``, and once from its registry, with ``filename=""``. The two
do not compare equal, so every page declared ``const THEBE_JS_URL`` twice,
and the browser refused the second declaration ("Identifier 'THEBE_JS_URL'
has already been declared"). This extension drops the second copy of each
script just before a page is written.
"""

from __future__ import annotations

from typing import Any

from sphinx.application import Sphinx


def _key(script: Any) -> tuple[str, int, tuple[tuple[str, str], ...]]:
    attributes = tuple(sorted(getattr(script, "attributes", {}).items()))
    return (
        getattr(script, "filename", None) or "",
        getattr(script, "priority", 500),
        attributes,
    )


def drop_repeated_scripts(
    app: Sphinx,
    pagename: str,
    templatename: str,
    context: dict[str, Any],
    doctree: Any,
) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen: set[tuple[str, int, tuple[tuple[str, str], ...]]] = set()
    unique = []
    for script in scripts:
        key = _key(script)
        if key not in seen:
            seen.add(key)
            unique.append(script)
    scripts[:] = unique


def setup(app: Sphinx) -> dict[str, Any]:
    # Run after every other handler, once the page's script list is final.
    app.connect("html-page-context", drop_repeated_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
