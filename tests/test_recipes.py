"""Chapter 7 decodes chapter 6's trained rotary model, which it trains again since each chapter
runs alone: its recipe (task data, seed, size, steps, learning rate) must stay chapter 6's."""

from __future__ import annotations

import ast
import json

from book_info import chapter_notebooks


def code_of(chapter: str) -> list[ast.Module]:
    path = next(path for path in chapter_notebooks() if path.name.startswith(chapter))
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [ast.parse("".join(c["source"])) for c in cells if c["cell_type"] == "code"]


def constants(trees: list[ast.Module]) -> dict[str, object]:
    """The page's top-level names bound to numbers (``VOCAB, LENGTH, K = 16, 32, 3``,
    ``CONTEXT = 2 * LENGTH``), in the order the page binds them."""
    known: dict[str, object] = {}
    for tree in trees:
        for node in tree.body:
            if not isinstance(node, ast.Assign) or len(node.targets) != 1:
                continue
            target = node.targets[0]
            names = target.elts if isinstance(target, ast.Tuple) else [target]
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            if len(names) != len(values) or not all(isinstance(n, ast.Name) for n in names):
                continue
            for name, value in zip(names, values, strict=True):
                try:
                    result = eval(compile(ast.Expression(value), "<page>", "eval"), {}, known)
                except (NameError, TypeError, SyntaxError):
                    continue
                if isinstance(result, int | float):
                    known[name.id] = result  # type: ignore[union-attr]
    return known


def calls(trees: list[ast.Module], function: str) -> list[ast.Call]:
    return [
        node
        for tree in trees
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name | ast.Attribute)
        and (node.func.id if isinstance(node.func, ast.Name) else node.func.attr) == function
    ]


def arguments(call: ast.Call, known: dict[str, object]) -> tuple[list[object], dict[str, object]]:
    """The call's literal arguments, names of the page's numbers replaced by their values;
    ``"?"`` for anything else (a model, a tensor)."""

    def value(node: ast.expr) -> object:
        try:
            return eval(compile(ast.Expression(node), "<page>", "eval"), {}, dict(known))
        except (NameError, TypeError):
            return "?"

    keywords = {k.arg: value(k.value) for k in call.keywords if k.arg is not None}
    return [value(arg) for arg in call.args], keywords


def rotary_recipe(chapter: str) -> dict[str, object]:
    trees = code_of(chapter)
    known = constants(trees)
    k_back = [arguments(call, known) for call in calls(trees, "k_back_task")]
    models = [
        arguments(call, known)
        for call in calls(trees, "TinyCausalModel")
        if any(k.arg == "positions" for k in call.keywords)
    ]
    trainings = [arguments(call, known)[1] for call in calls(trees, "train")]
    seeds = [arguments(call, known)[0] for call in calls(trees, "manual_seed")]
    return {"k_back": k_back, "models": models, "trainings": trainings, "seeds": seeds}


def test_chapter_7_trains_chapter_6s_rotary_model_by_chapter_6s_recipe() -> None:
    six, seven = rotary_recipe("06"), rotary_recipe("07")
    training_data = ([2000, 32, 16, 3], {"seed": 1})
    assert training_data in six["k_back"] and training_data in seven["k_back"]
    # Chapter 6 trains its four position variants in one loop, positions a loop variable.
    assert ([16], {"d_model": 32, "context_length": 64, "positions": "?"}) in six["models"]
    assert ([16], {"d_model": 32, "context_length": 64, "positions": "rotary"}) in seven["models"]
    recipe = {"steps": 250, "batch_size": 128, "lr": 1e-2, "progress": False}
    assert recipe in six["trainings"] and recipe in seven["trainings"]
    assert [123] in six["seeds"] and [123] in seven["seeds"]
