"""The built book reads without a network: every script and style it needs is in the build, and
in Chromium with the network switched off every formula is typeset (run `make book` first; the
browser checks are skipped, with a reason, where no Chromium is installed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from book_info import BUILD_HTML, browser_reports, chapter_notebooks, toc_files
from bs4 import BeautifulSoup

pytestmark = pytest.mark.book

EXTERNAL = re.compile(r"^(https?:)?//", re.IGNORECASE)


def built_pages() -> list[Path]:
    assert BUILD_HTML.is_dir(), f"{BUILD_HTML} is missing: build the book with `make book` first"
    return sorted(
        path
        for path in BUILD_HTML.rglob("*.html")
        if path.relative_to(BUILD_HTML).parts[0] not in {"_static", "_sources"}
    )


def test_pages_load_no_script_or_style_from_another_site() -> None:
    pages = built_pages()
    assert len(pages) >= len(toc_files())
    external = []
    for path in pages:
        soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
        sources = [tag.get("src", "") for tag in soup.find_all("script")]
        sources += [
            tag.get("href", "")
            for tag in soup.find_all("link")
            if {"stylesheet", "preload", "modulepreload"} & set(tag.get("rel", []))
        ]
        external += [(path.name, url) for url in sources if EXTERNAL.match(url)]
    assert external == []


def test_stylesheets_fetch_no_font_or_image_from_another_site() -> None:
    found = [
        (path.name, url)
        for path in (BUILD_HTML / "_static").rglob("*.css")
        for url in re.findall(r"url\(\s*['\"]?([^'\")]+)", path.read_text(encoding="utf-8"))
        if EXTERNAL.match(url)
    ]
    assert found == []


def test_mathjax_is_served_from_the_book_with_its_fonts() -> None:
    soup = BeautifulSoup(
        (BUILD_HTML / "book" / "02_trainable_qkv.html").read_text(encoding="utf-8"),
        "html.parser",
    )
    sources = [tag.get("src", "") for tag in soup.find_all("script")]
    (mathjax,) = [src for src in sources if "mathjax" in src.lower()]
    assert mathjax.startswith("../_static/mathjax/"), mathjax
    assert (BUILD_HTML / "book" / mathjax.split("?")[0]).resolve().is_file()
    fonts = BUILD_HTML / "_static" / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2"
    assert len(list(fonts.glob("*.woff"))) >= 10


def test_every_page_was_opened_in_both_modes() -> None:
    reports = browser_reports()
    opened = {(report["page"], report["mode"]) for report in reports}
    for name in toc_files():
        assert (f"{name}.html", "light") in opened
        assert (f"{name}.html", "dark") in opened
    for report in reports:
        # The theme really switched: axe measured the colours the reader gets in that mode.
        assert report["theme"] == report["mode"], report["page"]


@pytest.mark.parametrize("path", chapter_notebooks(), ids=lambda path: path.stem)
def test_chapter_shows_typeset_math_without_a_network(path: Path) -> None:
    reports = [r for r in browser_reports() if r["page"] == f"book/{path.stem}.html"]
    assert [report["mode"] for report in reports] == ["light", "dark"]
    for report in reports:
        assert report["typeset"], f"MathJax did not start ({report['mode']})"
        assert report["math"] > 0, "no formula was typeset"
        assert report["raw_math"] == [], "LaTeX delimiters left in the visible text"


def test_no_page_reaches_for_the_network_or_raises_offline() -> None:
    reports = browser_reports()
    assert [(r["page"], url) for r in reports for url in r["external"]] == []
    assert [(r["page"], error) for r in reports for error in r["errors"]] == []


@pytest.mark.parametrize("path", chapter_notebooks(), ids=lambda path: path.stem)
def test_live_code_says_it_needs_the_network(path: Path) -> None:
    (report,) = [
        r
        for r in browser_reports()
        if r["page"] == f"book/{path.stem}.html" and r["mode"] == "light"
    ]
    # The button was pressed with the network off: the page says why nothing starts.
    assert "Live code needs an internet connection" in report["live_code"]
