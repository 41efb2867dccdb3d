"""The grader's side of the checks: run them in a kernel that the submission controls.

``tools/grade.py`` runs a submission in a kernel whose code the submission writes, so
nothing the submission could have changed is trusted when an exercise is checked:

- before any of its cells, :func:`grader_setup` loads the checks into the kernel and prints
  fingerprints of what the checks rely on (torch, the standard library, builtins, the
  kernel's output stream and input hooks) behind a marker that only that cell knew;
- each check cell loads a fresh copy of this module from its read-only file and calls its
  :func:`grader_check`: it builds fresh copies of the exercises' modules, runs those (not the
  ones the submission could reach), compares every function, class and registry entry the
  submission could reach with the fresh copies, checks the builtins, and prints the
  results, what differed, and the fingerprints again, behind that cell's own marker.

What the cells print is ``report.py``'s :class:`SetupReport` and :class:`GraderReport`, one
JSON line each. The grader scores an exercise 0 and flags the row when anything differs,
when a check cell prints its marker twice or not at all, or when the results name other
checks.

This module imports none of the package's modules at its top: a check cell runs it as a
fresh copy outside the package, and everything it uses of the package it loads fresh from
the files beside it. It is one file, over the package's usual size, for that reason
(CONTRIBUTING.md).
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import types
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch

PACKAGE = "attention_from_scratch.exercises"
# The modules of files of checks loaded by path: ``_registry.CHECK_MODULE_PREFIX``, which
# this module may not import (tests/test_grading_report.py holds the two equal).
CHECK_MODULE_PREFIX = "_attention_from_scratch_checks_"
# The folder of the package's files, read by every fresh copy.
HERE = Path(__file__).resolve().parent

# Builtins the checks and this module call; each must still be the interpreter's own.
_BUILTIN_FUNCTIONS = [
    "__build_class__",
    "__import__",
    "abs",
    "all",
    "any",
    "callable",
    "compile",
    "delattr",
    "dir",
    "eval",
    "exec",
    "format",
    "getattr",
    "globals",
    "hasattr",
    "hash",
    "id",
    "isinstance",
    "issubclass",
    "iter",
    "len",
    "max",
    "min",
    "next",
    "open",
    "print",
    "repr",
    "round",
    "setattr",
    "sorted",
    "sum",
    "vars",
]
# Modules whose functions and classes the checks rely on, fingerprinted by identity.
_WATCHED = [
    "builtins",
    "contextlib",
    "copy",
    "dataclasses",
    "functools",
    "importlib",
    "importlib.util",
    "inspect",
    "json",
    "math",
    "re",
    "sys",
    "textwrap",
    "types",
    "torch",
    "torch.nn",
    "torch.nn.functional",
    "torch.overrides",
    "torch.random",
]
# What the kernel itself sets anew for each cell it runs, or after a cell raised, and what
# torch rewraps itself once its compiler is imported (torch.manual_seed).
_PER_CELL = (
    "input",
    "excepthook",
    "displayhook",
    "last_type",
    "last_value",
    "last_exc",
    "manual_seed",
)
_SIMPLE = (type(None), bool, int, float, complex, str, bytes)


def _ours(name: str) -> bool:
    return name == PACKAGE or name.startswith(PACKAGE + ".") or name.startswith(CHECK_MODULE_PREFIX)


def grader_setup(
    nonce: str,
    chapters: Iterable[int],
    hidden_dir: str | None = None,
    check_files: Iterable[str] = (),
) -> None:
    """Load the checks of ``chapters`` and print the fingerprints of what they rely on.

    The grader runs this in a submission's kernel before any of the submission's cells, so
    the package it imports is still the package's own.

    Introduced in chapter 1.

    Args:
        nonce: the marker that starts the printed line, chosen by the grader for this cell.
        chapters: the chapters whose exercises the submission answers.
        hidden_dir: the folder of hidden checks, or None.
        check_files: extra files of checks to load first (used by tests).
    """
    from . import _registry, report

    error = ""
    try:
        for path in check_files:
            _registry.load_check_file(path)
        for chapter in chapters:
            _registry.load_chapter(chapter)
        if hidden_dir is not None:
            _registry.load_hidden(hidden_dir, chapters)
    except Exception as failure:  # report it: a broken hidden file must not look like 0 points
        error = report.one_line(f"{type(failure).__name__}: {failure}")
    print(nonce + report.SetupReport(error, _fingerprints()).to_json(), flush=True)


def grader_check(
    labels: Iterable[str],
    nonce: str,
    hidden_dir: str | None,
    check_files: Iterable[str],
    namespace: Mapping[str, Any],
) -> None:
    """Check exercises with fresh checks and report what the submission changed.

    The grader calls this in a fresh copy of this module, loaded from its file by the check
    cell itself, so no function or class that the submission could reach takes part.

    Introduced in chapter 1.

    Args:
        labels: the exercises to check.
        nonce: the marker that starts the printed line, known only to this cell.
        hidden_dir: the folder of hidden checks, or None.
        check_files: extra files of checks (used by tests).
        namespace: the notebook's variables.
    """
    labels = list(labels)
    report = _standalone(HERE / "report.py")
    error, findings, live, fresh = "", [], None, {}
    try:
        live, fresh = _load_fresh(labels, hidden_dir, list(check_files))
    except Exception as failure:  # report it: a broken hidden file must not look like 0 points
        error = report.one_line(f"{type(failure).__name__}: {failure}")
    results = []
    for label in labels:
        if error:
            result = report.ExerciseResult(label, error=f"loading checks failed: {error}")
        else:
            checked = fresh[PACKAGE + "._core"].run_checks(label, namespace, hidden=True)
            result = report.ExerciseResult.from_dict(checked.to_dict())
        results.append(result)
    if live is not None:
        try:
            findings = _tampering(live, fresh, labels, namespace)
        except Exception as failure:  # a comparison that raises was given something odd
            findings = [report.one_line(f"the checks could not be compared: {failure}", 100)]
    line = report.GraderReport(tuple(results), tuple(findings), _fingerprints()).to_json()
    print(nonce + line, flush=True)


def _standalone(path: Path) -> types.ModuleType:
    """A fresh copy of a module of the package that imports only the standard library."""
    name = f"_grader_{path.stem}_{id(path)}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while they are built
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(name, None)
    return module


def _load_fresh(
    labels: list[str], hidden_dir: str | None, check_files: list[str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Load fresh copies of the package and the exercises' modules from their files; return
    the modules the kernel had before and the fresh ones, by name."""
    live = {name: module for name, module in sys.modules.items() if _ours(name)}
    for name in live:
        del sys.modules[name]
    try:
        spec = importlib.util.spec_from_file_location(
            PACKAGE, HERE / "__init__.py", submodule_search_locations=[str(HERE)]
        )
        assert spec is not None and spec.loader is not None
        package = importlib.util.module_from_spec(spec)
        sys.modules[PACKAGE] = package
        spec.loader.exec_module(package)
        chapters = sorted({package.chapter_of(label) for label in labels})
        for chapter in chapters:
            path = HERE / f"ch{chapter}.py"
            if path.is_file():
                name = f"{PACKAGE}.ch{chapter}"
                spec = importlib.util.spec_from_file_location(name, path)
                assert spec is not None and spec.loader is not None
                module = importlib.util.module_from_spec(spec)
                sys.modules[name] = module
                spec.loader.exec_module(module)
        for path in check_files:
            package.load_check_file(path)
        if hidden_dir is not None:
            package.load_hidden(hidden_dir, chapters)
        fresh = {name: module for name, module in sys.modules.items() if _ours(name)}
    finally:
        for name in [name for name in sys.modules if _ours(name)]:
            del sys.modules[name]
        sys.modules.update(live)
    return live, fresh


def _describe(value: Any, depth: int = 0) -> Any:
    """What identifies a function, class or value: code objects compare by their bytecode."""
    if isinstance(value, types.FunctionType):
        return (
            "function",
            value.__qualname__,
            value.__code__,
            repr(value.__defaults__),
            repr(value.__kwdefaults__),
        )
    if isinstance(value, (staticmethod, classmethod)):
        return (type(value).__name__, _describe(value.__func__, depth))
    if isinstance(value, property):
        return ("property", *(_describe(f, depth) for f in (value.fget, value.fset, value.fdel)))
    if isinstance(value, type) and depth == 0:
        members = tuple(
            (key, _describe(member, depth + 1))
            for key, member in sorted(vars(value).items())
            if key not in ("__module__", "__dict__", "__weakref__", "__doc__")
        )
        bases = tuple(base.__qualname__ for base in value.__bases__)
        return ("class", value.__qualname__, bases, members)
    if isinstance(value, type):
        return ("class", value.__module__, value.__qualname__)
    if isinstance(value, types.ModuleType):
        return ("module", value.__name__)
    if isinstance(value, re.Pattern):
        return ("pattern", value.pattern)
    if isinstance(value, _SIMPLE) or (
        isinstance(value, tuple) and all(isinstance(item, _SIMPLE) for item in value)
    ):
        return ("value", repr(value))
    return ("object", type(value).__qualname__)


def _differences(
    theirs: Mapping[str, Any], mine: Mapping[str, Any], where: str, skip: Iterable[str] = ()
) -> list[str]:
    skipped = set(skip)
    names = (set(theirs) | set(mine)) - skipped
    missing = object()
    return [
        f"{where}.{name}"
        for name in sorted(names)
        if not (name.startswith("__") and name.endswith("__"))
        and _describe(theirs.get(name, missing)) != _describe(mine.get(name, missing))
    ]


def _describe_exercise(exercise: Any, core: Mapping[str, Any]) -> Any:
    if type(exercise) is not core.get("Exercise"):
        return ("not an Exercise",)
    fields = vars(exercise)
    checks = fields.get("checks")
    if type(checks) is not list:
        return ("checks are not a list",)
    return (
        tuple(sorted(fields)),
        tuple(repr(fields.get(key)) for key in ("label", "chapter", "manual_points", "rubric")),
        tuple(
            (
                type(c) is core.get("Check"),
                c.name,
                repr(c.points),
                c.hint,
                c.hidden,
                _describe(c.function),
                c.function.__globals__.get("__file__")
                if isinstance(c.function, types.FunctionType)
                else None,
            )
            for c in checks
        ),
    )


def _tampering(
    live: Mapping[str, Any], fresh: Mapping[str, Any], labels: list[str], namespace: Any
) -> list[str]:
    """What differs between the machinery the submission could reach and the fresh copy."""
    names = ("", "._core", "._registry", "._shortcuts", ".report")
    theirs = [live.get(PACKAGE + name) for name in names]
    if not all(isinstance(module, types.ModuleType) for module in theirs):
        return ["the exercises' modules were replaced"]
    package, core, registry, *others = theirs
    mine_core, mine_registry = fresh[PACKAGE + "._core"], fresh[PACKAGE + "._registry"]
    found = _differences(vars(core), vars(mine_core), "exercises._core")
    found += _differences(
        vars(registry),
        vars(mine_registry),
        "exercises._registry",
        skip=("_REGISTRY", "_LOADED_FILES"),
    )
    # The package's names must still be those of the modules that define them.
    owners = [vars(module) for module in (core, registry, *others)]
    for name, value in vars(package).items():
        owner = next((space for space in owners if name in space), None)
        if owner is not None and not name.startswith("_") and value is not owner[name]:
            found.append(f"exercises.{name}")
    entries, mine = vars(registry).get("_REGISTRY"), vars(mine_registry)["_REGISTRY"]
    for label in labels:
        if label in mine:
            other = entries.get(label) if type(entries) is dict else None
            if _describe_exercise(other, vars(core)) != _describe_exercise(
                mine[label], vars(mine_core)
            ):
                found.append(f"the checks of {label}")
    by_file = {str(getattr(m, "__file__", name)): m for name, m in live.items()}
    for name, module in fresh.items():
        if name in (PACKAGE, PACKAGE + "._core", PACKAGE + "._registry"):
            continue
        path = str(getattr(module, "__file__", name))
        other = by_file.get(path)
        if not isinstance(other, types.ModuleType):
            found.append(f"the module of checks {Path(path).name} is missing")
        else:
            found += _differences(vars(other), vars(module), Path(path).stem)
    found += _builtins_tampering(globals().get("__builtins__"), "builtins")
    if hasattr(namespace, "get"):
        found += _builtins_tampering(namespace.get("__builtins__"), "the notebook's builtins")
    return list(dict.fromkeys(found))


def _builtins_tampering(space: Any, where: str) -> list[str]:
    """The builtins the checks call must be the interpreter's own functions and types."""
    table = vars(space) if isinstance(space, types.ModuleType) else space
    if not isinstance(table, dict):
        return [f"{where} were replaced"]
    found = []
    length = table.get("len")
    owner = getattr(length, "__self__", None)
    if owner is None or not (space is owner or table is getattr(owner, "__dict__", None)):
        found.append(f"{where} were replaced")
    for name in _BUILTIN_FUNCTIONS:
        value = table.get(name)
        if (
            value.__class__ is not length.__class__
            or getattr(value, "__name__", None) != name
            or (name != "open" and getattr(value, "__self__", None) is not owner)
        ):
            found.append(f"{where}.{name}")
    kinds = {
        "bool": True.__class__,
        "int": (0).__class__,
        "float": (0.0).__class__,
        "str": "".__class__,
        "list": [].__class__,
        "dict": {}.__class__,
        "tuple": ().__class__,
        "set": {0}.__class__,
        "type": (0).__class__.__class__,
        "object": (0).__class__.__mro__[-1],
        "Exception": AssertionError.__mro__[1],
        "AssertionError": AssertionError,
    }
    found += [f"{where}.{name}" for name, kind in kinds.items() if table.get(name) is not kind]
    return found


def _members(items: Iterable[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """Callables and classes with their code objects and members, by name."""
    found: list[tuple[str, Any]] = []
    for key, value in items:
        if isinstance(value, types.ModuleType) or not callable(value):
            continue
        found.append((key, value))
        found.append((key + ".__code__", getattr(value, "__code__", None)))
        if isinstance(value, type) and value.__module__.startswith("attention_from_scratch"):
            for member, item in vars(value).items():
                if not (callable(item) or isinstance(item, property)):
                    continue
                found.append((f"{key}.{member}", item))
                found.append((f"{key}.{member}.__code__", getattr(item, "__code__", None)))
    return found


def _fingerprint(items: Iterable[tuple[str, Any]]) -> int:
    return hash(tuple(sorted((str(key), id(value)) for key, value in items)))


def _fingerprints() -> dict[str, int]:
    """Identities of what the checks rely on and the submission could replace, hashed."""
    prints = {}
    modules = sys.modules
    for name in _WATCHED:
        module = modules.get(name)
        prints[name] = _fingerprint(
            (key, value)
            for key, value in (vars(module) if module is not None else {}).items()
            if not key.startswith("_") and callable(value) and key not in _PER_CELL
        )
    prints["sys.modules"] = _fingerprint((name, modules.get(name)) for name in _WATCHED)
    for cls in (torch.Tensor, torch.nn.Module, type(sys.stdout)):
        prints[cls.__qualname__] = _fingerprint(vars(cls).items())
    layers = [v for v in vars(torch.nn).values() if isinstance(v, type)]
    prints["torch.nn's classes"] = _fingerprint(
        (f"{cls.__qualname__}.{key}", value)
        for cls in layers
        for key, value in vars(cls).items()
        if callable(value) or isinstance(value, property)
    )
    # The course package: its functions (and their code) and classes (and their members).
    for name, module in list(modules.items()):
        if name.split(".")[0] == "attention_from_scratch" and not _ours(name):
            prints[name] = _fingerprint(_members(vars(module).items()))
    prints["sys.stdout"] = _fingerprint(
        [("stdout", sys.stdout), ("print", print), ("dumps", json.dumps)]
    )
    prints["the import system"] = _fingerprint(
        list(enumerate(sys.meta_path)) + [(f"hook {i}", h) for i, h in enumerate(sys.path_hooks)]
    )
    shell = getattr(modules.get("IPython"), "get_ipython", lambda: None)()
    hooks: list[tuple[str, Any]] = []
    if shell is not None:
        for event in ("pre_execute", "pre_run_cell"):
            hooks += [(f"{event} {i}", f) for i, f in enumerate(shell.events.callbacks[event])]
        for kind in ("input_transformers_cleanup", "input_transformers_post", "ast_transformers"):
            hooks += [(f"{kind} {i}", f) for i, f in enumerate(getattr(shell, kind, []))]
        hooks.append(("class", type(shell)))
        for name in ("run_cell", "run_cell_async", "transform_cell", "run_ast_nodes", "run_code"):
            hooks += [(name, getattr(type(shell), name, None)), (name + "!", vars(shell).get(name))]
    kernel = getattr(shell, "kernel", None)
    if kernel is not None:
        hooks.append(("kernel", type(kernel)))
        hooks += [(f"handler {k}", v) for k, v in getattr(kernel, "shell_handlers", {}).items()]
        session = getattr(kernel, "session", None)
        hooks += [
            ("session", type(session)),
            ("send", getattr(session, "__dict__", {}).get("send")),
        ]
        for name in ("do_execute", "execute_request", "send_response"):
            hooks += [
                (name, getattr(type(kernel), name, None)),
                (name + "!", vars(kernel).get(name)),
            ]
    prints["the kernel's input hooks"] = _fingerprint(hooks)
    return prints
