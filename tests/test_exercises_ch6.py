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

def rotate_half(x, offset, r):
    if torch.is_tensor(offset):  # one start per sequence: each sequence on its own
        return torch.stack([rotate_half(x[n], int(start), r) for n, start in enumerate(offset)])
    out = x.clone()
    half = r // 2
    for row in range(x.shape[-2]):
        for i in range(half):
            angle = (offset + row) * 10000 ** (-2 * i / r)  # Python floats: float64
            a, b = x[..., row, i], x[..., row, i + half]
            out[..., row, i] = a * math.cos(angle) - b * math.sin(angle)
            out[..., row, i + half] = a * math.sin(angle) + b * math.cos(angle)
    return out

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

def prediction_changes(model, tokens, order):
    with torch.no_grad():
        before = model(tokens[None])[0].argmax(dim=-1)
        after = model(tokens[order][None])[0].argmax(dim=-1)
    return before != after

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
    # A lazy-student read's answer: the package's rotation of the first r features, on any
    # number of axes, with one int offset.
    ("ch6-ex-rotate-half", "RotaryEmbedding on the first r features"): """
import torch
from attention_from_scratch.positions import RotaryEmbedding
def rotate_half(x, offset, r):
    t, d = x.shape[-2:]
    flat = x.reshape(-1, t, d)
    rope = RotaryEmbedding(r, interleaved=False).to(x.device)
    turned = rope(flat[..., :r], offset=int(offset))
    return torch.cat([turned, flat[..., r:]], dim=-1).reshape(x.shape).to(x.dtype)
""",
    # The same, called once per sequence with that sequence's start.
    ("ch6-ex-rotate-half", "RotaryEmbedding on each sequence"): """
import torch
from attention_from_scratch.positions import RotaryEmbedding
def one(x, offset, r):
    t, d = x.shape[-2:]
    flat = x.reshape(-1, t, d)
    turned = RotaryEmbedding(r, interleaved=False)(flat[..., :r], offset=offset)
    return torch.cat([turned, flat[..., r:]], dim=-1).reshape(x.shape).to(x.dtype)
def rotate_half(x, offset, r):
    if torch.is_tensor(offset):
        return torch.stack([one(x[n], int(start), r) for n, start in enumerate(offset)])
    return one(x, offset, r)
""",
    # The same, with the padding before position 0 left unturned.
    ("ch6-ex-rotate-half", "RotaryEmbedding on each sequence, pads unturned"): """
import torch
from attention_from_scratch.positions import RotaryEmbedding
def one(x, offset, r):
    t, d = x.shape[-2:]
    flat = x.reshape(-1, t, d)
    pads = max(0, -offset)
    turned = RotaryEmbedding(r, interleaved=False)(flat[..., pads:, :r], max(0, offset))
    turned = torch.cat([flat[..., :pads, :r], turned], dim=-2)
    return torch.cat([turned, flat[..., r:]], dim=-1).reshape(x.shape).to(x.dtype)
def rotate_half(x, offset, r):
    if torch.is_tensor(offset):
        return torch.stack([one(x[n], int(start), r) for n, start in enumerate(offset)])
    return one(x, offset, r)
""",
    # The page's rotate on the first r features: the interleaved pairs.
    ("ch6-ex-rotate-half", "the page's rotate on the first r features"): PAGE_ROTATE
    + """
def rotate_half(x, offset, r):
    if torch.is_tensor(offset):
        return torch.stack([rotate_half(x[n], int(start), r) for n, start in enumerate(offset)])
    return torch.cat([rotate(x[..., :r], offset), x[..., r:]], dim=-1)
""",
    # The right pairs and positions with the frequencies of the whole head.
    ("ch6-ex-rotate-half", "theta over d_h"): """
import torch
def rotate_half(x, offset, r):
    d_h, half, t = x.shape[-1], r // 2, x.shape[-2]
    p = torch.as_tensor(offset, dtype=torch.float64)[..., None] + torch.arange(t)
    if p.ndim == 2:
        p = p.view(len(p), *[1] * (x.ndim - 3), t)
    angles = p[..., None] * 10000 ** (-torch.arange(0, r, 2, dtype=torch.float64) / d_h)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    a, b = x[..., :half], x[..., half:r]
    return torch.cat([a * cos - b * sin, a * sin + b * cos, x[..., r:]], dim=-1)
""",
    # One start for the whole batch.
    ("ch6-ex-rotate-half", "the first sequence's start for all"): """
import torch
def rotate_half(x, offset, r):
    start = int(offset[0]) if torch.is_tensor(offset) else offset
    p = torch.arange(start, start + x.shape[-2], dtype=torch.float64)
    angles = torch.outer(p, 10000 ** (-torch.arange(0, r, 2, dtype=torch.float64) / r))
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    a, b = x[..., : r // 2], x[..., r // 2 : r]
    return torch.cat([a * cos - b * sin, a * sin + b * cos, x[..., r:]], dim=-1)
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
    reasons = failures(grade("ch6-ex-rotate-half", LAZY[("ch6-ex-rotate-half", "theta over d_h")]))
    assert "head of size r" in reasons
    page = LAZY[("ch6-ex-rotate-half", "the page's rotate on the first r features")]
    assert "interleaved convention" in failures(grade("ch6-ex-rotate-half", page))
    whole = LAZY[("ch6-ex-rotate-half", "RotaryEmbedding on every feature")]
    assert grade("ch6-ex-rotate-half", whole).earned == 0
    for name, reason in [
        ("the first sequence's start for all", "its own start"),
        ("RotaryEmbedding on each sequence, pads unturned", "not left unturned"),
        ("RotaryEmbedding on each sequence", "expected an int >= 0"),
    ]:
        score = grade("ch6-ex-rotate-half", LAZY[("ch6-ex-rotate-half", name)])
        assert score.earned == 0 and reason in failures(score), failures(score)
    lazy = LAZY[("ch6-ex-rotate-half", "RotaryEmbedding on the first r features")]
    assert grade("ch6-ex-rotate-half", lazy).earned == 0
    lazy = LAZY[("ch6-ex-extrapolate", "the page's accuracy per column")]
    score = grade("ch6-ex-extrapolate", lazy)
    assert score.earned == 0 and "positions 0, 1, ..." in failures(score), failures(score)
    lazy = LAZY[("ch6-ex-why-order-blind", "a slice of the tokens per position")]
    assert grade("ch6-ex-why-order-blind", lazy).earned == 0
    late = LAZY[("ch6-ex-why-order-blind", "token i in the window")]
    assert "token i itself" in failures(grade("ch6-ex-why-order-blind", late))
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
    assert [c.name for c in failed] == [
        "four_of_six_features_from_position_3",
        "a_left_padded_batch",
    ]
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
