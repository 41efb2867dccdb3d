"""Show the package's own source code in a chapter.

Each chapter builds a mechanism by hand, then displays the package's version of it (the code
the later chapters import, read from the installed package, never a copy) and checks the two
against each other. :func:`show_source` renders that code as a highlighted block: in the HTML
book (through the notebook's Markdown output), in Jupyter and in Colab alike, and as plain
text anywhere else.

A shared helper: it imports no chapter module.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from pathlib import Path
from types import FunctionType, MethodType

__all__ = ["SourceCode", "show_source"]


class SourceCode:
    """The source of one class or function, ready to display (what :func:`show_source`
    returns, from chapter 1 on).

    Jupyter, Colab and the book show it as a highlighted Python block (``_repr_markdown_``);
    ``str()`` gives the code itself.

    Attributes:
        code: the source text, dedented, without a trailing newline.
        where: the module's path inside the package and the line range in that file, e.g.
            ``"attention_from_scratch/causal.py, lines 20-61"``, followed by
            ``", docstrings left out"`` when they were.
    """

    def __init__(self, code: str, where: str) -> None:
        self.code = code
        self.where = where

    def __str__(self) -> str:
        return self.code

    def __repr__(self) -> str:
        return f"# {self.where}\n{self.code}"

    def _repr_markdown_(self) -> str:
        # A fence longer than any run of backticks inside the code, so it cannot end early.
        longest = max((len(run) for run in re.findall("`+", self.code)), default=0)
        fence = "`" * max(3, longest + 1)
        return f"{fence}python\n# {self.where}\n{self.code}\n{fence}\n"


def _docstring_lines(tree: ast.Module) -> set[int]:
    """Line numbers (1-based) of every class and function docstring in ``tree``."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
                and first.end_lineno is not None
            ):
                lines.update(range(first.lineno, first.end_lineno + 1))
    return lines


def show_source(obj: object, *, docstrings: bool = True) -> SourceCode:
    """Return the source of a class or function of the package, to display in a notebook.

    Introduced in chapter 1, and used by every chapter that shows the package's version of
    what it has just built.

    Args:
        obj: a class, a function or a method (e.g. ``MultiHeadAttention`` or
            ``MultiHeadAttention.forward``), or a Triton kernel (shown as the function it
            compiles, decorator included).
        docstrings: keep the docstrings (default); ``False`` leaves them out, so that a long
            class fits on one screen and the reader sees only its code.

    Returns:
        A :class:`SourceCode`, shown as a highlighted block when it is a cell's last value.

    Raises:
        TypeError: ``obj`` is not a class, function, method or Triton kernel, or
            ``docstrings`` is not a bool.
        ValueError: the source of ``obj`` cannot be found (e.g. it was defined in a notebook
            cell or is built into Python).
    """
    if not isinstance(docstrings, bool):
        raise TypeError(f"docstrings: expected a bool, got {type(docstrings).__name__}")
    if isinstance(obj, MethodType):
        obj = obj.__func__
    # A Triton kernel (chapter 8) keeps the Python function it compiles in `fn`.
    kernel_fn = getattr(obj, "fn", None)
    if type(obj).__module__.startswith("triton.") and isinstance(kernel_fn, FunctionType):
        obj = kernel_fn
    if not isinstance(obj, (type, FunctionType)):
        raise TypeError(
            f"obj: expected a class, function or method, got {type(obj).__name__} {obj!r}"
        )
    try:
        lines, start = inspect.getsourcelines(obj)
        # A decorated function (e.g. by @torch.no_grad()) is a wrapper defined in the
        # decorator's file; its lines above, and its file here, are the wrapped function's.
        path = inspect.getsourcefile(inspect.unwrap(obj))
    except (OSError, TypeError) as error:
        raise ValueError(
            f"obj: expected a class or function defined in a Python file, got "
            f"{obj.__qualname__!r}, whose source cannot be found ({error})"
        ) from None
    code = textwrap.dedent("".join(lines)).rstrip("\n")
    if not docstrings:
        lines_of_code = code.split("\n")
        drop = _docstring_lines(ast.parse(code))
        # A blank line that followed a docstring would now open the body.
        drop |= {n + 1 for n in drop if n < len(lines_of_code) and not lines_of_code[n].strip()}
        code = "\n".join(line for number, line in enumerate(lines_of_code, 1) if number not in drop)
    file = Path(path) if path else Path(f"{obj.__module__}.py")
    package = obj.__module__.split(".")[0]
    parts = file.parts
    shown = "/".join(parts[parts.index(package) :]) if package in parts else file.name
    end = start + len(lines) - 1
    # Without its docstrings the block is shorter than the file's range: say so, or a reader
    # counting lines from the header would land on the wrong ones.
    omitted = "" if docstrings else ", docstrings left out"
    return SourceCode(code, f"{shown}, lines {start}-{end}{omitted}")
