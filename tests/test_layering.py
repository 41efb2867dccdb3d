"""The package is layered like the book (CONTRIBUTING.md, "Layering").

The layers are import-linter's contracts in pyproject.toml (``[tool.importlinter]``): chapter
modules import only their own or earlier chapters, helpers import no chapter module, the entry
points sit above every chapter, and no import cycles. import-linter reads every import, at the
top of a module, under ``if TYPE_CHECKING:`` and inside functions. What it does not check, no
private name imported across modules, is read here with ``ast``.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import grimp
import pytest
from importlinter.cli import lint_imports

import attention_from_scratch

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIR = Path(attention_from_scratch.__file__).parent
PACKAGE = PACKAGE_DIR.name


def test_the_import_contracts_hold(capsys: pytest.CaptureFixture[str]) -> None:
    exit_code = lint_imports(
        config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True
    )
    report = capsys.readouterr().out
    assert exit_code == 0, report
    assert " BROKEN" not in report


def test_the_contracts_cover_every_chapter_and_the_entry_points() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    (layers,) = [c for c in contracts if c.get("containers") == ["attention_from_scratch"]]
    assert layers["exhaustive"] is True  # a new module must be given its layer
    names = [[name.strip() for name in layer.split(":")] for layer in layers["layers"]]
    # Entry points on top, then chapter 8 down to chapter 1, then the helpers.
    assert names[0] == ["__main__"] and names[1] == ["doctor"]
    chapters = [chapter_of(layer[0]) for layer in names[2:-1]]
    assert chapters == [8, 7, 6, 5, 4, 3, 2, 1]
    assert {"_checks", "figures", "views.widget"} <= set(names[-1])
    assert {contract["type"] for contract in contracts} >= {"layers", "acyclic_siblings"}
    # The packages placed module by module (exhaustive_ignores) place every module.
    placed = {name for layer in names for name in layer}
    for package in layers["exhaustive_ignores"]:
        modules = {
            f"{package}.{path.stem}"
            for path in (PACKAGE_DIR / package).glob("*.py")
            if path.name != "__init__.py"
        }
        assert modules - placed == set(), package


def chapter_of(module: str) -> int:
    """The chapter of a layer's first module: ``exercises.chN``, or a module whose docstring
    opens with "Chapter N:" (a chapter without exercises)."""
    if module.startswith("exercises.ch"):
        return int(module.removeprefix("exercises.ch"))
    tree = ast.parse((PACKAGE_DIR / f"{module}.py").read_text(encoding="utf-8"))
    docstring = ast.get_docstring(tree) or ""
    return int(docstring.removeprefix("Chapter ").split(":")[0])


def test_no_module_imports_the_package_itself() -> None:
    # The package's __init__ gathers every chapter: a module importing it imports them all.
    graph = grimp.build_graph(PACKAGE, exclude_type_checking_imports=False)
    importers = graph.find_modules_that_directly_import(PACKAGE)
    assert sorted(importers) == []


def package_modules() -> list[Path]:
    return sorted(PACKAGE_DIR.rglob("*.py"))


def module_parts(path: Path) -> list[str]:
    parts = [PACKAGE, *path.relative_to(PACKAGE_DIR).with_suffix("").parts]
    return parts[:-1] if parts[-1] == "__init__" else parts


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_names_imported(path: Path, source: str | None = None) -> list[str]:
    """Private names that the module at ``path`` (its text: ``source``, else the file's) takes
    from another module of the package: ``from .x import _y``, and ``x._y`` where ``x`` is a
    package module it imported."""
    here = module_parts(path)
    package = here if path.name == "__init__.py" else here[:-1]
    tree = ast.parse(path.read_text(encoding="utf-8") if source is None else source)
    found, modules = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = [*base, *(node.module.split(".") if node.module else [])]
            elif node.module and node.module.split(".")[0] == PACKAGE:
                target = node.module.split(".")
            else:
                continue
            for alias in node.names:
                submodule = PACKAGE_DIR.joinpath(*target[1:], alias.name)
                if submodule.with_suffix(".py").exists() or (submodule / "__init__.py").exists():
                    modules.add(alias.asname or alias.name)  # a module, not a name in one
                elif is_private(alias.name):
                    found.append(f"line {node.lineno}: {'.'.join(target)}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE and alias.asname:
                    modules.add(alias.asname)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and is_private(node.attr)
        ):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


@pytest.mark.parametrize(
    "path", package_modules(), ids=lambda path: str(path.relative_to(PACKAGE_DIR))
)
def test_no_private_name_is_imported_across_modules(path: Path) -> None:
    assert private_names_imported(path) == []


def test_the_private_name_check_finds_both_spellings() -> None:
    # A module that would sit in the package (never written: only its path is used).
    path = PACKAGE_DIR / "probe.py"
    source = "from ._checks import _helper, check_tensor\nfrom . import toy\ntoy._secret\n"
    assert private_names_imported(path, source) == [
        f"line 1: {PACKAGE}._checks._helper",
        "line 3: toy._secret",
    ]
    assert private_names_imported(path, "from .figures.style import write\n") == []


def test_the_chapters_extend_each_other_in_order() -> None:
    from attention_from_scratch import (
        CachedAttention,
        CachedCausalModel,
        MultiHeadAttention,
        TinyCausalModel,
    )

    # Chapter 7 builds on chapter 4's attention and chapter 6's model, never the reverse.
    assert issubclass(CachedAttention, MultiHeadAttention)
    assert issubclass(CachedCausalModel, TinyCausalModel)


def test_later_chapters_replace_a_step_of_chapter_4s_attention_not_its_forward() -> None:
    from attention_from_scratch import (
        CachedAttention,
        GroupedQueryAttention,
        MultiHeadAttention,
        RotaryGroupedQueryAttention,
        RotaryMultiHeadAttention,
    )

    # Chapter 6 changes only the projection step. Chapter 7's CachedAttention builds masks
    # and uses the cache in its forward and its attention step, and projects as chapter 4
    # does; GroupedQueryAttention changes only the size of the key and value layers; their
    # rotary combination writes nothing of its own.
    assert "project" in vars(RotaryMultiHeadAttention)
    assert RotaryMultiHeadAttention.forward is MultiHeadAttention.forward
    assert RotaryMultiHeadAttention.attend is MultiHeadAttention.attend
    assert {"forward", "attend"} <= set(vars(CachedAttention))
    assert CachedAttention.project is MultiHeadAttention.project
    overridden = {
        name for name in vars(GroupedQueryAttention) if callable(vars(GroupedQueryAttention)[name])
    }
    assert overridden <= {"__init__", "key_value_size", "extra_repr"}, overridden
    own = {name for name in vars(RotaryGroupedQueryAttention) if not name.startswith("__")}
    assert own == set(), own
    assert RotaryGroupedQueryAttention.project is RotaryMultiHeadAttention.project
    assert RotaryGroupedQueryAttention.forward is CachedAttention.forward
