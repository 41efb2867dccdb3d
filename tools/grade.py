"""Grade a folder of submitted notebooks: `make grade SUBMISSIONS=DIR`.

Each `*.ipynb` in DIR runs in a fresh kernel with a per-notebook timeout, every error
allowed so that a raising cell costs only its exercise. On Linux each kernel runs in its own
sandbox (bubblewrap): the system and the Python environment read-only, a private scratch
folder holding its own copy, no network, its own process namespace (all its processes end
with it) and limits on memory, CPU time, processes and file size. Where no sandbox can run
the grader refuses, unless `--sandbox none` says the class is trusted; each row then says so.

The submission's kernel is not trusted either. A setup cell, before any of its cells, loads
the checks and prints fingerprints of what they rely on; each check cell
(`check("chN-ex-name")`) is replaced by one that loads a fresh copy of the checks from their
read-only files, runs them, compares what the submission could have changed, and prints one
JSON line behind a marker that only that cell knew. An exercise whose checks were tampered
with scores 0 and its row's status says so (see CONTRIBUTING.md, "Grading untrusted
submissions").

Writes DIR/grades.csv (one row per file: `submission`, one column per auto-graded exercise,
`total`, `possible`, `status`, `notes`, `isolation`) and DIR/feedback/<name>.md; with a
roster, also DIR/gradebook.csv for the LMS (tools/gradebook.py).

Usage: python tools/grade.py DIR [--timeout 600] [--workers 2] [--sandbox bwrap|none]
       [--memory 8] [--hidden grading/hidden] [--roster roster.csv]

This file is the command line; the grader is the package `tools/grader/` (its `__init__`
lists its modules), which the tools and tests import.
"""

from __future__ import annotations

import sys

from grader import main  # tools/grader/, beside this file

if __name__ == "__main__":
    sys.exit(main())
