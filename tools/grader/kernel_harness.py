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
  shows; every input's buffer and every output's comes back whole after the launch, so that
  the grader sees a store around a tensor or into an input. Every memory access of the
  interpreter (loads, through block pointers and tensor descriptors too, stores and atomics)
  is checked, lane by lane, masked lanes excepted: each program's first read outside every
  tensor it was given, and its first store outside every output, come back with how many
  lanes strayed. The reads of traced inputs are recorded per program and element: addressed
  by any lane (a masked one too, so that a loop over key blocks it should have skipped shows)
  and read by a live lane. What comes back is written as ``.npy`` files and one JSON file,
  read by ``channel.read_results``.

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

    current = []  # the buffers of the launch under way (see _launch)
    builder = interpreter.InterpreterBuilder
    # Every way the interpreter touches memory, with the positions of its pointers and of its
    # mask among its arguments (None: every lane is live): loads (through block pointers and
    # tensor descriptors too), stores, and atomics, which read and write.
    accesses = {
        "create_masked_load": (0, 1, True, False),
        "create_masked_store": (0, 2, False, True),
        "create_atomic_rmw": (1, 3, True, True),
        "create_atomic_cas": (0, None, True, True),
    }
    originals = {name: getattr(builder, name) for name in accesses}

    def record(self, args, pointers, masked, reads, writes):
        addresses = numpy.asarray(args[pointers].data, dtype=numpy.uint64)
        live = numpy.ones(addresses.shape, dtype=bool)
        if masked is not None and args[masked] is not None:
            live = numpy.broadcast_to(numpy.asarray(args[masked].data, dtype=bool), live.shape)
        addresses, live = addresses.reshape(-1), live.reshape(-1)
        x, y, z = self.grid_idx
        strays = current[0]
        for kind, wanted in ((0, reads), (1, writes)):
            if not wanted:
                continue
            lanes = addresses[live]
            stray = numpy.ones(lanes.shape, dtype=bool)
            for buffer in current[1:]:
                if kind == 0 or buffer["output"]:
                    stray &= (lanes < buffer["first"]) | (lanes >= buffer["end"])
            if stray.any():
                if strays[x, y, z, kind, 0] == 0:
                    strays[x, y, z, kind, 1:] = _where(int(lanes[stray][0]), current[1:])
                strays[x, y, z, kind, 0] += int(stray.sum())
        for buffer in current[1:] if reads else ():
            touched = buffer["touched"]
            if touched is None:
                continue
            inside = (addresses >= buffer["start"]) & (addresses < buffer["stop"])
            index = (addresses - numpy.uint64(buffer["start"])) // numpy.uint64(buffer["item"])
            touched[x, y, z, index[inside].astype(numpy.int64)] |= 1
            touched[x, y, z, index[inside & live].astype(numpy.int64)] |= 2

    def recorded(name, pointers, masked, reads, writes):
        def access(self, *args, **kwargs):
            if current:
                record(self, args, pointers, masked, reads, writes)
            return originals[name](self, *args, **kwargs)

        return access

    for name, spec in accesses.items():
        setattr(builder, name, recorded(name, *spec))
    try:
        results = [_launch(root, kernel, launch, out, current) for launch in plan["launches"]]
    finally:  # as they were (the tests run this in their own process)
        for name, original in originals.items():
            setattr(builder, name, original)
    (out / "results.json").write_text(json.dumps({"calls": results}), encoding="utf-8")


def _where(address, buffers):
    """Where a stray address lies: the argument whose buffer holds it and its offset from that
    tensor's first element, in elements (negative before it), or (-1, 0) far from them all."""
    for buffer in buffers:
        if buffer["start"] <= address < buffer["stop"]:
            return buffer["arg"], (address - buffer["first"]) // buffer["item"]
    return -1, 0


def _launch(root, kernel, launch, out, current):
    """One launch, in the interpreter: its buffers made, the kernel run, what it left saved:
    each output's buffer, each input's, each traced input's record, then the strays."""
    import math

    import numpy
    import torch

    grid = tuple(launch["grid"])
    args, outputs, inputs, tracers, buffers = [], [], [], [], []
    strays = numpy.zeros((*grid, 2, 3), dtype=numpy.int64)  # (read, write) (lanes, arg, offset)
    current.clear()
    try:
        for index, spec in enumerate(launch["args"]):
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
            (outputs if spec["kind"] == "output" else inputs).append(flat)
            item, start = flat.element_size(), flat.data_ptr()
            touched = None
            if spec.get("traced"):
                touched = numpy.zeros((*grid, flat.numel()), dtype=numpy.uint8)
                tracers.append(touched)
            buffers.append(
                {
                    "arg": index,
                    "output": spec["kind"] == "output",
                    "start": start,
                    "stop": start + flat.numel() * item,
                    "first": start + pad * item,
                    "end": start + (pad + size) * item,
                    "item": item,
                    "touched": touched,
                }
            )
        current.extend([strays, *buffers])
        kernel[grid](*args, **launch["constexprs"])
    except Exception as error:  # the student's kernel may raise anything
        return {"steps": [{"raised": _failure(error)}]}
    finally:
        current.clear()
    items = []
    for array in [flat.numpy() for flat in outputs + inputs] + tracers + [strays]:
        name = f"r{len(list(out.iterdir())) + 1}.npy"
        numpy.save(out / name, array, allow_pickle=False)
        items.append({"kind": "tensor", "file": name, "dtype": f"torch.{array.dtype}"})
    return {"steps": [{"value": {"kind": "list", "items": items}}]}


if __name__ == "__main__":
    import sys

    _harness_main(sys.argv[1], sys.argv[2])
