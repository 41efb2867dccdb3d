"""What the tests need to know about the book: its chapters, as listed in ``_toc.yml``, and the
repository settings of ``_config.yml``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
BUILD_HTML = ROOT / "_build" / "html"


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
