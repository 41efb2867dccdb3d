"""Checks of the built HTML book (run `make book` first; `make test` does it).

They fail, rather than skip, when the book has not been built: a missing build is a failure of
the pipeline, not a reason to pass.
"""

from __future__ import annotations

import functools
import os
import re
import struct
from pathlib import Path

import pytest
from book_info import (
    BUILD_HTML,
    STUDENT_ZIP,
    chapter_notebooks,
    repository,
    student_edition_urls,
    toc_files,
)
from bs4 import BeautifulSoup

pytestmark = pytest.mark.book

NOTEBOOKS = chapter_notebooks()
IDS = [path.stem for path in NOTEBOOKS]


@functools.cache
def page(name: str) -> BeautifulSoup:
    """The built page, parsed once for every test that reads it (the tests only read it)."""
    path = BUILD_HTML / f"{name}.html"
    assert path.exists(), f"{path} is missing: build the book with `make book` first"
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


def test_every_page_of_the_table_of_contents_was_built() -> None:
    for name in toc_files():
        page(name)
    assert (BUILD_HTML / "index.html").exists()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_chapter_page_has_figures_with_alt_text(path: Path) -> None:
    soup = page(f"book/{path.stem}")
    images = [img for img in soup.select("article img") if "logo" not in img.get("class", [])]
    assert len(images) >= 2
    for img in images:
        assert img.get("alt", "").strip(), f"an image without alt text: {img.get('src')}"
        assert (BUILD_HTML / "book" / img["src"]).resolve().exists(), img["src"]
    assert len(soup.select("figure")) >= 2
    assert soup.select("figcaption")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_chapter_title_is_numbered_once(path: Path) -> None:
    title = page(f"book/{path.stem}").title.get_text()
    number = int(path.stem[:2])
    assert title.startswith(f"{number}. ")
    assert not title.startswith(f"{number}. {number}.")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_chapter_page_shows_no_errors(path: Path) -> None:
    soup = page(f"book/{path.stem}")
    assert not soup.select(".output.traceback"), "an error output was rendered"
    assert not soup.select(".cell_output .error")
    text = soup.get_text()
    assert "Traceback (most recent call last)" not in text
    # Each chapter printed something: the cells really ran.
    assert len(soup.select(".cell_output")) >= 5


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_launch_and_download_links_point_at_this_notebook(path: Path) -> None:
    owner_name, branch = repository()
    soup = page(f"book/{path.stem}")
    hrefs = {a.get("href", "") for a in soup.find_all("a")}
    notebook = f"book/{path.name}"
    assert f"https://mybinder.org/v2/gh/{owner_name}/{branch}?urlpath=tree/{notebook}" in hrefs
    assert (
        f"https://colab.research.google.com/github/{owner_name}/blob/{branch}/{notebook}" in hrefs
    )
    assert f"../_sources/{notebook}" in hrefs
    assert (BUILD_HTML / "_sources" / notebook).exists()
    # Live code: the Thebe button, configured for this repository and branch.
    assert soup.select("button.btn-launch-thebe")
    (config,) = soup.select("script[type='text/x-thebe-config']")
    assert f'repo: "{owner_name}"' in config.text
    assert f'ref: "{branch}"' in config.text


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_exercise_solutions_are_hidden_by_default(path: Path) -> None:
    soup = page(f"book/{path.stem}")
    exercises = soup.select(".exercise")
    solutions = soup.select(".solution")
    assert len(exercises) >= 3
    assert len(solutions) == len(exercises)
    for solution in solutions:
        assert "dropdown" in solution.get("class", [])
        assert solution.select(".cell_output, .highlight"), "a solution without code"


def test_references_page_lists_the_papers() -> None:
    text = page("book/references").get_text()
    assert "Attention Is All You Need" in text
    assert "Jointly Learning to Align and Translate" in text


# The book's column shows about 80 characters of code or output before it scrolls sideways.
COLUMN = 80


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_code_and_outputs_fit_the_column(path: Path) -> None:
    soup = page(f"book/{path.stem}")
    wide = [
        line
        for block in soup.select("div.cell pre")
        for line in block.get_text().splitlines()
        if len(line.rstrip()) > COLUMN
    ]
    assert wide == []


def png_width(path: Path) -> int:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">I", header[16:20])[0]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_figures_are_drawn_for_the_column(path: Path) -> None:
    # A figure wider than the column is scaled down until its text cannot be read: 7 inches
    # at 100 dpi is the most the column shows at full size.
    soup = page(f"book/{path.stem}")
    widths = {
        img["src"]: png_width((BUILD_HTML / "book" / img["src"]).resolve())
        for img in soup.select("article img")
        if img["src"].endswith(".png")
    }
    assert widths, "no figures"
    assert {src: width for src, width in widths.items() if width > 720} == {}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_object_repr_printed_by_accident(path: Path) -> None:
    text = page(f"book/{path.stem}").get_text()
    assert not re.findall(r"<[\w.]+ (object )?at 0x[0-9a-f]+>", text)


@pytest.mark.parametrize("name", ["book/notation", *[f"book/{p.stem}" for p in NOTEBOOKS]])
def test_one_top_bar_and_each_inline_script_once(name: str) -> None:
    soup = page(name)
    html = str(soup)
    # Declared twice, the second `const` stops the live-code (Thebe) configuration script.
    assert html.count("const THEBE_JS_URL") == 1
    assert html.count("var togglebuttonSelector") == 1
    # The search box lives in the sidebar; a header with a second one is a theme mismatch.
    assert [len(header.select("[class*=search]")) for header in soup.select("header")] in (
        [],
        [0],
    )


def test_word_vector_chapter_shows_real_vectors_where_the_build_requires_them() -> None:
    text = page("book/04_multi_head_attention").get_text()
    if os.environ.get("ATTENTION_FROM_SCRATCH_REQUIRE_REAL_VECTORS") == "1":
        # The published book: the real GloVe vectors, never the stand-in.
        assert "STAND-IN" not in text
    else:
        # Local and test builds may use the stand-in, but then it says so.
        assert "STAND-IN" not in text or "STAND-IN WORD VECTORS" in text


def test_references_are_labelled_as_the_text_cites_them_and_link_out() -> None:
    soup = page("book/references")
    entries = soup.select("div.citation")
    assert len(entries) >= 5
    for entry in entries:
        label = entry.select_one(".label").get_text(strip=True)
        # The same author-year form as the citations in the text, e.g. [Raschka, 2024].
        assert re.fullmatch(r"\[[A-Z][^\]]*, \d{4}\]", label), label
        assert entry.select("a[href^='http']"), f"{label} has no URL or DOI"
    cited = page("book/04_multi_head_attention").select("a[href*='references.html#id']")
    assert any(re.search(r", \d{4}", a.get_text()) for a in cited)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_exercises_section_opens_the_student_notebook_in_colab_and_binder(path: Path) -> None:
    soup = page(f"book/{path.stem}")
    section = soup.select_one("section#exercises")
    assert section.h2.get_text(strip=True).rstrip("#") == "Exercises"
    first = section.h2.find_next_sibling()
    colab, binder = student_edition_urls(path.name)
    links = {a.get_text(strip=True): a["href"] for a in first.select("a")}
    assert links == {"Open the exercises in Colab": colab, "on Binder": binder}
    # Before the first exercise, where a student looks for it.
    assert first.find_next(class_="exercise") is section.select_one(".exercise")


def test_instructors_page_links_every_student_notebook() -> None:
    soup = page("book/instructors")
    hrefs = [a.get("href", "") for a in soup.select("article a")]
    expected = [url for path in NOTEBOOKS for url in student_edition_urls(path.name)]
    assert [href for href in hrefs if href in expected] == expected


def test_instructors_page_offers_the_zip_only_where_the_build_has_it() -> None:
    text = page("book/instructors").get_text(" ", strip=True)
    hrefs = {a.get("href", "") for a in page("book/instructors").select("article a")}
    if STUDENT_ZIP.is_file():
        assert f"../{STUDENT_ZIP.name}" in hrefs
        assert (BUILD_HTML / STUDENT_ZIP.name).read_bytes() == STUDENT_ZIP.read_bytes()
    else:
        assert f"../{STUDENT_ZIP.name}" not in hrefs
        assert "does not include the student edition" in text
    assert "make student" in text
