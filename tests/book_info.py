"""What the tests need to know about the book: its chapters, as listed in ``_toc.yml``, the
repository settings of ``_config.yml``, and what a browser shows of the built pages."""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BUILD_HTML = ROOT / "_build" / "html"
STUDENT_ZIP = ROOT / "_build" / "student" / "attention-from-scratch-student.zip"

sys.path.insert(0, str(ROOT / "tools"))
import browser_checks  # noqa: E402


def load_config() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))


def toc_files() -> list[str]:
    """Every file of the table of contents, without suffix, in reading order."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [chapter["file"] for chapter in part["chapters"]]
    files += [chapter["file"] for chapter in toc.get("chapters", [])]
    return files


def chapter_notebooks() -> list[Path]:
    """The notebooks of the table of contents (every entry that is not a Markdown page), in
    reading order; a listed notebook that does not exist is still returned, so tests fail."""
    return [ROOT / f"{name}.ipynb" for name in toc_files() if not (ROOT / f"{name}.md").exists()]


def read_notebook(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def repository() -> tuple[str, str]:
    """The repository's ``owner/name`` and branch, from ``_config.yml``."""
    repo = load_config()["repository"]
    url = repo["url"].rstrip("/")
    prefix = "https://github.com/"
    if not url.startswith(prefix):
        raise ValueError(f"repository.url: expected a GitHub URL, got {url!r}")
    return url[len(prefix) :], repo["branch"]


def student_edition_urls(notebook: str) -> tuple[str, str]:
    """The Colab and Binder URLs of a chapter's student notebook (``01_name.ipynb``), written
    out from ``_config.yml``: its repository, student edition branch and launch services."""
    config = load_config()
    owner_name, _ = repository()
    branch = config["sphinx"]["config"]["student_edition_branch"]
    colab = config["launch_buttons"]["colab_url"]
    binder = config["launch_buttons"]["binderhub_url"]
    return (
        f"{colab}/github/{owner_name}/blob/{branch}/{notebook}",
        f"{binder}/v2/gh/{owner_name}/{branch}?urlpath=tree/{notebook}",
    )


def chromium() -> str:
    """The Chromium the browser checks drive. Skips the test where none is installed, but fails
    where $CHROMIUM names one that is missing (the publishing workflow names it, so that the
    published book is always checked)."""
    found = browser_checks.find_chromium()
    if found is None and os.environ.get("CHROMIUM"):
        pytest.fail(f"CHROMIUM={os.environ['CHROMIUM']} was not found")
    if found is None:
        pytest.skip("no Chromium installed (chromium, chromium-browser or google-chrome)")
    return found


@functools.cache
def browser_reports() -> tuple[dict[str, Any], ...]:
    """Every page of the built book opened offline, light and dark, with axe-core's findings
    (tools/browser_checks.py); run once per test session."""
    assert BUILD_HTML.is_dir(), f"{BUILD_HTML} is missing: build the book with `make book` first"
    # Test processes running side by side (make JOBS) share one pass through the browser:
    # the first writes the reports beside the build, under a lock, and the others read them
    # unless a page is newer.
    saved = BUILD_HTML.parent / "browser-reports.json"
    with open(BUILD_HTML.parent / ".browser-reports.lock", "w") as lock:
        if os.name == "posix":
            import fcntl

            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        newest = max(path.stat().st_mtime for path in BUILD_HTML.rglob("*.html"))
        if saved.exists() and saved.stat().st_mtime > newest:
            return tuple(json.loads(saved.read_text(encoding="utf-8")))
        pages = browser_checks.book_pages(BUILD_HTML)
        reports = browser_checks.run(pages, BUILD_HTML, chromium())
        saved.write_text(json.dumps(reports), encoding="utf-8")
    return tuple(reports)
