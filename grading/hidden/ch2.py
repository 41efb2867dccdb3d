"""Hidden checks of chapter 2: loaded by the grader, never shipped to students.

Each calls the answer on sizes the public checks do not use, so an answer fitted to the
public sizes (a hard-coded d_k, a missing transpose hidden by shapes that cannot be copied
untransposed, a layer's bias left out) fails here.
"""

from __future__ import annotations

import torch

from attention_from_scratch.exercises import get_exercise
from attention_from_scratch.exercises.ch2 import (
    _check_context,
    _check_count,
    _check_dots,
    _check_v2_into_v1,
    _tied_result,
)

v2_into_v1 = get_exercise("ch2-ex-v2-into-v1")


@v2_into_v1.check(
    points=1,
    hint="With d_in = d_out (4 and 4) and a batch of inputs, the copied weights must still "
    "compute what v2 computes.",
    hidden=True,
)
def square_weights_and_a_batch(v2_into_v1):
    _check_v2_into_v1(v2_into_v1, 4, 4, seed=3030, x_shape=(2, 6, 4))


qkv_bias = get_exercise("ch2-ex-qkv-bias")


@qkv_bias.check(
    points=1,
    hint="The count must hold for any sizes, d_in = d_out = 1 included.",
    hidden=True,
)
def counts_for_other_sizes(qkv_parameter_count):
    _check_count(qkv_parameter_count, [(1, 1, True), (16, 64, True), (64, 16, False)])


step = get_exercise("ch2-ex-step")


@step.check(
    points=1,
    hint="For other sizes (3 tokens, d_in = 2, d_out = 6) and the first and last tokens, "
    "the context vector must still be right.",
    hidden=True,
)
def other_sizes_first_and_last_token(context_vector):
    _check_context(context_vector, t=3, d_in=2, d_out=6, i=0, seed=3031)
    _check_context(context_vector, t=3, d_in=2, d_out=6, i=2, seed=3032)


symmetric = get_exercise("ch2-ex-symmetric")


@symmetric.check(
    points=1,
    hint="With a layer that has a bias, the queries and keys are the layer's outputs, bias "
    "included.",
    hidden=True,
)
def a_layer_with_a_bias(tied_attention):
    (scores, weights), (expected_scores, expected_weights) = _tied_result(
        tied_attention, 5, 4, 2, bias=True, seed=3033
    )
    assert torch.allclose(scores, expected_scores, atol=1e-4), (
        "wrong scores for a layer with a bias: use the layer's outputs, bias included"
    )
    if torch.allclose(weights, torch.softmax(expected_scores, dim=-1), atol=1e-5):
        raise AssertionError("the scores are not divided by sqrt(d_k) before the softmax")
    assert torch.allclose(weights, expected_weights, atol=1e-5), (
        "wrong weights for a layer with a bias"
    )


sigma = get_exercise("ch2-ex-sigma")


@sigma.check(
    points=1,
    hint="For d_k = 1 and sigma = 0.5, the dot products must still be those of the pairs "
    "drawn from the generator.",
    hidden=True,
)
def other_sizes(dot_products):
    _check_dots(dot_products, n=3000, d_k=1, sigma_=0.5, seed=3034)
