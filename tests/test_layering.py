"""The package is layered like the book: a module imports only modules of its own chapter or
of earlier ones, helpers import no chapter module, and there is no import cycle.

Imports are read with ``ast`` from the source files, all of them: at the top of a module,
under ``if TYPE_CHECKING:`` and inside functions, since an import deferred into a function is
still a dependency that a reader has to follow.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import attention_from_scratch

PACKAGE_DIR = Path(attention_from_scratch.__file__).parent
PACKAGE = PACKAGE_DIR.name

#: The chapter that introduces each module; the book's order.
CHAPTERS = {
    "simplified": 1,
    "trainable": 2,
    "causal": 3,
    "multihead": 4,
    "word_vectors": 4,
    "layout": 5,
    "positions": 6,
    "training": 6,
    "tasks": 6,
    "probes": 6,
    "scale": 7,
}
#: Shared helpers serve every chapter from the first, so they import no chapter module.
HELPERS = {
    "_checks",
    "device",
    "toy",
    "source",
    "plotting",
    "diagrams",
    "views",
    "exercises",
    "exercises._core",
}


def module_name(path: Path, root: Path) -> str:
    """``exercises/ch4.py`` -> ``exercises.ch4``; a package's ``__init__.py`` -> its name."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path, root: Path, package: str) -> set[str]:
    """Every module of the package that ``path`` imports, anywhere in the file.

    ``from . import x`` counts as importing submodule ``x`` when it is one, and as importing
    the package itself (``""``) otherwise.
    """
    name = module_name(path, root)
    is_package = path.name == "__init__.py"
    here = name.split(".") if name else []
    if not is_package:
        here = here[:-1]  # the package that holds the module
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == package or alias.name.startswith(package + "."):
                    found.add(alias.name[len(package) + 1 :])
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                target = [*base, *(node.module.split(".") if node.module else [])]
            elif node.module and (node.module + ".").startswith(package + "."):
                target = node.module.split(".")[1:]
            else:
                continue
            target_name = ".".join(target)
            for alias in node.names:
                submodule = ".".join([*target, alias.name])
                if (root / Path(*submodule.split("."))).with_suffix(".py").exists() or (
                    root / Path(*submodule.split(".")) / "__init__.py"
                ).exists():
                    found.add(submodule)
                else:
                    found.add(target_name)
    found.discard(name)
    return found


#: Entry points sit above the chapters, like the package's ``__init__``: they may import any
#: module, and no module imports them.
ENTRY_POINTS = {"__main__", "doctor"}


def chapter_of(name: str) -> int | None:
    """The chapter of a module, 0 for a helper, None for the package's ``__init__`` and the
    entry points."""
    if name == "" or name in ENTRY_POINTS:
        return None
    top = name.split(".")[0]
    if top in CHAPTERS:
        return CHAPTERS[top]
    if name.startswith("exercises.ch"):
        return int(name.removeprefix("exercises.ch"))
    if name in HELPERS or top in HELPERS:
        return 0
    raise AssertionError(f"{name}: not in the chapter table of tests/test_layering.py")


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    return {
        module_name(path, root): imported_modules(path, root, package)
        for path in sorted(root.rglob("*.py"))
    }


def forward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a later chapter's module, of a chapter module by a helper, or of the
    package itself from inside it, as readable lines."""
    problems = []
    for name, imports in sorted(graph.items()):
        if name == "" or name in ENTRY_POINTS:
            continue  # the package's __init__ and entry points gather every chapter
        own = chapter_of(name)
        assert own is not None
        for target in sorted(imports):
            theirs = chapter_of(target)
            if theirs is None:
                what = "an entry point" if target in ENTRY_POINTS else "the package itself"
                problems.append(f"{name} imports {what} (every chapter)")
            elif theirs > own:
                kind = "a helper" if own == 0 else f"chapter {own}"
                problems.append(f"{name} ({kind}) imports {target} (chapter {theirs})")
    return problems


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Import cycles among the modules (the package ``__init__`` left out), each once."""
    edges = {name: {t for t in targets if t in graph and t} for name, targets in graph.items()}
    edges.pop("", None)
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for target in sorted(edges.get(node, ())):
            if state.get(target) == 1:
                found.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target)
        path.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    return found


# --- the package ---


def test_every_module_has_a_chapter_or_is_a_helper() -> None:
    for name in import_graph(PACKAGE_DIR, PACKAGE):
        if name:
            chapter_of(name)  # raises for a module missing from the table


def test_no_module_imports_a_later_chapter() -> None:
    assert forward_imports(import_graph(PACKAGE_DIR, PACKAGE)) == []


def test_no_import_cycle() -> None:
    assert cycles(import_graph(PACKAGE_DIR, PACKAGE)) == []


def test_the_chapters_extend_each_other_in_order() -> None:
    graph = import_graph(PACKAGE_DIR, PACKAGE)
    # Chapter 7 builds on chapter 4's attention and chapter 6's model, never the reverse.
    assert {"multihead", "training"} <= graph["scale"]
    assert "training" in graph["scale"] and "scale" not in graph["training"]
    assert "multihead" in graph["training"]


# --- the checker itself, on small made-up packages ---


def write_package(root: Path, files: dict[str, str]) -> Path:
    package = root / "pkg"
    for name, text in {"__init__.py": "", **files}.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return package


def test_the_checker_finds_a_forward_import_inside_a_function(tmp_path: Path) -> None:
    package = write_package(
        tmp_path,
        {
            "multihead.py": "def f():\n    from .scale import KVCache\n",
            "scale.py": "from .multihead import f\n",
        },
    )
    graph = import_graph(package, "pkg")
    assert forward_imports(graph) == ["multihead (chapter 4) imports scale (chapter 7)"]
    assert cycles(graph) == [["multihead", "scale", "multihead"]]


def test_the_checker_finds_type_checking_absolute_and_helper_imports(tmp_path: Path) -> None:
    package = write_package(
        tmp_path,
        {
            "causal.py": "if TYPE_CHECKING:\n    from pkg.training import Model\n",
            "toy.py": "import pkg.causal\n",
            "layout.py": "from . import trainable, Thing\n",
            "trainable.py": "",
            "training.py": "",
        },
    )
    assert forward_imports(import_graph(package, "pkg")) == [
        "causal (chapter 3) imports training (chapter 6)",
        "layout imports the package itself (every chapter)",
        "toy (a helper) imports causal (chapter 3)",
    ]


def test_the_checker_accepts_a_well_layered_package(tmp_path: Path) -> None:
    package = write_package(
        tmp_path,
        {
            "_checks.py": "import torch\n",
            "causal.py": "from ._checks import check\n",
            "multihead.py": "from .causal import CausalAttention\nfrom . import _checks\n",
            "exercises/__init__.py": "",
            "exercises/ch4.py": "from ..multihead import MultiHeadAttention\n",
        },
    )
    graph = import_graph(package, "pkg")
    assert graph["multihead"] == {"causal", "_checks"}
    assert graph["exercises.ch4"] == {"multihead"}
    assert forward_imports(graph) == [] and cycles(graph) == []


@pytest.mark.parametrize("name", ["simplified", "exercises.ch7", "plotting"])
def test_chapters_of_known_modules(name: str) -> None:
    assert chapter_of(name) == {"simplified": 1, "exercises.ch7": 7, "plotting": 0}[name]


def test_later_chapters_replace_a_step_of_chapter_4s_attention_not_its_forward() -> None:
    from attention_from_scratch import (
        CachedAttention,
        GroupedQueryAttention,
        MultiHeadAttention,
        RotaryMultiHeadAttention,
    )

    # Chapter 6 changes only the projection step. Chapter 7's CachedAttention builds masks
    # and uses the cache in its forward and extends both steps; GroupedQueryAttention then
    # changes the layers and the explicit attention step, nothing else.
    assert "project" in vars(RotaryMultiHeadAttention)
    assert RotaryMultiHeadAttention.forward is MultiHeadAttention.forward
    assert RotaryMultiHeadAttention.attend is MultiHeadAttention.attend
    assert {"forward", "project", "attend"} <= set(vars(CachedAttention))
    assert GroupedQueryAttention.forward is CachedAttention.forward
    assert GroupedQueryAttention.project is CachedAttention.project
