"""Where the exercises come from: the chapters' modules of public checks.

Each chapter module ``exercises/chN.py`` declares its exercises when it is imported (an
:class:`~attention_from_scratch.exercises.Exercise` registers itself here). Every exercise is
found by its label, ``chN-ex-name``. The graded side of the exercises is not in this package
(the repository's ``grading/chN.py``).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import pkgutil
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from .results import ExerciseResult

# The package of the checks, named in full.
PACKAGE = "attention_from_scratch.exercises"
LABEL_PATTERN = re.compile(r"^ch(\d+)-ex-[a-z0-9]+(?:-[a-z0-9]+)*$")
# Files of checks loaded by path get module names that start with this.
CHECK_MODULE_PREFIX = "_attention_from_scratch_checks_"


class DeclaredExercise(Protocol):
    """What the registry needs of an exercise: ``_core.Exercise`` is the one kind there is
    (named here only by what it has, since ``_core`` imports this module)."""

    label: str
    chapter: int

    def run(self, namespace: Mapping[str, Any]) -> ExerciseResult: ...


# Every exercise declared so far, by label. A chapter module registers its exercises when it
# is imported; importing it again (a reload) replaces them.
_REGISTRY: dict[str, DeclaredExercise] = {}
# Files of checks already loaded by path (the tests' made-up chapter), so each runs once.
_LOADED_FILES: dict[Path, Any] = {}


def register(exercise: DeclaredExercise) -> None:
    """Record an exercise under its label, replacing one of the same label.

    Introduced in chapter 1.

    Args:
        exercise: the exercise, just declared.
    """
    _REGISTRY[exercise.label] = exercise


def chapter_of(label: str) -> int:
    """The chapter number in a label.

    Introduced in chapter 1.

    Args:
        label: an exercise label, ``chN-ex-name``.

    Returns:
        ``N``.

    Raises:
        ValueError: the label is not of the form ``chN-ex-name``.
    """
    match = LABEL_PATTERN.match(label) if isinstance(label, str) else None
    if match is None:
        raise ValueError(f"label: expected 'chN-ex-name' in lowercase, got {label!r}")
    return int(match.group(1))


def load_chapter(chapter: int) -> list[DeclaredExercise]:
    """Import the checks of one chapter (``attention_from_scratch.exercises.chN``).

    Introduced in chapter 1.

    Args:
        chapter: the chapter number.

    Returns:
        Its exercises in the order they were declared (an empty list if it has none, or if
        it has no module).
    """
    name = f"{PACKAGE}.ch{chapter}"
    if name not in sys.modules:
        with contextlib.suppress(ModuleNotFoundError):
            importlib.import_module(name)
    return [e for e in _REGISTRY.values() if e.chapter == chapter]


def get_exercise(label: str) -> DeclaredExercise:
    """The exercise with this label, importing its chapter's module if needed.

    Introduced in chapter 1.

    Args:
        label: the exercise label, ``chN-ex-name``.

    Returns:
        The registered :class:`Exercise`.

    Raises:
        ValueError: the label is malformed.
        KeyError: no exercise has this label.
    """
    chapter = chapter_of(label)
    if label not in _REGISTRY:
        load_chapter(chapter)
    if label not in _REGISTRY:
        raise KeyError(f"label: expected a known exercise, got {label!r}")
    return _REGISTRY[label]


def all_exercises() -> list[DeclaredExercise]:
    """Every exercise of the package (and any loaded check file), by chapter then order.

    Introduced in chapter 1.

    Returns:
        The registered exercises, sorted by chapter; within a chapter, in declaration order.
    """
    package_dir = Path(__file__).parent
    for module in pkgutil.iter_modules([str(package_dir)]):
        match = re.fullmatch(r"ch(\d+)", module.name)
        if match:
            load_chapter(int(match.group(1)))
    order = {label: i for i, label in enumerate(_REGISTRY)}
    return sorted(_REGISTRY.values(), key=lambda e: (e.chapter, order[e.label]))


def load_check_file(path: str | Path) -> Any:
    """Import a file of public checks by path, once (the tests' made-up chapter).

    Introduced in chapter 1.

    Args:
        path: a Python file that declares exercises or adds checks to them.

    Returns:
        The imported module.

    Raises:
        FileNotFoundError: the file does not exist.
    """
    path = Path(path).resolve()
    if path in _LOADED_FILES:
        return _LOADED_FILES[path]
    if not path.is_file():
        raise FileNotFoundError(f"path: expected a Python file of checks, got {str(path)!r}")
    module_name = f"{CHECK_MODULE_PREFIX}{len(_LOADED_FILES)}_{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"path: expected an importable Python file, got {str(path)!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    _LOADED_FILES[path] = module
    return module
