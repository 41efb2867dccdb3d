"""What the chapters say about the package code they show, checked against that code.

A chapter shows the package's version of what it has built in one or more cells in a row that
are each ``show_source(X, docstrings=False)`` (or ``docstrings=True``, where the docstring is
what explains a class that writes no code); the markdown cell right after them, up to its
first heading, walks through that code and quotes it in backticks. Every quoted span must be
explained by the code, docstrings left out, so that a change of the package that removes what
a page walks through fails:

- a piece of code (``s = past + t``, ``self.mask[past:s, :s]``, ``hidden & ~empty``,
  ``del scores``, ``mask: torch.Tensor``, ``*args, **kwargs``) is in the shown code, spaces
  aside, with ``...`` standing for what the page leaves out;
- a name (``hidden_keys``, ``super().attend``) is a word of the shown code, an attribute of a
  shown object, defined at the top level of the page's own code (``def``, ``class``,
  ``name =``), or a name of Python, torch, ``torch.nn``, ``torch.nn.functional`` or the
  package; a keyword (``return_lse=True``) is explained the same way, or is a parameter of a
  function of torch or the package that the walkthrough quotes (``head_attention``);
- a call with arguments (``super().project(x, offset)``) of a name that only the shown code
  explains is in the shown code as written, as a piece of code is; a call of a name known
  elsewhere (``print(ca)``, ``causal_mask(t)``) counts as its name;
- a name reached through torch (``torch.triu(ones, diagonal=1)``, ``nn.Dropout``,
  ``F.dropout``, ``@torch.no_grad()``) exists.

Anything else is not code of the shown object and is not checked: shapes ``(b, t, d)``, values
``6.0`` and ``"cuda"``, formulas such as ``t == s``, methods of the page's own tensors
(``inputs.T``), and roles (``{cite}`key```, ``{doc}`page```).
"""

from __future__ import annotations

import builtins
import importlib
import inspect
import json
import re
from dataclasses import dataclass
from types import ModuleType

import torch
import torch.nn.functional as F
from book_info import chapter_notebooks
from torch import nn

import attention_from_scratch as afs

KNOWN_ELSEWHERE = (builtins, torch, nn, F, afs)
TORCH_ROOTS = {"torch": torch, "nn": nn, "F": F}

SHOW = re.compile(r"show_source\(([\w.]+), docstrings=(?:False|True)\)\s*")
# A backticked span, with the role in front of it if it has one ({cite}`key`); the spans are
# read in order, so that a span broken over two lines pairs its own backticks.
SPAN = re.compile(r"(\{[\w:-]+\})?`([^`]+)`")
NAME_OR_CALL = re.compile(r"(?:super\(\)\.)?([A-Za-z_]\w*)(?:\((.*)\))?")
KEYWORD = re.compile(r"([A-Za-z_]\w*)=[^=].*")
THROUGH_TORCH = re.compile(r"@?(torch|nn|F)((?:\.\w+)+)(?:\(.*\))?")
CODE = re.compile(
    r"self\.|\[| = | & | \| "  # attributes, indexing, assignments, mask logic
    r"|^(?:del|return|raise|yield|assert) "  # statements
    r"|^\w+: \S"  # annotations
    r"|\*\w"  # *args, **kwargs
)


@dataclass(frozen=True)
class Shown:
    """A run of show_source cells and the markdown cell after it, up to its first heading (empty
    where there is none: the page goes on with code, or a heading opens the cell)."""

    chapter: str
    cell: int  # index of the cell after the run
    objects: tuple[object, ...]
    text: str
    defined: frozenset[str]

    @property
    def id(self) -> str:
        names = "+".join(obj.__qualname__ for obj in self.objects)  # type: ignore[attr-defined]
        return f"{self.chapter[:2]}:{names}"


def cells_of(chapter: str) -> list[dict]:
    path = next(path for path in chapter_notebooks() if path.stem == chapter)
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def source_of(cell: dict) -> str:
    return "".join(cell["source"])


def chapters_that_show_source() -> list[str]:
    """Every chapter of the book with a cell that calls show_source, in reading order."""
    return [
        path.stem
        for path in chapter_notebooks()
        if any(
            cell["cell_type"] == "code" and "show_source(" in source_of(cell)
            for cell in cells_of(path.stem)
        )
    ]


def resolve(dotted: str) -> object:
    """What a page shows: a name of the package, or of one of its modules
    (``fused._forward_kernel``); a Triton kernel stands for the function it compiles."""
    obj: object = afs
    for part in dotted.split("."):
        if isinstance(obj, ModuleType) and not hasattr(obj, part):  # a module not imported yet
            obj = importlib.import_module(f"{obj.__name__}.{part}")
        else:
            obj = getattr(obj, part)
    compiled = getattr(obj, "fn", None)
    if type(obj).__module__.startswith("triton.") and inspect.isfunction(compiled):
        obj = compiled
    return obj


def defined_by(cells: list[dict]) -> frozenset[str]:
    """The names the page's code cells define at their top level."""
    code = "\n".join(source_of(cell) for cell in cells if cell["cell_type"] == "code")
    pattern = re.compile(r"^(?:def|class) (\w+)|^(\w+) =", re.MULTILINE)
    return frozenset(name for pair in pattern.findall(code) for name in pair if name)


def shown_runs(chapter: str, cells: list[dict] | None = None) -> list[Shown]:
    """Every run of show_source cells of a chapter (of ``cells`` if given), with the text that
    walks through it."""
    cells = cells_of(chapter) if cells is None else cells
    defined = defined_by(cells)
    runs: list[Shown] = []
    objects: list[object] = []
    for index, cell in enumerate([*cells, {"cell_type": "end", "source": []}]):
        source = source_of(cell)
        shown = SHOW.fullmatch(source)
        if cell["cell_type"] == "code" and shown is not None:
            objects.append(resolve(shown.group(1)))
            continue
        if objects:
            text = ""
            if cell["cell_type"] == "markdown":
                text = re.split(r"^#", source, maxsplit=1, flags=re.MULTILINE)[0]
            runs.append(Shown(chapter, index, tuple(objects), text, defined))
        objects = []
    return runs


def walkthroughs() -> list[Shown]:
    """The runs of every chapter that a walkthrough follows."""
    return [
        run
        for chapter in chapters_that_show_source()
        for run in shown_runs(chapter)
        if run.text.strip()
    ]


def _in_code(span: str, compact: str) -> bool:
    """Whether ``span`` is in the code (``compact``: without whitespace), "..." standing for
    anything."""
    parts = re.sub(r"\s", "", span).split("...")
    return re.search(".*?".join(map(re.escape, parts)), compact) is not None


def _through_torch(root: str, attributes: str) -> object:
    """What ``torch.a.b`` (``nn.a``, ``F.a``) names; AttributeError where torch has no such name."""
    found: object = TORCH_ROOTS[root]
    for attribute in attributes.removeprefix(".").split("."):
        found = getattr(found, attribute)
    return found


def _parameters_of(span: str) -> set[str]:
    """The parameters of the function of Python, torch or the package that ``span`` names."""
    call, through_torch = NAME_OR_CALL.fullmatch(span), THROUGH_TORCH.fullmatch(span)
    found: object = None
    if call is not None:
        name = call.group(1)
        found = next((getattr(m, name) for m in KNOWN_ELSEWHERE if hasattr(m, name)), None)
    elif through_torch is not None:
        try:
            found = _through_torch(*through_torch.groups())
        except AttributeError:
            return set()
    try:
        return set(inspect.signature(found).parameters)  # type: ignore[arg-type]
    except (TypeError, ValueError):  # not a function, or one without a signature
        return set()


def unexplained(
    objects: tuple[object, ...], text: str, defined: frozenset[str] = frozenset()
) -> list[tuple[str, str]]:
    """Each span quoted in ``text`` that neither the shown ``objects``' code nor anything else
    explains (the rules are in this module's docstring), with the rule it breaks."""
    source = "\n".join(afs.show_source(obj, docstrings=False).code for obj in objects)
    compact = re.sub(r"\s", "", source)

    def in_shown(name: str) -> bool:
        return re.search(rf"\b{name}\b", source) is not None or any(
            hasattr(obj, name) for obj in objects
        )

    def known(name: str) -> bool:
        return name in defined or any(hasattr(module, name) for module in KNOWN_ELSEWHERE)

    def broken_rule(span: str) -> str | None:
        call = NAME_OR_CALL.fullmatch(span)
        if call is not None:
            name, arguments = call.groups()
            if not (in_shown(name) or known(name)):
                return "a name that neither the code nor the page defines"
            if arguments in (None, "", "...") or known(name) or _in_code(span, compact):
                return None
            return "a call of the shown code, not in it as written"
        keyword = KEYWORD.fullmatch(span)
        if keyword is not None and not (
            in_shown(keyword.group(1)) or known(keyword.group(1)) or keyword.group(1) in parameters
        ):
            return "a keyword of nothing the code or the text names"
        through_torch = THROUGH_TORCH.fullmatch(span)
        if through_torch is not None:
            try:
                _through_torch(*through_torch.groups())
            except AttributeError:
                return "a name that torch does not have"
        if CODE.search(span) and not _in_code(span, compact):
            return "a piece of code, not in the shown code"
        return None

    spans = [" ".join(quoted.split()) for role, quoted in SPAN.findall(text) if not role]
    parameters = set().union(*map(_parameters_of, spans))
    return [(span, why) for span in spans if (why := broken_rule(span)) is not None]
