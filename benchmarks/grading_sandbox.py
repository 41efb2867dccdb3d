"""What the sandbox costs: `make grade` on copies of chapter 4, with and without isolation.

Grades COPIES copies of book/04_multi_head_attention.ipynb (a chapter is a complete
submission) in rounds that alternate the two modes, each round a folder graded by
`grade_folder` exactly as `make grade` does (WORKERS notebooks at once): once with every
kernel in its bubblewrap sandbox, once with `--sandbox none`. Prints the seconds per notebook
of each round and overall, their difference and their ratio. Both modes run in one process on
one machine, alternately, so that load from elsewhere falls on both.

Run: python benchmarks/grading_sandbox.py [--copies 20] [--rounds 4] [--workers 2]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import grader  # noqa: E402

CHAPTER = ROOT / "book" / "04_multi_head_attention.ipynb"
MODES = ("bwrap", "none")


def grade_copies(count: int, sandbox: str, workers: int) -> float:
    """Seconds per notebook to grade ``count`` copies of the chapter in one folder."""
    with tempfile.TemporaryDirectory(prefix="bench-grade-") as folder:
        for index in range(count):
            shutil.copy(CHAPTER, Path(folder) / f"{index:02d}_{CHAPTER.name}")
        secret = Path(folder).parent / f"{Path(folder).name}.secret"
        start = time.perf_counter()
        rows = grader.grade_folder(folder, workers=workers, sandbox=sandbox, secret_path=secret)
        secret.unlink(missing_ok=True)
        seconds = time.perf_counter() - start
    bad = [row.submission for row in rows if row.total != row.possible]
    if bad:  # a timing of a broken grading would mean nothing
        raise SystemExit(f"{sandbox}: not full marks for {bad}: {rows[0].notes}")
    return seconds / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=20, help="notebooks per mode in all")
    parser.add_argument("--rounds", type=int, default=4, help="alternations of the two modes")
    parser.add_argument("--workers", type=int, default=2, help="notebooks graded at once")
    args = parser.parse_args()
    if problem := grader.sandbox_problem():
        raise SystemExit(f"no sandbox can run here: {problem}")
    per_round = max(1, args.copies // args.rounds)
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    print(f"{CHAPTER.name}: {per_round * args.rounds} copies per mode, workers={args.workers}")
    print(f"{'round':>5} {'sandbox s/nb':>13} {'none s/nb':>10}")
    for index in range(args.rounds):
        # Alternate which mode goes first, so neither always meets a warm or cold cache.
        order = MODES if index % 2 == 0 else MODES[::-1]
        for mode in order:
            times[mode].append(grade_copies(per_round, mode, args.workers))
        print(f"{index:>5} {times['bwrap'][-1]:>13.2f} {times['none'][-1]:>10.2f}")
    sandboxed = sum(times["bwrap"]) / args.rounds
    plain = sum(times["none"]) / args.rounds
    print(f"mean: {sandboxed:.2f} s per notebook in the sandbox, {plain:.2f} s without")
    print(
        f"the sandbox adds {sandboxed - plain:+.2f} s per notebook (ratio {sandboxed / plain:.2f}x)"
    )


if __name__ == "__main__":
    main()
