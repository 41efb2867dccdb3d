"""Checks for the exercises of chapter 2, "Trainable queries, keys and values".

Expected values are computed here from the toy sentence and the chapter's seeds, never from a
learner's code.
"""

from __future__ import annotations

import torch

from ..toy import toy_sentence
from ..trainable import SelfAttentionV2
from ._core import Exercise, answer_module, answer_tensor

v2_into_v1 = Exercise("ch2-ex-v2-into-v1", chapter=2)


@v2_into_v1.check(
    points=2,
    hint="`ex_v1` must give the output of SelfAttentionV2(3, 2) built under "
    "torch.manual_seed(789): copy each nn.Linear weight, transposed, into ex_v1.",
)
def v1_gives_the_seed_789_output(ex_v1):
    _, inputs = toy_sentence()
    torch.manual_seed(789)
    expected = SelfAttentionV2(3, 2)(inputs).detach()  # (t, d_out)
    module = answer_module(ex_v1)
    with torch.no_grad():
        got = module(inputs)
    assert torch.allclose(answer_tensor(got, (6, 2)), expected, atol=1e-5)


qkv_bias = Exercise(
    "ch2-ex-qkv-bias",
    chapter=2,
    manual_points=1,
    rubric="Says the output changes for two reasons: the biases, and the key and value "
    "weights, which are drawn later from the random stream once the query bias took its "
    "numbers.",
)


@qkv_bias.check(
    points=1,
    hint="`with_bias_parameters` must count every parameter of SelfAttentionV2(3, 2, "
    "qkv_bias=True): three (3, 2) weights and three biases of size 2.",
)
def parameter_count(with_bias_parameters):
    assert isinstance(with_bias_parameters, int) and not isinstance(with_bias_parameters, bool)
    assert with_bias_parameters == 3 * (3 * 2 + 2)


step = Exercise("ch2-ex-step", chapter=2)


@step.check(
    points=2,
    hint="`context_vec_5` must be the context vector of 'step' (inputs[5]), shape (2,), "
    "from the seed-123 matrices: softmax(q . k / sqrt(2)) weighted sum of the values.",
)
def step_context_vector(context_vec_5):
    _, inputs = toy_sentence()
    torch.manual_seed(123)
    w_query, w_key, w_value = (torch.rand(3, 2) for _ in range(3))
    query = inputs[5] @ w_query  # (d_out,)
    weights = torch.softmax(query @ (inputs @ w_key).T / 2**0.5, dim=-1)  # (t,)
    assert torch.allclose(
        answer_tensor(context_vec_5, (2,)), weights @ (inputs @ w_value), atol=1e-4
    )


symmetric = Exercise(
    "ch2-ex-symmetric",
    chapter=2,
    manual_points=1,
    rubric="Explains that softmax divides each row by its own sum, and the rows have "
    "different sums, so the symmetry of the scores is lost in the weights.",
)


@symmetric.check(
    points=1,
    hint="`s` must be the (10, 10) score matrix with W_k = W_q: it equals its transpose.",
)
def scores_are_symmetric(s):
    scores = answer_tensor(s, (10, 10))
    assert torch.allclose(scores, scores.T, atol=1e-5) and scores.std() > 0


@symmetric.check(
    points=1,
    hint="`w` must be the (10, 10) weights after the scaled softmax: rows sum to one, and "
    "they are not symmetric.",
)
def weights_are_not_symmetric(w):
    weights = answer_tensor(w, (10, 10))
    assert torch.allclose(weights.sum(dim=-1), torch.ones(10), atol=1e-5)
    assert not torch.allclose(weights, weights.T, atol=1e-6)


sigma = Exercise(
    "ch2-ex-sigma",
    chapter=2,
    manual_points=1,
    rubric="Expects Var(q . k) = sigma^4 d_k = 1024 and sigma^4 = 16 after scaling; says the "
    "scaling removes the d_k, not the sigma^4.",
)


@sigma.check(
    points=1,
    hint="`dots` must hold 20000 dot products of vectors of size 64 with entries of "
    "standard deviation 2: its variance is near 2**4 * 64 = 1024.",
)
def dot_product_variance(dots):
    values = answer_tensor(dots, (20000,))
    assert abs(values.var().item() - 1024) < 0.06 * 1024
