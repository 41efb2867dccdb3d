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
    # A full-size CausalAttention in disguise: its forward, replaced on the instance, runs the
    # module's own steps with the other heads' context zeroed; the linear layer is an identity.
    ("ch4-ex-one-head", "a disguised forward"): """
import copy
import torch
from torch import nn
from attention_from_scratch import CausalAttention, merge_heads
def as_causal_and_linear(mha, m):
    sub = copy.deepcopy(mha).eval()
    def forward(x, return_weights=False):
        q, k, v = sub.project(x)
        context, _ = sub.attend(q, k, v)
        keep = torch.zeros(sub.num_heads, 1, 1)
        keep[m] = 1
        return sub.out_proj(merge_heads(context * keep)) - sub.out_proj.bias
    causal = CausalAttention(mha.d_in, mha.d_out, mha.context_length, 0.0)
    causal.forward = forward
    linear = nn.Linear(mha.d_out, mha.d_out, bias=False)
    with torch.no_grad():
        linear.weight.copy_(torch.eye(mha.d_out))
    return causal, linear
""",
    # The same disguise with the other heads' values zeroed in a copy of the module.
    ("ch4-ex-one-head", "a disguised copy with other heads' values zeroed"): """
import copy
import torch
from torch import nn
from attention_from_scratch import CausalAttention
def as_causal_and_linear(mha, m):
    d_h = mha.head_dim
    sub = copy.deepcopy(mha).eval()
    keep = torch.zeros(mha.d_out)
    keep[m * d_h : (m + 1) * d_h] = 1
    with torch.no_grad():
        sub.W_value.weight.mul_(keep[:, None])
        if sub.W_value.bias is not None:
            sub.W_value.bias.mul_(keep)
        sub.out_proj.bias.zero_()
    causal = CausalAttention(mha.d_in, mha.d_out, mha.context_length, 0.0)
    causal.forward = lambda x, return_weights=False: sub(x)
    linear = nn.Linear(mha.d_out, mha.d_out, bias=False)
    with torch.no_grad():
        linear.weight.copy_(torch.eye(mha.d_out))
    return causal, linear
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
    # A copy whose attend, replaced on the instance, reorders the weights it returns: no
    # parameter moves.
    ("ch4-ex-permute-heads", "a disguised attend"): """
import copy
import types
def permute_heads(module, perm):
    new = copy.deepcopy(module)
    attend = type(new).attend
    def reordered(self, q, k, v):
        context, weights = attend(self, q, k, v)
        return context, None if weights is None else weights[:, list(perm)]
    new.attend = types.MethodType(reordered, new)
    return new
""",
    # The "heads" layout grouped (h, d_h, 3): each head's numbers, interleaved by role. It
    # passes the public self-check, which holds for more than one grouping.
    ("ch4-ex-divisible", "a grouping the self-check cannot tell"): """
def split_qkv(qkv, num_heads, layout):
    b, t, size = qkv.shape
    d_out = size // 3
    if size % 3 or d_out % num_heads:
        raise ValueError(f"d_out={d_out} is not a multiple of num_heads={num_heads}")
    d_h = d_out // num_heads
    if layout == "roles":
        grouped = qkv.reshape(b, t, 3, num_heads, d_h).permute(2, 0, 3, 1, 4)
    else:
        grouped = qkv.reshape(b, t, num_heads, d_h, 3).permute(4, 0, 2, 1, 3)
    return grouped[0], grouped[1], grouped[2]
""",
}


@pytest.mark.parametrize(("label", "name"), list(LAZY))
def test_a_lazy_answer_earns_less_than_full_marks(label: str, name: str) -> None:
    score = grade(label, LAZY[(label, name)], seed=1)
    assert score.earned < score.possible


def _failed(label: str, code: str | dict, seed: int = 2) -> set[str]:
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
    assert _failed("ch4-ex-permute-heads", copied) == {"heads", "output", "biases"}


def test_returned_modules_are_judged_by_their_weights() -> None:
    """A forward or attend replaced on the returned instance is never run: the grader
    computes what the returned weights do, and a head's CausalAttention has its size."""
    for name in ("a disguised forward", "a disguised copy with other heads' values zeroed"):
        score = grade("ch4-ex-one-head", LAZY[("ch4-ex-one-head", name)], seed=0)
        assert score.earned == 0
        assert "one head's CausalAttention has d_out = d_h" in failures(score)
    for name in ("an unchanged copy", "a disguised attend"):
        score = grade("ch4-ex-permute-heads", LAZY[("ch4-ex-permute-heads", name)], seed=0)
        assert score.earned == 0, failures(score)
        assert "no head moved" in failures(score)


def test_the_public_check_of_the_packed_split_cannot_name_the_layout() -> None:
    """The self-check holds for another grouping of the "heads" layout; the grader does not."""
    namespace: dict = {}
    exec(LAZY[("ch4-ex-divisible", "a grouping the self-check cannot tell")], namespace)
    assert run_checks("ch4-ex-divisible", namespace).passed
    assert "layouts" in _failed("ch4-ex-divisible", namespace)


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
    assert "'heads': head 0's query, key and value" in result.checks[0].reason
    result = run_checks("ch4-ex-count-parameters", {"parameter_count": lambda *a: 80_050.0})
    assert not result.passed and "expected an int" in result.checks[0].reason
    namespace = {}
    exec(LAZY[("ch4-ex-permute-heads", "an unchanged copy")], namespace)
    result = run_checks("ch4-ex-permute-heads", namespace)
    assert not any(c.passed for c in result.checks)
    assert "new head 0 should attend as the module's head 2" in result.checks[0].reason
    stub = run_checks("ch4-ex-permute-heads", {"permute_heads": ...})
    assert all("still `...`" in c.reason for c in stub.checks)
