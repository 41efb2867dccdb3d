"""Bad input raises TypeError or ValueError with a message that names the argument.

The package promises messages of the form "<argument>: expected X, got Y", raised by explicit
checks (never ``assert``, which ``python -O`` removes).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
import torch

import attention_from_scratch as afs


def check_message(error: pytest.ExceptionInfo[BaseException]) -> None:
    """Every message follows the "expected X, got Y" pattern."""
    message = str(error.value)
    assert "expected" in message
    assert "got" in message


# ---------------------------------------------------------------------------------------------
# Constructor arguments
# ---------------------------------------------------------------------------------------------

CONSTRUCTOR_CASES = [
    # d_out not divisible by num_heads
    pytest.param(
        lambda: afs.MultiHeadAttention(3, 5, 6, 0.0, num_heads=2),
        ValueError,
        r"d_out.*num_heads=2.*d_out=5",
        id="d_out-not-divisible",
    ),
    # dropout outside [0, 1)
    pytest.param(
        lambda: afs.CausalAttention(3, 2, 6, dropout=1.0),
        ValueError,
        r"dropout: expected a float in \[0, 1\), got 1\.0",
        id="dropout-1",
    ),
    pytest.param(
        lambda: afs.MultiHeadAttention(3, 2, 6, -0.1, 2),
        ValueError,
        r"dropout: expected a float in \[0, 1\), got -0\.1",
        id="dropout-negative",
    ),
    pytest.param(
        lambda: afs.MultiHeadAttentionWrapper(3, 2, 6, 1.5, 2),
        ValueError,
        r"dropout: expected a float in \[0, 1\)",
        id="dropout-wrapper",
    ),
    pytest.param(
        lambda: afs.CausalAttention(3, 2, 6, dropout="0.1"),
        TypeError,
        r"dropout: expected a float.*got str",
        id="dropout-str",
    ),
    pytest.param(
        lambda: afs.CausalAttention(3, 2, 6, dropout=None),
        TypeError,
        r"dropout: expected a float.*got NoneType",
        id="dropout-none",
    ),
    pytest.param(
        lambda: afs.MultiHeadAttention(3, 2, 6, True, 2),
        TypeError,
        r"dropout: expected a float.*got bool",
        id="dropout-bool",
    ),
    # non-positive or non-int sizes
    pytest.param(
        lambda: afs.SelfAttentionV1(0, 2),
        ValueError,
        r"d_in: expected a positive int, got 0",
        id="d_in-zero",
    ),
    pytest.param(
        lambda: afs.SelfAttentionV2(3, -1),
        ValueError,
        r"d_out: expected a positive int, got -1",
        id="d_out-negative",
    ),
    pytest.param(
        lambda: afs.CausalAttention(3, 2, 2.5, 0.0),
        TypeError,
        r"context_length: expected a positive int, got float 2\.5",
        id="context_length-float",
    ),
    pytest.param(
        lambda: afs.MultiHeadAttention(4, 4, 6, 0.0, num_heads=True),
        TypeError,
        r"num_heads: expected a positive int, got bool True",
        id="num_heads-bool",
    ),
    pytest.param(
        lambda: afs.MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=0),
        ValueError,
        r"num_heads: expected a positive int, got 0",
        id="wrapper-num_heads-zero",
    ),
    pytest.param(
        lambda: afs.WideMultiHeadAttention(50, num_heads=-2),
        ValueError,
        r"num_heads: expected a positive int, got -2",
        id="wide-num_heads-negative",
    ),
    pytest.param(
        lambda: afs.CrossAttention(3, 0, 2),
        ValueError,
        r"d_context: expected a positive int, got 0",
        id="d_context-zero",
    ),
    pytest.param(
        lambda: afs.SelfAttentionV2(3, 2, qkv_bias=1),
        TypeError,
        r"qkv_bias: expected a bool, got int 1",
        id="qkv_bias-int",
    ),
    pytest.param(
        lambda: afs.MultiHeadAttention(4, 4, 6, 0.0, 2, fused="yes"),
        TypeError,
        r"fused: expected a bool, got str",
        id="fused-str",
    ),
    pytest.param(
        lambda: afs.causal_mask(0),
        ValueError,
        r"num_tokens: expected a positive int, got 0",
        id="causal_mask-zero",
    ),
    pytest.param(
        lambda: afs.causal_mask(6.0),
        TypeError,
        r"num_tokens: expected a positive int, got float",
        id="causal_mask-float",
    ),
    pytest.param(
        lambda: afs.toy_sentence(dtype=torch.int64),
        TypeError,
        r"dtype: expected a floating torch\.dtype, got torch\.int64",
        id="toy_sentence-int-dtype",
    ),
    pytest.param(
        lambda: afs.toy_sentence(dtype="float32"),
        TypeError,
        r"dtype: expected a floating torch\.dtype",
        id="toy_sentence-str-dtype",
    ),
]


@pytest.mark.parametrize(("make", "error", "match"), CONSTRUCTOR_CASES)
def test_bad_constructor_arguments(make: Callable[[], object], error: type, match: str) -> None:
    with pytest.raises(error, match=match) as info:
        make()
    check_message(info)


# ---------------------------------------------------------------------------------------------
# Inputs to forward
# ---------------------------------------------------------------------------------------------


def causal() -> afs.CausalAttention:
    return afs.CausalAttention(3, 2, context_length=6, dropout=0.0)


def multi_head(fused: bool = False) -> afs.MultiHeadAttention:
    return afs.MultiHeadAttention(3, 4, context_length=6, dropout=0.0, num_heads=2, fused=fused)


FORWARD_CASES = [
    # wrong rank
    pytest.param(
        lambda: causal()(torch.rand(6, 3)),
        ValueError,
        r"x: expected a tensor of shape \(b, t, d_in\), got 2 dimension\(s\) with shape \(6, 3\)",
        id="causal-2d",
    ),
    pytest.param(
        lambda: multi_head()(torch.rand(6, 3)),
        ValueError,
        r"x: expected a tensor of shape \(b, t, d_in\), got 2 dimension",
        id="multi-head-2d",
    ),
    pytest.param(
        lambda: afs.MultiHeadAttentionWrapper(3, 2, 6, 0.0, 2)(torch.rand(6, 3)),
        ValueError,
        r"x: expected a tensor of shape \(b, t, d_in\)",
        id="wrapper-2d",
    ),
    pytest.param(
        lambda: afs.SelfAttentionV1(3, 2)(torch.rand(1, 2, 6, 3)),
        ValueError,
        r"x: expected a tensor of shape \(t, d_in\) or \(b, t, d_in\), got 4 dimension",
        id="v1-4d",
    ),
    pytest.param(
        lambda: afs.SelfAttentionV2(3, 2)(torch.rand(3)),
        ValueError,
        r"x: expected a tensor of shape \(t, d_in\) or \(b, t, d_in\), got 1 dimension",
        id="v2-1d",
    ),
    # last dimension is not d_in
    pytest.param(
        lambda: causal()(torch.rand(2, 6, 4)),
        ValueError,
        r"x: expected the last dimension to be d_in=3, got shape \(2, 6, 4\)",
        id="causal-last-dim",
    ),
    pytest.param(
        lambda: afs.SelfAttentionV1(3, 2)(torch.rand(6, 5)),
        ValueError,
        r"x: expected the last dimension to be d_in=3",
        id="v1-last-dim",
    ),
    pytest.param(
        lambda: afs.WideMultiHeadAttention(50, 8)(torch.rand(1, 6, 49)),
        ValueError,
        r"x: expected the last dimension to be d_in=50",
        id="wide-last-dim",
    ),
    # more tokens than context_length
    pytest.param(
        lambda: causal()(torch.rand(2, 7, 3)),
        ValueError,
        r"x: expected at most context_length=6 tokens, got 7",
        id="causal-too-long",
    ),
    pytest.param(
        lambda: multi_head()(torch.rand(1, 9, 3)),
        ValueError,
        r"x: expected at most context_length=6 tokens, got 9.*larger context_length",
        id="multi-head-too-long",
    ),
    pytest.param(
        lambda: multi_head(fused=True)(torch.rand(1, 9, 3)),
        ValueError,
        r"x: expected at most context_length=6 tokens",
        id="fused-too-long",
    ),
    # no tokens at all
    pytest.param(
        lambda: causal()(torch.rand(2, 0, 3)),
        ValueError,
        r"x: expected at least one token, got shape \(2, 0, 3\)",
        id="no-tokens",
    ),
    # integer input
    pytest.param(
        lambda: causal()(torch.ones(2, 6, 3, dtype=torch.int64)),
        TypeError,
        r"x: expected a floating-point tensor \(e\.g\. torch\.float32\), got torch\.int64",
        id="causal-int",
    ),
    pytest.param(
        lambda: afs.simplified_attention(torch.tensor([[1, 2], [3, 4]])),
        TypeError,
        r"inputs: expected a floating-point tensor.*float",
        id="simplified-int",
    ),
    pytest.param(
        lambda: afs.softmax_stable(torch.tensor([1, 2, 3])),
        TypeError,
        r"x: expected a floating-point tensor",
        id="softmax-int",
    ),
    # not a tensor
    pytest.param(
        lambda: causal()([[[0.1, 0.2, 0.3]]]),
        TypeError,
        r"x: expected a torch\.Tensor of shape \(b, t, d_in\), got list",
        id="causal-list",
    ),
    pytest.param(
        lambda: afs.simplified_attention_loop(None),
        TypeError,
        r"inputs: expected a torch\.Tensor of shape \(t, d_in\), got NoneType",
        id="loop-none",
    ),
    pytest.param(
        lambda: afs.softmax_naive([1.0, 2.0]),
        TypeError,
        r"x: expected a torch\.Tensor",
        id="softmax-list",
    ),
    # dtype differs from the weights
    pytest.param(
        lambda: causal()(torch.rand(2, 6, 3, dtype=torch.float64)),
        TypeError,
        r"x: expected dtype torch\.float32 like the module's weights, got torch\.float64",
        id="causal-float64",
    ),
    pytest.param(
        lambda: afs.SelfAttentionV1(3, 2)(torch.rand(6, 3, dtype=torch.float64)),
        TypeError,
        r"x: expected dtype torch\.float32.*got torch\.float64",
        id="v1-float64",
    ),
    pytest.param(
        lambda: multi_head().double()(torch.rand(1, 6, 3)),
        TypeError,
        r"x: expected dtype torch\.float64.*got torch\.float32",
        id="multi-head-double-module",
    ),
    # device differs from the weights (a meta tensor stands in for another device)
    pytest.param(
        lambda: causal()(torch.empty(2, 6, 3, device="meta")),
        ValueError,
        r"x: expected a tensor on the module's device cpu, got meta",
        id="causal-other-device",
    ),
    # return_weights on the fused path, or not a bool
    pytest.param(
        lambda: multi_head(fused=True)(torch.rand(1, 6, 3), return_weights=True),
        ValueError,
        r"return_weights: expected False on the fused path.*got True",
        id="fused-return-weights",
    ),
    pytest.param(
        lambda: causal()(torch.rand(1, 6, 3), return_weights=1),
        TypeError,
        r"return_weights: expected a bool, got int 1",
        id="return-weights-int",
    ),
    pytest.param(
        lambda: afs.MultiHeadAttentionWrapper(3, 2, 6, 0.0, 2)(
            torch.rand(1, 6, 3), return_weights="yes"
        ),
        TypeError,
        r"return_weights: expected a bool",
        id="wrapper-return-weights-str",
    ),
    # cross-attention
    pytest.param(
        lambda: afs.CrossAttention(3, 4, 2)(torch.rand(2, 5, 3), torch.rand(3, 7, 4)),
        ValueError,
        r"context: expected the same batch size as x \(2\), got 3",
        id="cross-batch",
    ),
    pytest.param(
        lambda: afs.CrossAttention(3, 4, 2)(torch.rand(2, 5, 3), torch.rand(2, 7, 5)),
        ValueError,
        r"context: expected the last dimension to be d_context=4, got shape \(2, 7, 5\)",
        id="cross-d_context",
    ),
    pytest.param(
        lambda: afs.CrossAttention(3, 4, 2)(torch.rand(2, 5, 2), torch.rand(2, 7, 4)),
        ValueError,
        r"x: expected the last dimension to be d_in=3",
        id="cross-d_in",
    ),
    pytest.param(
        lambda: afs.CrossAttention(3, 4, 2)(torch.rand(2, 5, 3), torch.rand(7, 4)),
        ValueError,
        r"context: expected a tensor of shape \(b, s, d_context\)",
        id="cross-context-2d",
    ),
    # layout helpers
    pytest.param(
        lambda: afs.split_heads(torch.rand(2, 6, 10), 3),
        ValueError,
        r"num_heads: expected a divisor of the last dimension d_out=10, got 3",
        id="split-heads-non-divisor",
    ),
    pytest.param(
        lambda: afs.split_heads(torch.rand(6, 10), 2),
        ValueError,
        r"x: expected a tensor of shape \(b, t, d_out\)",
        id="split-heads-2d",
    ),
    pytest.param(
        lambda: afs.split_heads(torch.rand(2, 6, 10), 0),
        ValueError,
        r"num_heads: expected a positive int, got 0",
        id="split-heads-zero",
    ),
    pytest.param(
        lambda: afs.merge_heads(torch.rand(2, 6, 10)),
        ValueError,
        r"x: expected a tensor of shape \(b, h, t, d_h\), got 3 dimension",
        id="merge-heads-3d",
    ),
    pytest.param(
        lambda: afs.describe_layout([1, 2, 3]),
        TypeError,
        r"x: expected a torch\.Tensor, got list",
        id="describe-layout-list",
    ),
    # softmax dim
    pytest.param(
        lambda: afs.softmax_naive(torch.rand(6), dim=1),
        ValueError,
        r"dim: expected a dimension in \[-1, 0\] for a tensor of shape \(6,\), got 1",
        id="softmax-naive-dim",
    ),
    pytest.param(
        lambda: afs.softmax_stable(torch.rand(2, 3), dim=-3),
        ValueError,
        r"dim: expected a dimension in \[-2, 1\].*got -3",
        id="softmax-stable-dim",
    ),
    pytest.param(
        lambda: afs.softmax_stable(torch.rand(2, 3), dim=1.0),
        TypeError,
        r"dim: expected an int, got float",
        id="softmax-float-dim",
    ),
]


@pytest.mark.parametrize(("call", "error", "match"), FORWARD_CASES)
def test_bad_inputs(call: Callable[[], object], error: type, match: str) -> None:
    with pytest.raises(error, match=match) as info:
        call()
    check_message(info)


# ---------------------------------------------------------------------------------------------
# Plot functions
# ---------------------------------------------------------------------------------------------

PLOT_CASES = [
    pytest.param(
        lambda: afs.plot_attention(torch.rand(2, 6, 6)),
        ValueError,
        r"weights: expected a tensor of shape \(t, s\), got shape \(2, 6, 6\).*weights\[0\]",
        id="plot-attention-3d",
    ),
    pytest.param(
        lambda: afs.plot_attention([[0.5, 0.5], [0.5, 0.5]]),
        TypeError,
        r"weights: expected a torch\.Tensor, got list",
        id="plot-attention-list",
    ),
    pytest.param(
        lambda: afs.plot_attention(torch.rand(6, 6), ["a", "b", "c"]),
        ValueError,
        r"tokens: expected 6 labels to match the weights, got 3",
        id="plot-attention-labels",
    ),
    pytest.param(
        lambda: afs.plot_attention(torch.rand(6, 6), "abcdef"),
        TypeError,
        r"tokens: expected a sequence of strings, got a single str",
        id="plot-attention-str-labels",
    ),
    pytest.param(
        lambda: afs.plot_attention(torch.rand(2, 4), ["a", "b"], key_tokens=["x", "y", "z"]),
        ValueError,
        r"key_tokens: expected 4 labels to match the weights, got 3",
        id="plot-attention-key-labels",
    ),
    pytest.param(
        lambda: afs.plot_attention_heads(torch.rand(6, 6)),
        ValueError,
        r"weights: expected a tensor of shape \(h, t, s\), got shape \(6, 6\)",
        id="plot-heads-2d",
    ),
    pytest.param(
        lambda: afs.plot_attention_heads(torch.rand(2, 3, 3), ["a", "b"]),
        ValueError,
        r"tokens: expected 3 labels to match the weights, got 2",
        id="plot-heads-labels",
    ),
    pytest.param(
        lambda: afs.plot_attention_heads(torch.rand(2, 3, 3), max_cols=0),
        ValueError,
        r"max_cols: expected a positive int, got 0",
        id="plot-heads-max-cols",
    ),
    pytest.param(
        lambda: afs.plot_layout(torch.rand(2, 3, 4)),
        ValueError,
        r"x: expected a tensor with 2 dimensions, got shape \(2, 3, 4\)",
        id="plot-layout-3d",
    ),
    pytest.param(
        lambda: afs.plot_layout("not a tensor"),
        TypeError,
        r"x: expected a torch\.Tensor, got str",
        id="plot-layout-str",
    ),
]


@pytest.mark.parametrize(("call", "error", "match"), PLOT_CASES)
def test_bad_plot_arguments(call: Callable[[], object], error: type, match: str) -> None:
    with pytest.raises(error, match=match) as info:
        call()
    check_message(info)


# ---------------------------------------------------------------------------------------------
# Checks are real checks, not asserts
# ---------------------------------------------------------------------------------------------


def package_sources() -> list[Path]:
    """The package's modules, subpackages included, less the exercise checks (which fail by
    ``assert``, as pytest's tests do, and are never run under ``python -O``)."""
    package = Path(afs.__file__).parent
    return sorted(path for path in package.rglob("*.py") if "exercises" not in path.parts)


def test_package_sources_are_found() -> None:
    names = {path.name for path in package_sources()}
    assert {"_checks.py", "causal.py", "multihead.py", "trainable.py", "layout.py"} <= names


@pytest.mark.parametrize(
    "path", package_sources(), ids=lambda path: str(path.relative_to(Path(afs.__file__).parent))
)
def test_no_assert_statements_in_the_package(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    asserts = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Assert)]
    assert asserts == [], f"{path.name} uses assert on lines {asserts}; raise an error instead"


def test_numpy_bools_are_bools_and_other_types_are_named_in_full() -> None:
    module = afs.MultiHeadAttention(3, 2, 6, 0.0, 2, qkv_bias=np.bool_(True))
    assert module.W_query.bias is not None
    with pytest.raises(TypeError, match=r"qkv_bias: expected a bool, got torch.Tensor tensor"):
        afs.MultiHeadAttention(3, 2, 6, 0.0, 2, qkv_bias=torch.tensor(True))


def test_softmax_stable_matches_torch_on_edge_cases() -> None:
    cases = [
        torch.tensor(2.0),  # 0-d: one entry, weight 1
        torch.zeros(3, 0),  # an empty last dimension
        torch.zeros(0, 3),  # no rows at all: an empty result, not an error
        torch.tensor([1.0, float("nan"), 0.0]),  # nan spreads to the whole slice
        torch.full((2, 3), float("-inf")),  # nothing to attend to: nan
        torch.tensor([[1e4, 0.0], [float("inf"), 1.0]]),
    ]
    for x in cases:
        expected = torch.softmax(x, dim=-1)
        got = afs.softmax_stable(x)
        assert got.shape == expected.shape
        assert torch.allclose(got, expected, equal_nan=True), x


def test_fused_may_be_switched_and_a_wrong_value_is_named_at_the_next_call() -> None:
    module = multi_head()
    x = torch.randn(2, 5, 3)
    explicit = module(x)
    module.fused = True
    assert torch.allclose(module(x), explicit, atol=1e-6)
    module.fused = np.bool_(False)
    assert torch.equal(module(x), explicit)
    module.fused = "yes"
    for call in (lambda: module(x), lambda: module(x, return_weights=True)):
        with pytest.raises(TypeError, match=r"fused: expected a bool, got str 'yes'"):
            call()


def test_context_length_cannot_change_after_construction() -> None:
    module = multi_head()
    with pytest.raises(AttributeError):  # Python's wording differs between versions
        module.context_length = 12
    assert module.context_length == 6
    # The buffer built for context_length is chapter 7's (CachedAttention).
    cached = afs.CachedAttention(3, 4, 6, 0.0, num_heads=2)
    assert cached.mask.shape == (6, 6)
    with pytest.raises(AttributeError):
        cached.context_length = 12
    with pytest.raises(ValueError, match=r"x: expected at most context_length=6 tokens, got 7"):
        module(torch.randn(1, 7, 3))


# ---------------------------------------------------------------------------------------------
# Devices, NumPy bools, and what nan and infinity do
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda: afs.causal_mask(6, device="gpu"),
            ValueError,
            r"device: expected a device .*'gpu'",
        ),
        (lambda: afs.causal_mask(6, device="cuda:x"), ValueError, r"got 'cuda:x'"),
        (lambda: afs.causal_mask(6, device=""), ValueError, r"device: expected a device"),
        (lambda: afs.toy_sentence(device="CPU"), ValueError, r"device: expected a device .*'CPU'"),
        (lambda: afs.toy_sentence(device=1.5), TypeError, r"device: expected a torch\.device"),
        (lambda: afs.causal_mask(6, device=0), TypeError, r"device: .*got int 0; write 'cuda:0'"),
        (lambda: afs.causal_mask(6, device=True), TypeError, r"device: .*got bool True"),
    ],
    ids=["gpu", "cuda-x", "empty", "upper-case", "float", "int", "bool"],
)
def test_bad_devices_are_named(call: Callable[[], object], error: type, match: str) -> None:
    with pytest.raises(error, match=match) as info:
        call()
    check_message(info)


def test_good_devices_still_work() -> None:
    assert afs.causal_mask(3, device="cpu").device == torch.device("cpu")
    assert afs.causal_mask(3, device=torch.device("cpu")).shape == (3, 3)
    _, inputs = afs.toy_sentence(device="cpu")
    assert inputs.device.type == "cpu"
    # A device torch can parse but this machine lacks is torch's own error, left as it is:
    # matched by type only, since its wording differs between torch's CPU and CUDA builds.
    if not torch.cuda.is_available():
        with pytest.raises((RuntimeError, AssertionError)):
            afs.causal_mask(3, device="cuda")


def test_numpy_bools_work_wherever_a_bool_is_expected() -> None:
    _, inputs = afs.toy_sentence()
    context, weights = afs.simplified_attention(inputs, return_weights=np.bool_(True))
    assert context.shape == (6, 3) and weights.shape == (6, 6)
    only_context = afs.simplified_attention_loop(inputs, return_weights=np.bool_(False))
    torch.testing.assert_close(only_context, context)
    for value, got in [
        (torch.tensor(True), "torch.Tensor"),
        (np.array([True]), "numpy.ndarray"),
        ("True", "str 'True'"),
        (1, "int 1"),
    ]:
        with pytest.raises(TypeError, match=r"return_weights: expected a bool, got ") as info:
            afs.simplified_attention(inputs, return_weights=value)
        message = str(info.value)
        assert got in message
        assert "got bool" not in message


def test_softmax_stable_edge_cases_match_torch() -> None:
    nan, inf = float("nan"), float("inf")
    cases = [
        (torch.tensor(2.0), 0),  # 0-d, reduced over dim 0
        (torch.tensor(-inf), -1),  # 0-d of -inf: torch says nan
        (torch.zeros(0), -1),  # nothing at all
        (torch.zeros(2, 0), 0),  # empty along another dimension
        (torch.tensor([0.0, -inf, -inf]), -1),  # masked entries get exactly 0
        (torch.tensor([[nan, 1.0], [1.0, 2.0]]), 0),  # nan spreads along dim 0 only
        (torch.tensor([inf, inf]), -1),  # inf - inf is nan
        (torch.tensor([1e30, -1e30, 0.0], dtype=torch.float64), -1),
    ]
    for x, dim in cases:
        expected = torch.softmax(x, dim=dim)
        got = afs.softmax_stable(x, dim=dim)
        assert got.shape == expected.shape and got.dtype == expected.dtype, x
        assert torch.equal(torch.isnan(got), torch.isnan(expected)), x
        torch.testing.assert_close(got, expected, equal_nan=True)
    # Exact values, from the definition: one entry gets all the weight.
    assert afs.softmax_stable(torch.tensor(2.0)).item() == 1.0
    assert afs.softmax_stable(torch.tensor([0.0, -inf, -inf])).tolist() == [1.0, 0.0, 0.0]


def test_nan_inputs_are_not_hidden_by_attention() -> None:
    _, inputs = afs.toy_sentence()
    batch = torch.stack([inputs, inputs])  # (b, t, d_in) = (2, 6, 3)
    batch[0, 2, 1] = float("nan")
    context, weights = afs.simplified_attention(batch, return_weights=True)
    # Every token of sequence 0 is compared with the nan token: all nan. Sequence 1 is intact.
    assert torch.isnan(weights[0]).all() and torch.isnan(context[0]).all()
    assert torch.isfinite(weights[1]).all() and torch.isfinite(context[1]).all()
    loop_context = afs.simplified_attention_loop(batch[0])
    assert torch.isnan(loop_context).all()
