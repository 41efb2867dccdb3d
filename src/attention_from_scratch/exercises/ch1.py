"""Checks for the exercises of chapter 1, "Simplified attention".

Expected values are computed here from the toy sentence itself, never from a learner's code.
"""

from __future__ import annotations

import torch

from ..toy import toy_sentence
from ._core import Exercise, answer_tensor


def _reference() -> tuple[list[str], torch.Tensor, torch.Tensor]:
    """The toy sentence's tokens, its simplified attention weights and context vectors."""
    tokens, inputs = toy_sentence()
    weights = torch.softmax(inputs @ inputs.T, dim=-1)  # (t, t)
    return tokens, weights, weights @ inputs  # (t, d_in)


step_context = Exercise("ch1-ex-step-context", chapter=1)


@step_context.check(
    points=1,
    hint="`weights_step` must be the softmax of the six scores of 'step': shape (6,), "
    "positive, summing to one.",
)
def step_weights(weights_step):
    _, weights, _ = _reference()
    assert torch.allclose(answer_tensor(weights_step, (6,)), weights[5], atol=1e-4)


@step_context.check(
    points=2,
    hint="`context_step` must be the weighted sum of all six embeddings, shape (3,): "
    "sum over j of weights_step[j] * inputs[j].",
)
def step_context_vector(context_step):
    _, _, context = _reference()
    assert torch.allclose(answer_tensor(context_step, (3,)), context[5], atol=1e-4)


shift = Exercise(
    "ch1-ex-shift",
    chapter=1,
    manual_points=2,
    rubric="1 point: shifting every score by c leaves the weights unchanged because e^c "
    "cancels between numerator and denominator. 1 point: multiplying changes the "
    "differences between scores, so the weights sharpen (factor > 1) or flatten (< 1).",
)

temperature = Exercise(
    "ch1-ex-temperature",
    chapter=1,
    manual_points=1,
    rubric="Says that softmax subtracts the largest score before exponentiating, so no "
    "exponent is positive and nothing overflows.",
)


@temperature.check(
    points=1,
    hint="`cold` must be softmax(scores_journey / 0.001): all weight on 'journey', shape (6,).",
)
def cold_is_one_hot(cold):
    expected = torch.zeros(6)
    expected[1] = 1.0
    assert torch.allclose(answer_tensor(cold, (6,)), expected, atol=1e-4)


@temperature.check(
    points=1,
    hint="`hot` must be softmax(scores_journey / 1000): nearly uniform weights of 1/6.",
)
def hot_is_uniform(hot):
    assert torch.allclose(answer_tensor(hot, (6,)), torch.full((6,), 1 / 6), atol=1e-3)


rows_columns = Exercise(
    "ch1-ex-rows-columns",
    chapter=1,
    manual_points=1,
    rubric="Rows are normalised by softmax (each query hands out one unit); columns are not: "
    "a column sum is the attention a token receives.",
)


@rows_columns.check(
    points=1,
    hint="`column_sums` must be weights.sum(dim=0): one number per token, shape (6,).",
)
def column_sums_values(column_sums):
    _, weights, _ = _reference()
    assert torch.allclose(answer_tensor(column_sums, (6,)), weights.sum(dim=0), atol=1e-4)


self_attention = Exercise(
    "ch1-ex-self",
    chapter=1,
    manual_points=2,
    rubric="1 point: the score with itself is the squared length, with another token "
    "length times length times cos(angle). 1 point: a longer token pointing in a similar "
    "direction ('journey') can beat the token itself.",
)


@self_attention.check(
    points=1,
    hint="`favourites` must be a list of six tokens: favourites[i] is the token that token "
    "i attends to most (the argmax of row i of `weights`).",
)
def favourite_tokens(favourites):
    tokens, weights, _ = _reference()
    assert isinstance(favourites, list)
    assert favourites == [tokens[int(row.argmax())] for row in weights]
