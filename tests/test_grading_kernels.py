"""Kernel exercises (chapter 8): a submitted Triton kernel is read from the notebook's source,
never run in the student's kernel; what is not plain kernel code is refused before anything
of it runs; the harness compiles the kernel for a GPU before launching it, and what comes
back is read as data.

The extraction and the judging helpers are tested here without a process; the compile step,
the sandbox and `tools/grade.py` in the slow tests at the end.
"""

from __future__ import annotations

import csv
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import numpy as np
import pytest
from grading_helpers import full_marks, grade_kernel
from test_exercises_ch8 import CORRECT, LABELS

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import grader  # noqa: E402
from grader import channel, kernels  # noqa: E402
from grader.run import judged  # noqa: E402
from grader.spec import (  # noqa: E402
    SENTINEL,
    Check,
    Input,
    KernelExercise,
    Launch,
    Launched,
    Output,
    Raised,
    StepResult,
    Tensor,
    launched,
)

SIGNATURE = "(x_ptr, out_ptr, n, BLOCK: tl.constexpr)"
BODY = """
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
"""


def kernel(body: str = BODY, decorator: str = "@triton.jit", signature: str = SIGNATURE) -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")
    return f"{decorator}\ndef copy_kernel{signature}:\n{body}\n"


# ----------------------------------------------------------------------------- extraction


def test_every_top_level_kernel_is_extracted_and_the_last_definition_wins() -> None:
    cells = [
        "import triton\nimport triton.language as tl\n%time x = 1\n!echo not python",
        kernel() + "\n\ndef launch(x):\n    return x\n",
        "def copy_kernel(x_ptr, out_ptr, n, BLOCK):\n    return None\n",  # replaced below
        kernel(body="    pass\n"),
        "@triton.jit\ndef helper(x):\n    return x * 2\n",
        "helper = 3\n",  # the notebook's `helper` is no kernel any more
    ]
    found = kernels.extract(cells)
    assert list(found.sources) == ["copy_kernel"]
    assert "pass" in found.sources["copy_kernel"]
    assert found.sources["copy_kernel"].startswith("@triton.jit\ndef copy_kernel(x_ptr")
    assert found.not_kernels["launch"] == "a plain function (without @triton.jit)"
    assert found.not_kernels["helper"] == "a variable"


def test_a_cell_that_does_not_parse_hides_only_its_own_kernels() -> None:
    found = kernels.extract([kernel() + "\nthis is not python(", kernel(body="    pass\n")])
    assert "pass" in found.sources["copy_kernel"]


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        (kernel(decorator='@triton.jit(do_not_specialize=["n"])'), "other than exactly"),
        (kernel(decorator="@triton.autotune(configs=[], key=[])\n@triton.jit"), "other than"),
        (kernel(decorator="@jit"), "other than exactly @triton.jit"),
        (kernel(signature="(x_ptr, out_ptr, n, BLOCK: tl.constexpr = 16)"), "default value"),
        (kernel(signature="(x_ptr, out_ptr, n, BLOCK: print('x'))"), "annotated with"),
        (kernel(signature="(x_ptr, *rest)"), "not plain names"),
        (kernel(body="    import torch\n" + BODY), "imports a module"),
        (kernel(body="    from math import sqrt\n" + BODY), "imports a module"),
        (kernel(body="    f = lambda x: x\n" + BODY), "lambda"),
        (kernel(body="    def inner():\n        pass\n" + BODY), "defines inner inside itself"),
        (kernel(body="    class Inner:\n        pass\n" + BODY), "defines Inner inside itself"),
        (kernel(body="    global n\n" + BODY), "global or nonlocal"),
        (kernel(body="    c = x_ptr.__class__\n" + BODY), "the attribute .__class__"),
        (kernel(body="    c = __builtins__\n" + BODY), "the name __builtins__"),
        (kernel(body="    c = x_ptr.handle\n" + BODY), "the attribute .handle"),
        (kernel(body="    c = getattr(tl, 'core')\n" + BODY), "it uses getattr"),
        (kernel(body="    o = open('answers')\n" + BODY), "it uses open"),
        (kernel(body="    torch.cuda.synchronize()\n" + BODY), "it uses torch"),
        (kernel(body="    m = tl\n" + BODY), "the module tl as a value"),
        (kernel(body="    tl = 1\n" + BODY), "assigns to tl"),
        (kernel(body="    c = tl.core.builtins\n" + BODY), "reaches into tl.core"),
        (kernel(body="    c = tl.math.core\n" + BODY), "uses tl.math.core, which is not"),
        (kernel(body="    c = triton.language.math.wraps\n" + BODY), "uses tl.math.wraps, which"),
        (kernel(body="    m = tl.math\n" + BODY), "the module tl.math as a value"),
        (kernel(body="    m = tl.math(1)\n" + BODY), "the module tl.math as a value"),
        (kernel(body="    c = triton.runtime.driver\n" + BODY), "triton.runtime"),
        (kernel(body="    x_ptr.dtype = 1\n" + BODY), "assigns to an attribute"),
        (kernel(body="    yield 1\n"), "generator"),
    ],
)
def test_what_is_not_plain_kernel_code_is_refused(source: str, reason: str) -> None:
    found = kernels.extract(["import triton\nimport triton.language as tl\n" + source])
    assert "copy_kernel" not in found.sources
    assert reason in found.refused["copy_kernel"], found.refused["copy_kernel"]


def test_a_kernel_may_not_hide_a_name_kernels_need() -> None:
    for name in ("tl", "math", "range", "__import__"):
        found = kernels.extract([kernel().replace("def copy_kernel", f"def {name}")])
        assert found.refused[name] == f"its name hides {name}, which kernels need"


def test_plain_kernel_code_is_accepted() -> None:
    body = """
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=float("-inf")).to(tl.float32)
    y = tl.exp2(x - tl.max(x, axis=0)) * math.log2(math.e)
    y = tl.math.exp2(y) + triton.language.math.sqrt(y)
    for i in tl.static_range(2):
        y = helper(y) + min(i, 1)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=offs < n)
"""
    source = "@triton.jit\ndef helper(y):\n    return y\n\n\n" + kernel(body=body)
    found = kernels.extract([source])
    assert found.refused == {} and set(found.sources) == {"helper", "copy_kernel"}
    source = kernel(signature="(x_ptr, out_ptr, n, BLOCK: triton.language.constexpr)")
    assert set(kernels.extract([source]).sources) == {"copy_kernel"}


def test_a_kernel_may_name_the_functions_of_tl_math_and_only_those() -> None:
    """tl.math's functions are tl's own (tl.math.exp2 is tl.exp2); its other attributes are
    Python."""
    import triton.language as tl
    from triton.language import core

    functions = {name for name in dir(tl.math) if core.is_builtin(getattr(tl.math, name))}
    assert functions == kernels.TL_MATH
    assert all(getattr(tl.math, name) is getattr(tl, name) for name in functions)


HELPER = "@triton.jit\ndef helper(y):\n    return y * 2\n"


@pytest.mark.parametrize(
    ("cells", "reason"),
    [
        (
            [HELPER.replace("(y)", "(y=1)"), kernel(body="    y = helper(n)\n" + BODY)],
            "copy_kernel calls helper, which was not graded: a parameter has a default value",
        ),
        (
            [
                HELPER.replace("y * 2", "tl.core.exp(y)"),
                "@triton.jit\ndef twice(y):\n    return helper(helper(y))\n",
                kernel(body="    y = twice(n)\n" + BODY),
            ],
            "copy_kernel calls twice, which calls helper, which was not graded: it reaches into",
        ),
    ],
)
def test_a_kernel_that_calls_a_refused_helper_is_told_why(cells: list[str], reason: str) -> None:
    """Not a NameError where it runs: the helper's own refusal."""
    why = kernels.problem(kernels.extract(cells), Copy())
    assert why is not None and why.startswith(reason), why


def test_a_kernels_own_name_is_no_call_of_a_helper() -> None:
    cells = [HELPER.replace("(y)", "(y=1)"), kernel(body="    helper = n\n" + BODY)]
    assert kernels.problem(kernels.extract(cells), Copy()) is None


# --------------------------------------------------------------------- judging a launch


def a_launch(traced: bool = False) -> Launch:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    return Launch((1, 1, 1), (Input(x, 4, traced=traced), Output((2, 3), 4), 6), {"BLOCK": 8})


def sent_back(
    output: np.ndarray | None = None,
    source: np.ndarray | None = None,
    trace: np.ndarray | None = None,
    strays: np.ndarray | None = None,
) -> list[StepResult]:
    """What the harness sends back for ``a_launch``: a right copy by default (the output's
    buffer, the input's, the input's trace where given, the strays)."""
    if output is None:
        output = np.full(14, SENTINEL, dtype=np.float32)
        output[4:10] = np.arange(6)
    if source is None:
        source = np.full(14, np.nan, dtype=np.float32)
        source[4:10] = np.arange(6)
    arrays = [output, source, *([] if trace is None else [trace])]
    arrays.append(np.zeros((1, 1, 1, 2, 3), dtype=np.int64) if strays is None else strays)
    return [StepResult([Tensor(array, f"torch.{array.dtype}") for array in arrays])]


NAMES = ("x_ptr", "out_ptr", "n", "BLOCK")


def test_a_launch_comes_back_as_its_outputs_and_traces() -> None:
    trace = np.zeros((1, 1, 1, 14), dtype=np.uint8)
    trace[..., 4:12] = 1  # addressed, by 8 lanes
    trace[..., 4:10] = 3  # and read by the 6 live ones
    done = launched(sent_back(trace=trace), a_launch(traced=True))
    assert isinstance(done, Launched)
    assert done.outputs[0].tolist() == [[0, 1, 2], [3, 4, 5]]
    (addressed,), (read,) = done.addressed, done.read
    assert addressed.dtype == read.dtype == bool
    assert np.flatnonzero(addressed).tolist() == list(range(4, 12))
    assert np.flatnonzero(read).tolist() == list(range(4, 10))


def test_a_store_outside_the_output_or_an_exception_is_the_reason() -> None:
    launch = a_launch()
    buffer = np.full(14, SENTINEL, dtype=np.float32)
    buffer[4:11] = 1.0  # one number past the end
    done = launched(sent_back(output=buffer), launch)
    assert isinstance(done, str) and "wrote 1 number(s) just outside its output" in done
    raised = launched([StepResult(Raised("IndexError", "out of range"))], launch)
    assert raised == "the kernel raised IndexError: out of range"


def stray(kind: int, lanes: int, arg: int, offset: int) -> np.ndarray:
    strays = np.zeros((1, 1, 1, 2, 3), dtype=np.int64)
    strays[0, 0, 0, kind] = (lanes, arg, offset)
    return strays


def scribbled(at: int, value: float = 7.0) -> np.ndarray:
    source = np.full(14, np.nan, dtype=np.float32)
    source[4:10] = np.arange(6)
    source[at] = value
    return source


@pytest.mark.parametrize(
    ("results", "reason"),
    [
        # Stores around an input, or into it, as the buffers came back.
        (sent_back(source=scribbled(3)), "wrote 1 number(s) just outside x_ptr, into memory"),
        (sent_back(source=scribbled(13)), "wrote 1 number(s) just outside x_ptr"),
        (sent_back(source=scribbled(5)), "changed 1 number(s) of its input x_ptr: an input is"),
        # Stores that left no trace in a buffer (NaN over NaN, a number over itself, far away).
        (sent_back(strays=stray(1, 2, 0, -1)), "program (0, 0) stores 2 number(s) outside its"),
        (sent_back(strays=stray(1, 1, 0, 2)), "outside its outputs, the first inside x_ptr"),
        (sent_back(strays=stray(1, 1, -1, 0)), "the first far from every tensor"),
        # Reads outside every tensor: before one, past the end of one (an output too).
        (sent_back(strays=stray(0, 1, 0, -1)), "loads 1 number(s) outside the tensors it got, the"),
        (sent_back(strays=stray(0, 1, 0, -3)), "the first 3 element(s) before x_ptr"),
        (sent_back(strays=stray(0, 4, 1, 6)), "the first 1 element(s) past the end of out_ptr"),
    ],
)
def test_memory_a_kernel_touches_outside_its_tensors_is_the_reason(
    results: list[StepResult], reason: str
) -> None:
    done = launched(results, a_launch(), NAMES)
    assert isinstance(done, str) and reason in done, done
    # A check that judges something else leaves it to the check that judges it.
    assert isinstance(launched(results, a_launch(), NAMES, trespass=False), Launched)


def test_a_nan_read_from_an_input_is_no_change_of_it() -> None:
    source = np.full(14, np.nan, dtype=np.float32)
    source[4:10] = [0, 1, np.nan, 3, 4, 5]
    launch = Launch(
        (1, 1, 1),
        (Input(source[4:10].reshape(2, 3), 4), Output((2, 3), 4), 6),
        {"BLOCK": 8},
    )
    assert isinstance(launched(sent_back(source=source), launch, NAMES), Launched)


def test_a_launch_is_one_step_of_the_channel(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    np.save(tmp_path / "out" / "r1.npy", np.zeros(14, dtype=np.float32))
    item = {"kind": "tensor", "file": "r1.npy", "dtype": "torch.float32"}
    text = '{"calls": [{"steps": [{"value": {"kind": "list", "items": [%s]}}]}, {"steps": []}]}'
    (tmp_path / "out" / "results.json").write_text(text % str(item).replace("'", '"'))
    first, second = channel.read_results(tmp_path, [a_launch(), a_launch()])
    assert isinstance(first[0].value, list) and first[0].value[0].shape == (14,)
    assert isinstance(second[0].value, Raised) and second[0].value.type_name == "NotRun"


class Copy(KernelExercise):
    label = "ch0-ex-copy"
    kernel = "copy_kernel"
    parameters = ("x_ptr", "out_ptr", "n", "BLOCK")
    constexprs = ("BLOCK",)
    checks = (Check("copy", 1, "copies", "Copy."),)


def harness_run(
    tmp_path: Path, body: str, traced: bool = False, trespass: bool = True
) -> Launched | str:
    """``copy_kernel`` with this body, launched by the harness (in this process) on 10 numbers
    with 16 lanes, and read back as a judge reads it."""
    from grader import kernel_harness

    x = np.arange(10, dtype=np.float32)
    args = (Input(x, 32, traced=traced), Output((10,), 32), 10)
    launch = Launch((1, 1, 1), args, {"BLOCK": 16})
    folder = kernels.prepare(tmp_path, kernels.extract([kernel(body)]), Copy(), [launch])
    kernel_harness._harness_main("run", str(folder))
    ((step,),) = channel.read_results(folder, [launch])
    return launched([step], launch, Copy.parameters, trespass)


@pytest.mark.parametrize(
    "read",
    ["tl.load(x_ptr + offs, mask=offs < n)", "tl.atomic_add(x_ptr + offs, 0.0, mask=offs < n)"],
)
def test_the_trace_holds_every_element_a_program_reads_masked_lanes_apart(
    read: str, tmp_path: Path
) -> None:
    """Loads and atomics alike; 10 elements read with 16 lanes, the 6 past them masked: they
    are addressed, not read. (An atomic writes to the input too: not judged here.)"""
    done = harness_run(tmp_path, f"""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, {read}, mask=offs < n)
    """, traced=True, trespass=False)  # fmt: skip
    assert isinstance(done, Launched), done
    assert done.outputs[0].tolist() == list(range(10))
    (addressed,), (got,) = done.addressed, done.read
    assert np.flatnonzero(addressed[0, 0, 0]).tolist() == list(range(32, 48))
    assert np.flatnonzero(got[0, 0, 0]).tolist() == list(range(32, 42))


PRELUDE = """
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
"""


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        # A read just before the input, or far past it, each lane that is not masked.
        ("y = tl.load(x_ptr - 1)", "loads 1 number(s) outside the tensors it got, the first 1"),
        ("y = tl.load(x_ptr + offs + 12)", "loads 16 number(s) outside the tensors it got"),
        ("y = tl.load(x_ptr + offs + 12, mask=offs < 4)", "loads 4 number(s) outside the"),
        ("y = tl.load(x_ptr + offs + 12)", "the first 3 element(s) past the end of x_ptr"),
        # Stores around the input, into it, and of what was already there.
        ("tl.store(x_ptr - 2, 0.0)", "wrote 1 number(s) just outside x_ptr, into memory"),
        ("tl.store(x_ptr + 3, 0.0)", "changed 1 number(s) of its input x_ptr"),
        ("tl.store(x_ptr - 2, float('nan'))", "stores 1 number(s) outside its outputs, the first"),
        ("tl.store(x_ptr + 3, 3.0)", "outside its outputs, the first inside x_ptr"),
        ("tl.atomic_add(x_ptr + 3, 0.0)", "outside its outputs, the first inside x_ptr"),
    ],
)
def test_the_harness_catches_memory_a_kernel_touches_outside_its_tensors(
    extra: str, reason: str, tmp_path: Path
) -> None:
    done = harness_run(tmp_path, PRELUDE + "    " + extra + "\n")
    assert isinstance(done, str) and reason in done, done


def test_masked_lanes_and_the_output_are_the_kernels_own(tmp_path: Path) -> None:
    """A masked lane points anywhere; a kernel may read back what it wrote."""
    done = harness_run(tmp_path, PRELUDE + """
    y = tl.load(x_ptr + offs - 5, mask=(offs >= 5) & (offs < n + 5), other=0.0)
    y += tl.load(out_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs - 100, y, mask=offs > 100)
    """)  # fmt: skip
    assert isinstance(done, Launched), done


def test_one_compile_serves_every_launch_of_the_same_sizes(tmp_path: Path) -> None:
    import json

    exercise = grader.load_chapter(8)[0]
    launches = [case.call for case in exercise.cases(np.random.default_rng(0))]
    kernels.write_plan(tmp_path, exercise, launches)  # type: ignore[arg-type]
    plan = json.loads((tmp_path / "plan.json").read_text())
    (request,) = plan["compile"]
    assert request["signature"]["q_ptr"] == "*fp32" and request["signature"]["t"] == "i32"
    assert request["signature"]["qk_scale"] == "fp32"
    assert request["signature"]["BLOCK"] == request["signature"]["D"] == "constexpr"
    assert len(plan["launches"]) == len(launches)


# ------------------------------------------------------ compiled, launched, graded (slow)

SANDBOX = "bwrap" if grader.sandbox_problem() is None else "none"
# The right window kernel, but it ends its loop with `break`: Python, which the interpreter
# runs and a GPU compiler refuses.
BREAKS = CORRECT["ch8-ex-sliding-window"].replace(
    "    while k0 < tl.minimum(start + BLOCK, t):\n",
    "    while k0 < t:\n        if k0 >= start + BLOCK:\n            break\n",
)


def graded(cells: list[str], labels: list[str], sandbox: str = SANDBOX) -> dict:
    """The scores ``make grade`` gives the kernels of these cells (variant 5)."""
    config = grader.GradingConfig.make(secret="s" * 40, sandbox=sandbox)
    chapter = {e.label: e for e in grader.load_chapter(8)}
    exercises = {
        label: (chapter[label], chapter[label].cases(np.random.default_rng(5))) for label in labels
    }
    results = kernels.grade_kernels(cells, exercises, config)
    return {
        label: judged(exercises[label][0], exercises[label][1], results[label]) for label in labels
    }


@pytest.mark.slow
def test_the_compile_step_rejects_what_only_the_interpreter_runs() -> None:
    assert CORRECT["ch8-ex-sliding-window"] != BREAKS
    # In the interpreter alone the kernel earns every point...
    assert full_marks(grade_kernel("ch8-ex-sliding-window", BREAKS, seed=5))
    # ...but it is not GPU code: compiled for sm_90 first, it earns none, and is told why.
    (score,) = graded([BREAKS], ["ch8-ex-sliding-window"]).values()
    assert score.earned == 0
    assert "does not compile for a GPU (sm_90)" in score.error
    assert "unsupported AST node type: Break" in score.error


@pytest.mark.slow
def test_kernels_compile_and_launch_in_a_fresh_process_without_isolation_too() -> None:
    scores = graded([CORRECT["ch8-ex-key-lengths"]], ["ch8-ex-key-lengths"], sandbox="none")
    assert all(full_marks(score) for score in scores.values()), scores


def submission(path: Path, cells: list[str]) -> None:
    """A notebook of chapter 8 (its labels in its check cells) holding these cells."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    nb.cells += [nbformat.v4.new_code_cell(f'check("{label}")') for label in LABELS]
    nbformat.write(nb, path)


@pytest.mark.slow
def test_make_grade_grades_kernel_exercises_from_the_notebooks_source(tmp_path: Path) -> None:
    """tools/grade.py on a folder: right kernels earn every point, in the sandbox where there
    is one; a kernel that does not compile for a GPU earns nothing, nor one that is missing."""
    folder = tmp_path / "submissions"
    folder.mkdir()
    right = [CORRECT[label] for label in LABELS]
    submission(folder / "right.ipynb", right)
    submission(folder / "wrong.ipynb", [BREAKS, CORRECT["ch8-ex-grouped-heads"]])
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "grade.py"), str(folder), "--sandbox", SANDBOX,
         "--secret", str(tmp_path / "secret"), "--timeout", "300"],
        capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    with (folder / "grades.csv").open(newline="") as handle:
        rows = {row["submission"]: row for row in csv.DictReader(handle)}
    assert rows["right.ipynb"]["total"] == rows["right.ipynb"]["possible"] == "9"
    assert rows["right.ipynb"]["status"] == "ok" and rows["right.ipynb"]["isolation"] == SANDBOX
    wrong = rows["wrong.ipynb"]
    assert (wrong["ch8-ex-sliding-window"], wrong["ch8-ex-grouped-heads"]) == ("0", "3")
    assert wrong["ch8-ex-key-lengths"] == "0"
    feedback = (folder / "feedback" / "wrong.md").read_text()
    assert "does not compile for a GPU (sm_90)" in feedback
    assert "no @triton.jit kernel named lengths_kernel" in feedback


def test_without_triton_where_the_grader_runs_the_exercises_say_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "triton" else find_spec(name)
    )
    (score,) = graded([CORRECT["ch8-ex-grouped-heads"]], ["ch8-ex-grouped-heads"]).values()
    assert score.earned == 0 and "Triton is not installed where the grader runs" in score.error
