"""Checks of the built HTML book (run `make book` first; `make test` does it).

They fail, rather than skip, when the book has not been built: a missing build is a failure of
the pipeline, not a reason to pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from book_info import BUILD_HTML, chapter_notebooks, repository, toc_files
from bs4 import BeautifulSoup

pytestmark = pytest.mark.book

NOTEBOOKS = chapter_notebooks()
IDS = [path.stem for path in NOTEBOOKS]


def page(name: str) -> BeautifulSoup:
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
