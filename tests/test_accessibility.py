"""Every page of the built book passes axe-core's WCAG 2.1 A and AA rules in Chromium, in the
theme's light and dark mode, as it opens and with every solution and hidden cell opened (run
`make book` first; skipped, with a reason, where no Chromium is installed)."""

from __future__ import annotations

import pytest
from book_info import browser_checks, browser_reports, chromium, toc_files

pytestmark = pytest.mark.book


def test_no_wcag_violation_on_any_page_in_either_mode() -> None:
    reports = browser_reports()
    assert len(reports) >= 2 * len(toc_files())
    found = [
        f"{report['page']} ({report['mode']}): {violation['id']} ({violation['impact']}) "
        f"{violation['help']}: {node['target']}"
        for report in reports
        for violation in report["violations"]
        for node in violation["nodes"]
    ]
    assert found == []


def test_the_checker_finds_what_it_should(tmp_path) -> None:
    # A page with the faults the checks exist for: an image without a text alternative, text
    # too faint to read, a list that is not one, a formula MathJax never saw, and a script that
    # reaches for another site.
    (tmp_path / "bad.html").write_text(
        '<!DOCTYPE html><html lang="en"><head><title>Bad</title>'
        '<script src="https://cdn.example.org/x.js"></script></head><body><main>'
        '<h1>Bad</h1><img src="x.png"><p style="color:#bbb;background:#fff">faint</p>'
        '<div role="list"><div role="doc-biblioentry">entry</div></div>'
        "<p>\\(\\sqrt{d_k}\\)</p></main></body></html>",
        encoding="utf-8",
    )
    (light, dark) = browser_checks.run(["bad.html"], tmp_path, chromium())
    assert (light["mode"], dark["mode"]) == ("light", "dark")
    found = {violation["id"] for violation in light["violations"]}
    assert {"image-alt", "color-contrast", "aria-required-children"} <= found
    assert light["raw_math"] and not light["typeset"]
    assert light["external"] == ["https://cdn.example.org/x.js"]
    assert browser_checks.problems(light)
