"""Grade a folder of submitted notebooks: `make grade SUBMISSIONS=DIR`.

Each `*.ipynb` in DIR runs in a fresh kernel with a per-notebook timeout, every error
allowed so that a raising cell costs only its exercise. On Linux each kernel runs in its own
sandbox (bubblewrap): the system and the Python environment read-only, a private scratch
folder holding its own copy, no network, its own process namespace (all its processes end
with it) and limits on memory, CPU time, processes and file size. Where no sandbox can run
the grader refuses, unless `--sandbox none` says the class is trusted; each row then says so.

The submission's kernel is not trusted either. A setup cell, before any of its cells, loads
the checks and prints fingerprints of what they rely on; each check cell
(`check("chN-ex-name")`) is replaced by one that loads a fresh copy of the checks from their
read-only files, runs them, compares what the submission could have changed, and prints one
JSON line behind a marker that only that cell knew. An exercise whose checks were tampered
with scores 0 and its row's status says so (see CONTRIBUTING.md, "Grading untrusted
submissions").

Writes DIR/grades.csv (one row per file: `submission`, one column per auto-graded exercise,
`total`, `possible`, `status`, `notes`, `isolation`) and DIR/feedback/<name>.md; with a
roster, also DIR/gradebook.csv for the LMS (tools/gradebook.py).

Usage: python tools/grade.py DIR [--timeout 600] [--workers 2] [--sandbox bwrap|none]
       [--memory 8] [--hidden grading/hidden] [--roster roster.csv]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import gradebook  # tools/gradebook.py, beside this file

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_HIDDEN = ROOT / "grading" / "hidden"
DEFAULT_TIMEOUT = 600
DEFAULT_MEMORY_GIB = 8.0
# Output a notebook may send the grader (the rest is dropped and counted in the notes).
OUTPUT_BYTES = 32 * 2**20
SANDBOXES = ("bwrap", "none")
PROBE = ("--unshare-all", "--die-with-parent", "--cap-drop", "ALL", "true")
OUTPUTS = {"grades.csv", "feedback", "gradebook.csv"}
LABEL = r"ch\d+-ex-[a-z0-9]+(?:-[a-z0-9]+)*"
# A check cell: optional comment lines, then exactly `check("label")`.
CHECK_CELL = re.compile(rf"^(?:\s*#[^\n]*\n)*\s*check\(\s*[\"']({LABEL})[\"']\s*\)\s*;?\s*$")
# The label of an exercise in the book (`:label:`) or in the student edition's title.
EXERCISE_LABEL = re.compile(
    rf"^(?::label:\s*|\*\*Exercise\*\* \(`)({LABEL})(?:`\))?\s*$", re.MULTILINE
)
FILE_CHAPTER = re.compile(r"^0*(\d+)_")


def _points(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


# ---------------------------------------------------------------- one notebook (child process)


def chapters_of(nb: Any, name: str) -> set[int]:
    """Chapters a submission belongs to: from its exercise labels, else its file name."""
    chapters = set()
    for cell in nb.cells:
        labels = EXERCISE_LABEL.findall(cell.source) if cell.cell_type == "markdown" else []
        match = CHECK_CELL.match(cell.source) if cell.cell_type == "code" else None
        labels += [match.group(1)] if match else []
        chapters.update(int(label[2:].split("-", 1)[0]) for label in labels)
    if not chapters and (match := FILE_CHAPTER.match(name)):
        chapters.add(int(match.group(1)))
    return chapters


def _marker() -> str:
    return "GRADER-" + secrets.token_hex(16) + ":"


def _setup_source(nonce: str, chapters: Iterable[int], config: dict[str, Any]) -> str:
    # Runs before any cell of the submission, so the module it imports is still the package's.
    return (
        '__import__("attention_from_scratch.exercises._core", fromlist=["_"]).grader_setup('
        f"{nonce!r}, {sorted(chapters)!r}, {config['hidden_dir']!r}, {config['check_files']!r})"
    )


def _check_source(labels: Sequence[str], nonce: str, config: dict[str, Any]) -> str:
    # Loads a fresh copy of the checks' module from its file (read-only in the sandbox): the
    # copy the submission imported, and anything it did to it, takes no part.
    from attention_from_scratch.exercises import _core

    name = "_grader_" + secrets.token_hex(8)
    return "\n".join(
        [
            "def _grader_cell(namespace):",
            "    import importlib.util, sys",
            f"    spec = importlib.util.spec_from_file_location({name!r}, {_core.__file__!r})",
            "    module = importlib.util.module_from_spec(spec)",
            f"    sys.modules[{name!r}] = module",
            "    try:",
            "        spec.loader.exec_module(module)",
            f"        module.grader_check({list(labels)!r}, {nonce!r},",
            f"            {config['hidden_dir']!r}, {config['check_files']!r}, namespace)",
            "    finally:",
            f"        sys.modules.pop({name!r}, None)",
            "_grader_cell(globals())",
            "del _grader_cell",
        ]
    )


def _marker_lines(cell: Any, nonce: str) -> list[dict[str, Any] | None]:
    """Every line of the cell's standard output that starts with ``nonce``, parsed."""
    # A long line may arrive in several stream messages: join them before splitting lines.
    text = "".join(
        output.get("text", "")
        for output in cell.get("outputs", [])
        if output.get("output_type") == "stream" and output.get("name") == "stdout"
    )
    found: list[dict[str, Any] | None] = []
    for line in text.splitlines():
        if line.startswith(nonce):
            try:
                data = json.loads(line[len(nonce) :])
            except ValueError:
                data = None
            found.append(data if isinstance(data, dict) else None)
    return found


def _score(item: Any, exercise: Any) -> tuple[dict[str, Any] | None, str]:
    """The grader's own score of one reported exercise, or why the report cannot be right."""
    if not isinstance(item, dict) or not isinstance(item.get("checks"), list):
        return None, "a result that is not the grader's"
    expected = {c.name: c for c in exercise.checks}
    checks, earned = [], 0.0
    for reported in item["checks"]:
        check = expected.pop(reported.get("name"), None) if isinstance(reported, dict) else None
        if check is None or reported.get("points") != check.points:
            return None, f"results for checks of {exercise.label} that it does not have"
        passed = reported.get("passed") is True
        earned += check.points if passed else 0.0
        checks.append(
            {
                "name": check.name,
                "title": check.title,
                "points": check.points,
                "passed": passed,
                "hint": check.hint,
                "reason": str(reported.get("reason", ""))[:300],
                "hidden": check.hidden,
            }
        )
    error = str(item.get("error", ""))[:300]
    if expected and not error:
        return None, f"results missing checks of {exercise.label}"
    return {"earned": earned, "possible": exercise.points, "checks": checks, "error": error}, ""


def _tail(path: Path, size: int = 4096) -> str:
    """The end of a file the kernel could write, never following a link it may have put there."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            return ""
        end = os.lseek(handle, 0, os.SEEK_END)
        os.lseek(handle, max(0, end - size), os.SEEK_SET)
        return os.read(handle, size).decode(errors="replace")
    finally:
        os.close(handle)


class _Bounded:
    """Counts the bytes of output a notebook produced; what is beyond the budget is dropped
    (except the grader's own lines)."""

    def __init__(self, budget: int) -> None:
        self.left = budget
        self.dropped = 0

    def keep(self, msg: dict[str, Any]) -> bool:
        content = msg.get("content", {})
        size = len(str(content))
        if size <= self.left:
            self.left -= size
            return True
        self.dropped += 1
        text = content.get("text") if msg.get("msg_type") == "stream" else None
        if isinstance(text, str) and "GRADER-" in text:
            # Keep the grader's own lines, which may arrive in one message with the flood.
            lines = [line for line in text.splitlines() if line.startswith("GRADER-")]
            content["text"] = "".join(line[: 2**20] + "\n" for line in lines[:4])
            return True
        return False


def grade_notebook(path: Path, config: dict[str, Any]) -> dict[str, Any]:
    """Run one submission and its checks; return its row, feedback data and cell errors."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    from attention_from_scratch.exercises import _core

    result: dict[str, Any] = {
        "submission": path.name,
        "status": "ok",
        "notes": "",
        "exercises": {},
        "manual": [],
        "errors": [],
        "total": None,
        "possible": None,
        "isolation": config["isolation"],
    }
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as error:  # any unreadable file is a row in the CSV, not a crash
        result["status"] = "unreadable"
        result["notes"] = f"{type(error).__name__}: {error}"[:200]
        return result

    for check_file in config["check_files"]:
        _core.load_check_file(check_file)
    chapters = chapters_of(nb, path.name)
    for chapter in sorted(chapters):
        _core.load_chapter(chapter)
    if config["hidden_dir"]:
        _core.load_hidden(config["hidden_dir"], chapters)
    exercises = [e for e in _core.all_exercises() if e.chapter in chapters]
    auto = {e.label: e for e in exercises if e.auto_graded}
    result["manual"] = [
        {"label": e.label, "points": e.manual_points} for e in exercises if e.manual_points
    ]
    result["possible"] = sum(e.points for e in auto.values())
    result["exercises"] = {
        label: {
            "earned": 0.0,
            "possible": e.points,
            "checks": [],
            "error": "its check did not run",
        }
        for label, e in auto.items()
    }
    if not chapters:
        result["status"] = "no exercises"
        result["notes"] = "no exercise label found and the file name names no chapter"
        result["total"] = 0.0
        return result

    # One marker per cell, each seen by the kernel only when its cell runs.
    setup_nonce = _marker()
    setup = nbformat.v4.new_code_cell(_setup_source(setup_nonce, chapters, config))
    cells = [setup]
    grading: list[tuple[Any, str, list[str]]] = []
    checked: set[str] = set()
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
            match = CHECK_CELL.match(cell.source)
            if match and match.group(1) in auto:
                nonce = _marker()
                cell.source = _check_source([match.group(1)], nonce, config)
                grading.append((cell, nonce, [match.group(1)]))
                checked.add(match.group(1))
        cells.append(cell)
    rest = [label for label in auto if label not in checked]
    if rest:
        nonce = _marker()
        last = nbformat.v4.new_code_cell(_check_source(rest, nonce, config))
        cells.append(last)
        grading.append((last, nonce, rest))
    nb.cells = cells

    deadline = time.monotonic() + config["timeout"]
    bounded = _Bounded(config["output_bytes"])
    workdir = Path(tempfile.mkdtemp(prefix="grade-"))
    try:
        scratch = workdir / "scratch"
        scratch.mkdir()
        shutil.copy2(path, scratch / path.name)
        options: dict[str, Any] = {}
        if config["sandbox"] == "bwrap":
            options["kernel_manager_class"] = sandboxed_kernel_manager(workdir, config)

        class Client(NotebookClient):
            def output(self, outs, msg, display_id, cell_index):  # type: ignore[no-untyped-def]
                return (
                    super().output(outs, msg, display_id, cell_index) if bounded.keep(msg) else None
                )

        client = Client(
            nb,
            kernel_name="python3",
            allow_errors=True,
            timeout_func=lambda cell: max(1, int(deadline - time.monotonic())),
            interrupt_on_timeout=False,
            resources={"metadata": {"path": str(scratch)}},
            **options,
        )
        try:
            client.execute()
        except CellTimeoutError:
            result["status"] = f"timeout after {config['timeout']:g} s"
        except DeadKernelError:
            result["status"] = "kernel died"
        except Exception as error:  # e.g. the kernel could not start
            result["status"] = "not run"
            lines = _tail(workdir / "kernel.log").strip().splitlines()
            result["notes"] = (lines[-1] if lines else f"{type(error).__name__}: {error}")[:200]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    finished = result["status"] == "ok"

    setup_lines = _marker_lines(setup, setup_nonce)
    baseline = setup_lines[0] if len(setup_lines) == 1 and setup_lines[0] else None
    if baseline is None or baseline.get("error"):
        if setup.get("outputs") or finished:
            result["status"] = "checks not loaded"
            result["notes"] = str((baseline or {}).get("error", ""))[:200]
        baseline = baseline or {}
    tampered: list[str] = []
    for cell, nonce, labels in grading:
        lines = _marker_lines(cell, nonce)
        findings: list[str] = []
        if len(lines) > 1:
            findings.append("a line imitating the grader's was printed")
        elif not lines:
            if finished:
                findings.append("the grader's check cell did not report")
            continue
        report = lines[0] or {}
        reported = report.get("findings")
        findings += [str(f)[:120] for f in reported][:10] if isinstance(reported, list) else []
        prints = report.get("fingerprints")
        prints = prints if isinstance(prints, dict) else {}
        for key, value in baseline.get("fingerprints", {}).items():
            if prints.get(key) != value:
                findings.append(f"{key} changed")
        scored = {}
        items = report.get("results")
        for item in items if isinstance(items, list) else [None]:
            label = item.get("label") if isinstance(item, dict) else None
            if label not in labels or label in scored:
                findings.append("a result for another exercise")
                continue
            score, problem = _score(item, auto[label])
            if problem:
                findings.append(problem)
            else:
                scored[label] = score
        if findings:
            for label in labels:
                result["exercises"][label] = {
                    "earned": 0.0,
                    "possible": auto[label].points,
                    "checks": [],
                    "error": "its checks were tampered with: " + "; ".join(findings)[:300],
                }
            tampered += findings
        else:
            result["exercises"].update(scored)
    for index, cell in enumerate(nb.cells[1:], start=1):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error" and all(cell is not g[0] for g in grading):
                evalue = str(output.get("evalue", ""))[:120]
                result["errors"].append(f"cell {index}: {output.get('ename')}: {evalue}")
    notes = []
    if tampered:
        result["status"] = "checks tampered with"
        notes.append("; ".join(dict.fromkeys(tampered)))
    if result["errors"]:
        notes.append(f"{len(result['errors'])} cell(s) raised")
    if bounded.dropped:
        notes.append(f"{bounded.dropped} output(s) over {config['output_bytes']} bytes dropped")
    if notes:
        result["notes"] = "; ".join([n for n in [result["notes"]] if n] + notes)[:400]
    result["total"] = sum(float(e["earned"]) for e in result["exercises"].values())
    return result


# ---------------------------------------------------------------- the sandbox


class SandboxUnavailable(RuntimeError):
    """No sandbox can run here; the message says what to install or do instead."""


ADVICE = (
    "Install bubblewrap (Debian and Ubuntu: `sudo apt-get install bubblewrap`; Fedora: "
    "`sudo dnf install bubblewrap`), or grade in a Linux container (for example "
    '`docker run --rm -it -v "$PWD":/course -w /course python:3.12 bash`, then '
    "`apt-get update && apt-get install -y bubblewrap make` and `make grade ...`; Docker "
    "needs `--security-opt seccomp=unconfined` or `--privileged` for bubblewrap to make its "
    "namespaces), or on a JupyterHub server where bubblewrap is installed. If you trust every "
    "submission, grade without isolation: `make grade SUBMISSIONS=DIR SANDBOX=none` "
    "(each row of grades.csv then says so)."
)


def sandbox_problem() -> str | None:
    """Why no sandbox can run here, or None when bubblewrap works."""
    if not sys.platform.startswith("linux"):
        return f"the sandbox needs Linux (this is {sys.platform})."
    missing = [tool for tool in ("bwrap", "prlimit") if shutil.which(tool) is None]
    if missing:
        names = {"bwrap": "bubblewrap (`bwrap`)", "prlimit": "prlimit (util-linux)"}
        return f"{' and '.join(names[t] for t in missing)} not found on PATH."
    try:
        probe = subprocess.run(
            [shutil.which("bwrap") or "bwrap", "--ro-bind", "/", "/", *PROBE],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bubblewrap could not start: {error}."
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or ["no message"])[-1]
        return (
            f"bubblewrap cannot make a sandbox here ({reason}): user namespaces may be "
            "disabled (sysctl kernel.unprivileged_userns_clone=1, or "
            "user.max_user_namespaces > 0)."
        )
    return None


def _readable_paths(config: dict[str, Any]) -> list[Path]:
    """What a kernel must read: Python, its packages, the course package and the checks."""
    import attention_from_scratch

    paths = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix)]
    paths.append(Path(sys.executable).resolve().parent.parent)
    paths += [Path(p) for p in sys.path if p and Path(p).is_dir()]
    paths.append(Path(attention_from_scratch.__file__).resolve().parent.parent)
    if config["hidden_dir"]:
        paths.append(Path(config["hidden_dir"]))
    paths += [Path(p) for p in config["check_files"]]
    return [p.resolve() for p in paths if p.exists()]


def sandbox_command(workdir: Path, config: dict[str, Any]) -> list[str]:
    """The command that runs a kernel in its sandbox (the kernel's own command follows)."""
    limits = config["limits"]
    argv = [shutil.which("prlimit") or "prlimit"]
    argv += [f"--{name}={value}" for name, value in limits.items()]
    argv += [shutil.which("bwrap") or "bwrap", "--unshare-all", "--die-with-parent"]
    argv += ["--new-session", "--cap-drop", "ALL", "--clearenv"]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for name in ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt"):
        system = Path("/", name)
        if system.is_symlink():
            argv += ["--symlink", os.readlink(system), str(system)]
        elif system.is_dir():
            argv += ["--ro-bind", str(system), str(system)]
    # Secrets a kernel run by root could read in /etc: hidden behind empty files and folders.
    for secret in ("shadow", "gshadow", "shadow-", "gshadow-"):
        if Path("/etc", secret).is_file():
            argv += ["--ro-bind", "/dev/null", f"/etc/{secret}"]
    for secret in ("ssh", "ssl/private"):
        if Path("/etc", secret).is_dir():
            argv += ["--tmpfs", f"/etc/{secret}"]
    bound: list[Path] = [Path("/", n) for n in ("usr", "etc", "opt")]
    for path in sorted(set(_readable_paths(config)), key=lambda p: len(p.parts)):
        if not any(path == b or b in path.parents for b in bound):
            argv += ["--ro-bind", str(path), str(path)]
            bound.append(path)
    scratch = workdir / "scratch"
    argv += ["--bind", str(workdir), str(workdir), "--chdir", str(scratch)]
    environment = {
        "HOME": str(scratch),
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "TMPDIR": "/tmp",
        "MPLCONFIGDIR": str(scratch / ".matplotlib"),
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
    }
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTHONHASHSEED"):
        if name in os.environ:
            environment[name] = os.environ[name]
    for name, value in environment.items():
        argv += ["--setenv", name, value]
    return [*argv, "--"]


def _font_cache(scratch: Path) -> None:
    """Copy matplotlib's font list into the sandbox, so it is not rebuilt for each kernel."""
    home = Path.home()
    for folder in (
        os.environ.get("MPLCONFIGDIR"),
        home / ".cache" / "matplotlib",
        home / ".matplotlib",
    ):
        if folder and Path(folder).is_dir():
            for cache in Path(folder).glob("fontlist-*.json"):
                target = scratch / ".matplotlib"
                target.mkdir(exist_ok=True)
                shutil.copy2(cache, target / cache.name)
            return


def sandboxed_kernel_manager(workdir: Path, config: dict[str, Any]) -> type:
    """A kernel manager whose kernels start inside the sandbox, reached through files in
    ``workdir`` (ipc sockets work across network namespaces; TCP on 127.0.0.1 would not)."""
    from jupyter_client.manager import AsyncKernelManager

    prefix = sandbox_command(workdir, config)
    _font_cache(workdir / "scratch")
    log = workdir / "kernel.log"

    class SandboxedKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs: Any) -> None:
            kwargs.update(
                transport="ipc",
                ip=str(workdir / "kernel"),
                connection_file=str(workdir / "kernel.json"),
            )
            super().__init__(**kwargs)

        async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
            # The kernel's own output goes to a file whose size the limits bound.
            handle = log.open("ab")
            kw.update(stdout=handle, stderr=handle, env={})
            try:
                await super()._async_launch_kernel(prefix + kernel_cmd, **kw)
            finally:
                handle.close()

    return SandboxedKernelManager


# ---------------------------------------------------------------- the folder (parent process)


def _run_child(path: Path, config: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="grade-result-") as scratch:
        out = Path(scratch) / "result.json"
        # The configuration goes through stdin, not the command line or the environment.
        payload = json.dumps({**config, "path": str(path), "out": str(out)})
        status, notes = f"timeout after {config['timeout']:g} s", "the grader stopped it"
        try:
            child = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "--one"],
                input=payload,
                text=True,
                capture_output=True,
                timeout=config["timeout"] + 120,
                check=False,
            )
            stderr = child.stderr.strip().splitlines()
            status, notes = "grader error", (stderr[-1] if stderr else "")[:200]
        except subprocess.TimeoutExpired:
            pass
        if out.is_file():
            return json.loads(out.read_text())
    return {
        "submission": path.name,
        "status": status,
        "notes": notes,
        "exercises": {},
        "manual": [],
        "errors": [],
        "total": None,
        "possible": None,
        "isolation": config["isolation"],
    }


def _own_processes() -> int:
    uid = os.getuid()
    return sum(1 for p in Path("/proc").glob("[0-9]*") if _owner(p) == uid)


def _owner(path: Path) -> int | None:
    try:
        return path.stat().st_uid
    except OSError:
        return None


def grade_folder(
    folder: str | Path,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    workers: int = 2,
    hidden_dir: str | Path | None = DEFAULT_HIDDEN,
    check_files: Iterable[str | Path] = (),
    sandbox: str = "bwrap",
    memory_gib: float = DEFAULT_MEMORY_GIB,
) -> list[dict[str, Any]]:
    """Grade every file of ``folder``; write grades.csv and feedback/; return the rows.

    Raises:
        SandboxUnavailable: ``sandbox="bwrap"`` where bubblewrap cannot run; the message
            says what to install, or how to grade elsewhere or without isolation.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"SUBMISSIONS: expected a folder, got {str(folder)!r}")
    if sandbox not in SANDBOXES:
        raise ValueError(f"sandbox: expected one of {SANDBOXES}, got {sandbox!r}")
    if sandbox == "bwrap" and (problem := sandbox_problem()):
        raise SandboxUnavailable(f"Cannot grade in a sandbox: {problem}\n{ADVICE}")
    cpus = os.cpu_count() or 1
    config = {
        "timeout": float(timeout),
        "hidden_dir": str(Path(hidden_dir).resolve()) if hidden_dir else None,
        "check_files": [str(Path(p).resolve()) for p in check_files],
        "sandbox": sandbox,
        "isolation": "bwrap" if sandbox == "bwrap" else "none: not isolated",
        "output_bytes": OUTPUT_BYTES,
        # Per kernel; the process limit counts every process of this user (root is exempt).
        "limits": {
            "as": int(memory_gib * 2**30),
            "cpu": int(timeout * cpus) + 60,
            "nproc": (_own_processes() + 1024) if sandbox == "bwrap" else 0,
            "fsize": 2**30,
            "nofile": 4096,
            "core": 0,
        },
    }
    files = sorted(
        p for p in folder.iterdir() if p.name not in OUTPUTS and not p.name.startswith(".")
    )
    notebooks = [p for p in files if p.suffix == ".ipynb" and p.is_file()]
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        graded = dict(
            zip(notebooks, pool.map(lambda p: _run_child(p, config), notebooks), strict=False)
        )
    rows = []
    for path in files:
        if path in graded:
            rows.append(graded[path])
        else:
            kind = "a folder" if path.is_dir() else f"a {path.suffix or 'file'} file"
            rows.append(
                {
                    "submission": path.name,
                    "status": "not a notebook",
                    "notes": f"{kind}, not .ipynb",
                    "exercises": {},
                    "manual": [],
                    "errors": [],
                    "total": None,
                    "possible": None,
                    "isolation": config["isolation"],
                }
            )
    write_csv(folder / "grades.csv", rows)
    feedback = folder / "feedback"
    feedback.mkdir(exist_ok=True)
    for row in rows:
        if row["submission"].endswith(".ipynb"):
            name = Path(row["submission"]).stem + ".md"
            (feedback / name).write_text(feedback_text(row), encoding="utf-8")
    return rows


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """One row per file; one column per auto-graded exercise seen in any submission."""
    labels: list[str] = []
    for row in rows:
        labels += [label for label in row["exercises"] if label not in labels]
    order = {label: i for i, label in enumerate(labels)}
    labels.sort(key=lambda label: (int(label[2:].split("-", 1)[0]), order[label]))
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            ["submission", *labels, "total", "possible", "status", "notes", "isolation"]
        )
        for row in rows:
            points = [
                _points(row["exercises"][label]["earned"]) if label in row["exercises"] else ""
                for label in labels
            ]
            writer.writerow(
                [
                    row["submission"],
                    *points,
                    _points(row["total"]),
                    _points(row["possible"]),
                    row["status"],
                    row["notes"],
                    row.get("isolation", ""),
                ]
            )


def feedback_text(row: dict[str, Any]) -> str:
    """The Markdown feedback for one submission."""
    lines = [f"# Feedback: {row['submission']}", ""]
    if row["possible"] is not None:
        lines.append(f"Auto-graded points: {_points(row['total'])} of {_points(row['possible'])}.")
    if row["status"] != "ok":
        lines.append(f"Status: {row['status']}. {row['notes']}".strip())
    if row.get("isolation", "bwrap") != "bwrap":
        lines.append("Graded without isolation: the instructor chose to trust every submission.")
    lines.append("")
    for label, exercise in row["exercises"].items():
        lines.append(
            f"## {label}: {_points(exercise['earned'])} of {_points(exercise['possible'])}"
        )
        lines.append("")
        if exercise.get("error"):
            lines.append(f"- Not checked: {exercise['error']}.")
        for check in exercise.get("checks", []):
            if check["passed"]:
                lines.append(f"- pass: {check['title']}")
            else:
                lines.append(f"- FAIL: {check['title']}")
                if check["reason"]:
                    lines.append(f"  - {check['reason']}")
                lines.append(f"  - Hint: {check['hint']}")
        lines.append("")
    if row["manual"]:
        lines.append("## Graded by your instructor")
        lines.append("")
        for item in row["manual"]:
            lines.append(f"- {item['label']}: {_points(item['points'])} points")
        lines.append("")
    if row["errors"]:
        lines.append("## Cells that raised an error")
        lines.append("")
        lines += [f"- {error}" for error in row["errors"]]
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: grade a folder, or (internally) one notebook."""
    if argv is None:
        argv = sys.argv[1:]
    if list(argv) == ["--one"]:
        config = json.loads(sys.stdin.read())
        result = grade_notebook(Path(config["path"]), config)
        Path(config["out"]).write_text(json.dumps(result))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("submissions", type=Path, help="folder of submitted .ipynb files")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds each")
    parser.add_argument("--workers", type=int, default=2, help="notebooks run in parallel")
    parser.add_argument("--hidden", type=Path, default=DEFAULT_HIDDEN, help="hidden checks")
    parser.add_argument(
        "--sandbox",
        choices=SANDBOXES,
        default="bwrap",
        help="bwrap: each kernel in its own sandbox (Linux); none: no isolation",
    )
    parser.add_argument(
        "--memory", type=float, default=DEFAULT_MEMORY_GIB, help="GiB of memory per kernel"
    )
    parser.add_argument(
        "--roster",
        type=Path,
        default=None,
        help="the LMS's class list with a `submission` column: also write gradebook.csv",
    )
    parser.add_argument("--checks", type=Path, action="append", default=[], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    # A roster that cannot be read is refused before hours of grading, not after.
    roster = gradebook.Roster.read(args.roster) if args.roster is not None else None
    try:
        rows = grade_folder(
            args.submissions,
            timeout=args.timeout,
            workers=args.workers,
            hidden_dir=args.hidden,
            check_files=args.checks,
            sandbox=args.sandbox,
            memory_gib=args.memory,
        )
    except SandboxUnavailable as error:
        print(error, file=sys.stderr)
        return 2
    for row in rows:
        print(
            f"{row['submission']}: {_points(row['total']) or '-'} / "
            f"{_points(row['possible']) or '-'} ({row['status']})"
        )
    print(f"Wrote {args.submissions / 'grades.csv'} and {args.submissions / 'feedback'}/")
    if roster is not None:
        book = args.submissions / "gradebook.csv"
        for warning in gradebook.write_gradebook(book, roster, rows):
            print(f"gradebook: {warning}")
        print(f"Wrote {book}, for the LMS's grade import")
    return 0


if __name__ == "__main__":
    sys.exit(main())
