"""Chapter 8's exercises: Triton kernels, graded from their source. A correct kernel earns
every point on every variant; wrong and lazy ones do not (each planted as a notebook cell);
the book's own solutions earn full marks; the self-check passes a correct kernel and fails a
wrong one with its hint.

The kernels are extracted and judged as ``make grade`` does, but launched in this process's
interpreter and not compiled (``grading_helpers.grade_kernel``): the compile step and the
sandbox are tested in tests/test_grading_kernels.py. The correct kernels below are written
as a student would write them, independently of the grader's references and of the book's
solutions (a while loop, natural exponentials, the batch and head named apart).
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
import torch
from grading_helpers import failures, full_marks, grade_kernel

from attention_from_scratch.exercises import run_checks

ROOT = Path(__file__).resolve().parent.parent
CHAPTER = ROOT / "book" / "08_fused_attention.ipynb"
LABELS = ["ch8-ex-sliding-window", "ch8-ex-key-lengths", "ch8-ex-grouped-heads"]

# Shared by every kernel below: the online softmax over one block of keys, as chapter 7's
# loop, in natural exponentials (qk_scale is log2(e) / sqrt(D), for exp2).
FOLD = """
@triton.jit
def fold(m_i, l_i, acc, q, k, v, visible, qk_scale):
    s = tl.dot(q, tl.trans(k)) * (qk_scale / 1.4426950408889634)
    s = tl.where(visible, s, float("-inf"))
    m_ij = tl.maximum(m_i, tl.max(s, 1))
    safe = tl.where(m_ij > float("-inf"), m_ij, 0.0)
    p = tl.exp(s - safe[:, None])
    alpha = tl.exp(m_i - safe)
    return m_ij, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p, v)
"""

WINDOW = """
@triton.jit
def window_kernel(q_ptr, k_ptr, v_ptr, out_ptr, t, window, qk_scale,
                  BLOCK: tl.constexpr, D: tl.constexpr):
    start = tl.program_id(0) * BLOCK
    head = tl.program_id(1) * t * D
    offs_m = start + tl.arange(0, BLOCK)
    offs_d = tl.arange(0, D)
    at_q = head + offs_m[:, None] * D + offs_d[None, :]
    q = tl.load(q_ptr + at_q, mask=offs_m[:, None] < t, other=0.0)
    m_i = tl.zeros((BLOCK,), dtype=tl.float32) - float("inf")
    l_i = tl.zeros((BLOCK,), dtype=tl.float32)
    acc = tl.zeros((BLOCK, D), dtype=tl.float32)
    k0 = LOW
    while k0 < tl.minimum(start + BLOCK, t):
        offs_n = k0 + tl.arange(0, BLOCK)
        at_kv = head + offs_n[:, None] * D + offs_d[None, :]
        k = tl.load(k_ptr + at_kv, mask=offs_n[:, None] < t, other=0.0)
        v = tl.load(v_ptr + at_kv, mask=offs_n[:, None] < t, other=0.0)
        back = offs_m[:, None] - offs_n[None, :]
        m_i, l_i, acc = fold(m_i, l_i, acc, q, k, v, (back >= 0) & (back < window), qk_scale)
        k0 += BLOCK
    tl.store(out_ptr + at_q, acc / l_i[:, None], mask=offs_m[:, None] < t)
"""
SKIPS = "tl.maximum(start - window + 1, 0) // BLOCK * BLOCK"

LENGTHS = """
@triton.jit
def lengths_kernel(q_ptr, k_ptr, v_ptr, lengths_ptr, out_ptr, h, t, s, qk_scale,
                   BLOCK: tl.constexpr, D: tl.constexpr):
    start = tl.program_id(0) * BLOCK
    batch = tl.program_id(1) // h
    head = tl.program_id(1) % h
    real = tl.load(lengths_ptr + batch)
    QUERIES
    for k0 in range(0, END, BLOCK):
        offs_n = k0 + tl.arange(0, BLOCK)
        at_kv = ((batch * h + head) * s + offs_n[:, None]) * D + offs_d[None, :]
        k = tl.load(k_ptr + at_kv, mask=LOADED, other=0.0)
        v = tl.load(v_ptr + at_kv, mask=LOADED, other=0.0)
        m_i, l_i, acc = fold(m_i, l_i, acc, q, k, v, VISIBLE, qk_scale)
    tl.store(out_ptr + at_q, acc / l_i[:, None], mask=offs_m[:, None] < t)
"""
LENGTHS_RIGHT = {
    "END": "tl.cdiv(real, BLOCK) * BLOCK",
    "LOADED": "offs_n[:, None] < real",
    "VISIBLE": "offs_n[None, :] < real",
}

GROUPED = """
@triton.jit
def grouped_kernel(q_ptr, k_ptr, v_ptr, out_ptr, h, h_kv, t, s, qk_scale,
                   BLOCK: tl.constexpr, D: tl.constexpr):
    start = tl.program_id(0) * BLOCK
    batch = tl.program_id(1) // h
    head = tl.program_id(1) % h
    kv_head = KV_HEAD
    QUERIES
    for k0 in range(0, s, BLOCK):
        offs_n = k0 + tl.arange(0, BLOCK)
        at_kv = ((batch * h_kv + kv_head) * s + offs_n[:, None]) * D + offs_d[None, :]
        k = tl.load(k_ptr + at_kv, mask=LOADED, other=0.0)
        v = tl.load(v_ptr + at_kv, mask=LOADED, other=0.0)
        m_i, l_i, acc = fold(m_i, l_i, acc, q, k, v, offs_n[None, :] < s, qk_scale)
    tl.store(out_ptr + at_q, acc / l_i[:, None], mask=offs_m[:, None] < t)
"""
GROUP_OF = "head // (h // h_kv)"
# The start of both: one block of queries of head `head` of batch element `batch`.
QUERIES = """
    offs_m = start + tl.arange(0, BLOCK)
    offs_d = tl.arange(0, D)
    at_q = ((batch * h + head) * t + offs_m[:, None]) * D + offs_d[None, :]
    q = tl.load(q_ptr + at_q, mask=offs_m[:, None] < t, other=0.0)
    m_i = tl.zeros((BLOCK,), dtype=tl.float32) - float("inf")
    l_i = tl.zeros((BLOCK,), dtype=tl.float32)
    acc = tl.zeros((BLOCK, D), dtype=tl.float32)
"""


def fill(template: str, **parts: str) -> str:
    template = template.replace("    QUERIES\n", QUERIES.lstrip("\n"))
    for name, text in parts.items():
        template = template.replace(name, text)
    return "import triton\nimport triton.language as tl\n" + FOLD + template


CORRECT = {
    "ch8-ex-sliding-window": fill(WINDOW, LOW=SKIPS),
    "ch8-ex-key-lengths": fill(LENGTHS, **LENGTHS_RIGHT),
    "ch8-ex-grouped-heads": fill(GROUPED, KV_HEAD=GROUP_OF, LOADED="offs_n[:, None] < s"),
}


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("label", LABELS)
def test_a_correct_kernel_earns_every_point_on_every_variant(label: str, seed: int) -> None:
    score = grade_kernel(label, CORRECT[label], seed=seed)
    assert full_marks(score), failures(score)


def test_the_books_solutions_earn_full_marks() -> None:
    """The chapter's own solution cells, extracted as the grader extracts a submission."""
    nb = nbformat.read(CHAPTER, as_version=4)
    cells = [cell.source for cell in nb.cells if cell.cell_type == "code"]
    for label in LABELS:
        score = grade_kernel(label, cells)
        assert full_marks(score), (label, failures(score))


@pytest.mark.parametrize("label", LABELS)
def test_the_self_check_passes_a_correct_kernel(label: str) -> None:
    namespace: dict = {}
    exec(compile(CORRECT[label], f"<{label}>", "exec"), namespace)
    result = run_checks(label, namespace)
    assert result.passed, [(c.name, c.reason) for c in result.checks]


UNMASKED = "tl.load(v_ptr + at_kv)"
WRONG = {
    # Every key block from 0 and to the end, the window kept by the mask alone: right numbers,
    # and every block visited.
    ("ch8-ex-sliding-window", "no skipping"): fill(WINDOW, LOW="0"),
    # The window one key too wide.
    ("ch8-ex-sliding-window", "a mask off by one"): fill(
        WINDOW, LOW=SKIPS, **{"back < window": "back <= window"}
    ),
    # The values loaded without their mask: the last block reads past the tensor.
    ("ch8-ex-sliding-window", "an unmasked load"): fill(
        WINDOW.replace("tl.load(v_ptr + at_kv, mask=offs_n[:, None] < t, other=0.0)", UNMASKED),
        LOW=SKIPS,
    ),
    # The loop runs to s, the loads masked by the length: right numbers, every block visited.
    ("ch8-ex-key-lengths", "no skipping"): fill(LENGTHS, **{**LENGTHS_RIGHT, "END": "s"}),
    # The keys masked at `<= real`: one padding key too many, and it holds NaN.
    ("ch8-ex-key-lengths", "a mask off by one"): fill(
        LENGTHS, **{**LENGTHS_RIGHT, "LOADED": "offs_n[:, None] <= real"}
    ),
    # The page's loads (masked by s), the length kept by the scores' mask only: 0 * NaN.
    ("ch8-ex-key-lengths", "loads masked by s only"): fill(
        LENGTHS, **{**LENGTHS_RIGHT, "LOADED": "offs_n[:, None] < s"}
    ),
    # Query head j on key/value head j % h_kv: right for one shared head and for none.
    ("ch8-ex-grouped-heads", "heads interleaved"): fill(
        GROUPED, KV_HEAD="head % h_kv", LOADED="offs_n[:, None] < s"
    ),
    # The loads without their mask: the last head's last block reads past the tensor.
    ("ch8-ex-grouped-heads", "an unmasked load"): fill(GROUPED, KV_HEAD=GROUP_OF, LOADED="None"),
    # Right numbers, but memory that is not the kernel's touched: a store into the NaN before
    # q, a load of it (thrown away), q overwritten after it is loaded. The page: "It must
    # never read or write past a tensor"; each costs the check of what the kernel computes.
    ("ch8-ex-grouped-heads", "a store before q"): fill(
        GROUPED.replace("    QUERIES\n", "    QUERIES\n    tl.store(q_ptr - 1, 0.0)\n"),
        KV_HEAD=GROUP_OF,
        LOADED="offs_n[:, None] < s",
    ),
    ("ch8-ex-grouped-heads", "a load before q"): fill(
        GROUPED.replace(
            "    QUERIES\n",
            "    QUERIES\n    junk = tl.load(q_ptr - 1)\n"
            "    acc += tl.where(junk == junk, 0.0, 0.0)\n",
        ),
        KV_HEAD=GROUP_OF,
        LOADED="offs_n[:, None] < s",
    ),
    ("ch8-ex-grouped-heads", "q overwritten"): fill(
        GROUPED.replace(
            "    QUERIES\n",
            "    QUERIES\n    tl.store(q_ptr + at_q, q * 0 + 5.0, mask=offs_m[:, None] < t)\n",
        ),
        KV_HEAD=GROUP_OF,
        LOADED="offs_n[:, None] < s",
    ),
    # Only the blocks with a real key, but the last one's padding loaded (masked by s) and
    # thrown away: right numbers, and the padding read.
    ("ch8-ex-key-lengths", "padding read, then dropped"): fill(
        LENGTHS.replace(
            "        v = tl.load(v_ptr + at_kv, mask=LOADED, other=0.0)\n",
            "        v = tl.load(v_ptr + at_kv, mask=LOADED, other=0.0)\n"
            "        k = tl.where(offs_n[:, None] < real, k, 0.0)\n"
            "        v = tl.where(offs_n[:, None] < real, v, 0.0)\n",
        ),
        **{**LENGTHS_RIGHT, "LOADED": "offs_n[:, None] < s"},
    ),
}
FAILED = {
    ("ch8-ex-sliding-window", "no skipping"): ["skips"],
    ("ch8-ex-sliding-window", "a mask off by one"): ["window", "skips"],
    ("ch8-ex-sliding-window", "an unmasked load"): ["window", "skips"],
    ("ch8-ex-key-lengths", "no skipping"): ["skips"],
    ("ch8-ex-key-lengths", "a mask off by one"): ["lengths", "skips"],
    ("ch8-ex-key-lengths", "loads masked by s only"): ["lengths", "skips"],
    ("ch8-ex-grouped-heads", "heads interleaved"): ["groups"],
    ("ch8-ex-grouped-heads", "an unmasked load"): ["groups", "edges"],
    ("ch8-ex-grouped-heads", "a store before q"): ["groups"],
    ("ch8-ex-grouped-heads", "a load before q"): ["groups"],
    ("ch8-ex-grouped-heads", "q overwritten"): ["groups"],
    ("ch8-ex-key-lengths", "padding read, then dropped"): ["lengths"],
}
# What the first failed check says, where it is not the output.
TOLD = {
    ("ch8-ex-sliding-window", "an unmasked load"): "the first 1 element(s) past the end of v_ptr",
    ("ch8-ex-grouped-heads", "a store before q"): "wrote 1 number(s) just outside q_ptr, into",
    ("ch8-ex-grouped-heads", "a load before q"): "the first 1 element(s) before q_ptr",
    ("ch8-ex-grouped-heads", "q overwritten"): "number(s) of its input q_ptr: an input is read",
    ("ch8-ex-key-lengths", "padding read, then dropped"): "padding (its length is",
}


@pytest.mark.parametrize(("label", "name"), list(WRONG))
def test_a_wrong_kernel_loses_the_checks_it_gets_wrong(label: str, name: str) -> None:
    score = grade_kernel(label, WRONG[(label, name)], seed=1)
    assert [c.name for c in score.checks if not c.passed] == FAILED[(label, name)], failures(score)
    failed = next(c for c in score.checks if not c.passed)
    assert TOLD.get((label, name), "") in failed.reason, failed.reason


def test_the_functions_of_tl_math_are_tls_own() -> None:
    """tl.math.exp is tl.exp: in the kernel and in a kernel it calls, a right answer."""
    source = CORRECT["ch8-ex-sliding-window"].replace("tl.exp(", "tl.math.exp(")
    source = source.replace("acc / l_i[:, None]", "tl.math.div_rn(acc, l_i[:, None])")
    assert source.count("tl.math.") == 3
    assert full_marks(grade_kernel("ch8-ex-sliding-window", source))


def test_a_kernel_that_visits_every_block_is_told_which_it_needed_not() -> None:
    score = grade_kernel("ch8-ex-key-lengths", WRONG[("ch8-ex-key-lengths", "no skipping")])
    (failed,) = [c for c in score.checks if not c.passed]
    assert "a block none of its queries sees" in failed.reason, failed.reason


SIGNATURE = (
    "(q_ptr, k_ptr, v_ptr, out_ptr, t, window, qk_scale, BLOCK: tl.constexpr, D: tl.constexpr)"
)
LAZY = {
    # The torch one-liner, in a plain function of the kernel's name.
    "the torch one-liner in a plain def": f"""
import torch
import torch.nn.functional as F

def window_kernel{SIGNATURE.replace(": tl.constexpr", "")}:
    return F.scaled_dot_product_attention(q_ptr, k_ptr, v_ptr, is_causal=True)
""",
    # A kernel whose body hands the work to torch.
    "a kernel calling torch": f"""
import torch
import triton
import triton.language as tl

@triton.jit
def window_kernel{SIGNATURE}:
    out_ptr.copy_(torch.nn.functional.scaled_dot_product_attention(q_ptr, k_ptr, v_ptr))
""",
    # The same, importing torch inside the kernel.
    "a kernel that imports": f"""
import triton
import triton.language as tl

@triton.jit
def window_kernel{SIGNATURE}:
    import torch
    out_ptr.copy_(torch.nn.functional.scaled_dot_product_attention(q_ptr, k_ptr, v_ptr))
""",
    # A kernel that stores NaN everywhere.
    "an always-NaN kernel": f"""
import triton
import triton.language as tl

@triton.jit
def window_kernel{SIGNATURE}:
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    at = tl.program_id(1) * t * D + rows[:, None] * D + tl.arange(0, D)[None, :]
    tl.store(out_ptr + at, tl.full((BLOCK, D), float("nan"), tl.float32), mask=rows[:, None] < t)
""",
    # The student edition's stub.
    "the stub": f"""
import triton
import triton.language as tl

@triton.jit
def window_kernel{SIGNATURE}:
    pass
""",
    # The right kernel with a parameter of another name.
    "another signature": fill(WINDOW.replace("qk_scale", "scale"), LOW=SKIPS),
    # The right kernel, its helper refused (a default value): it would not be defined.
    "a refused helper": fill(WINDOW, LOW=SKIPS).replace("qk_scale):\n", "qk_scale=1):\n", 1),
}


@pytest.mark.parametrize("name", list(LAZY))
def test_a_lazy_answer_earns_nothing(name: str) -> None:
    score = grade_kernel("ch8-ex-sliding-window", LAZY[name])
    assert score.earned == 0, failures(score)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("the torch one-liner in a plain def", "is a plain function (without @triton.jit)"),
        ("a kernel calling torch", "it uses torch, which a kernel cannot reach"),
        ("a kernel that imports", "it imports a module"),
        ("the stub", "the kernel wrote no output"),
        ("another signature", "window_kernel should have the parameters (q_ptr, k_ptr"),
        ("a refused helper", "window_kernel calls fold, which was not graded: a parameter has"),
    ],
)
def test_a_lazy_answer_is_told_why(name: str, reason: str) -> None:
    score = grade_kernel("ch8-ex-sliding-window", LAZY[name])
    told = score.error or " ".join(c.reason for c in score.checks)
    assert reason in told, told


def test_the_self_check_fails_a_wrong_kernel_with_its_hint() -> None:
    for (label, name), passed in {
        ("ch8-ex-sliding-window", "no skipping"): [True, False],
        ("ch8-ex-sliding-window", "a mask off by one"): [False, False],
        ("ch8-ex-grouped-heads", "heads interleaved"): [False, True],
    }.items():
        namespace: dict = {}
        exec(compile(WRONG[(label, name)], f"<{name}>", "exec"), namespace)
        result = run_checks(label, namespace)
        assert [c.passed for c in result.checks] == passed, (name, result)
        assert all(c.hint for c in result.checks if not c.passed)
    result = run_checks("ch8-ex-key-lengths", {"lengths_kernel": ...})
    assert all("still `...`" in c.reason for c in result.checks)


def tf32(x: torch.Tensor) -> torch.Tensor:
    """float32 rounded to TF32's 10 bits of mantissa (to nearest, ties away from zero)."""
    bits = x.contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)


def test_on_a_gpu_the_self_check_allows_tf32_rounding_and_no_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A kernel whose tl.dot lacks input_precision="ieee" multiplies TF32 inputs on a GPU.
    from attention_from_scratch.causal import attention
    from attention_from_scratch.exercises import ch8

    query, key = torch.arange(ch8.T)[:, None], torch.arange(ch8.T)[None, :]
    inputs = (ch8.Q, ch8.K, ch8.V)
    expected = attention(*inputs, (key > query) | (key <= query - 20))[0]
    rounded = attention(*map(tf32, inputs), (key > query) | (key <= query - 20))[0]
    one_too_many = attention(*inputs, (key > query) | (key <= query - 21))[0]
    assert 1e-4 < (rounded - expected).abs().max() < 1e-2  # the rounding is there
    monkeypatch.setattr(ch8, "_device", lambda: torch.device("cuda"))
    ch8._same(rounded, expected)
    with pytest.raises(AssertionError, match="is wrong: off by"):
        ch8._same(one_too_many, expected)
    monkeypatch.setattr(ch8, "_device", lambda: torch.device("cpu"))  # the interpreter
    with pytest.raises(AssertionError, match="is wrong: off by"):
        ch8._same(rounded, expected)


def test_the_self_check_says_when_triton_cannot_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from attention_from_scratch import fused

    reason = "Triton is not installed (it has no wheel here)."
    monkeypatch.setattr(fused, "triton_status", lambda: fused.TritonStatus(False, False, reason))
    result = run_checks("ch8-ex-grouped-heads", {})
    assert not result.checks and result.error == f"Triton cannot run here: {reason}"


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("label", LABELS)
def test_the_self_check_passes_a_correct_kernel_compiled_for_the_gpu(
    label: str, tmp_path: Path
) -> None:
    # Compiled, triton.jit reads each kernel's source back from its file.
    path = tmp_path / "answer.py"
    path.write_text(CORRECT[label], encoding="utf-8")
    namespace: dict = {}
    exec(compile(CORRECT[label], str(path), "exec"), namespace)
    result = run_checks(label, namespace)
    assert result.passed, [(c.name, c.reason) for c in result.checks]
