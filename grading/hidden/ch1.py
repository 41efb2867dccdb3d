"""Hidden checks of chapter 1: loaded by the grader, never shipped to students.

The public checks try one input each; these try other sizes, another dtype and the extremes
that a fixed shape, a hard-coded dimension or a softmax that overflows gets wrong.
"""

from __future__ import annotations

import torch

from attention_from_scratch.exercises import get_exercise
from attention_from_scratch.exercises.ch1 import (
    _inputs,
    assert_context,
    assert_favourites,
    assert_received,
    assert_softmax_temperature,
    run_attention_received,
    run_context_vector,
    run_favourites,
    run_softmax_temperature,
)

step_context = get_exercise("ch1-ex-step-context")


@step_context.check(
    points=1,
    hint="Does your function work for any number of tokens and features, keep the dtype of "
    "the inputs, and survive scores in the hundreds?",
    hidden=True,
)
def context_of_other_sizes(context_vector):
    for seed, t, d_in, scale, dtype, i in (
        (111, 1, 1, 1.0, torch.float32, 0),
        (112, 9, 2, 1.0, torch.float64, 8),
        (113, 6, 3, 12.0, torch.float32, 2),  # scores past 100: e^100 overflows
    ):
        x = _inputs(seed, t, d_in, scale, dtype=dtype)
        assert_context(run_context_vector(context_vector, x, i), x, i)


temperature = get_exercise("ch1-ex-temperature")


@temperature.check(
    points=1,
    hint="Try T = 0.001 and T = 1000, a single row of scores, a batch of matrices, and rows "
    "whose scores differ by hundreds: the weights must follow the last dimension and never "
    "overflow or vanish.",
    hidden=True,
)
def softmax_temperature_extremes(softmax_temperature):
    generator = torch.Generator().manual_seed(212)
    row = torch.rand(6, generator=generator) + 1  # (t,), scores between 1 and 2
    batch = torch.randn(2, 3, 4, generator=generator, dtype=torch.float64)  # (b, t, t)
    # Rows hundreds apart: one maximum for the whole tensor leaves the low rows all 0 (0 / 0).
    apart = torch.rand(2, 3, 5, generator=generator) + torch.tensor([0.0, -300.0, 200.0])[:, None]
    for scores, t in ((row, 0.001), (row, 1000.0), (batch, 0.7), (apart, 0.05)):
        got = run_softmax_temperature(softmax_temperature, scores, t)
        assert_softmax_temperature(got, scores, t)


rows_columns = get_exercise("ch1-ex-rows-columns")


@rows_columns.check(
    points=1,
    hint="Any number of tokens: one sum per token, and together they make t.",
    hidden=True,
)
def received_by_other_sentences(attention_received):
    for seed, t, d_in in ((311, 1, 2), (312, 10, 5)):
        x = _inputs(seed, t, d_in)
        assert_received(run_attention_received(attention_received, x), x)


self_attention = get_exercise("ch1-ex-self")


@self_attention.check(
    points=1,
    hint="Any sentence: one index per token, read from its own row of weights.",
    hidden=True,
)
def favourites_of_other_sentences(favourites):
    one_token = _inputs(411, 1, 3)
    # Orthogonal embeddings of equal length: every token attends most to itself.
    own = 2 * torch.eye(4)
    longer = _inputs(412, 5, 2) * torch.linspace(2.0, 0.5, 5)[:, None]
    for x in (one_token, own, longer):
        assert_favourites(run_favourites(favourites, x), x)
