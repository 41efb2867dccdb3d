"""Chapter 3's exercises: a correct answer earns every point on every variant, lazy answers do
not, and the self-check passes a correct answer and fails a wrong one with its hint.

The correct answers below are written as a student would write them, independently of the
grader's references (``grading/ch3.py``) and of the book's solutions (which the slow test
grades as a submission).
"""

from __future__ import annotations

import pytest
from grading_helpers import failures, full_marks, grade

from attention_from_scratch.exercises import run_checks

AUTO = [
    "ch3-ex-sliding-window",
    "ch3-ex-dropout-order",
    "ch3-ex-all-masked",
    "ch3-ex-dropout-rate",
    "ch3-ex-causality-test",
]

CORRECT = """
import itertools
import math
import torch

def window_mask(t, window, sinks):
    hide = torch.zeros(t, t, dtype=torch.bool)
    for i in range(t):
        for j in range(t):
            future = j > i
            far = i - j > window and j >= sinks
            hide[i, j] = future or far
    return hide

def window_attention(scores, window, sinks):
    hide = window_mask(scores.shape[-1], window, sinks)
    return scores.masked_fill(hide, -math.inf).softmax(dim=-1)

def drop_then_renormalise(masked, keep):
    dropped = masked * keep
    total = dropped.sum(dim=-1, keepdim=True)
    return dropped / torch.where(total == 0, torch.ones_like(total), total)

def expected_drop_first(row, p):
    visible = [j for j in range(len(row)) if row[j] != 0]
    out = torch.zeros(len(row), dtype=torch.float64)
    for pattern in itertools.product([True, False], repeat=len(visible)):
        kept = [j for j, k in zip(visible, pattern) if k]
        if not kept:
            continue
        probability = (1 - p) ** len(kept) * p ** (len(visible) - len(kept))
        total = sum(float(row[j]) for j in kept)
        for j in kept:
            out[j] += probability * float(row[j]) / total
    return out.to(row.dtype)

def padded_causal_weights(scores, lengths):
    b, t, _ = scores.shape
    out = torch.zeros_like(scores)
    for k in range(b):
        first = t - int(lengths[k])  # the first real token
        for i in range(first, t):
            out[k, i, first:i + 1] = torch.softmax(scores[k, i, first:i + 1], dim=0)
    return out

def my_dropout(x, p, draws):
    p = torch.as_tensor(p, dtype=torch.float64)
    scaled = x.double() / (1 - p)
    return torch.where(draws.double() >= p, scaled, 0.0).to(x.dtype)

def dependence(module, x):
    t = x.shape[1]
    with torch.no_grad():
        before = module(x)
        found = torch.zeros(t, t, dtype=torch.bool)
        for j in range(t):
            edited = x.clone()
            edited[:, j] = edited[:, j] * -2.0 + 0.5
            after = module(edited)
            found[:, j] = (after != before).any(dim=2).any(dim=0)
    return found

def is_causal(module, x):
    return not bool(torch.triu(dependence(module, x), diagonal=1).any())
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
    # The package's causal mask: the distant past stays visible.
    ("ch3-ex-sliding-window", "causal_mask"): """
import torch
from attention_from_scratch import causal_mask
def window_mask(t, window, sinks):
    return causal_mask(t)
def window_attention(scores, window, sinks):
    hide = causal_mask(scores.shape[-1])
    return torch.softmax(scores.masked_fill(hide, float("-inf")), dim=-1)
""",
    # A plain sliding window, the sinks left out.
    ("ch3-ex-sliding-window", "no sinks"): """
import torch
def window_mask(t, window, sinks):
    ones = torch.ones(t, t, dtype=torch.bool)
    return torch.triu(ones, 1) | torch.tril(ones, -window - 1)
def window_attention(scores, window, sinks):
    hide = window_mask(scores.shape[-1], window, sinks)
    return torch.softmax(scores.masked_fill(hide, float("-inf")), dim=-1)
""",
    # The page's way 1 copied: renormalise first, then drop.
    ("ch3-ex-dropout-order", "the page's order"): """
def drop_then_renormalise(masked, keep):
    return masked / masked.sum(dim=-1, keepdim=True) * keep
def expected_drop_first(row, p):
    return row / row.sum()
""",
    # The page's masked softmax with the causal mask only: padding stays visible.
    ("ch3-ex-all-masked", "causal only"): """
import torch
from attention_from_scratch import causal_mask
def padded_causal_weights(scores, lengths):
    hide = causal_mask(scores.shape[-1])
    return torch.softmax(scores.masked_fill(hide, float("-inf")), dim=-1)
""",
    # The package's attention with the right mask, but nan left in the padding rows.
    ("ch3-ex-all-masked", "nan rows"): """
import torch
from attention_from_scratch import causal_mask
def padded_causal_weights(scores, lengths):
    t = scores.shape[-1]
    padding = torch.arange(t) < (t - lengths)[:, None]
    hide = padding[:, None, :] | causal_mask(t)
    return torch.softmax(scores.masked_fill(hide, float("-inf")), dim=-1)
""",
    # nn.Dropout's functional form: its own random numbers, and no tensor of rates.
    ("ch3-ex-dropout-rate", "F.dropout"): """
import torch.nn.functional as F
def my_dropout(x, p, draws):
    return F.dropout(x, p)
""",
    # A mask times a scale: 0 * inf is nan at a rate of 1.
    ("ch3-ex-dropout-rate", "mask times scale"): """
def my_dropout(x, p, draws):
    return x * (draws >= p) / (1 - p)
""",
    # Keeps only the numbers above p: a number equal to p is dropped too.
    ("ch3-ex-dropout-rate", "drops at p"): """
import torch
def my_dropout(x, p, draws):
    p = torch.as_tensor(p, dtype=x.dtype)
    return torch.where(draws > p, x / (1 - p), torch.zeros((), dtype=x.dtype))
""",
    # Trusting what the module stores instead of measuring it.
    ("ch3-ex-causality-test", "reads the mask"): """
import torch
def dependence(module, x):
    t = x.shape[1]
    if not hasattr(module, "mask"):
        return torch.ones(t, t, dtype=torch.bool)
    return ~module.mask[:t, :t]
def is_causal(module, x):
    return hasattr(module, "mask") and not bool(torch.triu(~module.mask, 1).any())
""",
    # The page's result for `ca`, whatever the module.
    ("ch3-ex-causality-test", "the page's lower triangle"): """
import torch
def dependence(module, x):
    t = x.shape[1]
    return torch.tril(torch.ones(t, t, dtype=torch.bool))
def is_causal(module, x):
    return True
""",
    # A loose tolerance misses a small leak.
    ("ch3-ex-causality-test", "a loose tolerance"): """
import torch
def dependence(module, x):
    t = x.shape[1]
    found = torch.zeros(t, t, dtype=torch.bool)
    for j in range(t):
        edited = x.clone()
        edited[:, j] += 1.0
        change = (module(edited) - module(x)).abs().amax(dim=(0, 2))
        found[:, j] = change > 0.05
    return found
def is_causal(module, x):
    return not bool(torch.triu(dependence(module, x), 1).any())
""",
    # The Jacobian's nonzero entries: blind to a module that detaches its input.
    ("ch3-ex-causality-test", "gradients"): """
import torch
def dependence(module, x):
    with torch.enable_grad():
        jacobian = torch.autograd.functional.jacobian(module, x.clone())
    return (jacobian != 0).any(dim=(0, 2, 3, 5))  # (b, t, d_out, b, t, d_in) -> (t, t)
def is_causal(module, x):
    return not bool(dependence(module, x).triu(1).any())
""",
}


@pytest.mark.parametrize(("label", "name"), list(LAZY))
def test_a_lazy_answer_earns_less_than_full_marks(label: str, name: str) -> None:
    score = grade(label, LAZY[(label, name)], seed=1)
    assert score.earned < score.possible


def failed_checks(label: str, name: str, seed: int = 2) -> set[str]:
    score = grade(label, LAZY[(label, name)], seed=seed)
    return {check.name for check in score.checks if not check.passed}


def test_each_lazy_answer_fails_the_check_meant_for_it() -> None:
    assert failed_checks("ch3-ex-sliding-window", "no sinks") == {"sinks", "weights"}
    assert failed_checks("ch3-ex-sliding-window", "causal_mask") == {"window", "sinks", "weights"}
    assert "expected" in failed_checks("ch3-ex-dropout-order", "the page's order")
    assert failed_checks("ch3-ex-all-masked", "nan rows") == {"padding"}
    assert failed_checks("ch3-ex-dropout-rate", "mask times scale") == {"rates"}
    assert failed_checks("ch3-ex-dropout-rate", "drops at p") == {"drops", "rates"}
    assert failed_checks("ch3-ex-causality-test", "reads the mask") == {"dependence", "verdict"}
    assert failed_checks("ch3-ex-causality-test", "gradients") == {"dependence", "verdict"}
    # Tolerances of 1e-3 and 1e-5, as lazy answers chose: the verdict's tiny leak is below
    # both.
    for tolerance in ("1e-3", "1e-5"):
        answer = LAZY[("ch3-ex-causality-test", "a loose tolerance")]
        loose = answer.replace("0.05", tolerance)
        for seed in range(3):
            score = grade("ch3-ex-causality-test", loose, seed=seed)
            assert "verdict" in {check.name for check in score.checks if not check.passed}


def test_the_self_check_fails_a_wrong_answer_with_its_hint() -> None:
    namespace: dict = {}
    exec(LAZY[("ch3-ex-sliding-window", "no sinks")], namespace)
    result = run_checks("ch3-ex-sliding-window", namespace)
    assert not any(c.passed for c in result.checks)
    assert "unless j < sinks" in result.checks[0].hint
    namespace = {}
    exec(LAZY[("ch3-ex-all-masked", "nan rows")], namespace)
    result = run_checks("ch3-ex-all-masked", namespace)
    assert "not nan" in result.checks[0].reason
    namespace = {}
    exec(LAZY[("ch3-ex-dropout-rate", "mask times scale")], namespace)
    result = run_checks("ch3-ex-dropout-rate", namespace)
    assert [c.passed for c in result.checks] == [True, False]
    assert "torch.where" in result.checks[1].hint
    stub = {"dependence": ..., "is_causal": ...}
    result = run_checks("ch3-ex-causality-test", stub)
    assert all("still `...`" in c.reason for c in result.checks)
