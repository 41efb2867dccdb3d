"""The narrow channel between the grader and the student's kernel: data only, both ways.

The grader writes a plan (``plan.json``: which names to call with which arguments) and the
arrays it sends (``.npy``, no pickle) into a fresh folder the kernel can read; the kernel runs
:data:`RUNNER` on it and writes back ``out/results.json`` and ``.npy`` files. The grader reads
them here with ``numpy.load(..., allow_pickle=False)``, never following a link the kernel may
have put there, with limits on sizes and depth: nothing the student made is imported,
unpickled or run in the grader's process.
"""

from __future__ import annotations

import inspect
import io
import json
import os
import re
import secrets
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import kernel_side
from .spec import (
    Call,
    Launch,
    Module,
    ModuleState,
    Other,
    Raised,
    Result,
    Returned,
    Seeded,
    Step,
    StepResult,
    Tensor,
)

#: The function the kernel runs, as source: the sandbox cannot import the grader.
RUNNER = inspect.getsource(kernel_side._grader_run)
MAX_FILE_BYTES = 256 * 2**20
MAX_JSON_BYTES = 8 * 2**20
MAX_LEAVES = 4096
DTYPES = {"float32", "float64", "float16", "bfloat16", "int64", "int32", "bool", "uint8"}


def call_cell(folder: Path) -> str:
    """The cell the grader runs in the kernel to make one exercise's calls."""
    return f"{RUNNER}\n_grader_run({str(folder)!r}, globals())\ndel _grader_run\n"


def new_folder(parent: Path) -> Path:
    """A fresh folder, named at random, for one exercise's calls."""
    folder = parent / f"grader-{secrets.token_hex(8)}"
    folder.mkdir(mode=0o755)
    return folder


def write_plan(folder: Path, calls: Sequence[Call]) -> None:
    """Write the calls and their arrays into ``folder``."""
    files = [0]

    def save(array: np.ndarray) -> str:
        files[0] += 1
        name = f"a{files[0]}.npy"
        np.save(folder / name, np.ascontiguousarray(array), allow_pickle=False)
        return name

    def encode(value: Any) -> dict[str, Any]:
        if isinstance(value, Seeded):
            return {"kind": "generator", "seed": int(value.seed)}
        if isinstance(value, Result):
            return {"kind": "result", "index": int(value.index)}
        if isinstance(value, Module):
            return {
                "kind": "module",
                "name": value.name,
                "kwargs": {key: encode(item) for key, item in value.kwargs.items()},
                "state": {key: save(array_of(item)) for key, item in value.state.items()},
                "training": bool(value.training),
                "detached": bool(value.detached),
            }
        if isinstance(value, tuple | list):
            kind = "tuple" if isinstance(value, tuple) else "list"
            return {"kind": kind, "items": [encode(item) for item in value]}
        if isinstance(value, bool | int | float | str) or value is None:
            return {"kind": "value", "value": value}
        array = array_of(value)
        dtype = torch_dtype_name(value)
        spec: dict[str, Any] = {"kind": "array", "file": save(array)}
        if dtype is not None:
            spec["dtype"] = dtype
        return spec

    def step(item: Step) -> dict[str, Any]:
        target = item.target.index if isinstance(item.target, Result) else item.target
        return {
            "target": target,
            "method": item.method,
            "args": [encode(arg) for arg in item.args],
            "kwargs": {key: encode(arg) for key, arg in item.kwargs.items()},
            "send_back": item.send_back,
            "arguments_after": item.arguments_after,
            "called": item.called,
        }

    plan = {"calls": [{"steps": [step(s) for s in c.steps]} for c in calls]}
    (folder / "plan.json").write_text(json.dumps(plan), encoding="utf-8")


def array_of(value: Any) -> np.ndarray:
    """A numpy array of a numpy or torch array (a bfloat16 tensor as float32, cast back in the
    kernel)."""
    if isinstance(value, np.ndarray):
        return value
    import torch

    if isinstance(value, torch.Tensor):
        tensor = value.detach().cpu()
        if tensor.dtype == torch.bfloat16:
            tensor = tensor.float()
        return tensor.numpy()
    raise TypeError(f"cannot send {type(value).__name__} to the kernel")


def torch_dtype_name(value: Any) -> str | None:
    """The dtype to rebuild in the kernel where numpy cannot carry it (bfloat16)."""
    import torch

    if isinstance(value, torch.Tensor) and value.dtype == torch.bfloat16:
        return "bfloat16"
    return None


def read_file(path: Path, limit: int) -> bytes | None:
    """A regular file's bytes, never through a link, or None when it is not one or too big."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        chunks, left = [], limit + 1
        while left > 0 and (chunk := os.read(handle, min(left, 2**20))):
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        return data if len(data) <= limit else None
    finally:
        os.close(handle)


def tail(path: Path, size: int = 4096) -> str:
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


# Two or more segments after a slash or backslash (a drive letter first on Windows).
PATH = re.compile(r"(?:\b[A-Za-z]:|~)?(?:[\\/][\w.~-]+){2,}[\\/]?")


def echoed(message: object) -> str:
    """What the feedback shows of a message the student's code raised: its first line, with
    the file paths in it left out (the kernel's frames and folders are none of the feedback's
    business), at most 200 characters."""
    lines = str(message or "").strip().splitlines()
    return PATH.sub("<path>", lines[0] if lines else "")[:200]


class Unreadable(ValueError):
    """What the kernel wrote is not a result the grader can read."""


def read_results(folder: Path, calls: Sequence[Call | Launch]) -> list[list[StepResult]]:
    """What the kernel sent back for each call, step by step (fewer steps where one raised);
    a kernel :class:`~grader.spec.Launch` is one step (its harness writes the same files).

    Raises:
        Unreadable: no results, or results that are not what the runner writes.
    """
    out = folder / "out"
    try:
        if not stat.S_ISDIR(os.lstat(out).st_mode):
            raise Unreadable("the kernel's output folder is not a folder")
    except FileNotFoundError:
        raise Unreadable("the kernel wrote no results") from None
    raw = read_file(out / "results.json", MAX_JSON_BYTES)
    if raw is None:
        raise Unreadable("the kernel wrote no results")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise Unreadable(f"results that are not JSON ({error})") from None
    if not isinstance(data, dict) or not isinstance(data.get("calls"), list):
        raise Unreadable("results without calls")
    if len(data["calls"]) != len(calls):
        raise Unreadable(f"results for {len(data['calls'])} calls, expected {len(calls)}")
    leaves = [0]

    def leaf(spec: Any, depth: int = 0) -> Returned:
        leaves[0] += 1
        if leaves[0] > MAX_LEAVES or depth > 6 or not isinstance(spec, dict):
            raise Unreadable("results too large or malformed")
        kind = spec.get("kind")
        if kind == "tensor":
            name, dtype = spec.get("file"), spec.get("dtype")
            if not isinstance(name, str) or "/" in name or name.startswith("."):
                raise Unreadable("a tensor file with a bad name")
            if not isinstance(dtype, str) or dtype.removeprefix("torch.") not in DTYPES:
                return Other(f"tensor of {str(dtype)[:40]}")
            data = read_file(out / name, MAX_FILE_BYTES)
            if data is None:
                raise Unreadable(f"the tensor file {name} is missing or too large")
            try:
                array = np.load(io.BytesIO(data), allow_pickle=False)
            except (ValueError, OSError) as error:
                raise Unreadable(f"the tensor file {name} is not an array ({error})") from None
            if array.dtype.kind not in "biuf":
                raise Unreadable(f"the tensor file {name} holds {array.dtype}")
            return Tensor(array, dtype)
        if kind == "module":
            state = spec.get("state")
            if not isinstance(state, dict) or not isinstance(spec.get("name"), str):
                raise Unreadable("a module without its state")
            tensors = {str(key): leaf(item, depth + 1) for key, item in state.items()}
            if not all(isinstance(item, Tensor) for item in tensors.values()):
                raise Unreadable("a module whose state is not tensors")
            return ModuleState(spec["name"][:80], bool(spec.get("training")), tensors)
        if kind in ("bool", "int", "float", "str"):
            value = spec.get("value")
            wanted = {"bool": bool, "int": int, "float": float, "str": str}[kind]
            if not isinstance(value, wanted) or (kind == "int" and isinstance(value, bool)):
                raise Unreadable(f"a {kind} that is not one")
            return value
        if kind == "none":
            return None
        if kind == "list":
            items = spec.get("items")
            if not isinstance(items, list):
                raise Unreadable("a list without items")
            return [leaf(item, depth + 1) for item in items]
        if kind == "other":
            return Other(str(spec.get("type", "?"))[:80])
        raise Unreadable(f"a value of unknown kind {str(kind)[:40]}")

    results = []
    for call, got in zip(calls, data["calls"], strict=True):
        count = len(call.steps) if isinstance(call, Call) else 1
        steps = got.get("steps") if isinstance(got, dict) else None
        if not isinstance(steps, list) or len(steps) > count:
            raise Unreadable("a call with more steps than it has")
        done = []
        for step in steps:
            if not isinstance(step, dict):
                raise Unreadable("a step that is not a record")
            if "raised" in step:
                raised = step["raised"] if isinstance(step["raised"], dict) else {}
                done.append(
                    StepResult(
                        Raised(str(raised.get("type", "?"))[:80], echoed(raised.get("message")))
                    )
                )
                continue
            arguments = step.get("arguments", [])
            if not isinstance(arguments, list):
                raise Unreadable("arguments that are not a list")
            done.append(StepResult(leaf(step.get("value")), tuple(leaf(arg) for arg in arguments)))
        # The steps after one that raised did not run: their judges see why.
        skipped = StepResult(Raised("NotRun", "an earlier step of this call raised"))
        results.append(done + [skipped] * (count - len(done)))
    return results
