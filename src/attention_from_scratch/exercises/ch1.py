"""Checks for the exercises of chapter 1, "Simplified attention".

Each auto-graded exercise asks for a function; the checks call it on inputs they draw
themselves and compare it with a reference computed here from first principles, never from a
learner's objects. Where an exercise asks the learner to build something torch or the package
already has, the answer runs with that shortcut refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from ..simplified import (
    simplified_attention,
    simplified_attention_loop,
    softmax_naive,
    softmax_stable,
)
from ._core import Exercise, answer_tensor
from ._shortcuts import call_refusing, later_attention


def _aten(*names: str) -> tuple[Any, ...]:
    """torch.ops.aten's operators of these names that this torch has, each overload too:
    calls below torch's Python layer reach the refusal only under these names."""
    packets = [getattr(torch.ops.aten, name) for name in names if hasattr(torch.ops.aten, name)]
    return (*packets, *(getattr(op, overload) for op in packets for overload in op.overloads()))


def _torch(*names: str) -> tuple[Any, ...]:
    """torch's private aliases of these names that this torch has (``torch._softmax``)."""
    return tuple(getattr(torch, name) for name in names if hasattr(torch, name))


# Every way torch has to multiply matrices or vectors in one call. `a @ b` reaches the
# refusal as Tensor.matmul (Tensor.__matmul__ alone does not catch it).
MATRIX_PRODUCTS = (
    torch.matmul,
    torch.Tensor.matmul,
    torch.Tensor.__matmul__,
    torch.Tensor.__rmatmul__,
    torch.linalg.matmul,
    torch.mm,
    torch.Tensor.mm,
    torch.mv,
    torch.Tensor.mv,
    torch.bmm,
    torch.Tensor.bmm,
    torch.addmm,
    torch.Tensor.addmm,
    torch.Tensor.addmm_,
    torch.addmv,
    torch.Tensor.addmv,
    torch.Tensor.addmv_,
    torch.baddbmm,
    torch.Tensor.baddbmm,
    torch.Tensor.baddbmm_,
    torch.addbmm,
    torch.Tensor.addbmm,
    torch.Tensor.addbmm_,
    torch.chain_matmul,
    torch.einsum,
    torch.inner,
    torch.Tensor.inner,
    torch.tensordot,
    torch.linalg.vecdot,
    torch.linalg.multi_dot,
    F.linear,
    F.bilinear,
    F.scaled_dot_product_attention,
    *_aten(
        "mm", "mv", "bmm", "matmul", "addmm", "addmv", "baddbmm", "addbmm", "_addmm_activation",
        "einsum", "linear", "tensordot", "inner", "chain_matmul", "linalg_matmul",
        "linalg_multi_dot", "linalg_vecdot",
    ),
)  # fmt: skip
SOFTMAXES = (
    torch.softmax,
    torch.Tensor.softmax,
    F.softmax,
    F.softmin,
    torch.special.softmax,
    torch.log_softmax,
    torch.Tensor.log_softmax,
    F.log_softmax,
    torch.special.log_softmax,
    torch.masked.softmax,
    torch.masked.log_softmax,
    torch.sparse.softmax,
    torch.sparse.log_softmax,
    *_torch("_softmax", "_log_softmax", "_safe_softmax", "_masked_softmax"),
    *_aten(
        "softmax", "_softmax", "_safe_softmax", "log_softmax", "_log_softmax",
        "special_softmax", "special_log_softmax", "_masked_softmax", "_sparse_softmax",
        "_sparse_log_softmax",
    ),
    softmax_naive,
    softmax_stable,
)  # fmt: skip
# The package's attention of later chapters, refused by name: this module may not import
# them (the package's chapter order). Each computes softmax(q k^T / sqrt(d)) v, which
# identity projections or values turn into chapter 1's weights or context vectors.
LATER_ATTENTION = later_attention(1)
PACKAGE_ATTENTION = (simplified_attention, simplified_attention_loop)
# Every ready-made way to attention weights: the package's, torch's fused kernels and module.
ATTENTION = (
    *PACKAGE_ATTENTION,
    F.scaled_dot_product_attention,
    F.multi_head_attention_forward,
    torch.nn.MultiheadAttention,
    *_torch(
        "_scaled_dot_product_attention_math", "_scaled_dot_product_flash_attention_for_cpu",
        "_native_multi_head_attention",
    ),
    *_aten(
        "scaled_dot_product_attention", "_scaled_dot_product_attention_math",
        "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_fused_attention_overrideable", "_native_multi_head_attention",
    ),
)  # fmt: skip
# A softmax in all but name: exp(x - logsumexp(x)), the last of a logcumsumexp included.
LOGSUMEXPS = (
    torch.logsumexp,
    torch.Tensor.logsumexp,
    torch.special.logsumexp,
    torch.logcumsumexp,
    torch.Tensor.logcumsumexp,
    *_torch("_logcumsumexp"),
    *_aten("logsumexp", "special_logsumexp", "logcumsumexp", "_logcumsumexp"),
)  # fmt: skip


def _answer(
    function: Callable[..., Any],
    *args: Any,
    refused: tuple[Any, ...],
    write: str,
    named: tuple[str, ...] = LATER_ATTENTION,
) -> Any:
    """Call a learner's function on copies of the check's ``args`` with ``refused`` (and
    ``named``) refused, and return what it returned, checked to be a plain object: a tensor
    subclass could compute its values later, outside the refusal, and a list or int subclass
    could compare equal to anything. No torch mode that could change what the check
    computes may be on, before or after, and the check's own tensors (which the answer could
    reach through the call stack) must be as they were."""
    tensors = [arg for arg in args if isinstance(arg, torch.Tensor)]
    before = [bytes(tensor.numpy().tobytes()) for tensor in tensors]
    copies = [arg.clone() if isinstance(arg, torch.Tensor) else arg for arg in args]
    got = call_refusing(function, *copies, shortcuts=refused, write=write, named=named)
    assert [tensor.numpy().tobytes() for tensor in tensors] == before, (
        "the answer changed the check's own inputs"
    )
    return list(got) if isinstance(got, tuple) else got


def _inputs(seed: int, t: int, d_in: int, scale: float = 1.0, **kwargs: Any) -> torch.Tensor:
    """Embeddings ``(t, d_in)`` drawn from the check's own generator, in [0, scale)."""
    generator = torch.Generator().manual_seed(seed)
    return scale * torch.rand(t, d_in, generator=generator, **kwargs)  # (t, d_in)


def _weights(x: torch.Tensor) -> torch.Tensor:
    """Simplified attention weights, softmax(X X^T) along each row, in float64."""
    x = x.double()
    return torch.softmax(x @ x.T, dim=-1)  # (t, t)


def _close(got: torch.Tensor, expected: torch.Tensor, atol: float = 1e-5) -> bool:
    return torch.allclose(got.double(), expected.double(), atol=atol, rtol=1e-4)


# ---------------------------------------------------------------------------------------------
# ch1-ex-step-context
# ---------------------------------------------------------------------------------------------

step_context = Exercise("ch1-ex-step-context", chapter=1)


def run_context_vector(context_vector: Callable[..., Any], x: torch.Tensor, i: int) -> Any:
    """Call the learner's ``context_vector`` with matrix products and the package refused."""
    return _answer(
        context_vector,
        x,
        i,
        refused=(*MATRIX_PRODUCTS, *PACKAGE_ATTENTION),
        write="the scores and the weighted sum without matrix products",
    )


def assert_context(got: object, x: torch.Tensor, i: int) -> None:
    """``got`` must be z^(i) of simplified attention on ``x``; name a common mistake if not."""
    t, d_in = x.shape
    weights = _weights(x)  # (t, t)
    expected = weights[i] @ x.double()  # (d_in,)
    assert isinstance(got, torch.Tensor), f"expected a tensor, got {type(got).__name__}"
    if tuple(got.shape) == (t,) and t != d_in:
        raise AssertionError(
            f"returned {t} numbers, one per token: the weights, not the weighted sum of rows"
        )
    assert tuple(got.shape) == (d_in,), f"expected shape ({d_in},), got {tuple(got.shape)}"
    assert got.dtype == x.dtype, f"expected the inputs' dtype {x.dtype}, got {got.dtype}"
    got = got.detach().cpu()
    if torch.isnan(got).any():
        raise AssertionError("nan in the result: the exponentials overflowed")
    unnormalised = (x.double() @ x[i].double()) @ x.double()  # (d_in,)
    if _close(got, unnormalised):
        raise AssertionError("the rows were weighted by the raw scores, not by softmax")
    assert _close(got, expected), f"wrong context vector for token {i}"


@step_context.check(
    points=2,
    hint="Token i's context vector takes three steps: a score for every token (its dot "
    "product with token i), softmax over those t scores, and the sum of all t rows, each "
    "scaled by its weight. It has d_in numbers, and works for any t and d_in.",
)
def context_of_any_token(context_vector):
    """context_vector(inputs, i) on inputs of the check's own"""
    x = _inputs(101, 5, 4)  # (t, d_in) = (5, 4)
    for i in (0, 3):
        assert_context(run_context_vector(context_vector, x, i), x, i)


# ---------------------------------------------------------------------------------------------
# ch1-ex-shift (graded by hand)
# ---------------------------------------------------------------------------------------------

shift = Exercise(
    "ch1-ex-shift",
    chapter=1,
    manual_points=2,
    rubric="1 point: dividing by the sum changes under a shift, (w_j + c) / (sum w + t c): "
    "the weights tend to the uniform 1/t as c grows, and explode and change sign where the "
    "denominator crosses 0 (c near minus the mean score, about -1.1 here). 1 point: a "
    "constant per row leaves the row-wise softmax unchanged (e^(c_i) cancels within row i); "
    "a constant per column changes it (weight j of every row is multiplied by its own "
    "e^(c_j), which no longer cancels: keys with a large c_j gain).",
)

# ---------------------------------------------------------------------------------------------
# ch1-ex-temperature
# ---------------------------------------------------------------------------------------------

temperature = Exercise(
    "ch1-ex-temperature",
    chapter=1,
    manual_points=1,
    rubric="As T -> 0 the weights become one-hot on the largest score (an argmax); as T "
    "grows they approach the uniform 1/t. No overflow at T = 0.001 because the largest "
    "scaled score is subtracted before exponentiating: no exponent is positive.",
)


def run_softmax_temperature(
    softmax_temperature: Callable[..., Any], scores: torch.Tensor, t: float
) -> Any:
    """Call the learner's ``softmax_temperature`` with ready-made softmaxes refused."""
    return _answer(
        softmax_temperature,
        scores,
        t,
        refused=(*SOFTMAXES, *LOGSUMEXPS, *ATTENTION),
        write="the softmax, from torch.exp",
    )


def assert_softmax_temperature(got: object, scores: torch.Tensor, t: float) -> None:
    """``got`` must be softmax(scores / t) over the last dimension; name a mistake if not."""
    expected = torch.softmax(scores.double() / t, dim=-1)
    assert isinstance(got, torch.Tensor), f"expected a tensor, got {type(got).__name__}"
    assert got.shape == scores.shape, (
        f"expected the shape of the scores {tuple(scores.shape)}, got {tuple(got.shape)}"
    )
    assert got.dtype == scores.dtype, f"expected the scores' dtype {scores.dtype}, got {got.dtype}"
    got = got.detach().cpu()
    if torch.isnan(got).any() or torch.isinf(got).any():
        raise AssertionError(
            "nan or inf in the weights: the exponentials overflowed, or every exponential of "
            "a slice rounded to 0 (0 / 0)"
        )
    if scores.dim() > 1 and _close(got, torch.softmax(scores.double() / t, dim=0)):
        raise AssertionError("normalised along dimension 0, not the last dimension")
    if t != 1 and _close(got, torch.softmax(scores.double() * t, dim=-1)):
        raise AssertionError("the scores were multiplied by the temperature, not divided")
    if t != 1 and _close(got, torch.softmax(scores.double(), dim=-1)):
        raise AssertionError("the temperature changed nothing: it was left out")
    assert _close(got, expected, atol=1e-4), f"wrong weights at T = {t}"


@temperature.check(
    points=1,
    hint="A temperature divides every score before softmax. Divided by a small T, the "
    "scores are large and their exponentials overflow to inf: subtract each row's largest "
    "scaled score before exponentiating (softmax is unchanged when a whole row moves by the "
    "same amount), then divide each row (a slice of the last dimension) by its own sum. "
    "Keep the reduced dimension so that both line up.",
)
def softmax_with_temperature(softmax_temperature):
    """softmax_temperature(scores, T) at T = 0.5, 2 and 0.01"""
    scores = 3 * torch.randn(3, 5, generator=torch.Generator().manual_seed(202))  # (3, 5)
    # At T = 0.01 two rows reach scaled scores of about 470 and 530, and e^x is inf in
    # float32 past x = 88.7: a softmax that exponentiates them unshifted returns nan.
    for t in (0.5, 2.0, 0.01):
        got = run_softmax_temperature(softmax_temperature, scores, t)
        assert_softmax_temperature(got, scores, t)


# ---------------------------------------------------------------------------------------------
# ch1-ex-rows-columns
# ---------------------------------------------------------------------------------------------

rows_columns = Exercise(
    "ch1-ex-rows-columns",
    chapter=1,
    manual_points=1,
    rubric="Rows are normalised by softmax (each query hands out one unit); columns are not: "
    "a column sum is the attention a token receives, larger for tokens that match many "
    "others; together the column sums add up to t.",
)


def run_attention_received(attention_received: Callable[..., Any], x: torch.Tensor) -> Any:
    """Call the learner's ``attention_received`` with softmaxes and attention refused."""
    return _answer(
        attention_received,
        x,
        refused=(*SOFTMAXES, *LOGSUMEXPS, *ATTENTION),
        write="the attention weights, from torch.exp",
    )


def assert_received(got: object, x: torch.Tensor) -> None:
    """``got`` must hold the column sums of softmax(X X^T); name a mistake if not."""
    weights = _weights(x)  # (t, t)
    t = x.shape[0]
    got = answer_tensor(got, (t,))
    if t > 1 and _close(got, torch.ones(t, dtype=torch.float64)):
        raise AssertionError("every sum is 1: those are the rows, each query's own total")
    x64 = x.double()
    if _close(got, (x64 @ x64.T).sum(dim=0)):
        raise AssertionError("summed the scores, not the weights")
    assert _close(got, weights.sum(dim=0)), "wrong column sums"


@rows_columns.check(
    points=1,
    hint="Column j of the weights holds what every query gives token j; add up each column "
    "of the weight matrix of these inputs, not its rows.",
)
def attention_each_token_receives(attention_received):
    """attention_received(inputs) on inputs of the check's own"""
    x = _inputs(303, 7, 3)  # (t, d_in) = (7, 3)
    assert_received(run_attention_received(attention_received, x), x)


# ---------------------------------------------------------------------------------------------
# ch1-ex-self
# ---------------------------------------------------------------------------------------------

self_attention = Exercise(
    "ch1-ex-self",
    chapter=1,
    manual_points=2,
    rubric="1 point: the score with itself is the squared length, with another token "
    "length times length times cos(angle). 1 point: a longer token pointing in a similar "
    "direction (here 'journey') can beat the token itself.",
)


def assert_favourites(got: object, x: torch.Tensor) -> None:
    """``got`` must give, for each row of the weights, the index of its largest entry."""
    weights = _weights(x)  # (t, t)
    t = x.shape[0]
    if isinstance(got, torch.Tensor):
        assert not got.is_floating_point(), "expected token indices (integers), got floats"
        got = got.detach().cpu().tolist()
    assert isinstance(got, (list, tuple)), f"expected a list of ints, got {type(got).__name__}"
    assert len(got) == t, f"expected one index per token ({t}), got {len(got)}"
    assert all(type(j) is int for j in got), "expected int token indices"
    expected = weights.argmax(dim=-1).tolist()
    if got != expected and got == weights.argmax(dim=0).tolist():
        raise AssertionError("took the largest entry of each column, not of each row")
    if got != expected and got == list(range(t)):
        raise AssertionError("every token picked itself, which is not what the weights say")
    assert got == expected, "wrong favourites"


@self_attention.check(
    points=1,
    hint="Each row of the weights is one attending token: find the position of the largest "
    "weight in each row. A token need not pick itself.",
)
def favourites_of_any_sentence(favourites):
    """favourites(inputs) on inputs of the check's own"""
    # Lengths from 0.5 to 2.0: some tokens attend most to a longer neighbour.
    x = _inputs(404, 8, 3) * torch.linspace(0.5, 2.0, 8)[:, None]  # (t, d_in)
    assert favourites_rows_differ_from_self(x)
    assert_favourites(run_favourites(favourites, x), x)


def run_favourites(favourites: Callable[..., Any], x: torch.Tensor) -> Any:
    """Call the learner's ``favourites`` with ready-made attention refused."""
    return _answer(favourites, x, refused=ATTENTION, write="the scores or the weights")


def favourites_rows_differ_from_self(x: torch.Tensor) -> bool:
    """True when some token of ``x`` attends most to another token (a test worth running)."""
    return _weights(x).argmax(dim=-1).tolist() != list(range(x.shape[0]))
