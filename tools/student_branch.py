"""Lay out the student edition as the branch that Colab and Binder open.

The publishing workflow (.github/workflows/book.yml) pushes this folder, as the only commit of
the branch `student_edition_branch` set in _config.yml; each chapter's Exercises section links
its notebook there (book/_ext/student_edition.py). The folder holds:

- the student notebooks that `make student` writes (tools/student_edition.py), at the root, so
  a notebook's path on the branch is its file name;
- binder/requirements.txt: the CPU-only build of torch and the course package at the commit
  the edition was built from, so Binder starts with the package installed (the notebooks'
  install cell then does nothing; in Colab it installs the package itself);
- binder/runtime.txt, the Python version of the book's own Binder environment;
- a README that says what the branch is and where it comes from.

Usage: python tools/student_branch.py --commit SHA [--out _build/student-branch]
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import student_edition  # noqa: E402

DEFAULT_OUT = ROOT / "_build" / "student-branch"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def settings(root: Path = ROOT) -> tuple[str, str]:
    """The repository URL and the student edition's branch, from _config.yml."""
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    url = config["repository"]["url"].rstrip("/")
    branch = config["sphinx"]["config"]["student_edition_branch"]
    return url, branch


def layout(out: Path, commit: str, root: Path = ROOT) -> list[Path]:
    """Write the branch's files into ``out`` (emptied first); return the notebooks' paths."""
    if not re.fullmatch(r"[0-9a-f]{7,40}", commit):
        raise ValueError(f"commit: expected a hexadecimal commit id, got {commit!r}")
    url, branch = settings(root)
    if out.exists():
        shutil.rmtree(out)
    notebooks = student_edition.build(out, root)
    (out / student_edition.ZIP_NAME).unlink()
    binder = out / "binder"
    binder.mkdir()
    (binder / "requirements.txt").write_text(
        "# Binder has about 2 GB of memory: the CPU-only build of torch.\n"
        f"--extra-index-url {CPU_INDEX}\n"
        f"attention-from-scratch @ git+{url}@{commit}\n",
        encoding="utf-8",
    )
    shutil.copy2(root / "binder" / "runtime.txt", binder / "runtime.txt")
    chapters = "\n".join(f"- `{path.name}`" for path in notebooks)
    (out / "README.md").write_text(
        "# Attention from Scratch: student edition\n\n"
        f"The branch `{branch}`, written by the book's publishing workflow from "
        f"{url}/commit/{commit}; do not edit it here, as every publication replaces it.\n\n"
        "Every chapter with each solution replaced by a stub and followed by a cell that "
        "checks the answer. Open a notebook from the Exercises section of its chapter in "
        "the book (Colab or Binder), or download it. Its first cell installs the course "
        "package where it is missing.\n\n"
        f"{chapters}\n",
        encoding="utf-8",
    )
    return notebooks


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commit", required=True)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    notebooks = layout(args.out, args.commit)
    print(f"Wrote {len(notebooks)} notebooks and binder/ to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
