"""A small chapter-0 notebook in the book's exercise format, for the grader's tests."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

DOUBLE_SOLUTION = "def double(x):\n    return x * 2\n"
TOTAL_SOLUTION = "def total(x):\n    return float(x.sum())\n"


def solution(label: str, code: str, stub: str, explanation: str) -> list:
    """The cells of one exercise's statement, solution and check."""
    return [
        new_markdown_cell(f":::{{exercise}}\n:label: {label}\nStore the answer.\n:::"),
        new_markdown_cell(f"```{{solution-start}} {label}\n:class: dropdown\n```"),
        new_code_cell(code, metadata={"exercise": {"stub": stub}}),
        new_markdown_cell(explanation),
        new_markdown_cell("```{solution-end}\n```"),
        new_code_cell(f'check("{label}")', metadata={"tags": ["remove-cell", "exercise-check"]}),
    ]


def fixture_notebook(double: str = DOUBLE_SOLUTION, total: str = TOTAL_SOLUTION) -> object:
    """The notebook, with the reference answers unless others are given."""
    cells = [
        new_markdown_cell("# 0. A made-up chapter"),
        new_code_cell(
            "import torch\n\n"
            "from attention_from_scratch.exercises import check\n\n"
            "base = torch.tensor([1.0, 2.0, 3.0])"
        ),
        *solution(
            "ch0-ex-double",
            double,
            "def double(x):\n    # Twice x, of its shape and dtype.\n    return ...\n",
            "Multiplying by 2 doubles every entry.",
        ),
        *solution(
            "ch0-ex-total",
            total,
            "def total(x):\n    # The sum of x, as a float.\n    return ...\n",
            "The sum of 1, 2 and 3 is 6.",
        ),
        new_markdown_cell(":::{exercise}\n:label: ch0-ex-explain\nExplain.\n:::"),
        new_markdown_cell("```{solution-start} ch0-ex-explain\n:class: dropdown\n```"),
        new_markdown_cell("Doubling every entry doubles the sum."),
        new_markdown_cell("```{solution-end}\n```"),
        new_code_cell("after = 1"),
    ]
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    return nb


def write_fixture(path: Path, **answers: str) -> Path:
    """Write the notebook to ``path`` and return it."""
    nbformat.write(fixture_notebook(**answers), path)
    return path
