"""Chapter 2's exercises: a correct answer earns every point on every variant, lazy answers do
not, and the self-check passes a correct answer and fails a wrong one with its hint.

The correct answers below are written as a student would write them, independently of the
grader's references (``grading/ch2.py``) and of the book's solutions (which the slow test
grades as a submission).
"""

from __future__ import annotations

import pytest
import torch
from grading_helpers import failures, full_marks, grade, graded_exercise

from attention_from_scratch.exercises import run_checks

AUTO = [
    "ch2-ex-v2-into-v1",
    "ch2-ex-qkv-bias",
    "ch2-ex-step",
    "ch2-ex-symmetric",
    "ch2-ex-sigma",
]

CORRECT = """
import math
import torch
from torch import nn
from attention_from_scratch import SelfAttentionV1

def v2_into_v1(v2):
    d_in, d_out = v2.W_query.in_features, v2.W_query.out_features
    v1 = SelfAttentionV1(d_in + 1, d_out)
    for name in ("W_query", "W_key", "W_value"):
        layer = getattr(v2, name)
        w = torch.zeros(d_in + 1, d_out)
        w[:d_in] = layer.weight.detach().T
        if layer.bias is not None:
            w[d_in] = layer.bias.detach()
        setattr(v1, name, nn.Parameter(w))
    return v1

def key_bias_shift(x, v2):
    with torch.no_grad():
        with_bias = v2.W_query(x) @ v2.W_key(x).transpose(-2, -1)
        keys = x @ v2.W_key.weight.T
        without = v2.W_query(x) @ keys.transpose(-2, -1)
    return (with_bias - without)[..., 0]

def context_vector(x, W_query, W_key, W_value, i):
    q = x[i] @ W_query
    k = x @ W_key
    v = x @ W_value
    scaled = (k @ q) / math.sqrt(k.shape[1])
    e = torch.exp(scaled - scaled.max())
    a = e / e.sum()
    z = (a[:, None] * v).sum(dim=0)
    pull = torch.stack([a[j] * (v[j] - z) for j in range(len(a))]) / math.sqrt(k.shape[1])
    return z, pull

def tied_attention(x, W, b):
    q = x @ W + b
    s = q @ q.T / math.sqrt(W.shape[1])
    top = s.max(dim=1, keepdim=True).values
    log_sums = top[:, 0] + torch.log(torch.exp(s - top).sum(dim=1))
    return torch.exp(s - log_sums[:, None]), log_sums

def score_variance(W_query, W_key, sigma):
    total = 0.0
    for a in range(W_query.shape[0]):
        for c in range(W_key.shape[0]):
            total += float(sigma[a] * sigma[c] * (W_query[a] @ W_key[c])) ** 2
    return total
"""


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("label", AUTO)
def test_a_correct_answer_earns_every_point_on_every_variant(label: str, seed: int) -> None:
    score = grade(label, CORRECT, seed=seed)
    assert full_marks(score), failures(score)


@pytest.mark.parametrize("label", AUTO)
def test_the_self_check_passes_a_correct_answer(label: str) -> None:
    namespace: dict = {}
    exec(CORRECT, namespace)
    result = run_checks(label, namespace)
    assert result.passed, [(c.name, c.reason) for c in result.checks]


LAZY = {
    # The page's copy, V1 into V2, run backwards: no room for the biases.
    ("ch2-ex-v2-into-v1", "the page's copy reversed"): """
import torch
from attention_from_scratch import SelfAttentionV1
def v2_into_v1(v2):
    v1 = SelfAttentionV1(v2.d_in, v2.d_out)
    with torch.no_grad():
        for name in ("W_query", "W_key", "W_value"):
            getattr(v1, name).copy_(getattr(v2, name).weight.T)
    return v1
""",
    # A real SelfAttentionV1 whose forward calls v2 on the inputs without their ones: no
    # weights mapped (it earned the function check when that check called the returned
    # object's forward in the kernel).
    ("ch2-ex-v2-into-v1", "a forward that calls v2"): """
from attention_from_scratch import SelfAttentionV1
def v2_into_v1(v2):
    v1 = SelfAttentionV1(v2.W_query.in_features + 1, v2.W_query.out_features)
    v1.forward = lambda x, *a, **k: v2(x[..., :-1], *a, **k)
    return v1
""",
    # The biases folded in, but the weights copied without their transpose.
    ("ch2-ex-v2-into-v1", "no transpose"): """
import torch
from attention_from_scratch import SelfAttentionV1
def v2_into_v1(v2):
    v1 = SelfAttentionV1(v2.d_in + 1, v2.d_out)
    with torch.no_grad():
        for name in ("W_query", "W_key", "W_value"):
            layer = getattr(v2, name)
            bias = layer.bias if layer.bias is not None else torch.zeros(v2.d_out)
            w = layer.weight.reshape(v2.d_in, v2.d_out)
            getattr(v1, name).copy_(torch.cat([w, bias[None]]))
    return v1
""",
    # The query's bias left out: x W_q^T b_k.
    ("ch2-ex-qkv-bias", "the query bias left out"): """
import torch
def key_bias_shift(x, v2):
    if v2.W_key.bias is None:
        return torch.zeros(x.shape[:-1])
    with torch.no_grad():
        return x @ v2.W_query.weight.T @ v2.W_key.bias
""",
    # The page's numbers typed in.
    ("ch2-ex-qkv-bias", "the public numbers"): """
import torch
def key_bias_shift(x, v2):
    return torch.tensor([-0.5596, -0.7342, -0.7290, -0.5592, -0.5199, -0.6247])
""",
    # One library call for z, nothing for the pull.
    ("ch2-ex-step", "scaled_dot_product_attention"): """
import torch
import torch.nn.functional as F
def context_vector(x, W_query, W_key, W_value, i):
    z = F.scaled_dot_product_attention(x @ W_query, x @ W_key, x @ W_value)[i]
    return z, torch.zeros(x.shape[0], W_value.shape[1], dtype=x.dtype)
""",
    # The page's hand computation copied, and the pull without the scale.
    ("ch2-ex-step", "the pull without 1/sqrt(d_k)"): """
import torch
def context_vector(x, W_query, W_key, W_value, i):
    query_1 = x[i] @ W_query
    keys = x @ W_key
    values = x @ W_value
    attn_scores_1 = query_1 @ keys.T
    d_k = keys.shape[-1]
    attn_weights_1 = torch.softmax(attn_scores_1 / d_k**0.5, dim=-1)
    context_vec_1 = attn_weights_1 @ values
    return context_vec_1, attn_weights_1[:, None] * (values - context_vec_1)
""",
    # The page's tied scores (no bias) and the row sums of the weights.
    ("ch2-ex-symmetric", "the page's tied cell"): """
import torch
def tied_attention(x, W, b):
    queries = x @ W
    scores_tied = queries @ queries.T
    weights = torch.softmax(scores_tied / W.shape[1] ** 0.5, dim=-1)
    return weights, weights.sum(dim=-1).log()
""",
    # The log of the sum of exponentials, computed as written: it overflows.
    ("ch2-ex-symmetric", "a log-sum-exp that overflows"): """
import torch
def tied_attention(x, W, b):
    q = x @ W + b
    s = q @ q.T / W.shape[1] ** 0.5
    return torch.softmax(s, dim=-1), torch.log(torch.exp(s).sum(dim=-1))
""",
    # The chapter's answer for unit-variance queries and keys.
    ("ch2-ex-sigma", "sigma^4 d_k"): """
def score_variance(W_query, W_key, sigma):
    return sigma**4 * W_query.shape[1]
""",
    # The formula for one shared sigma (the old hint's), with the features' mean variance.
    ("ch2-ex-sigma", "one shared sigma"): """
def score_variance(W_query, W_key, sigma):
    M = W_query.double() @ W_key.double().T
    return float(sigma.double().pow(2).mean() ** 2 * (M**2).sum())
""",
    # The old hint's formula typed in as it was: one number per feature, not a number.
    ("ch2-ex-sigma", "sigma^4 times the sum of M squared"): """
def score_variance(W_query, W_key, sigma):
    M = W_query.double() @ W_key.double().T
    return sigma**4 * (M**2).sum()
""",
    # The page's measurement, with many pairs.
    ("ch2-ex-sigma", "a measurement"): """
import torch
def score_variance(W_query, W_key, sigma):
    g = torch.Generator().manual_seed(0)
    x = sigma * torch.randn(200_000, W_query.shape[0], generator=g, dtype=torch.float64)
    y = sigma * torch.randn(200_000, W_query.shape[0], generator=g, dtype=torch.float64)
    return ((x @ W_query.double()) * (y @ W_key.double())).sum(dim=-1).var().item()
""",
}


@pytest.mark.parametrize(("label", "name"), list(LAZY))
def test_a_lazy_answer_earns_less_than_full_marks(label: str, name: str) -> None:
    score = grade(label, LAZY[(label, name)], seed=1)
    assert score.earned < score.possible


def test_a_forward_that_calls_v2_earns_nothing() -> None:
    score = grade("ch2-ex-v2-into-v1", LAZY[("ch2-ex-v2-into-v1", "a forward that calls v2")])
    assert score.earned == 0, failures(score)


def test_the_returned_weights_are_judged_not_the_returned_forward() -> None:
    # The right weights behind a forward that returns zeros: the grader runs the weights.
    answer = (
        CORRECT
        + """
def v2_into_v1(v2, _fold=v2_into_v1):
    v1 = _fold(v2)
    v1.forward = lambda x, *a, **k: torch.zeros(*x.shape[:-1], v2.d_out)
    return v1
"""
    )
    for seed in range(3):
        score = grade("ch2-ex-v2-into-v1", answer, seed=seed)
        assert full_marks(score), failures(score)


def test_the_pull_s_derivation_is_graded_by_hand() -> None:
    # autograd's Jacobian of the page's forward pass gives the pull: the derivation the
    # statement asks for earns the point a person grades.
    autograd = """
import torch
def context_vector(x, W_query, W_key, W_value, i):
    k, v = x @ W_key, x @ W_value
    def z_of(omega):
        return torch.softmax(omega / k.shape[-1] ** 0.5, dim=-1) @ v
    omega = k @ (x[i] @ W_query)
    return z_of(omega), torch.autograd.functional.jacobian(z_of, omega).T
"""
    assert full_marks(grade("ch2-ex-step", autograd))
    exercise = graded_exercise("ch2-ex-step")
    assert exercise.manual_points == 1 and "by hand" in exercise.rubric


def test_a_library_call_earns_the_context_vector_only() -> None:
    score = grade("ch2-ex-step", LAZY[("ch2-ex-step", "scaled_dot_product_attention")])
    assert {c.name for c in score.checks if not c.passed} == {"pull"}


def test_an_overflowing_log_sum_exp_loses_the_large_scores_only() -> None:
    answer = LAZY[("ch2-ex-symmetric", "a log-sum-exp that overflows")]
    score = grade("ch2-ex-symmetric", answer)
    assert {c.name for c in score.checks if not c.passed} == {"large"}


def test_changing_v2_in_place_loses_the_function_check() -> None:
    answer = (
        CORRECT
        + """
def v2_into_v1(v2, _fold=v2_into_v1):
    v1 = _fold(v2)
    with torch.no_grad():
        v2.W_key.weight.zero_()
    return v1
"""
    )
    score = grade("ch2-ex-v2-into-v1", answer)
    failed = {c.name: c.reason for c in score.checks if not c.passed}
    assert list(failed) == ["function"] and "changed v2" in failed["function"]


def test_the_self_check_fails_a_wrong_answer_with_its_hint() -> None:
    namespace: dict = {}
    exec(LAZY[("ch2-ex-v2-into-v1", "the page's copy reversed")], namespace)
    result = run_checks("ch2-ex-v2-into-v1", namespace)
    assert not result.passed and "(d_in + 1, d_out)" in result.checks[0].reason
    assert "column of ones" in result.checks[0].hint
    namespace = {}
    exec(LAZY[("ch2-ex-step", "the pull without 1/sqrt(d_k)")], namespace)
    result = run_checks("ch2-ex-step", namespace)
    assert [c.passed for c in result.checks] == [False, True]
    assert "sqrt(d_k)" in result.checks[0].hint
    result = run_checks("ch2-ex-sigma", {"score_variance": ...})
    assert all("still `...`" in c.reason for c in result.checks)
    wrong = {"tied_attention": lambda x, w, b: torch.zeros(len(x), len(x))}
    result = run_checks("ch2-ex-symmetric", wrong)
    assert not any(c.passed for c in result.checks)
    assert "expected the pair" in result.checks[0].reason
