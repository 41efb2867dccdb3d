"""Where the graded exercises come from, and each student's variant of them.

The exercises of chapter N are the :class:`~grader.spec.GradedExercise` subclasses that
``grading/chN.py`` lists in ``EXERCISES``. The file is loaded by path, so neither the sandbox
(which cannot read the repository's tools) nor the package students install has it.

A *variant* is the seed that draws one student's inputs (and, where an exercise draws them,
its sizes and parameters): an HMAC of the student's key under the course's secret, so that it
is the same at every regrade and no student can work out another's. The key is the roster's
student, or the submission's file name without a roster. The secret is a file of random
bytes made on first use (``grading/.secret``, ignored by git; ``--secret`` picks another) that
students never see.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib.util
import secrets
import sys
from pathlib import Path

import numpy as np

from .spec import GradedExercise

ROOT = Path(__file__).resolve().parents[2]
GRADING = ROOT / "grading"
DEFAULT_SECRET = GRADING / ".secret"


def chapter_file(chapter: int, folder: Path = GRADING) -> Path:
    return folder / f"ch{chapter}.py"


def load_chapter(chapter: int, folder: Path = GRADING) -> list[GradedExercise]:
    """The graded exercises of one chapter (none when it has no file)."""
    path = chapter_file(chapter, folder)
    if not path.is_file():
        return []
    name = f"_graded_ch{chapter}_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(name, None)
    exercises = [cls() for cls in module.EXERCISES]
    for exercise in exercises:
        if exercise.chapter != chapter:
            raise ValueError(f"{path}: {exercise.label} is not an exercise of chapter {chapter}")
    return exercises


def load_all(folder: Path = GRADING) -> list[GradedExercise]:
    """Every chapter's graded exercises, in chapter order."""
    chapters = sorted(
        int(path.stem[2:]) for path in folder.glob("ch*.py") if path.stem[2:].isdigit()
    )
    return [exercise for chapter in chapters for exercise in load_chapter(chapter, folder)]


def read_secret(path: Path = DEFAULT_SECRET) -> bytes:
    """The course's secret, made (32 random bytes, readable by its owner only) if missing."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "x", encoding="ascii") as handle:  # never overwrite a made one
            handle.write(secrets.token_hex(32) + "\n")
        path.chmod(0o600)
    text = path.read_text(encoding="ascii").strip()
    if len(text) < 32:
        raise ValueError(f"{path}: expected a secret of at least 32 characters")
    return text.encode("ascii")


def variant_seed(secret: bytes, student: str, label: str) -> int:
    """The seed of one student's variant of one exercise."""
    digest = hmac.new(secret, f"{student}\0{label}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big")


def variant_rng(secret: bytes, student: str, label: str) -> np.random.Generator:
    """The random generator that draws one student's variant of one exercise."""
    return np.random.default_rng(variant_seed(secret, student, label))
