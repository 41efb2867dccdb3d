"""Checks for the exercises of chapter 2, "Trainable queries, keys and values".

Each auto-graded answer is a function that the checks call on inputs they draw themselves
(seeded generators, sizes the chapter never prints); the expected values are computed here
from first principles or the package, never from a learner's objects. Where an exercise asks
the learner to build what the package already has, the answer runs with it refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..trainable import SelfAttentionV1, SelfAttentionV2
from ._core import Exercise, answer_tensor
from ._shortcuts import call_refusing, later_attention


def _aten(*names: str) -> tuple[Any, ...]:
    """torch.ops.aten's operators of these names that this torch has, each overload too."""
    packets = [getattr(torch.ops.aten, name) for name in names if hasattr(torch.ops.aten, name)]
    return (*packets, *(getattr(op, overload) for op in packets for overload in op.overloads()))


_ATTENTION_SHORTCUTS = (
    SelfAttentionV1,
    SelfAttentionV2,
    F.scaled_dot_product_attention,
    F.multi_head_attention_forward,
    nn.MultiheadAttention,
    *_aten(
        "scaled_dot_product_attention", "_scaled_dot_product_attention_math",
        "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_fused_attention_overrideable", "_native_multi_head_attention",
    ),
)  # fmt: skip
# The package's attention of later chapters, refused by name (this module may not import
# them): with the check's weights copied in, each computes the same context vectors.
_LATER_ATTENTION = later_attention(2)


def _answer(
    function: Callable[..., Any],
    *args: Any,
    refused: tuple[Any, ...],
    write: str,
    named: tuple[str, ...] = (),
) -> Any:
    """Call a learner's function with ``refused`` (and ``named``) refused and return what it
    returned, checked to be plain (``call_refusing``). The check computes its own
    expectation only after this returns, so the answer cannot read it from the check's
    frame."""
    return call_refusing(function, *args, shortcuts=refused, write=write, named=named)


def _draw(generator: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=generator)


def _seeded_v2(d_in: int, d_out: int, seed: int) -> SelfAttentionV2:
    """A SelfAttentionV2 whose weights come from a generator of its own seed."""
    generator = torch.Generator().manual_seed(seed)
    module = SelfAttentionV2(d_in, d_out)
    with torch.no_grad():
        for name in ("W_query", "W_key", "W_value"):
            getattr(module, name).weight.copy_(_draw(generator, d_out, d_in) / d_in**0.5)
    return module


def _check_v2_into_v1(v2_into_v1: object, d_in: int, d_out: int, seed: int, x_shape) -> None:
    """Call the learner's transfer function on a module of the check's own and compare."""
    assert callable(v2_into_v1), "`v2_into_v1` must be a function"
    v2 = _seeded_v2(d_in, d_out, seed)
    # As the learner's notebook runs it, autograd recording.
    v1 = _answer(v2_into_v1, v2, refused=(), write="the copy")
    # The check's own reference, rebuilt from the seeds after the answer ran: nothing the
    # answer could reach (the check's frame included) takes part.
    reference = _seeded_v2(d_in, d_out, seed)
    names = ("W_query", "W_key", "W_value")
    stored = {name: getattr(reference, name).weight.detach().clone() for name in names}
    x = _draw(torch.Generator().manual_seed(seed + 1), *x_shape)
    with torch.no_grad():
        expected = reference(x)
    assert type(v1) is SelfAttentionV1, (
        f"v2_into_v1 returned {type(v1).__name__}, expected a new SelfAttentionV1"
    )
    for name, weight in stored.items():
        assert torch.equal(getattr(v2, name).weight.detach(), weight), (
            "v2_into_v1 changed the module it was given; leave v2 as it was"
        )
    assert all(p.requires_grad for p in v2.parameters()), (
        "v2_into_v1 switched off gradients of the module it was given; leave v2 as it was"
    )
    assert all(p.requires_grad for p in v1.parameters()), (
        "the new SelfAttentionV1 must be trainable: its parameters must require gradients"
    )
    for name, weight in stored.items():
        got = getattr(v1, name).detach().cpu()
        if got.shape == weight.shape and torch.allclose(got, weight) and d_in == d_out:
            raise AssertionError(
                f"{name} was copied without transposing: nn.Linear stores (d_out, d_in)"
            )
        assert got.shape == (d_in, d_out) and torch.allclose(got, weight.T), (
            f"{name} of the SelfAttentionV1 does not hold v2's {name} weight"
        )
    with torch.no_grad():
        got = v1.cpu()(x)
    assert torch.allclose(answer_tensor(got, tuple(expected.shape)), expected, atol=1e-5)
    # A training step on v1 must leave v2 alone: the weights are copied, not shared.
    with torch.no_grad():
        for parameter in v1.parameters():
            parameter.add_(1.0)
    for name, weight in stored.items():
        assert torch.equal(getattr(v2, name).weight.detach().cpu(), weight.cpu()), (
            f"{name} of the SelfAttentionV1 shares memory with v2, so changing one (a "
            "training step) changes the other; copy the numbers instead"
        )


v2_into_v1 = Exercise("ch2-ex-v2-into-v1", chapter=2)


@v2_into_v1.check(
    points=2,
    hint="`v2_into_v1(v2)` must return a new SelfAttentionV1 of v2's sizes holding v2's "
    "three weights, so that both compute the same function (the check uses sizes of its "
    "own, d_in = 5 and d_out = 3). Mind how nn.Linear lays out its weight.",
)
def v1_computes_what_v2_computes(v2_into_v1):
    _check_v2_into_v1(v2_into_v1, 5, 3, seed=2020, x_shape=(4, 5))


qkv_bias = Exercise(
    "ch2-ex-qkv-bias",
    chapter=2,
    manual_points=1,
    rubric="Says the output changes for two reasons: the biases, and the key and value "
    "weights, which are drawn later from the random stream once the query bias took its "
    "numbers (the query weights agree, the key weights do not).",
)


def _expected_count(d_in: int, d_out: int, qkv_bias: bool) -> int:
    return 3 * (d_in * d_out + (d_out if qkv_bias else 0))


def _check_count(qkv_parameter_count: object, cases) -> None:
    """Call the learner's count on the check's sizes, with the modules refused."""
    assert callable(qkv_parameter_count), "`qkv_parameter_count` must be a function"
    for d_in, d_out, bias in cases:
        # nn.Module.__init__: any module at all (a convolution, nn.Bilinear) is built.
        got = _answer(
            qkv_parameter_count,
            d_in,
            d_out,
            bias,
            refused=(SelfAttentionV1, SelfAttentionV2, nn.Linear, nn.Module.__init__),
            write="the count from the sizes",
        )
        assert type(got) is int, (
            f"qkv_parameter_count returned {type(got).__name__}, expected an int"
        )
        wanted = _expected_count(d_in, d_out, bias)
        if got == wanted:
            continue
        if bias and got == _expected_count(d_in, d_out, False):
            raise AssertionError("the biases are not counted")
        if got == d_in * d_out + (d_out if bias else 0):
            raise AssertionError("only one projection is counted; there are three")
        if bias and got == 3 * (d_in * d_out + d_in):
            raise AssertionError("a bias has one number per output feature, not per input")
        assert got == wanted, f"wrong count for d_in={d_in}, d_out={d_out}, qkv_bias={bias}"


@qkv_bias.check(
    points=1,
    hint="`qkv_parameter_count(d_in, d_out, qkv_bias)` must return, as an int, the number "
    "of trained numbers, from the sizes alone: count what each of the three projections "
    "holds (nn.Linear's documentation gives the shapes of its weight and bias).",
)
def parameter_count(qkv_parameter_count):
    _check_count(qkv_parameter_count, [(7, 5, True), (7, 5, False)])


step = Exercise("ch2-ex-step", chapter=2)


def _reference_context(x, w_query, w_key, w_value, i) -> torch.Tensor:
    query = x[i] @ w_query  # (d_out,)
    keys = x @ w_key  # (t, d_out)
    weights = torch.softmax(query @ keys.T / keys.shape[-1] ** 0.5, dim=-1)  # (t,)
    return weights @ (x @ w_value)  # (t,) @ (t, d_out) -> (d_out,)


def _check_context(context_vector: object, t: int, d_in: int, d_out: int, i: int, seed: int):
    """Call the learner's function on the check's own inputs and weights."""
    assert callable(context_vector), "`context_vector` must be a function"
    generator = torch.Generator().manual_seed(seed)
    x = _draw(generator, t, d_in)
    w_query, w_key, w_value = (_draw(generator, d_in, d_out) for _ in range(3))
    got = _answer(
        context_vector,
        *(tensor.clone() for tensor in (x, w_query, w_key, w_value)),
        i,
        refused=_ATTENTION_SHORTCUTS,
        write="the context vector, step by step",
        named=_LATER_ATTENTION,
    )
    got = answer_tensor(got, (d_out,))
    # The check's own inputs, drawn again after the answer ran (it could reach the first).
    generator = torch.Generator().manual_seed(seed)
    x = _draw(generator, t, d_in)
    w_query, w_key, w_value = (_draw(generator, d_in, d_out) for _ in range(3))
    expected = _reference_context(x, w_query, w_key, w_value, i)
    if torch.allclose(got, expected, atol=1e-4):
        return
    keys, values = x @ w_key, x @ w_value
    scores = x @ w_query @ keys.T  # (t, t)
    mistakes = {
        "the scores are not divided by sqrt(d_k)": torch.softmax(scores[i], -1) @ values,
        "the scores are divided by d_k instead of sqrt(d_k)": torch.softmax(scores[i] / d_out, -1)
        @ values,
        "the scale must be the size of the keys, d_k = d_out, not d_in": torch.softmax(
            scores[i] / d_in**0.5, -1
        )
        @ values,
        "softmax ran over the wrong axis: each query's weights must sum to one": (
            torch.softmax(scores / d_out**0.5, dim=0)[i] @ values
        ),
    }
    for message, wrong in mistakes.items():
        if torch.allclose(got, wrong, atol=1e-4):
            raise AssertionError(message)
    raise AssertionError(f"wrong context vector for token {i} of {t}")


@step.check(
    points=2,
    hint="`context_vector(x, W_query, W_key, W_value, i)` must return z^(i), shape "
    "(d_out,), for any sizes (the check uses 7 tokens, d_in = 5, d_out = 4): token i's "
    "query against every key, the scaled softmax, then the weighted sum of the values.",
)
def step_context_vector(context_vector):
    _check_context(context_vector, t=7, d_in=5, d_out=4, i=3, seed=2021)


symmetric = Exercise(
    "ch2-ex-symmetric",
    chapter=2,
    manual_points=1,
    rubric="Explains that softmax divides each row by its own sum, and the rows have "
    "different sums, so the symmetry of the scores is lost in the weights.",
)


def _seeded_linear(d_in: int, d_out: int, bias: bool, seed: int) -> nn.Linear:
    generator = torch.Generator().manual_seed(seed)
    layer = nn.Linear(d_in, d_out, bias=bias)
    with torch.no_grad():
        layer.weight.copy_(_draw(generator, d_out, d_in) / d_in**0.5)
        if bias:
            layer.bias.copy_(_draw(generator, d_out))
    return layer


def _tied_result(tied_attention: object, t: int, d_in: int, d_out: int, bias: bool, seed: int):
    """The learner's (scores, weights) and the check's own, for the check's inputs."""
    assert callable(tied_attention), "`tied_attention` must be a function"
    layer = _seeded_linear(d_in, d_out, bias, seed)
    x = _draw(torch.Generator().manual_seed(seed + 1), t, d_in)
    with torch.no_grad():
        got = _answer(
            tied_attention,
            x.clone(),
            layer,
            refused=_ATTENTION_SHORTCUTS,
            write="the tied scores and weights",
            named=_LATER_ATTENTION,
        )
        # The check's own layer and inputs, built again after the answer ran.
        layer = _seeded_linear(d_in, d_out, bias, seed)
        x = _draw(torch.Generator().manual_seed(seed + 1), t, d_in)
        q = layer(x)  # (t, d_out), queries and keys alike
        scores = q @ q.T  # (t, t)
        weights = torch.softmax(scores / d_out**0.5, dim=-1)  # (t, t)
    assert type(got) is tuple and len(got) == 2, (
        "tied_attention must return the pair (scores, weights)"
    )
    return (answer_tensor(got[0], (t, t)), answer_tensor(got[1], (t, t))), (scores, weights)


@symmetric.check(
    points=1,
    hint="The first item `tied_attention(x, layer)` returns must be the (t, t) scores, "
    "before softmax, with the queries and the keys both made by `layer` from `x` (the "
    "check uses its own x and layer).",
)
def scores_with_one_layer(tied_attention):
    (scores, _), (expected, _) = _tied_result(tied_attention, 9, 7, 3, bias=False, seed=2022)
    if torch.allclose(scores, expected / 3**0.5, atol=1e-4):
        raise AssertionError("the scores must come before the division by sqrt(d_k)")
    assert torch.allclose(scores, expected, atol=1e-4), "wrong scores"


@symmetric.check(
    points=1,
    hint="The second item must be the weights: the scaled scores through a softmax that "
    "makes each query's row sum to one.",
)
def weights_with_one_layer(tied_attention):
    (_, weights), (scores, expected) = _tied_result(tied_attention, 9, 7, 3, bias=False, seed=2022)
    if torch.allclose(weights, torch.softmax(scores, dim=-1), atol=1e-5):
        raise AssertionError("the scores are not divided by sqrt(d_k) before the softmax")
    if torch.allclose(weights, torch.softmax(scores / 3**0.5, dim=0), atol=1e-5):
        raise AssertionError("softmax ran over the wrong axis: rows must sum to one")
    assert torch.allclose(weights, expected, atol=1e-5), "wrong weights"


sigma = Exercise(
    "ch2-ex-sigma",
    chapter=2,
    manual_points=1,
    rubric="Expects Var(q . k) = sigma^4 d_k = 1024 and sigma^4 = 16 after scaling; says the "
    "scaling removes the d_k, not the sigma^4.",
)


def _check_dots(dot_products: object, n: int, d_k: int, sigma_: float, seed: int) -> None:
    """Call the learner's function with the check's generator and compare the draws."""
    got = _answer(
        dot_products,
        n,
        d_k,
        sigma_,
        torch.Generator().manual_seed(seed),
        refused=(),
        write="the dot products",
    )
    reference = torch.Generator().manual_seed(seed)  # drawn after the answer ran
    q = sigma_ * torch.randn(n, d_k, generator=reference)  # (n, d_k)
    k = sigma_ * torch.randn(n, d_k, generator=reference)  # (n, d_k)
    expected = (q * k).sum(dim=-1)  # (n,)
    assert isinstance(got, torch.Tensor) and tuple(got.shape) == (n,), (
        f"dot_products must return a tensor of shape ({n},), one dot product per pair"
    )
    got = got.detach().cpu().to(expected.dtype)
    if torch.allclose(got, expected * sigma_**2, rtol=1e-4, atol=1e-3):
        raise AssertionError("the entries were scaled by the variance, not the standard deviation")
    assert torch.allclose(got, expected, rtol=1e-4, atol=1e-3), (
        "not the dot products of the pairs drawn from `generator`, queries first"
    )


@sigma.check(
    points=1,
    hint="`dot_products(n, d_k, sigma, generator)` must draw the n queries, then the n "
    "keys, from `generator`, each entry with standard deviation sigma, and return one dot "
    "product per pair, shape (n,). The check calls it with sizes of its own.",
)
def dot_products_of_the_pairs(dot_products):
    _check_dots(dot_products, n=5000, d_k=48, sigma_=3.0, seed=2023)
