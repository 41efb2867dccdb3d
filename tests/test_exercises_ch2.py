"""Chapter 2's exercises: a correct answer earns every point on every variant, lazy answers do
not, and the self-check passes a correct answer and fails a wrong one with its hint.

The correct answers below are written as a student would write them, independently of the
grader's references (``grading/ch2.py``) and of the book's solutions (which the slow test
grades as a submission).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from grading_helpers import failures, full_marks, grade, graded_exercise

from attention_from_scratch.exercises import run_checks

AUTO = [
    "ch2-ex-v2-into-v1",
    "ch2-ex-qkv-bias",
    "ch2-ex-symmetric",
    "ch2-ex-sigma",
]
# Graded by hand only, but its self-check runs on the correct answer below.
SELF_CHECKED = [*AUTO, "ch2-ex-step"]

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

def key_bias_shift(x, query_weight, query_bias, key_bias):
    if key_bias is None:
        return torch.zeros(x.shape[:-1])
    q = torch.einsum("...ti,oi->...to", x, query_weight)
    if query_bias is not None:
        q = q + query_bias
    return torch.einsum("...to,o->...t", q, key_bias)

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


@pytest.mark.parametrize("label", SELF_CHECKED)
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
def key_bias_shift(x, query_weight, query_bias, key_bias):
    if key_bias is None:
        return torch.zeros(x.shape[:-1])
    return x @ query_weight.T @ key_bias
""",
    # The page's numbers typed in.
    ("ch2-ex-qkv-bias", "the public numbers"): """
import torch
def key_bias_shift(x, query_weight, query_bias, key_bias):
    return torch.tensor([-0.5596, -0.7342, -0.7290, -0.5592, -0.5199, -0.6247])
""",
    # The exercise's old definition taken literally: the scores of a copy of the module with
    # its key bias zeroed subtracted from the module's own. The grader passes no module, and
    # without the key weights the scores cannot be computed twice.
    ("ch2-ex-qkv-bias", "a copy with the key bias zeroed"): """
import copy
import torch
def key_bias_shift(x, v2, *rest):
    if v2.W_key.bias is None:
        return torch.zeros(x.shape[:-1], dtype=x.dtype)
    v0 = copy.deepcopy(v2)
    with torch.no_grad():
        v0.W_key.bias.zero_()
        s1 = v2.W_query(x) @ v2.W_key(x).mT
        s0 = v0.W_query(x) @ v0.W_key(x).mT
    return (s1 - s0)[..., 0]
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
    # The exact mean over the +-sigma_l sign patterns of x and x' (two points per entry are
    # exact for a polynomial of degree 2 in each): 4^d_in pairs, no derivation. The grader's
    # d_in of 32 or more puts it out of reach; this one gives up past 12 features.
    ("ch2-ex-sigma", "sign patterns enumerated"): """
import itertools
import torch
def score_variance(W_query, W_key, sigma):
    M = (W_query.double() @ W_key.double().T).cpu()
    s = sigma.double().cpu()
    d = len(s)
    if d > 12:
        raise ValueError(f"d_in = {d} is too many features to enumerate")
    signs = torch.tensor(list(itertools.product((-1.0, 1.0), repeat=d)), dtype=torch.float64)
    X = signs * s
    scores = X @ M @ X.T
    return float((scores**2).mean() - scores.mean() ** 2)
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


# autograd's Jacobian of the page's forward pass gives the pull, and no check of the numbers
# returned can tell it from a derivation; z alone is the page's cell or one library call.
AUTOGRAD_PULL = """
import torch
def context_vector(x, W_query, W_key, W_value, i):
    k, v = x @ W_key, x @ W_value
    def z_of(omega):
        return torch.softmax(omega / k.shape[-1] ** 0.5, dim=-1) @ v
    omega = k @ (x[i] @ W_query)
    return z_of(omega), torch.autograd.functional.jacobian(z_of, omega).T
"""

# The page's hand computation copied, and the pull without the scale.
PULL_UNSCALED = """
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
"""


def test_the_context_vector_and_its_pull_are_graded_by_hand() -> None:
    exercise = graded_exercise("ch2-ex-step")
    assert exercise.checks == () and exercise.points == 0
    assert exercise.manual_points == 4  # the 3 automatic points moved to the rubric
    assert "by hand" in exercise.rubric and "autograd" in exercise.rubric
    # The learner's self-check still checks the pull (a wrong one fails it: see below).
    namespace: dict = {}
    exec(AUTOGRAD_PULL, namespace)
    assert run_checks("ch2-ex-step", namespace).passed


def test_the_grader_s_inputs_put_enumerating_sign_patterns_out_of_reach() -> None:
    for seed in range(4):
        cases = graded_exercise("ch2-ex-sigma").cases(np.random.default_rng(seed))
        sizes = [case.call.steps[0].args[0].shape[0] for case in cases]
        assert min(sizes) >= 32, sizes  # 2^32 sign patterns of each input


def test_the_key_bias_shift_gets_no_key_weights() -> None:
    for case in graded_exercise("ch2-ex-qkv-bias").cases(np.random.default_rng(0)):
        (step,) = case.call.steps
        assert len(step.args) == 4 and not step.kwargs
        assert all(isinstance(a, np.ndarray) or a is None for a in step.args)
        x, weight, _, key_bias = step.args
        # x, the query weight (d_out, d_in) and the key bias: nothing of the key layer's weight
        assert weight.shape[1] == x.shape[-1]
        assert key_bias is None or key_bias.shape == (weight.shape[0],)


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
    exec(PULL_UNSCALED, namespace)
    result = run_checks("ch2-ex-step", namespace)
    assert [c.passed for c in result.checks] == [False, True]
    assert "sqrt(d_k)" in result.checks[0].hint
    result = run_checks("ch2-ex-sigma", {"score_variance": ...})
    assert all("still `...`" in c.reason for c in result.checks)
    wrong = {"tied_attention": lambda x, w, b: torch.zeros(len(x), len(x))}
    result = run_checks("ch2-ex-symmetric", wrong)
    assert not any(c.passed for c in result.checks)
    assert "expected the pair" in result.checks[0].reason
