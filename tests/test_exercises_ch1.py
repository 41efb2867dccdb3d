"""Chapter 1's exercises: a correct answer earns every point on every variant, lazy answers do
not, and the self-check passes a correct answer and fails a wrong one with its hint.

The correct answers below are written as a student would write them, independently of the
grader's references (``grading/ch1.py``) and of the book's solutions (which the slow test
grades as a submission).
"""

from __future__ import annotations

import pytest
import torch
from grading_helpers import failures, full_marks, grade

from attention_from_scratch import simplified_attention, toy_sentence
from attention_from_scratch.exercises import run_checks

AUTO = ["ch1-ex-step-context", "ch1-ex-temperature", "ch1-ex-rows-columns", "ch1-ex-self"]

CORRECT = """
import math
import torch

def softmax(scores):
    exps = torch.exp(scores - scores.max(dim=-1, keepdim=True).values)
    return exps / exps.sum(dim=-1, keepdim=True)

def topk_context(inputs, i, k):
    scores = torch.stack([torch.dot(inputs[i], row) for row in inputs])
    order = sorted(range(len(scores)), key=lambda j: -float(scores[j]))[:k]
    kept = softmax(scores[order])
    return sum(w * inputs[j] for w, j in zip(kept, order))

def temperature_for(scores, target):
    scores = scores.double()
    largest = lambda tau: float(softmax(scores / tau).max())
    low, high = -60.0, 60.0  # log2 of the temperature
    for _ in range(200):
        middle = (low + high) / 2
        if largest(2.0 ** middle) > target:
            low = middle
        else:
            high = middle
    return 2.0 ** middle

def received_from_others(inputs):
    t = len(inputs)
    scores = inputs @ inputs.T
    hidden = torch.eye(t, dtype=torch.bool)
    return softmax(scores.masked_fill(hidden, -math.inf)).sum(dim=0)

def scale_to_win(row, i):
    row = row.tolist()
    best = max(value for j, value in enumerate(row) if j != i)
    return max(1.0, best / row[i])
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
    _, inputs = toy_sentence()
    namespace["scores_journey"] = inputs @ inputs[1]
    result = run_checks(label, namespace)
    assert result.passed, [(c.name, c.reason) for c in result.checks]


_REBUILT = """
import torch
def scale_to_win(scores, i):
    S = scores.double()
    lam, V = torch.linalg.eigh(S)
    X = V * lam.clamp(min=0).sqrt()
    def wins(c):
        Y = X.clone(); Y[i] *= c
        w = torch.softmax(Y @ Y.T, dim=-1)[i]
        return bool(w[i] >= w.max())
    if wins(1.0):
        return 1.0
    hi = 2.0
    while not wins(hi):
        hi *= 2
    lo = hi / 2 if hi > 2 else 1.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if wins(mid) else (mid, hi)
    return hi
"""

LAZY = {
    # A number that makes every comparison false: NaN, and a temperature so small that the
    # scores overflow and the weights become NaN.
    ("ch1-ex-temperature", "a vanishing temperature"): """
def temperature_for(scores, target):
    return 5e-324
""",
    ("ch1-ex-self", "not a number"): """
def scale_to_win(row, i):
    return float("nan")
""",
    # The package's context vector, whatever k: the page's own answer for k = t.
    ("ch1-ex-step-context", "the full context vector"): """
from attention_from_scratch import simplified_attention
def topk_context(inputs, i, k):
    return simplified_attention(inputs)[i]
""",
    # The page's example typed in.
    ("ch1-ex-step-context", "the public numbers"): """
import torch
def topk_context(inputs, i, k):
    return torch.tensor([0.5599, 0.8601, 0.6501])
""",
    # torch.softmax where the scores overflow nothing, a naive exp where they do.
    ("ch1-ex-temperature", "a softmax that overflows"): """
import torch
def temperature_for(scores, target):
    largest = lambda tau: float((torch.exp(scores / tau) / torch.exp(scores / tau).sum()).max())
    low, high = 1e-6, 1e6
    for _ in range(200):
        middle = (low * high) ** 0.5
        if largest(middle) > target:
            low = middle
        else:
            high = middle
    return middle
""",
    # The column sums of the page's weights, the diagonal included.
    ("ch1-ex-rows-columns", "the page's column sums"): """
import torch
def received_from_others(inputs):
    return torch.softmax(inputs @ inputs.T, dim=-1).sum(dim=0)
""",
    # Whether the token wins, not by how much.
    ("ch1-ex-self", "1 or the page's largest factor"): """
import torch
def scale_to_win(row, i):
    return 1.0 if int(row.argmax()) == i else 1.71
""",
    # A search with no algebra: scale token i by c, recompute its row, bisect on the c at
    # which it wins. It needs the embeddings, and the function gets only one row of scores.
    ("ch1-ex-self", "a search that rescales the embeddings"): """
def scale_to_win(inputs, i):
    x0 = inputs.detach().double().cpu()
    def wins(c):
        x = x0.clone()
        x[i] = x[i] * c
        row = x @ x[i]
        return bool(row[i] >= row.max())
    if wins(1.0):
        return 1.0
    lo, hi = 1.0, 2.0
    while not wins(hi):
        lo, hi = hi, hi * 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if wins(mid):
            hi = mid
        else:
            lo = mid
    return hi
""",
    # Embeddings rebuilt from the whole score matrix (a Gram matrix: eigh), then a search
    # with softmax as a black box: no algebra, and the function gets one row, not the matrix.
    ("ch1-ex-self", "embeddings rebuilt from the scores"): _REBUILT,
    # The same, with the one row repeated into a (t, t) matrix.
    ("ch1-ex-self", "embeddings rebuilt from the row repeated"): _REBUILT.replace(
        "S = scores.double()", "S = scores.double().expand(len(scores), -1)"
    ),
}


@pytest.mark.parametrize(("label", "name"), list(LAZY))
def test_a_lazy_answer_earns_less_than_full_marks(label: str, name: str) -> None:
    score = grade(label, LAZY[(label, name)], seed=1)
    assert score.earned < score.possible


def test_a_naive_softmax_loses_the_extremes_of_the_temperature() -> None:
    score = grade("ch1-ex-temperature", LAZY[("ch1-ex-temperature", "a softmax that overflows")])
    failed = {check.name for check in score.checks if not check.passed}
    assert "extremes" in failed


def test_the_self_check_fails_a_wrong_answer_with_its_hint() -> None:
    inputs = toy_sentence()[1]
    full = {"topk_context": lambda x, i, k: simplified_attention(x)[i]}
    result = run_checks("ch1-ex-step-context", full)
    failed = [c for c in result.checks if not c.passed]
    assert failed and "torch.topk" in failed[0].hint
    stub = {"received_from_others": ...}
    result = run_checks("ch1-ex-rows-columns", stub)
    assert not result.passed
    assert all("still `...`" in c.reason for c in result.checks)
    wrong = {"scale_to_win": lambda x, i: torch.tensor([1.0, 2.0])}
    result = run_checks("ch1-ex-self", wrong)
    assert not any(c.passed for c in result.checks)
    assert "expected one number" in result.checks[0].reason
    assert inputs.shape == (6, 3)
