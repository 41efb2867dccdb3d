"""Chapter 4's exercises: a correct answer earns every point on every variant, lazy answers do
not, and the self-check passes a correct answer and fails a wrong one with its hint.

The correct answers below are written as a student would write them, independently of the
grader's references (``grading/ch4.py``) and of the book's solutions (which the slow test
grades as a submission).
"""

from __future__ import annotations

import pytest
from grading_helpers import failures, full_marks, grade

from attention_from_scratch.exercises import run_checks

AUTO = [
    "ch4-ex-one-head",
    "ch4-ex-count-parameters",
    "ch4-ex-divisible",
    "ch4-ex-permute-heads",
]

CORRECT = """
import copy
import torch
from torch import nn
from attention_from_scratch import CausalAttention, MultiHeadAttention

def as_causal_and_linear(mha, m):
    d_h = mha.d_out // mha.num_heads
    lo, hi = m * d_h, (m + 1) * d_h
    has_bias = mha.W_query.bias is not None
    causal = CausalAttention(mha.d_in, d_h, mha.context_length, 0.0, qkv_bias=has_bias)
    state = {}
    for name in ("W_query", "W_key", "W_value"):
        state[name + ".weight"] = getattr(mha, name).weight[lo:hi].detach().clone()
        if has_bias:
            state[name + ".bias"] = getattr(mha, name).bias[lo:hi].detach().clone()
    causal.load_state_dict(state)
    linear = nn.Linear(d_h, mha.d_out, bias=False)
    linear.weight = nn.Parameter(mha.out_proj.weight[:, lo:hi].detach().clone())
    return causal, linear

def parameter_count(d_in, d_out, num_heads, head_dim, qkv_bias):
    inner = num_heads * head_dim
    total = 0
    for fan_in, fan_out, bias in [(d_in, inner, qkv_bias)] * 3 + [(inner, d_out, True)]:
        total += fan_in * fan_out + (fan_out if bias else 0)
    return total

def split_qkv(qkv, num_heads, layout):
    b, t, size = qkv.shape
    d_out = size // 3
    if size != 3 * d_out or d_out % num_heads != 0:
        raise ValueError(f"d_out={d_out} is not a multiple of num_heads={num_heads}")
    d_h = d_out // num_heads
    if layout == "roles":
        q, k, v = qkv.split(d_out, dim=-1)
        return tuple(z.reshape(b, t, num_heads, d_h).transpose(1, 2) for z in (q, k, v))
    per_head = qkv.reshape(b, t, num_heads, 3 * d_h).transpose(1, 2)
    return tuple(per_head.split(d_h, dim=-1))

def permute_heads(module, perm):
    d_h = module.head_dim
    rows = [p * d_h + i for p in perm for i in range(d_h)]
    new = copy.deepcopy(module)
    state = new.state_dict()
    for name in ("W_query", "W_key", "W_value"):
        state[name + ".weight"] = module.state_dict()[name + ".weight"][rows]
        if name + ".bias" in state:
            state[name + ".bias"] = module.state_dict()[name + ".bias"][rows]
    state["out_proj.weight"] = module.state_dict()["out_proj.weight"][:, rows]
    new.load_state_dict(state)
    return new
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
    # The exercise as it stood for one head: the whole module, bias included, whatever m.
    ("ch4-ex-one-head", "the whole module as one head"): """
from torch import nn
from attention_from_scratch import CausalAttention
def as_causal_and_linear(mha, m):
    bias = mha.W_query.bias is not None
    causal = CausalAttention(mha.d_in, mha.d_out, mha.context_length, 0.0, qkv_bias=bias)
    for name in ("W_query", "W_key", "W_value"):
        getattr(causal, name).load_state_dict(getattr(mha, name).state_dict())
    linear = nn.Linear(mha.d_out, mha.d_out)
    linear.load_state_dict(mha.out_proj.state_dict())
    return causal, linear
""",
    # The module itself, and an identity.
    ("ch4-ex-one-head", "the module and an identity"): """
from torch import nn
def as_causal_and_linear(mha, m):
    return mha, nn.Identity()
""",
    # The page's count: build the package's module and count its parameters.
    ("ch4-ex-count-parameters", "the package's module counted"): """
from attention_from_scratch import MultiHeadAttention
def parameter_count(d_in, d_out, num_heads, head_dim, qkv_bias):
    module = MultiHeadAttention(d_in, d_out, 4, 0.0, num_heads=num_heads, qkv_bias=qkv_bias)
    return sum(p.numel() for p in module.parameters())
""",
    # The page's printed numbers typed in.
    ("ch4-ex-count-parameters", "the page's numbers"): """
def parameter_count(d_in, d_out, num_heads, head_dim, qkv_bias):
    return 80_050 if head_dim == d_in else 10_050
""",
    # The package's split_heads on each third: nanoGPT's layout only.
    ("ch4-ex-divisible", "split_heads on each third"): """
from attention_from_scratch import split_heads
def split_qkv(qkv, num_heads, layout):
    return tuple(split_heads(part, num_heads) for part in qkv.chunk(3, dim=-1))
""",
    # The page's steps 2 and 3 on the packed tensor, with no check of their own.
    ("ch4-ex-divisible", "one view for both layouts"): """
def split_qkv(qkv, num_heads, layout):
    b, t, size = qkv.shape
    d_h = size // (3 * num_heads)
    return tuple(qkv.view(b, t, 3, num_heads, d_h).permute(2, 0, 3, 1, 4))
""",
    # A copy of the module: the same output, no head moved.
    ("ch4-ex-permute-heads", "an unchanged copy"): """
import copy
def permute_heads(module, perm):
    return copy.deepcopy(module)
""",
}


@pytest.mark.parametrize(("label", "name"), list(LAZY))
def test_a_lazy_answer_earns_less_than_full_marks(label: str, name: str) -> None:
    score = grade(label, LAZY[(label, name)], seed=1)
    assert score.earned < score.possible


def _failed(label: str, code: str, seed: int = 2) -> set[str]:
    return {check.name for check in grade(label, code, seed=seed).checks if not check.passed}


def test_each_lazy_answer_fails_the_check_meant_for_it() -> None:
    assert _failed("ch4-ex-one-head", LAZY[("ch4-ex-one-head", "the whole module as one head")])
    assert _failed(
        "ch4-ex-count-parameters",
        LAZY[("ch4-ex-count-parameters", "the package's module counted")],
    ) == {"count", "edges"}
    assert "layouts" in _failed(
        "ch4-ex-divisible", LAZY[("ch4-ex-divisible", "split_heads on each third")]
    )
    no_check = LAZY[("ch4-ex-divisible", "one view for both layouts")]
    assert _failed("ch4-ex-divisible", no_check) == {"layouts", "edges"}
    copied = LAZY[("ch4-ex-permute-heads", "an unchanged copy")]
    assert _failed("ch4-ex-permute-heads", copied) == {"heads", "biases"}


WITHOUT_OUT_PROJ = CORRECT.replace(
    'state["out_proj.weight"] = module.state_dict()["out_proj.weight"][:, rows]', ""
)
INVERSE = CORRECT.replace(
    "rows = [p * d_h + i for p in perm",
    "perm = [perm.index(i) for i in range(len(perm))]\n    rows = [p * d_h + i for p in perm",
)
KEY_BIAS_LEFT = CORRECT.replace(
    '        if name + ".bias" in state:\n            state[name + ".bias"]',
    '        if name != "W_key" and name + ".bias" in state:\n            state[name + ".bias"]',
)


def test_permuting_halfway_is_named() -> None:
    score = grade("ch4-ex-permute-heads", WITHOUT_OUT_PROJ, seed=3)
    reasons = {check.name: check.reason for check in score.checks}
    assert {check.name for check in score.checks if not check.passed} == {"output"}
    assert "the output is off" in reasons["output"]
    score = grade("ch4-ex-permute-heads", INVERSE, seed=3)
    reasons = {check.name: check.reason for check in score.checks if not check.passed}
    assert "inverse permutation" in reasons["heads"]
    # The key bias adds the same number to a row of scores: only the state shows it.
    assert _failed("ch4-ex-permute-heads", KEY_BIAS_LEFT) == {"biases"}


def test_a_head_with_a_biased_linear_layer_is_named() -> None:
    biased = CORRECT.replace("nn.Linear(d_h, mha.d_out, bias=False)", "nn.Linear(d_h, mha.d_out)")
    score = grade("ch4-ex-one-head", biased, seed=0)
    assert score.earned == 0
    assert all("no bias" in check.reason for check in score.checks)


def test_a_missing_out_proj_bias_is_named() -> None:
    short = CORRECT.replace("(inner, d_out, True)", "(inner, d_out, False)")
    score = grade("ch4-ex-count-parameters", short, seed=0)
    assert score.earned == 0
    assert "out_proj's bias is missing" in failures(score)


def test_the_self_check_fails_a_wrong_answer_with_its_hint() -> None:
    namespace: dict = {}
    exec(LAZY[("ch4-ex-one-head", "the whole module as one head")], namespace)
    result = run_checks("ch4-ex-one-head", namespace)
    assert not any(c.passed for c in result.checks)
    assert "no bias" in result.checks[0].reason and "block" in result.checks[0].hint
    namespace = {}
    exec(LAZY[("ch4-ex-divisible", "split_heads on each third")], namespace)
    result = run_checks("ch4-ex-divisible", namespace)
    assert [c.passed for c in result.checks] == [False, True]
    assert "'heads', queries" in result.checks[0].reason
    result = run_checks("ch4-ex-count-parameters", {"parameter_count": lambda *a: 80_050.0})
    assert not result.passed and "expected an int" in result.checks[0].reason
    namespace = {}
    exec(LAZY[("ch4-ex-permute-heads", "an unchanged copy")], namespace)
    result = run_checks("ch4-ex-permute-heads", namespace)
    assert not any(c.passed for c in result.checks)
    assert "new head 0 should attend as the module's head 2" in result.checks[0].reason
    stub = run_checks("ch4-ex-permute-heads", {"permute_heads": ...})
    assert all("still `...`" in c.reason for c in stub.checks)
