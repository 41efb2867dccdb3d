"""The process that compiles and launches a submitted Triton kernel, from its source alone.

The grader never calls a kernel exercise's answer in the student's notebook kernel: there a
torch function or a patched triton could stand in for the kernel. It extracts the kernel's
source from the notebook as data (``kernels.py``, with ``ast``), writes it with a plan into a
fresh folder, and runs this file, sent as text, in a fresh process in the sandbox, twice:

- ``compile``: without ``TRITON_INTERPRET``, the kernel is compiled for an NVIDIA GPU
  (``triton.compile`` with ``GPUTarget("cuda", 90, 32)``; the compiler and ptxas ship in
  Triton's wheel, so no GPU is needed): what only Triton's interpreter accepts (any Python)
  fails here, before anything of the kernel runs;
- ``run``: with ``TRITON_INTERPRET=1`` set before ``import triton``, the kernel is launched
  in the interpreter with the grader's grid, arguments and block sizes, on inputs the grader
  drew. Each input and output lies inside a larger buffer (NaN, or a sentinel around an
  output, whose own elements start as NaN), so that a load or store past a tensor's end
  shows; the reads of traced inputs (loads and atomics) are recorded, per program, lanes
  switched off by a mask included, so that a loop over key blocks it should have skipped
  shows too. What comes back
  is written as ``.npy`` files and one JSON file, read by ``channel.read_results``.

Only the extracted ``@triton.jit`` functions are executed, in a namespace that holds
``triton``, ``tl`` and ``math``. This file imports nothing of the grader.
"""


def _failure(error):
    """What the feedback shows of an exception: its type, and for a compilation error where
    it was (Triton's messages start with "at 12:8:" and the source) and what was wrong."""
    lines = [line for line in str(error).strip().splitlines() if line.strip()]
    where = lines[0] if lines and lines[0].startswith("at ") else ""
    last = lines[-1].strip() if lines else ""
    message = f"{where} {last}".strip() if where and last != where else (last or where)
    return {"type": type(error).__name__, "message": message[:400]}


def _harness_main(mode, folder):  # runs in the sandbox: no annotation it cannot evaluate
    import json
    import math
    import os
    import pathlib

    if mode == "run":
        os.environ["TRITON_INTERPRET"] = "1"  # read by triton.jit: before the import
    else:
        os.environ.pop("TRITON_INTERPRET", None)
    root = pathlib.Path(folder)
    plan = json.loads((root / "plan.json").read_text(encoding="utf-8"))
    out = root / ("out" if mode == "run" else "compiled")
    out.mkdir()

    import triton
    import triton.language as tl

    # A module's namespace (Triton names a kernel a kernel calls by its module).
    namespace = {"__name__": "kernels", "triton": triton, "tl": tl, "math": math}
    source = root / "kernels.py"
    # Compiled from the file, so that triton.jit can read each function's source back.
    exec(compile(source.read_text(encoding="utf-8"), str(source), "exec"), namespace)
    kernel = namespace[plan["kernel"]]

    if mode == "compile":
        from triton.backends.compiler import GPUTarget

        done = {"ok": True}
        try:
            for request in plan["compile"]:
                constants = {(int(index),): value for index, value in request["constexprs"]}
                ast_source = triton.compiler.ASTSource(kernel, request["signature"], constants)
                triton.compile(ast_source, target=GPUTarget("cuda", 90, 32))
        except Exception as error:  # anything the compiler refuses fails the exercise
            done = {"ok": False, **_failure(error)}
        (out / "compiled.json").write_text(json.dumps(done), encoding="utf-8")
        return

    import numpy
    from triton.runtime import interpreter

    traced = []  # (first byte, bytes, bytes per element, touched (gx, gy, gz, elements))
    builder = interpreter.InterpreterBuilder
    # Every way the interpreter reads memory: loads (through block pointers and tensor
    # descriptors too) and atomics, each given its pointers as its first or second argument.
    reads = {"create_masked_load": 0, "create_atomic_rmw": 1, "create_atomic_cas": 0}
    originals = {name: getattr(builder, name) for name in reads}

    def record(self, ptrs):
        addresses = numpy.asarray(ptrs.data, dtype=numpy.uint64).reshape(-1)
        x, y, z = self.grid_idx
        for start, size, itemsize, touched in traced:
            inside = (addresses >= start) & (addresses < start + size)
            if inside.any():
                index = (addresses[inside] - numpy.uint64(start)) // numpy.uint64(itemsize)
                touched[x, y, z, index.astype(numpy.int64)] = 1

    def recorded(name, position):
        def read(self, *args, **kwargs):
            if traced:
                record(self, args[position])
            return originals[name](self, *args, **kwargs)

        return read

    for name, position in reads.items():
        setattr(builder, name, recorded(name, position))
    try:
        results = [_launch(root, kernel, launch, out, traced) for launch in plan["launches"]]
    finally:  # as they were (the tests run this in their own process)
        for name, original in originals.items():
            setattr(builder, name, original)
    (out / "results.json").write_text(json.dumps({"calls": results}), encoding="utf-8")


def _launch(root, kernel, launch, out, traced):
    """One launch, in the interpreter: its buffers made, the kernel run, what it left saved."""
    import math

    import numpy
    import torch

    grid = tuple(launch["grid"])
    args, outputs, tracers = [], [], []
    traced.clear()
    try:
        for spec in launch["args"]:
            if spec["kind"] == "value":
                args.append(spec["value"])
                continue
            pad, shape = spec["pad"], spec["shape"]
            size = math.prod(shape)
            if spec["kind"] == "input":
                inner = numpy.load(root / spec["file"], allow_pickle=False).reshape(-1)
                buffer = numpy.full(size + 2 * pad, spec["fill"], dtype=inner.dtype)
                buffer[pad : pad + size] = inner
            else:  # an output: NaN inside, the sentinel around it
                buffer = numpy.full(size + 2 * pad, spec["fill"], dtype=numpy.float32)
                buffer[pad : pad + size] = numpy.nan
            flat = torch.from_numpy(buffer)
            args.append(flat[pad : pad + size].view(shape))
            if spec["kind"] == "output":
                outputs.append(flat)
            elif spec.get("traced"):
                touched = numpy.zeros((*grid, flat.numel()), dtype=numpy.uint8)
                size = flat.numel() * flat.element_size()
                traced.append((flat.data_ptr(), size, flat.element_size(), touched))
                tracers.append(touched)
        kernel[grid](*args, **launch["constexprs"])
    except Exception as error:  # the student's kernel may raise anything
        return {"steps": [{"raised": _failure(error)}]}
    finally:
        traced.clear()
    items = []
    for array in [flat.numpy() for flat in outputs] + tracers:
        name = f"r{len(list(out.iterdir())) + 1}.npy"
        numpy.save(out / name, array, allow_pickle=False)
        items.append({"kind": "tensor", "file": name, "dtype": f"torch.{array.dtype}"})
    return {"steps": [{"value": {"kind": "list", "items": items}}]}


if __name__ == "__main__":
    import sys

    _harness_main(sys.argv[1], sys.argv[2])
