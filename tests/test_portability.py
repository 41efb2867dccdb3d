"""The stand-ins for another machine (tools/portability.py) change what they say they change:
another seed for every model, ATen's portable kernels instead of this CPU's, other thread
counts, oneDNN off. Chapters 6 and 7, whose claims rest on training and random draws, run
under every condition weekly (`nox -s portability`, compat.yml), outside the test command's
time budget, and by hand before a change to them lands (CONTRIBUTING.md).
"""

from __future__ import annotations

import ast
import builtins
import json
import sys

import nbformat
import pytest
import torch
from book_info import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import portability

PROBE = """\
import json
torch.set_num_threads(1)  # a chapter's own setting, which a condition overrides
torch.manual_seed(5)
print(json.dumps({
    "draw": torch.randn(3).tolist(),
    "threads": torch.get_num_threads(),
    "capability": torch.backends.cpu.get_cpu_capability(),
    "onednn": torch.backends.mkldnn.enabled,
}))
"""


def probe(condition: portability.Condition) -> dict[str, object]:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(condition.preamble()),
        nbformat.v4.new_code_cell("import torch"),
        nbformat.v4.new_code_cell(PROBE),
    ]
    portability.execute(notebook, condition, timeout=120)
    return json.loads(notebook.cells[-1].outputs[0]["text"])


def test_a_condition_changes_the_seed_the_kernels_the_threads_and_onednn() -> None:
    changed = portability.Condition(
        "probe", threads=2, cpu_capability="default", onednn=False, seed_offset=3
    )
    seen = probe(changed)
    torch.manual_seed(5 + 3)
    assert seen["draw"] == pytest.approx(torch.randn(3).tolist())
    assert seen["threads"] == 2
    assert seen["capability"] == "DEFAULT"
    assert seen["onednn"] is False
    # As written, the notebook's own seed and thread count stand.
    plain = probe(portability.CONDITIONS["as-written"])
    torch.manual_seed(5)
    assert plain["draw"] == pytest.approx(torch.randn(3).tolist())
    assert plain["threads"] == 1
    assert plain["onednn"] is True


def test_measure_mode_runs_past_a_failing_guard_and_keeps_its_names() -> None:
    namespace: dict[str, object] = {}
    exec(portability.disarmed("x = 1\nassert x == 2, 'no'\ny = x + 1\n"), namespace)
    assert namespace["y"] == 2


def free_names(expression: str) -> set[str]:
    """The names an expression reads that it does not bind itself (in a comprehension)."""
    nodes = [node for node in ast.walk(ast.parse(expression)) if isinstance(node, ast.Name)]
    bound = {node.id for node in nodes if isinstance(node.ctx, ast.Store)}
    return {node.id for node in nodes if isinstance(node.ctx, ast.Load)} - bound


def test_each_portable_chapter_has_guards_and_defines_what_measure_reads() -> None:
    for chapter in portability.PORTABLE_CHAPTERS:
        notebook = nbformat.read(portability.chapter_path(chapter), as_version=4)
        assert any(portability.is_guard(cell) for cell in notebook.cells), chapter
        code = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
        defined = set()
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                defined.add(node.id)
            elif isinstance(node, ast.FunctionDef | ast.ClassDef):
                defined.add(node.name)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                defined |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        for expression in portability.MEASURES.get(chapter, {}).values():
            missing = free_names(expression) - defined - set(dir(builtins))
            assert not missing, (chapter, expression, missing)
