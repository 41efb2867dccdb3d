"""`jupyter-book build . -W` on a fresh clone, where `make student` has not run: the book's own
configuration, extensions, templates and styles build a small book in a fresh folder with
warnings as errors. The instructors' page then says how to get the student edition; once the
zip exists, the next build links it and publishes it. Marked `book`: it runs where the book's
environment (jupyter-book) is installed, with the other checks of the book."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml
from book_info import ROOT, STUDENT_ZIP, student_edition_urls
from bs4 import BeautifulSoup

pytestmark = pytest.mark.book

JUPYTER_BOOK = Path(sys.executable).parent / "jupyter-book"


def chapter() -> nbformat.NotebookNode:
    return nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# 1. A chapter\n\nThe scale $\\sqrt{d_k}$."),
            nbformat.v4.new_markdown_cell("## Exercises\n\nSome exercises."),
        ],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}},
    )


def build(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(JUPYTER_BOOK), "build", ".", "-W", "--keep-going"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_fresh_clone_builds_with_warnings_as_errors_and_without_the_zip(
    tmp_path: Path,
) -> None:
    book = tmp_path / "clone"
    (book / "book").mkdir(parents=True)
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    config["execute"]["execute_notebooks"] = "off"  # nothing to run; the chapters are not here
    (book / "_config.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    toc = {"format": "jb-book", "root": "book/instructors"}
    toc["chapters"] = [{"file": "book/01_a_chapter"}]
    (book / "_toc.yml").write_text(yaml.safe_dump(toc), encoding="utf-8")
    for name in ("_ext", "_templates", "_static"):
        shutil.copytree(ROOT / "book" / name, book / "book" / name)
    for name in ("instructors.md", "references.bib"):
        shutil.copy2(ROOT / "book" / name, book / "book" / name)
    nbformat.write(chapter(), book / "book" / "01_a_chapter.ipynb")

    result = build(book)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    html = book / "_build" / "html"
    page = BeautifulSoup((html / "book" / "instructors.html").read_text("utf-8"), "html.parser")
    text = page.get_text(" ", strip=True)
    assert "does not include the student edition" in text and "make student" in text
    assert not list(html.glob("*.zip"))
    colab, binder = student_edition_urls("01_a_chapter.ipynb")
    hrefs = {a.get("href") for a in page.select("article a")}
    assert {colab, binder} <= hrefs
    chapter_page = (html / "book" / "01_a_chapter.html").read_text(encoding="utf-8")
    assert colab in chapter_page and binder in chapter_page
    assert "_static/mathjax/tex-chtml.js" in chapter_page

    # `make student` ran: the next build links the zip and publishes it at the site's root.
    zip_path = book / STUDENT_ZIP.relative_to(ROOT)
    zip_path.parent.mkdir(parents=True)
    zip_path.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip
    result = build(book)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    page = BeautifulSoup((html / "book" / "instructors.html").read_text("utf-8"), "html.parser")
    assert f"../{zip_path.name}" in {a.get("href") for a in page.select("article a")}
    assert (html / zip_path.name).read_bytes() == zip_path.read_bytes()
