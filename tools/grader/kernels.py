"""Kernel exercises: a submitted ``@triton.jit`` kernel, graded from its source.

A kernel exercise's answer is never called in the student's kernel, where a torch function
or a patched triton could answer for it. Instead:

1. :func:`extract` reads the submitted notebook as data and takes, with :mod:`ast` (nothing
   of it is run here), every top-level function decorated exactly ``@triton.jit`` in its code
   cells, the last definition of a name winning as it would in the notebook. It refuses what
   is not plain kernel code (:func:`refusal`): another decorator, default values, imports,
   lambdas, nested functions or classes, ``global``, names starting with ``__``, and any name
   a kernel cannot reach (a kernel uses its arguments, its own variables, ``tl`` (of its
   submodules, only the functions of ``tl.math``), ``math`` and the other kernels of the
   notebook). An asked kernel that calls a refused one is not launched, and says why.
2. :func:`grade_kernels` writes the accepted sources (regenerated from the checked syntax
   tree), the plan and the grader's inputs into a fresh folder, and runs the harness
   (``kernel_harness.py``, sent as text) in a fresh process, in the sandbox the notebooks
   run in: first to compile the asked kernel for a GPU, then to launch it in Triton's
   interpreter. What comes back is read as data (``channel.read_results``) and judged by
   ``grading/chN.py`` in the grader's process.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import channel, kernel_harness
from .config import GradingConfig
from .sandbox import sandbox_command, submission_environment
from .spec import SENTINEL, Case, Input, KernelExercise, Launch, Output, StepResult

#: The harness, as the text of a script (the sandbox cannot import the grader).
HARNESS = Path(kernel_harness.__file__).read_text(encoding="utf-8")
# Seconds to compile one kernel, and to run one exercise's launches in the interpreter (a few
# seconds each, imports included): with the notebook's own time, within what folder.py gives
# a notebook's grading.
COMPILE_TIMEOUT = 60
RUN_TIMEOUT = 120
# What a kernel may name besides its parameters, its variables and the notebook's kernels:
# the modules the harness gives it, and the builtins Triton's compiler gives a kernel (less
# getattr and hasattr, which would reach attributes by strings).
MODULES = ("tl", "triton", "math")
BUILTINS = frozenset({"range", "min", "max", "len", "float", "int", "isinstance", "print"})
# Submodules of triton.language: an attribute of one would reach past the language.
TL_MODULES = frozenset({"core", "extra", "math", "random", "standard", "target_info"})
# The functions of tl.math (Triton 3.7.1), the one submodule a kernel may name: each is also
# tl's own. Its other attributes (core, wraps, List, T) are Python, not the language.
TL_MATH = frozenset(
    {"abs", "ceil", "cos", "div_rn", "erf", "exp", "exp2", "fdiv", "floor", "fma", "log", "log2"}
    | {"rsqrt", "sin", "sqrt", "sqrt_rn", "umulhi"}
)


@dataclass
class Extracted:
    """The kernels of a notebook: the accepted sources by name, the refused ones with why,
    and the names whose last definition is not a kernel."""

    sources: dict[str, str] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    not_kernels: dict[str, str] = field(default_factory=dict)


def _is_triton_jit(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "jit"
        and isinstance(node.value, ast.Name)
        and node.value.id == "triton"
    )


def _mentions_jit(node: ast.expr) -> bool:
    return any(
        (isinstance(n, ast.Attribute) and n.attr == "jit")
        or (isinstance(n, ast.Name) and n.id == "jit")
        for n in ast.walk(node)
    )


def _cell_tree(source: str) -> ast.Module | None:
    """A code cell's syntax tree, IPython's own syntax (magics, ``!``) turned into Python
    first, or None where it does not parse."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        source = TransformerManager().transform_cell(source)
    except Exception:  # no IPython here, or a cell it cannot transform: parse it as it is
        pass
    try:
        return ast.parse(source)
    except SyntaxError:
        return None


def _defined_names(node: ast.stmt) -> list[str]:
    """Names a top-level statement binds (what a later statement replaces)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Import | ast.ImportFrom):
        return [(alias.asname or alias.name).split(".")[0] for alias in node.names]
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AnnAssign | ast.AugAssign | ast.For | ast.AsyncFor):
        targets = [node.target]
    elif isinstance(node, ast.With | ast.AsyncWith):
        targets = [item.optional_vars for item in node.items if item.optional_vars]
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def extract(cells: Sequence[str]) -> Extracted:
    """The ``@triton.jit`` kernels of a notebook's code cells, read as data.

    Args:
        cells: the sources of its code cells, in order.

    Returns:
        Each name's last top-level definition: accepted (its source, regenerated from the
        checked syntax tree), refused (why), or not a kernel at all (what it is).
    """
    last: dict[str, ast.stmt] = {}
    for source in cells:
        tree = _cell_tree(source)
        for node in tree.body if tree is not None else []:
            for name in _defined_names(node):
                last[name] = node
    found = Extracted()
    kernels = {
        name
        for name, node in last.items()
        if isinstance(node, ast.FunctionDef) and any(map(_mentions_jit, node.decorator_list))
    }
    for name, node in last.items():
        if name not in kernels:
            found.not_kernels[name] = _what(node)
            continue
        assert isinstance(node, ast.FunctionDef)
        why = refusal(node, kernels)
        if name in MODULES or name in BUILTINS or name.startswith("__"):
            why = f"its name hides {name}, which kernels need"
        if why:
            found.refused[name] = why
        else:
            found.sources[name] = ast.unparse(node)
    return found


def _what(node: ast.stmt) -> str:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return "a plain function (without @triton.jit)"
    if isinstance(node, ast.ClassDef):
        return "a class"
    if isinstance(node, ast.Import | ast.ImportFrom):
        return "an imported name"
    return "a variable"


def refusal(node: ast.FunctionDef, kernels: set[str]) -> str | None:
    """Why a kernel's definition is not plain kernel code, or None when it is.

    Args:
        node: the function's definition.
        kernels: the names of every kernel of the notebook (a kernel may call them).
    """
    if len(node.decorator_list) != 1 or not _is_triton_jit(node.decorator_list[0]):
        return "it is decorated with something other than exactly @triton.jit"
    arguments = node.args
    if arguments.vararg or arguments.kwarg or arguments.kwonlyargs or arguments.posonlyargs:
        return "its parameters are not plain names (*, ** or / in its signature)"
    if arguments.defaults or arguments.kw_defaults:
        return "a parameter has a default value"
    for arg in arguments.args:
        annotation = arg.annotation
        if annotation is not None and not _is_constexpr(annotation):
            return f"parameter {arg.arg} is annotated with something other than tl.constexpr"
    if node.returns is not None:
        return "it has a return annotation"
    local = {arg.arg for arg in arguments.args}
    for child in ast.walk(ast.Module(body=node.body, type_ignores=[])):
        if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store | ast.Del):
            local.add(child.id)
    allowed = local | kernels | BUILTINS | set(MODULES)
    for child in ast.walk(ast.Module(body=node.body, type_ignores=[])):
        why = _refused_node(child, allowed)
        if why:
            return why
    for arg in arguments.args:
        if arg.arg.startswith("__"):
            return f"it uses the name {arg.arg}"
    return _module_uses(node)


def _is_constexpr(node: ast.expr) -> bool:
    text = ast.unparse(node)
    return text in ("tl.constexpr", "triton.language.constexpr")


def _refused_node(node: ast.AST, allowed: set[str]) -> str | None:
    if isinstance(node, ast.Import | ast.ImportFrom):
        return "it imports a module (a kernel uses only tl, math and other kernels)"
    if isinstance(node, ast.Lambda):
        return "it holds a lambda"
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return f"it defines {node.name} inside itself"
    if isinstance(node, ast.Global | ast.Nonlocal):
        return "it declares a global or nonlocal name"
    if isinstance(node, ast.Yield | ast.YieldFrom | ast.Await):
        return "it is a generator or a coroutine"
    if isinstance(node, ast.Name):
        if node.id.startswith("__"):
            return f"it uses the name {node.id}"
        if isinstance(node.ctx, ast.Load) and node.id not in allowed:
            return (
                f"it uses {node.id}, which a kernel cannot reach: a kernel uses its arguments, "
                "its own variables, tl, math and the other @triton.jit kernels of the notebook"
            )
    if isinstance(node, ast.Attribute):
        if node.attr.startswith("_") or node.attr == "handle":
            return f"it uses the attribute .{node.attr}"
        if isinstance(node.ctx, ast.Store | ast.Del):
            return f"it assigns to an attribute (.{node.attr})"
    return None


def _module_uses(node: ast.FunctionDef) -> str | None:
    """Why a use of ``tl``, ``triton`` or ``math`` reaches past the language, or None: each
    appears only as ``tl.name``, ``triton.language.name`` or ``math.name``, never as a value
    of its own, and no name is a submodule."""
    parents: dict[ast.AST, ast.AST] = {}
    for parent in ast.walk(node):
        for child in ast.iter_child_nodes(parent):
            parents[child] = parent
    for arg in node.args.args:
        if arg.arg in MODULES:
            return f"a parameter is named {arg.arg}, the name of a module"
    for child in ast.walk(ast.Module(body=node.body, type_ignores=[])):
        if not isinstance(child, ast.Name) or child.id not in MODULES:
            continue
        if not isinstance(child.ctx, ast.Load):
            return f"it assigns to {child.id}, the name of a module"
        parent = parents.get(child)
        if not isinstance(parent, ast.Attribute) or parent.value is not child:
            return f"it uses the module {child.id} as a value (write {child.id}.name)"
        used, name = parent, parent.attr  # tl.name, or triton.language.name
        if child.id == "triton":
            grand = parents.get(parent)
            if name != "language" or not isinstance(grand, ast.Attribute):
                return f"it uses triton.{name} (a kernel uses tl, that is triton.language)"
            used, name = grand, grand.attr
        if child.id != "math" and name == "math":
            grand = parents.get(used)
            if not isinstance(grand, ast.Attribute) or grand.value is not used:
                return "it uses the module tl.math as a value (write tl.math.name)"
            if grand.attr not in TL_MATH:
                return f"it uses tl.math.{grand.attr}, which is not a function of tl.math"
        elif child.id != "math" and name in TL_MODULES:
            return f"it reaches into tl.{name} (use the functions of tl itself)"
    return None


# ---- grading ------------------------------------------------------------------------------


def _argument(value: Input | Output | int | float) -> tuple[str, Any]:
    """The harness's spec of one launch argument (arrays saved by the caller), and its type in
    the compiler's signature."""
    if isinstance(value, Input):
        kind = "*i32" if value.array.dtype == np.int32 else "*fp32"
        return kind, {"kind": "input", "pad": value.pad, "fill": value.fill}
    if isinstance(value, Output):
        spec = {"kind": "output", "shape": list(value.shape), "pad": value.pad, "fill": SENTINEL}
        return "*fp32", spec
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"a launch argument must be an Input, an Output or a number, got {value!r}")
    return ("i32" if isinstance(value, int) else "fp32"), {"kind": "value", "value": value}


def write_plan(folder: Path, exercise: KernelExercise, launches: Sequence[Launch]) -> None:
    """The plan of one exercise's launches, and the arrays they read, into ``folder``."""
    compiles: dict[str, dict[str, Any]] = {}
    specs = []
    files = 0
    for launch in launches:
        signature, arguments = {}, []
        for name, value in zip(exercise.parameters, launch.args, strict=False):
            kind, spec = _argument(value)
            signature[name] = kind
            if isinstance(value, Input):
                files += 1
                spec["file"] = f"a{files}.npy"
                array = np.ascontiguousarray(value.array)
                spec["shape"] = list(array.shape)
                spec["traced"] = value.traced
                spec["fill"] = float(value.fill) if array.dtype.kind == "f" else int(value.fill)
                np.save(folder / spec["file"], array, allow_pickle=False)
            arguments.append(spec)
        constexprs = []
        for name in exercise.constexprs:
            signature[name] = "constexpr"
            constexprs.append([exercise.parameters.index(name), launch.constexprs[name]])
        request = {"signature": signature, "constexprs": constexprs}
        compiles[json.dumps(request, sort_keys=True)] = request
        specs.append(
            {"grid": list(launch.grid), "args": arguments, "constexprs": dict(launch.constexprs)}
        )
    plan = {"kernel": exercise.kernel, "compile": list(compiles.values()), "launches": specs}
    (folder / "plan.json").write_text(json.dumps(plan), encoding="utf-8")  # NaN as NaN


def problem(found: Extracted, exercise: KernelExercise) -> str | None:
    """Why an exercise's kernel cannot be launched at all (missing, refused, another
    signature), or None."""
    name = exercise.kernel
    if name in found.refused:
        return f"{name} was not graded: {found.refused[name]}"
    if name not in found.sources:
        what = found.not_kernels.get(name)
        if what:
            return f"{name} is {what}, not a @triton.jit kernel"
        return f"no @triton.jit kernel named {name} was found in the notebook"
    node = ast.parse(found.sources[name]).body[0]
    assert isinstance(node, ast.FunctionDef)
    names = tuple(arg.arg for arg in node.args.args)
    constexprs = tuple(arg.arg for arg in node.args.args if arg.annotation is not None)
    if names != exercise.parameters or constexprs != exercise.constexprs:
        wanted = ", ".join(
            f"{n}: tl.constexpr" if n in exercise.constexprs else n for n in exercise.parameters
        )
        return f"{name} should have the parameters ({wanted})"
    chain = refused_callee(found, name)
    if chain:
        calls = ", which calls ".join(chain[1:])
        return f"{name} calls {calls}, which was not graded: {found.refused[chain[-1]]}"
    return None


def refused_callee(found: Extracted, name: str) -> list[str] | None:
    """The calls from kernel ``name`` to a refused kernel (a helper it needs, which would be
    missing where it runs), as the chain of kernels from ``name`` to it, or None."""
    chains = {name: [name]}
    waiting = [name]
    while waiting:
        caller = waiting.pop(0)
        function = ast.parse(found.sources[caller]).body[0]
        assert isinstance(function, ast.FunctionDef)
        nodes = list(ast.walk(ast.Module(body=function.body, type_ignores=[])))
        local = {arg.arg for arg in function.args.args}  # its own names hide kernels
        local |= {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        for node in nodes:
            if not isinstance(node, ast.Name) or node.id in chains or node.id in local:
                continue
            if node.id in found.refused:
                return [*chains[caller], node.id]
            if node.id in found.sources:
                chains[node.id] = [*chains[caller], node.id]
                waiting.append(node.id)
    return None


def prepare(
    parent: Path, found: Extracted, exercise: KernelExercise, launches: Sequence[Launch]
) -> Path:
    """A fresh folder in ``parent`` holding the accepted kernels, the harness, the plan and
    its inputs."""
    folder = channel.new_folder(parent)
    (folder / "kernels.py").write_text("\n\n\n".join(found.sources.values()) + "\n")
    (folder / "harness.py").write_text(HARNESS, encoding="utf-8")
    write_plan(folder, exercise, launches)
    return folder


def _run(argv: list[str], workdir: Path, config: GradingConfig, timeout: float) -> str | None:
    """Run the harness once, in the sandbox when configured; why it failed, or None."""
    scratch = workdir / "scratch"
    prefix = sandbox_command(workdir, config) if config.sandbox == "bwrap" else []
    with (workdir / "harness.log").open("ab") as log:
        process = subprocess.Popen(
            [*prefix, *argv],
            cwd=scratch,
            env=submission_environment(scratch),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return f"it ran past {timeout:g} s"
    if code < 0:
        return f"the process died ({signal.Signals(-code).name}: a load or store far outside?)"
    return None


def compiled(folder: Path, why: str | None, kernel: str) -> str | None:
    """Why the harness's compile step failed, from what it wrote (or why it wrote nothing)."""
    raw = channel.read_file(folder / "compiled" / "compiled.json", 2**16)
    try:
        done = json.loads(raw) if raw else None
    except ValueError:
        done = None
    if isinstance(done, dict) and done.get("ok") is True and not why:
        return None
    if isinstance(done, dict) and done.get("message"):
        why = channel.echoed(f"{done.get('type')}: {done['message']}")
    return f"{kernel} does not compile for a GPU (sm_90): {why or 'the compiler wrote nothing'}"


def grade_kernels(
    cells: Sequence[str],
    exercises: dict[str, tuple[KernelExercise, list[Case]]],
    config: GradingConfig,
) -> dict[str, list[list[StepResult]] | str]:
    """Each kernel exercise's results (or why there are none): its kernel extracted from the
    notebook's code ``cells``, compiled for a GPU, then launched in the interpreter, each in a
    fresh process of its own, in the sandbox when ``config`` says so."""
    found = extract(cells)
    results: dict[str, list[list[StepResult]] | str] = {}
    if importlib.util.find_spec("triton") is None:
        missing = "not graded: Triton is not installed where the grader runs (Linux x86-64 only)"
        return dict.fromkeys(exercises, missing)
    for label, (exercise, cases) in exercises.items():
        launches = [case.call for case in cases if isinstance(case.call, Launch)]
        why = problem(found, exercise)
        if why:
            results[label] = why
            continue
        workdir = Path(tempfile.mkdtemp(prefix="grade-kernel-"))
        try:
            (workdir / "scratch").mkdir()
            folder = prepare(workdir, found, exercise, launches)
            harness = [sys.executable, str(folder / "harness.py")]
            why = _run([*harness, "compile", str(folder)], workdir, config, COMPILE_TIMEOUT)
            why = compiled(folder, why, exercise.kernel)
            if why is None:
                why = _run([*harness, "run", str(folder)], workdir, config, RUN_TIMEOUT)
                why = why and f"launching {exercise.kernel} failed: {why}"
            if why is None:
                try:
                    results[label] = channel.read_results(folder, launches)
                except channel.Unreadable as error:
                    lines = channel.tail(workdir / "harness.log").strip().splitlines()
                    why = f"{error} ({channel.echoed(lines[-1])})" if lines else str(error)
            if why is not None:
                results[label] = why
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    return results
