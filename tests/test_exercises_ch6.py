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
import functools
import math
import torch

def to_rotate_half(w, num_heads, r):
    # Hugging Face's permute, head by head, on the first r features only.
    d_h = w.shape[0] // num_heads
    out = w.clone().reshape(num_heads, d_h, -1)
    turned = out[:, :r].reshape(num_heads, r // 2, 2, -1).transpose(1, 2)
    out[:, :r] = turned.reshape(num_heads, r, -1)
    return out.reshape(w.shape)

def accuracy_by_position(model, inputs, targets, offset):
    # The model's own forward pass, with its two position steps told the offset.
    model.eval()
    model.embed = functools.partial(type(model).embed, model, offset=offset)
    rotary = [b.attention for b in model.blocks if hasattr(b.attention, "rope")]
    for attention in rotary:
        attention.project = functools.partial(type(attention).project, attention, offset=offset)
    try:
        with torch.no_grad():
            predictions = model(inputs).argmax(dim=-1)
    finally:
        del model.embed
        for attention in rotary:
            del attention.project
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

def positions_that_can_change(tokens, order, window=None):
    moved = tokens[order]
    out = []
    for p in range(len(tokens)):
        start = 0 if window is None else max(0, p - window)
        seen = sorted(tokens[start : p + 1].tolist())
        seen_moved = sorted(moved[start : p + 1].tolist())
        out.append(seen != seen_moved or bool(tokens[p] != moved[p]))
    return torch.tensor(out)

def bound_by_position(counts, k, window):
    t = counts.shape[1] - 1
    bounds = []
    for i in range(k, t):
        start = max(0, i - window)
        bag = counts[:, i] - counts[:, start]  # (b, vocab): the tokens start .. i - 1
        bounds.append((bag.max(dim=1).values / (i - start)).double().mean())
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


LAZY = {
    # The page's evens-then-odds order on every row at once: the heads ignored.
    ("ch6-ex-rotate-half", "the page's permutation on all rows"): """
import torch
def to_rotate_half(w, num_heads, r):
    n = w.shape[0]
    return w[torch.cat([torch.arange(0, n, 2), torch.arange(1, n, 2)])]
""",
    # Hugging Face's Llama converter: every feature of each head, r ignored.
    ("ch6-ex-rotate-half", "Llama's converter, r ignored"): """
def to_rotate_half(w, num_heads, r):
    d_out = w.shape[0]
    d_in = w.shape[1] if w.ndim == 2 else 1
    turned = w.reshape(num_heads, d_out // num_heads // 2, 2, d_in).transpose(1, 2)
    return turned.reshape(w.shape)
""",
    # The right rows, moved the other way round (odds interleaved back).
    ("ch6-ex-rotate-half", "the inverse permutation"): """
import torch
def to_rotate_half(w, num_heads, r):
    d_h = w.shape[0] // num_heads
    inside = torch.cat([torch.arange(0, r, 2), torch.arange(1, r, 2), torch.arange(r, d_h)])
    rows = (torch.arange(num_heads)[:, None] * d_h + torch.argsort(inside)).flatten()
    return w[rows]
""",
    # Right for weights, but a bias (one axis) raises; and w is changed in place.
    ("ch6-ex-rotate-half", "weights only, in place"): """
import torch
def to_rotate_half(w, num_heads, r):
    d_h, d_in = w.shape[0] // num_heads, w.shape[1]
    view = w.view(num_heads, d_h, d_in)
    view[:, :r] = view[:, :r].reshape(num_heads, r // 2, 2, d_in).transpose(1, 2).reshape(
        num_heads, r, d_in
    )
    return w
""",
    # The weights as they were: the lazy "nothing to convert".
    ("ch6-ex-rotate-half", "the weights as they were"): """
def to_rotate_half(w, num_heads, r):
    return w.clone()
""",
    # The package's accuracy: one number.
    ("ch6-ex-extrapolate", "evaluate"): """
from attention_from_scratch import evaluate
def accuracy_by_position(model, inputs, targets, offset):
    return evaluate(model, inputs, targets)
""",
    # A lazy-student read's answer: the page's held_out_accuracy summed per column, here
    # given the offset it ignores.
    ("ch6-ex-extrapolate", "the page's accuracy per column"): """
import torch
from attention_from_scratch.tasks import IGNORE_INDEX
@torch.no_grad()
def accuracy_by_position(model, inputs, targets, offset=0):
    model.eval()
    predictions = model(inputs).argmax(dim=-1)
    scored = targets != IGNORE_INDEX
    correct = (predictions == targets) & scored
    return correct.sum(0).double() / scored.sum(0).double()
""",
    # `offset` tokens put in front, then cut off: the sequences see them.
    ("ch6-ex-extrapolate", "a prefix of offset tokens"): """
import torch
@torch.no_grad()
def accuracy_by_position(model, inputs, targets, offset):
    model.eval()
    prefix = torch.zeros(inputs.shape[0], offset, dtype=inputs.dtype)
    predictions = model(torch.cat([prefix, inputs], dim=1))[:, offset:].argmax(dim=-1)
    scored = targets != -100
    return ((predictions == targets) & scored).sum(0).double() / scored.sum(0)
""",
    # Every target counted, the ignored ones as wrong answers, and no eval().
    ("ch6-ex-extrapolate", "ignored targets counted, dropout on"): """
import torch
def accuracy_by_position(model, inputs, targets, offset):
    with torch.no_grad():
        x = model.embed(inputs, offset)
        for block in model.blocks:
            x, _ = block(x)
        return (model.head(x).argmax(dim=-1) == targets).float().mean(dim=0)
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
    # A lazy-student read's answer to the earlier exercise, run on a model without positions
    # the package builds: right with every earlier token in view, blind to the window.
    ("ch6-ex-causal-bag", "a random model without positions"): """
import torch
from attention_from_scratch import TinyCausalModel
def positions_that_can_change(tokens, order, window=None):
    torch.manual_seed(0)
    vocab = int(tokens.max()) + 1
    model = TinyCausalModel(vocab, d_model=32, context_length=len(tokens), positions="none")
    with torch.no_grad():
        logits = model(torch.stack([tokens, tokens[order]])).double()
    return (logits[0] - logits[1]).abs().amax(dim=-1) > 1e-5
""",
    # Where a token moved, not what the queries see.
    ("ch6-ex-causal-bag", "the moved positions"): """
import torch
def positions_that_can_change(tokens, order, window=None):
    return order != torch.arange(len(order))
""",
    # The inverse permutation: right for a swap, wrong for a ring of three.
    ("ch6-ex-causal-bag", "the inverse order"): """
import torch
def positions_that_can_change(tokens, order, window=None):
    moved = torch.empty_like(tokens)
    moved[order] = tokens
    out = []
    for p in range(len(tokens)):
        start = 0 if window is None else max(0, p - window)
        out.append(sorted(tokens[start : p + 1].tolist()) != sorted(moved[start : p + 1].tolist())
                   or bool(tokens[p] != moved[p]))
    return torch.tensor(out)
""",
    # The whole prefix compared in order, as with positions: a bag has no order.
    ("ch6-ex-causal-bag", "the prefix in order"): """
import torch
def positions_that_can_change(tokens, order, window=None):
    moved = tokens[order]
    out = []
    for p in range(len(tokens)):
        start = 0 if window is None else max(0, p - window)
        out.append(not torch.equal(tokens[start : p + 1], moved[start : p + 1]))
    return torch.tensor(out)
""",
    # The window one token short: `window` tokens, the query among them.
    ("ch6-ex-causal-bag", "a window one token short"): """
import torch
def positions_that_can_change(tokens, order, window=None):
    moved = tokens[order]
    out = []
    for p in range(len(tokens)):
        start = 0 if window is None else max(0, p - window + 1)
        out.append(sorted(tokens[start : p + 1].tolist()) != sorted(moved[start : p + 1].tolist())
                   or bool(tokens[p] != moved[p]))
    return torch.tensor(out)
""",
    # A lazy-student read's answer: a slice of the tokens per position, counted; there are
    # no tokens, only their counts.
    ("ch6-ex-why-order-blind", "a slice of the tokens per position"): """
import torch
import torch.nn.functional as F
def bound_by_position(inputs, k, window, vocab_size=16):
    out = []
    for i in range(k, inputs.shape[1]):
        seen = inputs[:, max(0, i - window):i]
        counts = F.one_hot(seen, vocab_size).sum(dim=1)
        out.append(counts.max(dim=-1).values.double().mean() / seen.shape[1])
    return torch.stack(out)
""",
    # The page's bound at every position, whatever the window.
    ("ch6-ex-why-order-blind", "the page's bound"): """
import torch
def bound_by_position(counts, k, window):
    best = counts[:, k:-1].max(dim=-1).values
    return (best / torch.arange(k, counts.shape[1] - 1)).mean(dim=0)
""",
    # The window one token late: it takes in the token at i.
    ("ch6-ex-why-order-blind", "token i in the window"): """
import torch
def bound_by_position(counts, k, window):
    i = torch.arange(k, counts.shape[1] - 1) + 1
    start = (i - window).clamp(min=0)
    best = (counts[:, i] - counts[:, start]).max(dim=-1).values
    return (best / (i - start)).mean(dim=0)
""",
    # The page's overall bound: one number.
    ("ch6-ex-why-order-blind", "one number"): """
def bound_by_position(counts, k, window):
    return 0.21
""",
}


@pytest.mark.parametrize(("label", "name"), list(LAZY))
def test_a_lazy_answer_earns_less_than_full_marks(label: str, name: str) -> None:
    score = grade(label, LAZY[(label, name)], seed=1)
    assert score.earned < score.possible


def test_the_mistakes_are_named() -> None:
    for name, reason in [
        ("the page's permutation on all rows", "head by head"),
        ("Llama's converter, r ignored", "only the first r features"),
        ("the inverse permutation", "the other way round"),
        ("the weights as they were", "as they were"),
    ]:
        score = grade("ch6-ex-rotate-half", LAZY[("ch6-ex-rotate-half", name)])
        assert score.earned == 0 and reason in failures(score), failures(score)
    in_place = grade("ch6-ex-rotate-half", LAZY[("ch6-ex-rotate-half", "weights only, in place")])
    assert [check.passed for check in in_place.checks] == [True, False]
    for name, reason in [
        ("a random model without positions", "not where the prediction can change"),
        ("the moved positions", "a token moved"),
        ("the prefix in order", "cannot tell the order"),
        ("a window one token short", "one more than that"),
    ]:
        score = grade("ch6-ex-causal-bag", LAZY[("ch6-ex-causal-bag", name)])
        assert not score.checks[0].passed and reason in failures(score), (name, failures(score))
    lazy = LAZY[("ch6-ex-extrapolate", "the page's accuracy per column")]
    score = grade("ch6-ex-extrapolate", lazy)
    assert score.earned == 0 and "positions 0, 1, ..." in failures(score), failures(score)
    lazy = LAZY[("ch6-ex-why-order-blind", "a slice of the tokens per position")]
    assert grade("ch6-ex-why-order-blind", lazy).earned == 0
    late = LAZY[("ch6-ex-why-order-blind", "token i in the window")]
    assert "token i itself" in failures(grade("ch6-ex-why-order-blind", late))
    inverse = LAZY[("ch6-ex-causal-bag", "the inverse order")]
    assert "tokens[order]" in failures(grade("ch6-ex-causal-bag", inverse))
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
    exec(LAZY[("ch6-ex-rotate-half", "Llama's converter, r ignored")], namespace)
    result = run_checks("ch6-ex-rotate-half", namespace)
    failed = [c for c in result.checks if not c.passed]
    assert [c.name for c in failed] == ["a_quarter_of_each_head_from_position_100"]
    assert "first r features" in failed[0].hint
    exec(LAZY[("ch6-ex-rotate-half", "weights only, in place")], namespace)
    result = run_checks("ch6-ex-rotate-half", namespace)
    assert [c.passed for c in result.checks] == [False, True, False]
    exec(LAZY[("ch6-ex-extrapolate", "evaluate")], namespace)
    result = run_checks("ch6-ex-extrapolate", namespace)
    assert not any(c.passed for c in result.checks)
    assert "expected a tensor" in result.checks[0].reason
    exec(LAZY[("ch6-ex-ablate-induction", "the page's zeroed layer")], namespace)
    result = run_checks("ch6-ex-ablate-induction", namespace)
    assert [c.passed for c in result.checks] == [False, True]
    exec(LAZY[("ch6-ex-causal-bag", "the moved positions")], namespace)
    assert not run_checks("ch6-ex-causal-bag", namespace).passed
    exec(LAZY[("ch6-ex-causal-bag", "a window one token short")], namespace)
    result = run_checks("ch6-ex-causal-bag", namespace)
    assert [c.passed for c in result.checks] == [False, True]
    exec(LAZY[("ch6-ex-why-order-blind", "the page's bound")], namespace)
    result = run_checks("ch6-ex-why-order-blind", namespace)
    assert [c.passed for c in result.checks] == [False, False]
    stub = {**page_namespace(), "bound_by_position": ...}
    result = run_checks("ch6-ex-why-order-blind", stub)
    assert all("still `...`" in c.reason for c in result.checks)
