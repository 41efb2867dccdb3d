"""What a shell command line calls, and whether it exists: the make targets, nox sessions,
Python scripts and modules, pytest marks and paths, and the imports and attributes of a
``python -c`` snippet that a workflow step, ``.ci/run`` or the Makefile runs. Other programs
(ruff, git, apt-get) are left to the machine that runs them."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import re
import shlex
import subprocess
import sys
import tomllib
import types
from pathlib import Path
from typing import Any

import yaml
from book_info import ROOT

NOX = importlib.util.find_spec("nox") is not None
PYTHON = re.compile(r"python(3(\.\d+)?)?")
# pytest options that take a value; `--deselect` names a test, which must exist too.
PYTEST_VALUES = {"-m", "-k", "-p", "-c", "--rootdir", "-n", "--dist"}


def script_lines(path: Path) -> list[tuple[str, dict[str, str]]]:
    """Each command line of a workflow's `run:` steps (with the variables set for the step) or
    of a shell script, continuation lines joined and comments left out."""
    if path.suffix == ".yml":
        workflow = yaml.safe_load(path.read_text(encoding="utf-8"))
        scripts = [
            (step["run"], {**workflow.get("env", {}), **job.get("env", {}), **step.get("env", {})})
            for job in workflow["jobs"].values()
            for step in job["steps"]
            if "run" in step
        ]
    else:
        scripts = [(path.read_text(encoding="utf-8"), {})]
    return [
        (line.strip(), env)
        for script, env in scripts
        for line in script.replace("\\\n", " ").splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]


def split(line: str, env: dict[str, str]) -> list[list[str]]:
    """The commands of a line (split at `&&`, `||`, `;` and `|`), a `$NAME` the step sets
    expanded to its words."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    commands: list[list[str]] = [[]]
    for token in lexer:
        name = token.removeprefix("$").strip("{}")
        if set(token) <= set(";&|"):
            commands.append([])
        elif token.startswith("$") and name in env:
            commands[-1] += str(env[name]).split()
        else:
            commands[-1].append(token)
    return [command for command in commands if command]


def problems(line: str, env: dict[str, str] | None = None, root: Path = ROOT) -> list[str]:
    """What the line calls that does not exist, one sentence each; none when all of it does."""
    found: list[str] = []
    for argv in split(line, env or {}):
        program, args = Path(argv[0]).name, argv[1:]
        if PYTHON.fullmatch(program):
            found += python_problems(args, root)
        elif program == "pytest":
            found += pytest_problems(args, root)
        elif program == "nox":
            found += nox_problems(args, root)
        elif program == "make":
            targets = [arg for arg in args if not arg.startswith("-") and "=" not in arg]
            found += make_problems(targets, root)
    return found


def python_problems(args: list[str], root: Path) -> list[str]:
    if not args:
        return []
    if args[0] == "-c":
        return snippet_problems(args[1])
    if args[0] == "-m":
        module, rest = args[1], args[2:]
        if importlib.util.find_spec(module) is None:
            return [f"no module {module}"]
        handlers = {"pytest": pytest_problems, "nox": nox_problems, "pip": pip_problems}
        return handlers.get(module, lambda *_: [])(rest, root)
    path = args[0]
    return [] if path.startswith("$") or (root / path).is_file() else [f"no script {path}"]


def attribute(owner: Any, name: str) -> Any:
    """owner.name, importing it where it is a submodule not imported yet."""
    try:
        return getattr(owner, name)
    except AttributeError:
        if not isinstance(owner, types.ModuleType):
            raise
        return importlib.import_module(f"{owner.__name__}.{name}")


def snippet_problems(code: str) -> list[str]:
    """A `python -c` snippet compiles, and every module it imports and every attribute it reads
    of one (`grader.sandbox_problem`, `torch.cuda.is_available`) exists, with tools/ on
    sys.path as the snippets put it. Nothing of the snippet itself runs."""
    try:
        tree = ast.parse(code)
    except SyntaxError as error:
        return [f"python -c does not compile: {error.msg}"]
    if str(ROOT / "tools") not in sys.path:
        sys.path.insert(0, str(ROOT / "tools"))
    names: dict[str, Any] = {}
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imports = [(alias.name, None, alias.asname) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            imports = [(node.module, alias.name, alias.asname) for alias in node.names]
        else:
            continue
        for module_name, name, asname in imports:
            try:
                module = importlib.import_module(module_name)
                if name is not None:
                    names[asname or name] = attribute(module, name)
                else:
                    top = module_name.split(".")[0]
                    names[asname or top] = module if asname else sys.modules[top]
            except (ImportError, AttributeError):
                found.add(
                    f"python -c: {'.'.join(filter(None, [module_name, name]))} does not exist"
                )
    for node in ast.walk(tree):
        chain = []
        while isinstance(node, ast.Attribute):
            chain.insert(0, node.attr)
            node = node.value
        if chain and isinstance(node, ast.Name) and node.id in names:
            owner = names[node.id]
            for depth, name in enumerate(chain, 1):
                try:
                    owner = attribute(owner, name)
                except (ImportError, AttributeError):
                    found.add(f"python -c: {'.'.join([node.id, *chain[:depth]])} does not exist")
                    break
    return sorted(found)


def pytest_problems(args: list[str], root: Path) -> list[str]:
    """Every mark of `-m` is registered (pytest would select no test by an unknown one), and
    every file or test named exists."""
    pyproject = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    markers = {m.split(":")[0] for m in pyproject["tool"]["pytest"]["ini_options"]["markers"]}
    found, paths = [], []
    words = iter(args)
    for arg in words:
        if arg == "-m":
            expression = next(words)
            for mark in set(re.findall(r"\w+", expression)) - {"and", "or", "not"} - markers:
                found.append(f"pytest -m: mark {mark} is not registered in pyproject.toml")
        elif arg == "--deselect":
            paths.append(next(words))
        elif arg in PYTEST_VALUES:
            next(words)
        elif not arg.startswith("-"):
            paths.append(arg)
    for path in paths:
        file, _, test = path.partition("::")
        if not (root / file).exists():
            found.append(f"pytest: no file {file}")
        elif test:
            tree = ast.parse((root / file).read_text(encoding="utf-8"))
            if test.split("[")[0] not in {getattr(node, "name", None) for node in tree.body}:
                found.append(f"pytest: no test {path}")
    return found


def pip_problems(args: list[str], root: Path) -> list[str]:
    """Every requirements file of `-r` exists."""
    files = [args[i + 1] for i, arg in enumerate(args[:-1]) if arg in ("-r", "--requirement")]
    return [f"pip: no file {file}" for file in files if not (root / file).is_file()]


def nox_problems(args: list[str], root: Path) -> list[str]:
    """Each session of `-s` is one that nox finds in noxfile.py: nox itself lists them where it
    is installed; elsewhere they are read off the noxfile's decorators."""
    sessions = [args[i + 1] for i, arg in enumerate(args[:-1]) if arg in ("-s", "--session")]
    if not sessions:
        return []
    if NOX:
        result = subprocess.run(
            [sys.executable, "-m", "nox", "-f", str(root / "noxfile.py"), "-l", "-s", *sessions],
            capture_output=True,
            text=True,
            cwd=root,
        )
        return [] if result.returncode == 0 else [f"nox -s: {result.stderr.strip()}"]
    known = set()
    for node in ast.parse((root / "noxfile.py").read_text(encoding="utf-8")).body:
        decorators = getattr(node, "decorator_list", [])
        if not any(ast.unparse(d).startswith("nox.session") for d in decorators):
            continue
        known.add(node.name)
        for keyword in (k for d in decorators for k in getattr(d, "keywords", [])):
            if keyword.arg == "ids":
                known |= {f"{node.name}({i})" for i in ast.literal_eval(keyword.value)}
    return [f"nox -s: no session {name} in noxfile.py" for name in sessions if name not in known]


def make_problems(targets: list[str], root: Path) -> list[str]:
    """Each target is a rule of the Makefile with something to run: `make -q` (which runs
    nothing) answers 1, "not up to date"; a folder named like it, with no rule, answers 0."""
    found = []
    for target in targets:
        result = subprocess.run(
            ["make", "-q", "-C", str(root), "--no-print-directory", target],
            capture_output=True,
            text=True,
            env={**os.environ, "MAKEFLAGS": ""},
        )
        if result.returncode != 1:
            found.append(f"make {target}: {result.stderr.strip() or 'not a rule of the Makefile'}")
    return found
