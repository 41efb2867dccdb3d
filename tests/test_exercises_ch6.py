"""Chapter 6's exercises: a correct answer earns every point on every variant, lazy answers do
not, and the self-check passes a correct answer and fails a wrong one with its hint.

The correct answers below are written as a student would write them, independently of the
grader's references (``grading/ch6.py``) and of the book's solutions (which the slow test
grades as a submission).
"""

from __future__ import annotations

import pytest
import torch
from grading_helpers import failures, full_marks, grade

from attention_from_scratch import TinyCausalModel, induction_task, k_back_task
from attention_from_scratch.exercises import run_checks

AUTO = [
    "ch6-ex-rotate-half",
    "ch6-ex-extrapolate",
    "ch6-ex-ablate-induction",
    "ch6-ex-causal-bag",
    "ch6-ex-why-order-blind",
]

CORRECT = """
import math
import torch

def rotate_half(x, offset, r):
    out = x.clone()
    half = r // 2
    for row in range(x.shape[-2]):
        for i in range(half):
            angle = (offset + row) * 10000 ** (-2 * i / r)  # Python floats: float64
            a, b = x[..., row, i], x[..., row, i + half]
            out[..., row, i] = a * math.cos(angle) - b * math.sin(angle)
            out[..., row, i + half] = a * math.sin(angle) + b * math.cos(angle)
    return out

def accuracy_by_position(model, inputs, targets):
    model.eval()
    with torch.no_grad():
        predictions = model(inputs).argmax(dim=-1)
    scored = targets != -100
    right = ((predictions == targets) & scored).sum(dim=0).double()
    return right / scored.sum(dim=0)  # 0 / 0 is NaN

def logits_without_head(model, tokens, layer, head):
    attention = model.blocks[layer].attention
    size = attention.d_out // attention.num_heads

    def off(module, inputs):
        merged = inputs[0].clone()
        merged[..., head * size : (head + 1) * size] = 0
        return (merged,)

    handle = attention.out_proj.register_forward_pre_hook(off)
    try:
        with torch.no_grad():
            return model(tokens)
    finally:
        handle.remove()

def prediction_changes(model, tokens, order):
    with torch.no_grad():
        before = model(tokens[None])[0].argmax(dim=-1)
        after = model(tokens[order][None])[0].argmax(dim=-1)
    return before != after

def bound_by_position(inputs, vocab_size, k, window):
    b, t = inputs.shape
    bounds = []
    for i in range(k, t):
        seen = inputs[:, max(0, i - window) : i]
        counts = torch.stack([(seen == v).sum(dim=1) for v in range(vocab_size)], dim=1)
        bounds.append((counts.max(dim=1).values / seen.shape[1]).double().mean())
    return torch.stack(bounds)
"""


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("label", AUTO)
def test_a_correct_answer_earns_every_point_on_every_variant(label: str, seed: int) -> None:
    score = grade(label, CORRECT, seed=seed)
    assert full_marks(score), failures(score)


def page_namespace() -> dict:
    """The page's names the self-checks read, with small untrained models in place of the
    trained ones (every self-check holds for any model)."""
    torch.manual_seed(0)
    k_models = {
        positions: TinyCausalModel(16, d_model=16, context_length=64, positions=positions)
        for positions in ("none", "learned")
    }
    x_test, y_test = k_back_task(50, 32, 16, 3, seed=2)
    induction_model = TinyCausalModel(16, d_model=16, context_length=20, num_layers=2)
    x_test_ind, _ = induction_task(20, 20, 16, min_period=3, max_period=10, seed=2)
    return {
        "k_models": k_models,
        "x_test": x_test,
        "y_test": y_test,
        "induction_model": induction_model,
        "x_test_ind": x_test_ind,
    }


@pytest.mark.parametrize("label", AUTO)
def test_the_self_check_passes_a_correct_answer(label: str) -> None:
    namespace = page_namespace()
    exec(CORRECT, namespace)
    result = run_checks(label, namespace)
    assert result.passed, [(c.name, c.reason) for c in result.checks]


PAGE_ROTATE = """
import torch

def rotate(x, offset=0):  # the page's interleaved rotation of every feature
    t, d_h = x.shape[-2], x.shape[-1]
    p = torch.arange(offset, offset + t, dtype=torch.float64)
    two_i = torch.arange(0, d_h, 2, dtype=torch.float64)
    angles = torch.outer(p, 10000 ** (-two_i / d_h))
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = a * cos - b * sin
    out[..., 1::2] = a * sin + b * cos
    return out
"""

LAZY = {
    # The package's rotate-half rotation of the whole head.
    ("ch6-ex-rotate-half", "RotaryEmbedding on every feature"): """
from attention_from_scratch import RotaryEmbedding
def rotate_half(x, offset, r):
    return RotaryEmbedding(x.shape[-1], interleaved=False).to(x.dtype)(x, offset)
""",
    # The package's rotation of the first r features: a head of four axes at most.
    ("ch6-ex-rotate-half", "RotaryEmbedding on the first r features"): """
import torch
from attention_from_scratch import RotaryEmbedding
def rotate_half(x, offset, r):
    rope = RotaryEmbedding(r, interleaved=False).to(x.dtype)
    return torch.cat([rope(x[..., :r], offset), x[..., r:]], dim=-1)
""",
    # The page's rotate on the first r features: the interleaved pairs.
    ("ch6-ex-rotate-half", "the page's rotate on the first r features"): PAGE_ROTATE
    + """
def rotate_half(x, offset, r):
    return torch.cat([rotate(x[..., :r], offset), x[..., r:]], dim=-1)
""",
    # The right pairs with the frequencies of the whole head.
    ("ch6-ex-rotate-half", "theta over d_h"): """
import torch
def rotate_half(x, offset, r):
    d_h, half = x.shape[-1], r // 2
    p = torch.arange(offset, offset + x.shape[-2], dtype=torch.float64)
    angles = torch.outer(p, 10000 ** (-torch.arange(0, r, 2, dtype=torch.float64) / d_h))
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    a, b = x[..., :half], x[..., half:r]
    return torch.cat([a * cos - b * sin, a * sin + b * cos, x[..., r:]], dim=-1)
""",
    # The package's accuracy: one number.
    ("ch6-ex-extrapolate", "evaluate"): """
from attention_from_scratch import evaluate
def accuracy_by_position(model, inputs, targets):
    return evaluate(model, inputs, targets)
""",
    # Every target counted, the ignored ones as wrong answers, and no eval().
    ("ch6-ex-extrapolate", "ignored targets counted, dropout on"): """
import torch
def accuracy_by_position(model, inputs, targets):
    with torch.no_grad():
        return (model(inputs).argmax(dim=-1) == targets).float().mean(dim=0)
""",
    # The page's ablation: the whole attention output of the layer set to zero.
    ("ch6-ex-ablate-induction", "the page's zeroed layer"): """
import torch
def logits_without_head(model, tokens, layer, head):
    hook = model.blocks[layer].attention.register_forward_hook(
        lambda module, args, output: torch.zeros_like(output)
    )
    try:
        with torch.no_grad():
            return model(tokens)
    finally:
        hook.remove()
""",
    # The head's features zeroed after out_proj, and the hook left on.
    ("ch6-ex-ablate-induction", "after out_proj, hook left on"): """
import torch
def logits_without_head(model, tokens, layer, head):
    attention = model.blocks[layer].attention
    d_h = attention.head_dim
    def off(module, args, output):
        output = output.clone()
        output[..., head * d_h : (head + 1) * d_h] = 0
        return output
    attention.register_forward_hook(off)
    with torch.no_grad():
        return model(tokens)
""",
    # Where a token moved, not where a prediction changed.
    ("ch6-ex-causal-bag", "the moved positions"): """
import torch
def prediction_changes(model, tokens, order):
    return order != torch.arange(len(order))
""",
    # The inverse permutation: right for a swap, wrong for a ring of three.
    ("ch6-ex-causal-bag", "the inverse order"): """
import torch
def prediction_changes(model, tokens, order):
    moved = torch.empty_like(tokens)
    moved[order] = tokens
    with torch.no_grad():
        logits = model(torch.stack([tokens, moved]))
    return logits[0].argmax(-1) != logits[1].argmax(-1)
""",
    # The page's bound at every position, whatever the window.
    ("ch6-ex-why-order-blind", "the page's bound"): """
import torch
import torch.nn.functional as F
def bound_by_position(inputs, vocab_size, k, window):
    counts = F.one_hot(inputs, vocab_size).cumsum(dim=1)
    best = counts[:, k - 1 : -1].max(dim=-1).values
    return (best / torch.arange(k, inputs.shape[1])).mean(dim=0)
""",
    # The page's overall bound: one number.
    ("ch6-ex-why-order-blind", "one number"): """
def bound_by_position(inputs, vocab_size, k, window):
    return 0.21
""",
}


@pytest.mark.parametrize(("label", "name"), list(LAZY))
def test_a_lazy_answer_earns_less_than_full_marks(label: str, name: str) -> None:
    score = grade(label, LAZY[(label, name)], seed=1)
    assert score.earned < score.possible


def test_the_mistakes_are_named() -> None:
    reasons = failures(grade("ch6-ex-rotate-half", LAZY[("ch6-ex-rotate-half", "theta over d_h")]))
    assert "head of size r" in reasons
    page = LAZY[("ch6-ex-rotate-half", "the page's rotate on the first r features")]
    assert "interleaved convention" in failures(grade("ch6-ex-rotate-half", page))
    whole = LAZY[("ch6-ex-rotate-half", "RotaryEmbedding on every feature")]
    assert grade("ch6-ex-rotate-half", whole).earned == 0
    inverse = LAZY[("ch6-ex-causal-bag", "the inverse order")]
    reasons = "; ".join(failures(grade("ch6-ex-causal-bag", inverse, seed=s)) for s in range(3))
    assert "tokens[order]" in reasons
    left_on = LAZY[("ch6-ex-ablate-induction", "after out_proj, hook left on")]
    assert grade("ch6-ex-ablate-induction", left_on).earned == 0
    page_bound = LAZY[("ch6-ex-why-order-blind", "the page's bound")]
    assert "every earlier token" in failures(grade("ch6-ex-why-order-blind", page_bound))


def test_an_answer_left_in_training_mode_loses_the_edges() -> None:
    no_eval = CORRECT.replace("    model.eval()\n", "")
    score = grade("ch6-ex-extrapolate", no_eval, seed=2)
    assert {check.name for check in score.checks if not check.passed} == {"edges"}


def test_the_self_check_fails_a_wrong_answer_with_its_hint() -> None:
    namespace = page_namespace()
    exec(LAZY[("ch6-ex-rotate-half", "theta over d_h")], namespace)
    result = run_checks("ch6-ex-rotate-half", namespace)
    failed = [c for c in result.checks if not c.passed]
    assert [c.name for c in failed] == ["four_of_six_features_from_position_3"]
    assert "head of size r" in failed[0].hint
    exec(LAZY[("ch6-ex-extrapolate", "evaluate")], namespace)
    result = run_checks("ch6-ex-extrapolate", namespace)
    assert not any(c.passed for c in result.checks)
    assert "expected a tensor" in result.checks[0].reason
    exec(LAZY[("ch6-ex-ablate-induction", "the page's zeroed layer")], namespace)
    result = run_checks("ch6-ex-ablate-induction", namespace)
    assert [c.passed for c in result.checks] == [False, True]
    exec(LAZY[("ch6-ex-causal-bag", "the moved positions")], namespace)
    assert not run_checks("ch6-ex-causal-bag", namespace).passed
    exec(LAZY[("ch6-ex-why-order-blind", "the page's bound")], namespace)
    result = run_checks("ch6-ex-why-order-blind", namespace)
    assert [c.passed for c in result.checks] == [False, False]
    stub = {**page_namespace(), "bound_by_position": ...}
    result = run_checks("ch6-ex-why-order-blind", stub)
    assert all("still `...`" in c.reason for c in result.checks)
