"""Chapter 1's exercises: a correct answer earns every point, a lazy one does not.

The correct answers below are written as a student would write them, with loops and
exponentials, independently of the package's functions under test.
"""

from __future__ import annotations

from pathlib import Path

import torch

from attention_from_scratch import simplified_attention, softmax_stable, toy_sentence
from attention_from_scratch.exercises import load_hidden, run_checks

ROOT = Path(__file__).resolve().parent.parent
load_hidden(ROOT / "grading" / "hidden", chapters=[1])

TOKENS, INPUTS = toy_sentence()


def full_marks(label: str, namespace: dict) -> bool:
    result = run_checks(label, namespace, hidden=True)
    return result.passed and result.earned == result.possible > 0


def reasons(label: str, namespace: dict, hidden: bool = True) -> str:
    result = run_checks(label, namespace, hidden=hidden)
    assert result.earned < result.possible
    return " | ".join(c.reason for c in result.checks if not c.passed)


def by_hand_softmax(scores: torch.Tensor) -> torch.Tensor:
    """A stable softmax over the last dimension, written out."""
    e = torch.exp(scores - scores.max(dim=-1, keepdim=True).values)
    return e / e.sum(dim=-1, keepdim=True)


# ch1-ex-step-context -------------------------------------------------------------------------


def context_vector(inputs: torch.Tensor, i: int) -> torch.Tensor:
    t, d_in = inputs.shape
    scores = torch.zeros(t, dtype=inputs.dtype)
    for j in range(t):
        scores[j] = torch.dot(inputs[i], inputs[j])
    weights = by_hand_softmax(scores)
    z = torch.zeros(d_in, dtype=inputs.dtype)
    for j in range(t):
        z = z + weights[j] * inputs[j]
    return z


def test_step_context_a_loop_answer_earns_full_marks() -> None:
    assert full_marks("ch1-ex-step-context", {"context_vector": context_vector})
    # The published context vector of "step", row 5 of the chapter's context matrix.
    expected = torch.tensor([0.4177, 0.6503, 0.5645])
    assert torch.allclose(context_vector(INPUTS, 5), expected, atol=1e-4)


def test_step_context_refuses_the_copied_row_the_package_and_matrix_products() -> None:
    context = simplified_attention(INPUTS)
    # The answer on the page: row 5 of `context`, whatever the inputs.
    copied = {"context_vector": lambda inputs, i: context[5]}
    assert "expected shape (4,)" in reasons("ch1-ex-step-context", copied)
    # Row i of the toy sentence's context, of the right size for the public check.
    padded = {"context_vector": lambda x, i: torch.cat([context[i], context[i, :1]])}
    assert "wrong context vector" in reasons("ch1-ex-step-context", padded)
    # Delegation to the package.
    lazy = {"context_vector": lambda inputs, i: simplified_attention(inputs)[i]}
    assert "ShortcutTaken" in reasons("ch1-ex-step-context", lazy)
    # The matrix form instead of the loops.
    matrix = {
        "context_vector": lambda x, i: torch.softmax(x @ x[i], dim=-1) @ x,
    }
    assert "Tensor.matmul" in reasons("ch1-ex-step-context", matrix)
    einsum = {
        "context_vector": lambda x, i: torch.einsum(
            "t,td->d", torch.softmax(torch.einsum("td,d->t", x, x[i]), -1), x
        )
    }
    assert "einsum" in reasons("ch1-ex-step-context", einsum)


def test_step_context_asks_for_no_matrix_product_and_nothing_more() -> None:
    # The exercise says "without matrix products"; loops are one way, elementwise products
    # and sums another, and torch.softmax is allowed (the chapter uses it).
    def elementwise(x, i):
        return (torch.softmax((x * x[i]).sum(-1), 0)[:, None] * x).sum(0)

    assert full_marks("ch1-ex-step-context", {"context_vector": elementwise})


def test_step_context_names_common_mistakes() -> None:
    def weights_only(x, i):
        return by_hand_softmax(torch.stack([torch.dot(x[i], row) for row in x]))

    def raw_scores(x, i):
        scores = torch.stack([torch.dot(x[i], row) for row in x])
        return sum(s * row for s, row in zip(scores, x, strict=True))

    assert "the weights, not the weighted sum" in reasons(
        "ch1-ex-step-context", {"context_vector": weights_only}
    )
    assert "raw scores" in reasons("ch1-ex-step-context", {"context_vector": raw_scores})


def test_step_context_hidden_catches_an_overflowing_or_fixed_dtype_answer() -> None:
    def naive(x, i):
        scores = torch.stack([torch.dot(x[i], row) for row in x])
        e = torch.exp(scores)
        weights = e / e.sum()
        return sum(w * row for w, row in zip(weights, x, strict=True))

    assert run_checks("ch1-ex-step-context", {"context_vector": naive}).passed  # public
    assert "overflowed" in reasons("ch1-ex-step-context", {"context_vector": naive})

    def float32_only(x, i):
        return context_vector(x.float(), i)

    assert run_checks("ch1-ex-step-context", {"context_vector": float32_only}).passed
    assert "dtype" in reasons("ch1-ex-step-context", {"context_vector": float32_only})


# ch1-ex-temperature --------------------------------------------------------------------------


def softmax_temperature(scores: torch.Tensor, t: float) -> torch.Tensor:
    return by_hand_softmax(scores / t)


def test_temperature_a_written_softmax_earns_full_marks() -> None:
    assert full_marks("ch1-ex-temperature", {"softmax_temperature": softmax_temperature})


def test_temperature_refuses_every_ready_made_softmax() -> None:
    for lazy in (
        lambda s, t: torch.softmax(s / t, dim=-1),
        lambda s, t: (s / t).softmax(-1),
        lambda s, t: torch.nn.functional.softmax(s / t, dim=-1),
        lambda s, t: torch.log_softmax(s / t, dim=-1).exp(),
        lambda s, t: softmax_stable(s / t),
        # A ready-made stable softmax in all but name.
        lambda s, t: torch.exp(s / t - torch.logsumexp(s / t, -1, keepdim=True)),
        lambda s, t: torch.exp(s / t - (s / t).logsumexp(-1, keepdim=True)),
    ):
        assert "ShortcutTaken" in reasons("ch1-ex-temperature", {"softmax_temperature": lazy})


def test_temperature_names_common_mistakes() -> None:
    def dim_0(s, t):
        e = torch.exp(s / t - (s / t).max())
        return e / e.sum(dim=0, keepdim=True)

    def multiplied(s, t):
        return by_hand_softmax(s * t)

    def ignored(s, t):
        return by_hand_softmax(s)

    def naive(s, t):
        e = torch.exp(s / t)
        return e / e.sum(dim=-1, keepdim=True)

    label = "ch1-ex-temperature"
    assert "dimension 0" in reasons(label, {"softmax_temperature": dim_0})
    assert "multiplied" in reasons(label, {"softmax_temperature": multiplied})
    assert "left out" in reasons(label, {"softmax_temperature": ignored})
    # A softmax that overflows passes the public check, not the hidden one.
    assert run_checks(label, {"softmax_temperature": naive}).passed
    assert "overflowed" in reasons(label, {"softmax_temperature": naive})


def test_temperature_hidden_catches_a_hard_coded_dimension() -> None:
    def dim_1(s, t):  # right for the public (3, 5) scores only
        e = torch.exp(s / t - (s / t).amax(dim=1, keepdim=True))
        return e / e.sum(dim=1, keepdim=True)

    label = "ch1-ex-temperature"
    assert run_checks(label, {"softmax_temperature": dim_1}).passed
    assert not run_checks(label, {"softmax_temperature": dim_1}, hidden=True).passed


def test_temperature_hidden_catches_one_maximum_for_the_whole_tensor() -> None:
    def global_max(s, t):  # stable only while every row is near the largest score
        e = torch.exp(s / t - (s / t).max())
        return e / e.sum(dim=-1, keepdim=True)

    label = "ch1-ex-temperature"
    assert run_checks(label, {"softmax_temperature": global_max}).passed  # public
    assert "rounded to 0" in reasons(label, {"softmax_temperature": global_max})


# ch1-ex-rows-columns -------------------------------------------------------------------------


def attention_received(inputs: torch.Tensor) -> torch.Tensor:
    t = inputs.shape[0]
    scores = torch.tensor([[float(torch.dot(a, b)) for b in inputs] for a in inputs])
    weights = by_hand_softmax(scores.to(inputs.dtype))
    return torch.stack([weights[:, j].sum() for j in range(t)])


def test_rows_columns_an_answer_earns_full_marks() -> None:
    assert full_marks("ch1-ex-rows-columns", {"attention_received": attention_received})


def test_rows_columns_refuses_copied_values_row_sums_and_the_package() -> None:
    label = "ch1-ex-rows-columns"
    toy = simplified_attention(INPUTS, return_weights=True)[1].sum(dim=0)
    # The toy sentence's column sums, whatever the inputs: the check's sentence has 7 tokens.
    copied = {"attention_received": lambda x: toy}
    assert not run_checks(label, copied).passed
    padded = {"attention_received": lambda x: torch.cat([toy, toy[:1]])}
    assert "wrong column sums" in reasons(label, padded)

    def rows(x):
        return by_hand_softmax(x @ x.T).sum(dim=-1)

    assert "those are the rows" in reasons(label, {"attention_received": rows})

    def scores(x):
        return (x @ x.T).sum(dim=0)

    assert "summed the scores" in reasons(label, {"attention_received": scores})

    def package(x):
        return simplified_attention(x, return_weights=True)[1].sum(dim=0)

    assert "ShortcutTaken" in reasons(label, {"attention_received": package})


def test_rows_columns_refuses_ready_made_weights() -> None:
    def page_code(x):  # the chapter's own line, summed over the columns
        return torch.softmax(x @ x.T, -1).sum(0)

    def sdpa(x):  # identity values: the output is the weight matrix
        eye = torch.eye(x.shape[0], dtype=x.dtype)
        return torch.nn.functional.scaled_dot_product_attention(x, x, eye, scale=1).sum(0)

    def module(x):  # one head, queries scaled by sqrt(d) against its 1 / sqrt(d)
        d = x.shape[1]
        mha = torch.nn.MultiheadAttention(d, 1, bias=False)
        eye = torch.eye(d)
        with torch.no_grad():
            mha.in_proj_weight.copy_(torch.cat([eye * d**0.5, eye, eye]))
        return mha(x, x, x, need_weights=True)[1].sum(0).detach()

    label = "ch1-ex-rows-columns"
    x = torch.rand(5, 3)
    expected = by_hand_softmax(x @ x.T).sum(0)
    for lazy in (page_code, sdpa, module):
        assert torch.allclose(lazy(x), expected, atol=1e-5)  # right, outside the check
        assert "ShortcutTaken" in reasons(label, {"attention_received": lazy})


# ch1-ex-self ---------------------------------------------------------------------------------


def favourites(inputs: torch.Tensor) -> list[int]:
    picks = []
    for row in inputs:
        scores = [float(torch.dot(row, other)) for other in inputs]
        picks.append(scores.index(max(scores)))  # softmax keeps the order of a row
    return picks


def test_self_an_answer_earns_full_marks() -> None:
    assert full_marks("ch1-ex-self", {"favourites": favourites})
    assert favourites(INPUTS) == [0, 1, 1, 1, 2, 1]  # "with" picks "journey"


def test_self_refuses_the_page_answer_columns_and_self() -> None:
    label = "ch1-ex-self"
    page = [0, 1, 1, 1, 2, 1]  # read off the chapter's heatmap
    assert not run_checks(label, {"favourites": lambda x: page}).passed
    assert not run_checks(label, {"favourites": page}).passed  # a list, not a function

    def columns(x):
        return by_hand_softmax(x @ x.T).argmax(dim=0)

    assert "each column" in reasons(label, {"favourites": columns})
    itself = {"favourites": lambda x: list(range(x.shape[0]))}
    assert "picked itself" in reasons(label, itself)


def test_self_refuses_the_package() -> None:
    def package(x):
        return simplified_attention(x, return_weights=True)[1].argmax(-1).tolist()

    assert package(INPUTS) == [0, 1, 1, 1, 2, 1]  # right, outside the check
    assert "ShortcutTaken" in reasons("ch1-ex-self", {"favourites": package})
