"""Checks for the exercises of chapter 4, "Multi-head attention".

Expected values are computed here from first principles, never from a learner's code.
"""

from __future__ import annotations

import torch

from ..multihead import MultiHeadAttention
from ..toy import toy_sentence
from ._core import Exercise, answer_module


def _batch() -> torch.Tensor:
    _, inputs = toy_sentence()
    return torch.stack((inputs, inputs))  # (b, t, d_in)


one_head = Exercise("ch4-ex-one-head", chapter=4)


@one_head.check(
    points=2,
    hint="`one_head(batch)` must equal `linear(causal(batch))`: copy W_query, W_key and "
    "W_value into `causal` and out_proj into `linear`.",
)
def one_head_is_causal_attention_and_a_linear_layer(one_head, causal, linear):
    batch = _batch()
    mha, ca, out = answer_module(one_head), answer_module(causal), answer_module(linear)
    assert mha.num_heads == 1
    with torch.no_grad():
        assert torch.allclose(mha(batch), out(ca(batch)), atol=1e-5)


count_parameters = Exercise(
    "ch4-ex-count-parameters",
    chapter=4,
    manual_points=1,
    rubric="Says num_heads does not appear: the heads split the d_out outputs of each "
    "projection, so more heads are smaller heads, not more weights.",
)


@count_parameters.check(
    points=2,
    hint="`formula(d_in, d_out, qkv_bias)` must return 3 * d_in * d_out (+ 3 * d_out with "
    "biases) for the projections plus d_out * d_out + d_out for out_proj.",
)
def parameter_formula(formula):
    for d_in, d_out, bias in [(3, 2, False), (3, 8, True), (50, 50, False), (7, 12, True)]:
        expected = 3 * d_in * d_out + (3 * d_out if bias else 0) + d_out * d_out + d_out
        assert formula(d_in, d_out, bias) == expected


divisible = Exercise(
    "ch4-ex-divisible",
    chapter=4,
    manual_points=1,
    rubric="Says that d_out is cut into num_heads heads of equal size d_h = d_out / num_heads "
    "(view(b, t, h, d_h)), so d_out must be a multiple of num_heads.",
)


def _runs_on_the_toy_batch(module: torch.nn.Module, d_out: int) -> None:
    """Fail unless ``module`` maps the toy batch ``(2, 6, 3)`` to ``(2, 6, d_out)``."""
    with torch.no_grad():
        assert tuple(module(_batch()).shape) == (2, 6, d_out)  # (b, t, d_out)


@divisible.check(
    points=1,
    hint="`keep_heads` must be a MultiHeadAttention with d_in=3 and num_heads=4, and a "
    "d_out that 4 divides, e.g. 12 (heads of size 3).",
)
def four_heads_with_a_multiple_of_four(keep_heads):
    module = answer_module(keep_heads)
    assert isinstance(module, MultiHeadAttention)
    assert module.num_heads == 4 and module.d_out % 4 == 0
    _runs_on_the_toy_batch(module, module.d_out)


@divisible.check(
    points=1,
    hint="`keep_d_out` must be a MultiHeadAttention with d_in=3 and d_out=10, and a number "
    "of heads that divides 10: 1, 2, 5 or 10.",
)
def ten_outputs_with_a_divisor_of_ten(keep_d_out):
    module = answer_module(keep_d_out)
    assert isinstance(module, MultiHeadAttention)
    assert module.d_out == 10 and module.num_heads in (1, 2, 5, 10)
    _runs_on_the_toy_batch(module, 10)


permute_heads = Exercise(
    "ch4-ex-permute-heads",
    chapter=4,
    manual_points=1,
    rubric="Says that without permuting the columns of out_proj the heads' outputs meet the "
    "wrong weights, so the output changes.",
)


@permute_heads.check(
    points=1,
    hint="`permuted.W_query.weight` must hold the row blocks of `original`'s in the order "
    "`perm`: head i of `permuted` is head perm[i] of `original`.",
)
def query_rows_permuted(original, permuted, perm):
    first, second = answer_module(original), answer_module(permuted)
    d_h = first.head_dim
    blocks = first.W_query.weight.split(d_h)  # h blocks of (d_h, d_in)
    expected = torch.cat([blocks[p] for p in perm])  # (d_out, d_in)
    assert sorted(perm) == list(range(first.num_heads)) and list(perm) != sorted(perm)
    assert torch.equal(second.W_query.weight, expected)


@permute_heads.check(
    points=1,
    hint="`same` must be the comparison after undoing the out_proj permutation: False, the "
    "output changes.",
)
def forgetting_out_proj_changes_the_output(same):
    assert same is False
