"""Checks for the exercises of chapter 4, "Multi-head attention".

Every answer is a function that the checks call with modules and tensors they build and seed
themselves, at sizes the chapter never prints; the expected values come from the package's
own modules or from first principles, never from a learner's objects.
"""

from __future__ import annotations

import copy
import re

import torch
import torch.nn.functional as F
from torch import nn

from .._checks import check_divisible
from ..causal import CausalAttention
from ..multihead import MultiHeadAttention, MultiHeadAttentionWrapper
from ._core import Exercise, answer_module
from ._shortcuts import ShortcutTaken, refusing

_LAYERS = ("W_query", "W_key", "W_value", "out_proj")


def _module(
    d_in: int,
    d_out: int,
    num_heads: int,
    qkv_bias: bool,
    seed: int,
    context_length: int = 8,
    dropout: float = 0.0,
) -> MultiHeadAttention:
    """A ``MultiHeadAttention`` on the CPU with weights drawn from its own generator."""
    module = MultiHeadAttention(
        d_in, d_out, context_length, dropout, num_heads=num_heads, qkv_bias=qkv_bias
    )
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.6)
    return module.eval()


def _inputs(b: int, t: int, d_in: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(b, t, d_in, generator=generator)  # (b, t, d_in)


# ---------------------------------------------------------------------------------------
one_head = Exercise("ch4-ex-one-head", chapter=4)


def one_head_agrees(
    as_causal_and_linear,
    d_in: int,
    d_out: int,
    qkv_bias: bool,
    seed: int,
    context_length: int = 7,
    dropout: float = 0.0,
):
    """Hand the learner's function a one-head module; its two layers must compute the same,
    on inputs as long as the module accepts, and (with ``dropout``) in training mode too."""
    mha = _module(d_in, d_out, 1, qkv_bias, seed, context_length, dropout)
    x = _inputs(3, context_length, d_in, seed + 1)  # (b, t, d_in)
    given = copy.deepcopy(mha)
    answer = as_causal_and_linear(given)
    assert isinstance(answer, tuple) and len(answer) == 2, "return a pair (causal, linear)"
    causal, linear = answer
    assert type(causal) is CausalAttention, "the first module must be a CausalAttention"
    assert type(linear) is nn.Linear, "the second module must be an nn.Linear"
    # New modules: no parameter (nor its memory) may be one of the module's own.
    theirs = {p.data_ptr() for p in given.parameters()}
    for module in (causal, linear):
        assert not any(p.data_ptr() in theirs for p in module.parameters()), (
            "return new modules: yours share weights with mha (copy the values instead)"
        )
    causal, linear = answer_module(causal), answer_module(linear)
    for module in (causal, linear):
        assert "forward" not in vars(module), "keep the modules' own forward"
        assert not module._forward_hooks and not module._forward_pre_hooks, "no hooks"
    for name in ("W_query", "W_key", "W_value"):
        assert type(getattr(causal, name)) is nn.Linear, f"causal.{name}: an nn.Linear"
    assert causal.context_length == mha.context_length, (
        f"causal must accept the inputs mha accepts: context_length {mha.context_length}, "
        f"not {causal.context_length}"
    )
    refused = (MultiHeadAttention, nn.MultiheadAttention, F.scaled_dot_product_attention)
    with torch.no_grad(), refusing(*refused, write="CausalAttention and nn.Linear"):
        got = linear(causal(x))  # (b, t, d_out)
    with torch.no_grad():
        expected = mha(x)  # (b, t, d_out)
    if qkv_bias and causal.W_query.bias is None:
        raise AssertionError("the module has query, key and value biases: causal needs them")
    assert torch.allclose(got, expected, atol=1e-5), (
        "linear(causal(x)) differs from the module's output"
    )
    if dropout:  # the same draws drop the same weights: (b, 1, t, t) and (b, t, t)
        causal.train(), linear.train(), mha.train()
        with torch.no_grad(), refusing(*refused, write="CausalAttention and nn.Linear"):
            torch.manual_seed(seed)
            got = linear(causal(x))
        with torch.no_grad():
            torch.manual_seed(seed)
            expected = mha(x)
        assert torch.allclose(got, expected, atol=1e-5), (
            "in training mode linear(causal(x)) differs from the module's output: does "
            "causal drop attention weights as mha does?"
        )


@one_head.check(
    points=2,
    hint="`as_causal_and_linear(mha)` gets a MultiHeadAttention with one head and returns a "
    "new CausalAttention and nn.Linear. With one head, d_h = d_out: which of the module's "
    "layers does each of yours correspond to, and what must it hold?",
)
def causal_and_linear_compute_the_module(as_causal_and_linear):
    one_head_agrees(as_causal_and_linear, d_in=5, d_out=6, qkv_bias=False, seed=41)


# ---------------------------------------------------------------------------------------
count_parameters = Exercise(
    "ch4-ex-count-parameters",
    chapter=4,
    manual_points=1,
    rubric="Says num_heads does not appear: the heads split the d_out outputs of each "
    "projection, so more heads are smaller heads, not more weights.",
)


def counted(d_in: int, d_out: int, num_heads: int, qkv_bias: bool) -> int:
    """The package's count: the parameters of the module itself."""
    module = MultiHeadAttention(d_in, d_out, 4, 0.0, num_heads=num_heads, qkv_bias=qkv_bias)
    return sum(p.numel() for p in module.parameters())


def count_matches(parameter_count, sizes) -> None:
    """Call the learner's count on sizes the check picks, with every module refused."""
    refused = (
        MultiHeadAttention,
        MultiHeadAttentionWrapper,
        CausalAttention,
        nn.MultiheadAttention,
        nn.Linear,
    )
    for d_in, d_out, num_heads, qkv_bias in sizes:
        with refusing(*refused, write="the count from the sizes"):
            got = parameter_count(d_in, d_out, num_heads, qkv_bias)
        # Exactly int: a subclass (bool among them) could answer the comparisons below.
        assert type(got) is int, f"return an int, not {type(got).__name__}"
        expected = counted(d_in, d_out, num_heads, qkv_bias)
        where = f"d_in={d_in}, d_out={d_out}, num_heads={num_heads}, qkv_bias={qkv_bias}"
        if got == expected - d_out:
            raise AssertionError(f"{where}: out_proj's bias is missing")
        if qkv_bias and got == expected - 3 * d_out:
            raise AssertionError(f"{where}: the three projections' biases are missing")
        if not qkv_bias and got == expected + 3 * d_out:
            raise AssertionError(f"{where}: qkv_bias=False, yet projection biases are counted")
        assert got == expected, f"{where}: got {got}, the module has {expected}"


@count_parameters.check(
    points=2,
    hint="`parameter_count(d_in, d_out, num_heads, qkv_bias)` must return the number the "
    "module has. Count layer by layer, each weight and each bias on its own (print the "
    "named parameters of a small module to see them); which layers have a bias when "
    "qkv_bias is False?",
)
def count_on_sizes_the_check_picks(parameter_count):
    count_matches(
        parameter_count, [(5, 12, 3, False), (7, 6, 2, True), (1, 4, 4, True), (12, 5, 1, False)]
    )


# ---------------------------------------------------------------------------------------
divisible = Exercise(
    "ch4-ex-divisible",
    chapter=4,
    manual_points=1,
    rubric="Says that d_out is cut into num_heads heads of equal size d_h = d_out / num_heads "
    "(view(b, t, h, d_h)), so d_out must be a multiple of num_heads; names the two fixes "
    "(a d_out that num_heads divides, or a num_heads that divides d_out).",
)

_SPLIT_REFUSED = (check_divisible, MultiHeadAttention, nn.MultiheadAttention)
# The package's split_heads and merge_heads live in chapter 5's module, which this one may not
# import (the layering of the package): they are refused by their full names.
_LAYOUT_MODULE = f"{__name__.split('.')[0]}.layout"
_LAYOUT_REFUSED = tuple(f"{_LAYOUT_MODULE}.{name}" for name in ("split_heads", "merge_heads"))


def splits_like_the_definition(
    split_into_heads, b: int, t: int, d_out: int, h: int, seed: int, refused=()
):
    """The learner's split of a tensor the check draws, against view-then-swap by hand."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(b, t, d_out, generator=generator)  # (b, t, d_out)
    d_h = d_out // h
    with refusing(*_SPLIT_REFUSED, *refused, write="the split", named=_LAYOUT_REFUSED):
        got = split_into_heads(x.clone(), h)
    # A plain tensor: a subclass could answer the comparisons below.
    assert type(got) is torch.Tensor, f"return a torch.Tensor, not {type(got).__name__}"
    # Head m owns features m*d_h .. (m+1)*d_h - 1 of every token: (b, h, t, d_h).
    expected = torch.stack([x[:, :, m * d_h : (m + 1) * d_h] for m in range(h)], dim=1)
    where = f"x of shape {(b, t, d_out)}, num_heads={h}"
    if tuple(got.shape) == (b, t, h, d_h) and t != h:
        raise AssertionError(f"{where}: the head axis must come before the token axis")
    assert tuple(got.shape) == (b, h, t, d_h), f"{where}: expected shape {(b, h, t, d_h)}"
    scrambled = x.reshape(b, h, t, d_h)  # a view straight to the final shape
    if h > 1 and t > 1 and torch.equal(got, scrambled):
        raise AssertionError(
            f"{where}: right shape, scrambled numbers: a view straight to (b, h, t, d_h) "
            "mixes the tokens"
        )
    assert torch.equal(got, expected), f"{where}: a head holds the wrong numbers"


def refuses_with_a_clear_error(split_into_heads, d_out: int, h: int, refused=()) -> None:
    x = torch.zeros(2, 3, d_out)  # (b, t, d_out)
    write = "the check and its error"
    try:
        with refusing(*_SPLIT_REFUSED, *refused, write=write, named=_LAYOUT_REFUSED):
            split_into_heads(x, h)
    except ShortcutTaken:
        raise
    except ValueError as error:
        message = str(error)
        numbers = re.findall(r"\d+", message)
        assert str(d_out) in numbers and str(h) in numbers and len(set(numbers)) <= 6, (
            f"the ValueError must name d_out={d_out} and num_heads={h}, got {message!r}"
        )
        return
    except RuntimeError as error:
        raise AssertionError(
            f"d_out={d_out}, num_heads={h}: the reshape failed ({type(error).__name__}) "
            "before your own check"
        ) from None
    raise AssertionError(f"d_out={d_out}, num_heads={h}: no ValueError was raised")


@divisible.check(
    points=1,
    hint="`split_into_heads(x, num_heads)` must turn (b, t, d_out) into (b, h, t, d_h), "
    "head m holding features m*d_h to (m+1)*d_h - 1 of each token: cut the last axis "
    "first, then bring the heads in front of the tokens.",
)
def split_values(split_into_heads):
    splits_like_the_definition(split_into_heads, b=2, t=5, d_out=12, h=3, seed=43)


@divisible.check(
    points=1,
    hint="When num_heads does not divide d_out, `split_into_heads` must raise a ValueError "
    "whose message names both numbers, before any reshape can fail.",
)
def split_refuses_a_bad_head_count(split_into_heads):
    refuses_with_a_clear_error(split_into_heads, d_out=10, h=4)


# ---------------------------------------------------------------------------------------
permute_heads = Exercise(
    "ch4-ex-permute-heads",
    chapter=4,
    manual_points=1,
    rubric="Says that without permuting the columns of out_proj the heads' outputs meet the "
    "wrong weights of out_proj, so the output changes (the weights of each head do not).",
)


def _head_order(weights: torch.Tensor, reference: torch.Tensor) -> list[int] | None:
    """For each head of ``weights`` (b, h, t, t), the head of ``reference`` it equals."""
    order = []
    for i in range(weights.shape[1]):
        same = [
            j
            for j in range(reference.shape[1])
            if torch.allclose(weights[:, i], reference[:, j], atol=1e-5)
        ]
        if len(same) != 1:
            return None
        order.append(same[0])
    return order


def _blocks_moved(module: MultiHeadAttention, original: MultiHeadAttention, perm) -> None:
    """Each projection's block of rows m (weight and bias) is the original's block perm[m].
    The weights alone cannot show a key bias left behind: it adds the same amount to every
    score of a row, which the softmax ignores."""
    d_h = original.head_dim
    index = torch.cat([torch.arange(p * d_h, (p + 1) * d_h) for p in perm])  # (d_out,)
    for name in _LAYERS[:3]:
        mine, theirs = getattr(module, name), getattr(original, name)
        for part in ("weight", "bias"):
            if getattr(theirs, part) is None:
                continue
            assert torch.equal(getattr(mine, part).detach(), getattr(theirs, part)[index]), (
                f"{name}.{part}: block m must be the original's block perm[m]"
            )


def permutation_holds(
    permute_heads, d_in: int, d_out: int, h: int, qkv_bias: bool, perm, seed: int, part: str
):
    """Build a module, permute its heads with the learner's function, compare ``part``:
    "heads" (each head's weights) or "output" (the module's output)."""
    original = _module(d_in, d_out, h, qkv_bias, seed)
    x = _inputs(2, 7, d_in, seed + 1)  # (b, t, d_in)
    answer = permute_heads(copy.deepcopy(original), list(perm))
    with torch.no_grad():
        expected, expected_weights = original(x, return_weights=True)
    assert type(answer) is MultiHeadAttention, "return a MultiHeadAttention"
    module = answer_module(answer)
    assert "forward" not in vars(module), "keep the module's own forward"
    assert not module._forward_hooks and not module._forward_pre_hooks, "no hooks"
    assert (module.d_in, module.d_out, module.num_heads) == (d_in, d_out, h), "same sizes"
    module.fused = False
    with torch.no_grad():
        out, weights = module(x, return_weights=True)
    order = _head_order(weights, expected_weights)
    inverse = [list(perm).index(i) for i in range(h)]
    if part == "heads":
        if order == list(range(h)):
            raise AssertionError("the heads are still in their old order")
        if order == inverse and inverse != list(perm):
            raise AssertionError(
                "head i holds the original's head perm.index(i): the inverse permutation"
            )
        assert order == list(perm), "head i must compute what the original's head perm[i] did"
        _blocks_moved(module, original, perm)
    else:
        if order == list(range(h)):
            raise AssertionError("no head moved: the output point needs the heads reordered")
        if order == list(perm) and not torch.allclose(out, expected, atol=1e-5):
            raise AssertionError(
                "the heads moved, but out_proj still reads their outputs in the old order"
            )
        assert torch.allclose(out, expected, atol=1e-5), "the output changed"


@permute_heads.check(
    points=1,
    hint="Head m owns a block of d_h rows in each of W_query, W_key and W_value (weights and "
    "biases): the new module's block m must be the original's block perm[m].",
)
def heads_are_reordered(permute_heads):
    permutation_holds(permute_heads, 5, 12, 4, True, [1, 3, 0, 2], seed=47, part="heads")


@permute_heads.check(
    points=1,
    hint="The output must not change: out_proj reads the heads' outputs side by side, so "
    "which of its weights must follow the heads?",
)
def output_is_unchanged(permute_heads):
    permutation_holds(permute_heads, 5, 12, 4, True, [1, 3, 0, 2], seed=47, part="output")
