"""Self-checks of the exercises of chapter 1, "Simplified attention".

Each check tries the learner's function on the page's example, the toy sentence, and compares
it with the numbers written out here (public: a reader can compute them by hand) or with a
property every right answer has. Grading is not done here: see :mod:`._core`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..simplified import simplified_attention, softmax_stable
from ..toy import toy_sentence
from ._core import Exercise, answer_tensor


def _toy() -> torch.Tensor:
    _, inputs = toy_sentence()
    return inputs  # (t, d_in) = (6, 3)


def _number(value: object) -> float:
    """A Python number, or a tensor of one number, as a float (a check fails otherwise)."""
    if isinstance(value, torch.Tensor):
        assert value.numel() == 1, f"expected one number, got a tensor of shape {value.shape}"
        return float(value)
    assert isinstance(value, int | float) and not isinstance(value, bool), (
        f"expected a number, got {type(value).__name__}"
    )
    return float(value)


step_context = Exercise("ch1-ex-step-context", chapter=1)


@step_context.check(
    hint="Score token i against every token, keep the k largest scores (torch.topk), "
    "softmax those alone and weight their tokens with the result."
)
def the_context_of_step_from_its_two_best_matches(topk_context: Callable[..., object]) -> None:
    """the context of "step" (i = 5) from its k = 2 best-matching tokens"""
    got = answer_tensor(topk_context(_toy(), 5, 2), (3,))
    # "journey" and "starts" score highest with "step": softmax of their two scores.
    expected = torch.tensor([0.5599, 0.8601, 0.6501])
    assert torch.allclose(got, expected, atol=1e-4), f"got {got.tolist()}"


@step_context.check(
    hint="With k = t every token keeps its weight, so the answer is chapter 1's context "
    "vector; with k = 1 the one best-matching token gets all the weight."
)
def k_equal_to_t_and_k_equal_to_one(topk_context: Callable[..., object]) -> None:
    """k = 6 gives row 5 of the context vectors; k = 1 gives the best-matching token"""
    inputs = _toy()
    everything = answer_tensor(topk_context(inputs, 5, 6), (3,))
    assert torch.allclose(everything, simplified_attention(inputs)[5], atol=1e-5)
    one = answer_tensor(topk_context(inputs, 4, 1), (3,))
    assert torch.allclose(one, inputs[2], atol=1e-6), '"one" matches "starts" best'


# Answered in words: nothing to check automatically.
shift = Exercise("ch1-ex-shift", chapter=1)

temperature = Exercise("ch1-ex-temperature", chapter=1)


def _largest_weight(scores: torch.Tensor, temperature: float) -> float:
    return float(softmax_stable(scores.double() / temperature).max())


@temperature.check(
    hint="The largest weight falls steadily as the temperature grows: search for the "
    "temperature (bisection) until the largest weight equals the target."
)
def half_of_journeys_attention_on_one_token(
    temperature_for: Callable[..., object], scores_journey: torch.Tensor
) -> None:
    """the temperature at which the largest weight of "journey" is 0.5"""
    found = _number(temperature_for(scores_journey, 0.5))
    assert found > 0, f"expected a temperature > 0, got {found}"
    largest = _largest_weight(scores_journey, found)
    assert abs(largest - 0.5) < 1e-4, f"at T = {found:.4g} the largest weight is {largest:.5f}"


@temperature.check(
    hint="Near a target of 1 the temperature is tiny and the scaled scores huge: subtract "
    "the largest scaled score before exponentiating, and search far enough."
)
def a_target_near_one(temperature_for: Callable[..., object], scores_journey: torch.Tensor) -> None:
    """the temperature at which the largest weight of "journey" is 0.999"""
    found = _number(temperature_for(scores_journey, 0.999))
    assert found > 0, f"expected a temperature > 0, got {found}"
    largest = _largest_weight(scores_journey, found)
    assert abs(largest - 0.999) < 1e-4, f"at T = {found:.4g} the largest weight is {largest:.5f}"


rows_columns = Exercise("ch1-ex-rows-columns", chapter=1)


@rows_columns.check(
    hint="Give each token's own score no weight (e^(-inf) is 0), softmax each row over the "
    "other tokens, then add up each column."
)
def what_each_token_receives_from_the_others(received_from_others: Callable[..., object]) -> None:
    """the attention each token of the toy sentence receives from the others"""
    got = answer_tensor(received_from_others(_toy()), (6,))
    expected = torch.tensor([0.8898, 1.3161, 1.3021, 0.8253, 0.7106, 0.9560])
    assert torch.allclose(got, expected, atol=1e-4), f"got {got.tolist()}"


@rows_columns.check(hint="Every row still hands out one unit: the column sums add up to t.")
def the_columns_add_up_to_t(received_from_others: Callable[..., object]) -> None:
    """what the tokens receive adds up to t = 6"""
    got = answer_tensor(received_from_others(_toy()), (6,))
    assert abs(float(got.sum()) - 6.0) < 1e-4, f"the sum is {float(got.sum()):.5f}"


self_attention = Exercise("ch1-ex-self", chapter=1)


@self_attention.check(
    hint="Scaling token i by c multiplies its score with itself by c squared and its score "
    "with every other token by c: find the c at which it overtakes its strongest rival."
)
def the_scale_at_which_one_and_with_win(scale_to_win: Callable[..., object]) -> None:
    """the smallest scale at which "one" (i = 4) and "with" (i = 3) attend most to themselves"""
    inputs = _toy()
    for i, expected in ((4, 1.0751), (3, 1.7083)):
        row = inputs @ inputs[i]  # (t,): token i's scores, not the embeddings
        got = _number(scale_to_win(row, i))
        assert abs(got - expected) < 1e-3, f"i = {i}: got {got:.4f}"


@self_attention.check(hint="A token that already attends most to itself needs no scaling.")
def journey_needs_no_scaling(scale_to_win: Callable[..., object]) -> None:
    """the answer for "journey" (i = 1), which already attends most to itself, is 1"""
    inputs = _toy()
    got = _number(scale_to_win(inputs @ inputs[1], 1))  # (t,) scores of "journey"
    assert abs(got - 1.0) < 1e-6, f"got {got}"
