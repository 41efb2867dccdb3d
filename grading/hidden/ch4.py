"""Hidden checks of chapter 4: loaded by the grader, never shipped to students."""

from __future__ import annotations

import torch

from attention_from_scratch.exercises import answer_module, get_exercise

one_head = get_exercise("ch4-ex-one-head")
count_parameters = get_exercise("ch4-ex-count-parameters")
permute_heads = get_exercise("ch4-ex-permute-heads")


@one_head.check(
    points=1,
    hint="The two sides must agree on any input, not only on `batch`: copy every weight.",
    hidden=True,
)
def agree_on_another_input(one_head, causal, linear):
    mha, ca, out = answer_module(one_head), answer_module(causal), answer_module(linear)
    generator = torch.Generator().manual_seed(4)
    x = torch.randn(3, 5, mha.W_query.in_features, generator=generator)  # (b, t, d_in)
    with torch.no_grad():
        assert torch.allclose(mha(x), out(ca(x)), atol=1e-5)  # (b, t, d_out)


@count_parameters.check(
    points=1,
    hint="`formula` must hold for any sizes, including d_in != d_out and d_out = 1.",
    hidden=True,
)
def formula_for_other_sizes(formula):
    for d_in, d_out, bias in [(1, 1, False), (1, 1, True), (768, 64, True), (128, 256, False)]:
        expected = 3 * d_in * d_out + (3 * d_out if bias else 0) + d_out * d_out + d_out
        assert formula(d_in, d_out, bias) == expected


@permute_heads.check(
    points=1,
    hint="Permute the row blocks of W_key and W_value too, weights and biases, like W_query.",
    hidden=True,
)
def keys_values_and_biases_permuted(original, permuted, perm):
    first, second = answer_module(original), answer_module(permuted)
    d_h = first.head_dim
    for name in ("W_query", "W_key", "W_value"):
        source, target = getattr(first, name), getattr(second, name)
        weight_blocks = source.weight.split(d_h)  # h blocks of (d_h, d_in)
        bias_blocks = source.bias.split(d_h)  # h blocks of (d_h,)
        assert torch.equal(target.weight, torch.cat([weight_blocks[p] for p in perm]))
        assert torch.equal(target.bias, torch.cat([bias_blocks[p] for p in perm]))
