"""Chapter 8's Triton kernels (``attention_from_scratch.fused``).

Without a GPU they run in Triton's interpreter (``TRITON_INTERPRET=1``, set by conftest.py
before anything imports Triton), checked against chapter 3's ``attention`` and autograd. The
interpreter runs code a GPU compiler would reject, so the kernels, and those the chapter's page
writes, are also compiled here (the package's for sm_90 and sm_80, the page's for sm_90), in a
subprocess without the interpreter flag (triton.jit reads it as it decorates a kernel).
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
import torch

pytest.importorskip("triton", reason="Triton is optional: it has no wheel for this platform")

from attention_from_scratch import fused
from attention_from_scratch.causal import attention, causal_mask

ROOT = Path(__file__).resolve().parents[1]
STATUS = fused.triton_status()
needs_kernels = pytest.mark.skipif(not STATUS.available, reason=STATUS.reason)
DEVICE = "cpu" if STATUS.interpreted else "cuda"
B = fused.BLOCK
# Lengths around the block: one token, a partial block, one past a block, a ragged 100.
LENGTHS = [1, B - 1, B + 1, 100]


def draw(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=gen).to(DEVICE, dtype) for _ in range(3)]


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    mask = causal_mask(q.shape[2], device=q.device) if causal else None
    context, _ = attention(q, k, v, mask)
    return context


@needs_kernels
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("t", LENGTHS)
def test_forward_and_gradients_match_the_package_in_float32(t: int, causal: bool) -> None:
    q, k, v = (x.requires_grad_() for x in draw(1, 2, t, 32, seed=t))
    grad = torch.randn(1, 2, t, 32, generator=torch.Generator().manual_seed(1)).to(DEVICE)
    out = fused.flash_attention(q, k, v, is_causal=causal)
    got = torch.autograd.grad(out, (q, k, v), grad)
    expected = reference(q, k, v, causal)
    want = torch.autograd.grad(expected, (q, k, v), grad)
    # Measured: <= 1e-6 for the output, <= 1.5e-6 for the gradients; 1e-5 leaves room.
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    for name, a, b in zip("qkv", got, want, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5, msg=f"d{name}")


@needs_kernels
def test_more_keys_than_queries_without_the_causal_mask() -> None:
    q, _, _ = draw(2, 1, 20, 16, seed=3)
    _, k, v = draw(2, 1, B + 13, 16, seed=4)
    torch.testing.assert_close(
        fused.flash_attention(q, k, v), reference(q, k, v, False), atol=1e-5, rtol=1e-5
    )


@needs_kernels
@pytest.mark.parametrize("causal", [False, True])
def test_float16_stays_within_float16_rounding(causal: bool) -> None:
    q, k, v = (x.requires_grad_() for x in draw(1, 2, B + 1, 64, dtype=torch.float16))
    out = fused.flash_attention(q, k, v, is_causal=causal)
    assert out.dtype == torch.float16
    out.float().sum().backward()
    exact = [x.detach().float().requires_grad_() for x in (q, k, v)]
    expected = reference(*exact, causal)
    expected.sum().backward()
    # Measured: <= 1.3e-3 forward, <= 2.4e-3 gradients; the explicit float16 path of the
    # package is itself up to 1.4e-3 from float32 here.
    torch.testing.assert_close(out.float(), expected, atol=4e-3, rtol=0)
    for x, e in zip((q, k, v), exact, strict=True):
        assert x.grad is not None and e.grad is not None
        torch.testing.assert_close(x.grad.float(), e.grad, atol=1e-2, rtol=0)


@needs_kernels
@pytest.mark.parametrize("causal", [False, True])
def test_the_log_sum_exp_is_chapter_7s_in_base_2(causal: bool) -> None:
    # The backward kernels compute with exp2: the forward kernel keeps L log2(e), where
    # chapter 7's tiled_attention returns L = m + log(l) in natural log.
    from attention_from_scratch.tiled import tiled_attention

    q, k, v = draw(1, 2, B + 9, 32, seed=5)
    out, lse = torch.empty_like(q), q.new_empty(q.shape[:3])
    fused._forward(q, k, v, causal, out, lse)
    _, natural = tiled_attention(q, k, v, block_size=16, causal=causal, return_lse=True)
    torch.testing.assert_close(lse, natural / math.log(2), atol=1e-5, rtol=1e-5)


SENTINEL = 1234.5


def inside(shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """A tensor of ``shape`` followed in memory by a block's worth of sentinels: the tensor
    and the sentinels after it."""
    n = torch.Size(shape).numel()
    buffer = torch.full((n + B * shape[-1],), SENTINEL, device=DEVICE)
    return buffer[:n].view(shape), buffer[n:]


@needs_kernels
@pytest.mark.parametrize("causal", [False, True])
def test_stores_stay_inside_their_tensors(causal: bool) -> None:
    # A store without its mask writes the padded rows of the last block past the end:
    # into the sentinels, which must survive. The interpreter raises no error for it.
    b, h, t, d = 1, 2, B + 3, 16
    q, k, v = draw(b, h, t, d)
    out, out_after = inside((b, h, t, d))
    lse, lse_after = inside((b, h, t))
    fused._forward(q, k, v, causal, out, lse)
    torch.testing.assert_close(out, reference(q, k, v, causal), atol=1e-5, rtol=1e-5)
    grads = [inside((b, h, t, d)) for _ in range(3)]
    grad_out = torch.randn(b, h, t, d, device=DEVICE)
    fused._backward(q, k, v, out, lse, grad_out, causal, *(g for g, _ in grads))
    for after in (out_after, lse_after, *(after for _, after in grads)):
        assert torch.all(after == SENTINEL), "a store wrote past the end of its tensor"
    assert all(torch.isfinite(g).all() for g, _ in grads)


@needs_kernels
@pytest.mark.parametrize("causal", [False, True])
def test_loads_never_read_past_their_tensors(causal: bool) -> None:
    # The inputs end where NaNs begin: a load without its mask would read them and spread
    # them (the interpreter reads the neighbouring memory silently, as a GPU may).
    t, d = B + 5, 16
    tensors = []
    for x in draw(1, 1, t, d):
        buffer = torch.full((x.numel() + B * d,), float("nan"), device=DEVICE)
        tensors.append(buffer[: x.numel()].view_as(x).copy_(x).requires_grad_())
    out = fused.flash_attention(*tensors, is_causal=causal)
    out.sum().backward()
    torch.testing.assert_close(out, reference(*tensors, causal), atol=1e-5, rtol=1e-5)
    assert all(torch.isfinite(x.grad).all() for x in tensors if x.grad is not None)


@needs_kernels
def test_the_softmax_kernel_matches_torch_and_keeps_to_its_rows() -> None:
    x = torch.randn(5, 37, generator=torch.Generator().manual_seed(2)).to(DEVICE)
    torch.testing.assert_close(fused.softmax(x), torch.softmax(x, dim=-1))
    buffer = torch.full((5 * 37 + 64,), float("nan"), device=DEVICE)
    x_inside = buffer[: x.numel()].view_as(x).copy_(x)
    torch.testing.assert_close(fused.softmax(x_inside), torch.softmax(x, dim=-1))


@needs_kernels
def test_gradients_are_the_same_on_every_run() -> None:
    # dQ is summed by its own kernel, not by atomic additions in any order.
    q, k, v = (x.requires_grad_() for x in draw(1, 1, B + 7, 16))
    runs = [
        torch.autograd.grad(fused.flash_attention(q, k, v, is_causal=True).sum(), (q, k, v))
        for _ in range(2)
    ]
    for a, b in zip(*runs, strict=True):
        assert torch.equal(a, b)


@needs_kernels
@pytest.mark.skipif(not STATUS.interpreted, reason="float64 runs in the interpreter only")
@pytest.mark.parametrize("causal", [False, True])
def test_gradcheck_in_float64(causal: bool) -> None:
    # fast_mode checks one random projection of the Jacobian: a few kernel runs, not one
    # per input element (the full check takes minutes in the interpreter).
    q, k, v = (x.requires_grad_() for x in draw(1, 1, B + 8, 16, dtype=torch.float64))
    assert torch.autograd.gradcheck(
        lambda q, k, v: fused.flash_attention(q, k, v, is_causal=causal),
        (q, k, v),
        fast_mode=True,
    )


def test_triton_status_says_how_the_kernels_run() -> None:
    status = fused.triton_status()
    assert status.interpreted == (os.environ.get("TRITON_INTERPRET") == "1")
    assert status.available == (status.interpreted or torch.cuda.is_available())
    assert status.reason.endswith(".")


GOOD = torch.zeros(1, 2, 4, 16)


@needs_kernels
@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        (([[1.0]], GOOD, GOOD), {}, TypeError, r"^queries: expected a torch.Tensor"),
        (
            (GOOD, GOOD.long(), GOOD),
            {},
            TypeError,
            r"^keys: expected a floating-point tensor, got torch.int64",
        ),
        (
            (GOOD[0], GOOD, GOOD),
            {},
            ValueError,
            r"^queries: expected a tensor of shape \(b, h, t, d_h\)",
        ),
        ((GOOD, GOOD, GOOD.double()), {}, ValueError, r"^values: expected torch.float32"),
        (
            (GOOD, GOOD[:, :1], GOOD[:, :1]),
            {},
            ValueError,
            r"^keys: expected \(b, h, s, d_h\) with b, h, d_h = 1, 2, 16",
        ),
        ((GOOD, GOOD, GOOD[..., :8]), {}, ValueError, r"^values: expected the shape of the keys"),
        ((GOOD[..., :8],) * 3, {}, ValueError, r"^queries: expected d_h in \(16, 32, 64, 128\)"),
        ((GOOD, GOOD[:, :, :3], GOOD[:, :, :3]), {"is_causal": True}, ValueError, r"^keys: "),
        ((GOOD, GOOD, GOOD), {"is_causal": 1}, TypeError, r"^is_causal: expected a bool"),
        ((GOOD.to(torch.float8_e4m3fn),) * 3, {}, TypeError, r"^queries: expected float16, bf"),
        ((GOOD[:0],) * 3, {}, ValueError, r"^queries: expected b, h >= 1, got shape \(0, 2, 4, 16"),
        ((GOOD[:, :, :0],) * 3, {}, ValueError, r"^queries, keys: expected at least one token"),
    ],
)
def test_bad_input_gets_a_clear_error(
    args: tuple[object, ...], kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        fused.flash_attention(*args, **kwargs)  # type: ignore[arg-type]


@needs_kernels
@pytest.mark.skipif(not STATUS.interpreted, reason="checks the interpreter's dtypes")
def test_bfloat16_is_refused_in_the_interpreter() -> None:
    # Its bfloat16 tl.dot gives wrong results: refused rather than silently wrong.
    x = GOOD.bfloat16()
    with pytest.raises(TypeError, match=r"^queries: expected float16 or float32 in the inter"):
        fused.flash_attention(x, x, x)


@needs_kernels
def test_softmax_refuses_bad_input() -> None:
    with pytest.raises(TypeError, match=r"^x: expected a floating-point torch.Tensor"):
        fused.softmax(torch.ones(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"^x: expected a non-empty \(rows, cols\) matrix"):
        fused.softmax(torch.ones(2, 3, 4))


@pytest.mark.skipif(
    STATUS.available, reason="Triton can run here: set TRITON_INTERPRET=0 without a GPU"
)
def test_cpu_tensors_without_the_interpreter_get_a_clear_error() -> None:
    with pytest.raises(RuntimeError, match=r"^queries: cannot run a Triton kernel here"):
        fused.flash_attention(GOOD, GOOD, GOOD)


def test_triton_is_optional_and_pinned_to_torchs_version_on_linux_x86_64_only() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    project = pyproject["project"]
    assert not any(d.startswith("triton") for d in project["dependencies"])
    (extra,) = project["optional-dependencies"]["triton"]
    requirements = (ROOT / "requirements.txt").read_text(encoding="utf-8")
    (pinned,) = re.findall(r"^triton==.*$", requirements, re.MULTILINE)
    torch_pin = re.search(r"^torch==(\d+\.\d+)", requirements, re.MULTILINE)
    assert torch_pin is not None and torch_pin.group(1) == "2.13"  # which pairs with 3.7.1
    linux_x86 = 'sys_platform == "linux" and platform_machine == "x86_64"'
    assert extra == pinned == f"triton==3.7.1; {linux_x86}"


# ---- compiled for a GPU, on this machine -------------------------------------------------

COMPILE = textwrap.dedent(
    """
    import sys
    import triton
    from triton.backends.compiler import GPUTarget
    from attention_from_scratch import fused

    capability, dtypes, causal = int(sys.argv[1]), sys.argv[2].split(","), sys.argv[3] == "1"
    names = sys.argv[4].split(",")
    assert not fused.triton_status().interpreted
    scalars = {"n_cols": "i32", "t": "i32", "s": "i32", "qk_scale": "fp32", "scale": "fp32"}
    for kernel, constexprs in (
        (fused._softmax_kernel, {"BLOCK_COLS": 64}),
        (fused._forward_kernel, {"CAUSAL": causal, "BLOCK": fused.BLOCK, "D": 64}),
        (fused._backward_dkdv_kernel, {"CAUSAL": causal, "BLOCK": fused.BLOCK, "D": 64}),
        (fused._backward_dq_kernel, {"CAUSAL": causal, "BLOCK": fused.BLOCK, "D": 64}),
    ):
        if kernel.__name__ not in names:
            continue
        for dtype in dtypes:
            signature = {}
            for name in kernel.arg_names:
                if name in constexprs:
                    signature[name] = "constexpr"
                elif name in ("lse_ptr", "delta_ptr"):
                    signature[name] = "*fp32"
                elif name.endswith("_ptr"):
                    signature[name] = "*" + dtype
                else:
                    signature[name] = scalars[name]
            where = {(kernel.arg_names.index(k),): v for k, v in constexprs.items()}
            source = triton.compiler.ASTSource(kernel, signature, where)
            compiled = triton.compile(source, target=GPUTarget("cuda", capability, 32))
            assert compiled.asm["cubin"], kernel.__name__
            ptx = compiled.asm["ptx"]
            matrix = ptx.count("mma.sync"), ptx.count("wgmma.mma_async")
            print(capability, dtype, kernel.__name__, len(compiled.asm["cubin"]), *matrix)
    """
)


KERNELS = ["_softmax_kernel", "_forward_kernel", "_backward_dkdv_kernel", "_backward_dq_kernel"]


def compile_kernels(
    capability: int,
    dtypes: str,
    causal: bool,
    tmp_path: Path,
    kernels: list[str] = KERNELS,
    script: str = COMPILE,
) -> subprocess.CompletedProcess[str]:
    """Run the compile script without the interpreter flag, with an empty cache."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path)  # compile for real, not from a cache
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    args = [str(capability), dtypes, str(int(causal)), ",".join(kernels)]
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )


# Each compile takes seconds: one target per architecture, each dtype and mask once between them
# (every kernel, sm_90 with float16 and the causal mask, sm_80 with bfloat16 and float32 without).
@pytest.mark.slow
@pytest.mark.parametrize(
    ("capability", "dtypes", "causal"), [(90, "fp16", True), (80, "bf16,fp32", False)]
)
def test_every_kernel_compiles_for_a_gpu(
    capability: int, dtypes: str, causal: bool, tmp_path: Path
) -> None:
    done = compile_kernels(capability, dtypes, causal, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line.split() for line in done.stdout.splitlines()]
    assert sorted(line[2] for line in lines) == sorted(KERNELS * len(dtypes.split(",")))
    # What the chapter says of the matrix units: float16 and bfloat16 products run on them,
    # float32 ones with input_precision="ieee" do not, and blocks of 32 rows are too few for
    # the H100's warpgroup instructions (WGMMA, 64 rows).
    for _, dtype, name, _, mma, wgmma in lines:
        if name != "_softmax_kernel":
            assert (int(mma) > 0) == (dtype != "fp32") and int(wgmma) == 0, (dtype, name)


@pytest.mark.slow
def test_a_kernel_the_gpu_compiler_rejects_fails_to_compile(tmp_path: Path) -> None:
    # The reason for compiling at all: an 8 x 8 tl.dot runs in the interpreter, but a GPU
    # needs at least 16 along the summed dimension (a block of keys in P V). The same forward
    # kernel, with blocks of 8, must fail.
    script = COMPILE.replace('"BLOCK": fused.BLOCK, "D": 64', '"BLOCK": 8, "D": 16')
    done = compile_kernels(90, "fp16", True, tmp_path, ["_forward_kernel"], script)
    assert done.returncode != 0
    assert "CompilationError" in done.stderr


# The chapter's own kernels (the cells of book/08 that define them) compile for a GPU too: the
# page runs them compiled wherever there is one.
PAGE_COMPILE = textwrap.dedent(
    """
    import sys
    import triton
    from triton.backends.compiler import GPUTarget
    import page_kernels

    scalars = {"n_cols": "i32", "n_blocks": "i32", "t": "i32", "s": "i32"}
    scalars |= {"window": "i32", "h": "i32", "h_kv": "i32"}  # the exercises' solutions
    scalars |= {"qk_scale": "fp32", "scale": "fp32"}
    for name, kernel in vars(page_kernels).items():
        if not isinstance(kernel, triton.JITFunction) or not name.endswith("_kernel"):
            continue  # a helper (fold_tiles), compiled inside the kernels that call it
        for dtype, causal in (("fp16", True), ("fp32", False)):
            if dtype == "fp16" and name in ("window_kernel", "lengths_kernel", "grouped_kernel"):
                continue  # the exercises take float32 inputs only
            constexprs = {"CAUSAL": causal, "BLOCK": 32, "D": 64}
            signature = {}
            for arg in kernel.arg_names:
                if arg in constexprs:
                    signature[arg] = "constexpr"
                elif arg in ("lse_ptr", "delta_ptr"):
                    signature[arg] = "*fp32"
                elif arg in ("kinds_ptr", "lengths_ptr"):
                    signature[arg] = "*i32"
                elif arg.endswith("_ptr"):
                    signature[arg] = "*" + dtype
                else:
                    signature[arg] = scalars[arg]
            where = {
                (kernel.arg_names.index(k),): v
                for k, v in constexprs.items()
                if k in kernel.arg_names
            }
            source = triton.compiler.ASTSource(kernel, signature, where)
            compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32))
            assert compiled.asm["cubin"], name
            # Float32 products stay float32 on a GPU (input_precision="ieee"), not TF32.
            assert dtype != "fp32" or ".tf32" not in compiled.asm["ptx"], name
            print(name, dtype)
    """
)


@pytest.mark.slow
def test_the_chapters_kernels_compile_for_a_gpu(tmp_path: Path) -> None:
    notebook = json.loads((ROOT / "book" / "08_fused_attention.ipynb").read_text("utf-8"))
    # Every function the cells decorate with @triton.jit, without the code that runs them;
    # Triton reads a kernel's source from its file, so they become a module.
    kernels = [
        ast.unparse(node)
        for cell in notebook["cells"]
        if cell["cell_type"] == "code"
        for node in ast.parse("".join(cell["source"])).body
        if isinstance(node, ast.FunctionDef)
        and any(ast.unparse(d) == "triton.jit" for d in node.decorator_list)
    ]
    header = "import triton\nimport triton.language as tl\n\n\n"
    (tmp_path / "page_kernels.py").write_text(header + "\n\n\n".join(kernels), "utf-8")
    script = PAGE_COMPILE.replace(
        "import page_kernels", f"sys.path.insert(0, {str(tmp_path)!r})\nimport page_kernels"
    )
    done = compile_kernels(90, "fp16", True, tmp_path / "cache", [], script)
    assert done.returncode == 0, done.stderr[-3000:]
    compiled = {line.split()[0] for line in done.stdout.splitlines()}
    assert compiled == {
        "softmax_kernel",
        "unmasked_softmax_kernel",
        "forward_kernel",
        "tiles_kernel",
        "dkdv_kernel",
        "dq_kernel",
        "window_kernel",
        "lengths_kernel",
        "grouped_kernel",
    }
