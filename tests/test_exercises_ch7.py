"""Chapter 7's exercises: a correct answer earns every point on every variant, lazy answers do
not, and the self-check passes a correct answer and fails a wrong one with its hint.

The correct answers below are written as a student would write them, independently of the
grader's references (``grading/ch7.py``) and of the book's solutions (which the slow test
grades as a submission).
"""

from __future__ import annotations

import pytest
from grading_helpers import failures, full_marks, grade

from attention_from_scratch.exercises import run_checks

AUTO = [
    "ch7-ex-kv-cache",
    "ch7-ex-position-ids",
    "ch7-ex-online-softmax",
    "ch7-ex-group-heads",
    "ch7-ex-which-path",
]

CORRECT = """
import math
import torch

class RollingKVCache:
    def __init__(self, window):
        self.window, self.length = window, 0
        self.keys = self.values = None

    def append(self, keys, values):
        if self.keys is None:
            shape = (*keys.shape[:2], self.window, keys.shape[3])
            self.keys = torch.zeros(shape, dtype=keys.dtype)
            self.values = torch.zeros(shape, dtype=values.dtype)
        for i in range(keys.shape[2]):  # one token at a time, into its slot
            slot = (self.length + i) % self.window
            self.keys[:, :, slot] = keys[:, :, i]
            self.values[:, :, slot] = values[:, :, i]
        self.length += keys.shape[2]
        held = min(self.length, self.window)
        order = [(self.length - held + j) % self.window for j in range(held)]
        return self.keys[:, :, order], self.values[:, :, order]

def shifted_positions(padding_mask, past):
    real = ~padding_mask
    before = torch.cumsum(real.int(), dim=1) - real.int()
    return torch.where(real, before + past.reshape(-1, 1), 0).long()

def online_softmax(scores, values, block_size):
    r, s = scores.shape
    m = torch.full((r,), -math.inf, dtype=scores.dtype)
    ell = torch.zeros(r, dtype=scores.dtype)
    o = torch.zeros(r, values.shape[1], dtype=scores.dtype)
    ms, ells, os = [], [], []
    for start in range(0, s, block_size):
        block = scores[:, start:start + block_size]
        new_m = torch.max(m, block.max(dim=1).values)
        base = torch.where(torch.isinf(new_m), torch.zeros_like(new_m), new_m)
        shrink = torch.exp(m - base)
        weights = torch.exp(block - base[:, None])
        ell = shrink * ell + weights.sum(dim=1)
        o = shrink[:, None] * o + weights @ values[start:start + block_size]
        m = new_m
        ms.append(m); ells.append(ell); os.append(o)
    return torch.stack(ms), torch.stack(ells), torch.stack(os)

def folded_attention(q, k, v):
    b, h, t, d_h = q.shape
    h_kv, s = k.shape[1], k.shape[2]
    g = h // h_kv
    folded = q.reshape(b, h_kv, g * t, d_h)
    scores = torch.matmul(folded, k.transpose(-1, -2)) * d_h ** -0.5
    row_position = torch.arange(t).repeat(g) + (s - t)
    future = torch.arange(s)[None, :] > row_position[:, None]
    scores = scores.masked_fill(future, -math.inf)
    out = torch.softmax(scores, dim=-1) @ v
    return out.reshape(b, h, t, d_h), scores

def explicit_peak_bytes(tokens, heads, layers, bytes_per_number, chunk):
    largest, start = 0, 0
    while start < tokens:
        end = min(start + chunk, tokens)
        largest = max(largest, (end - start) * end)
        start = end
    return 2 * heads * largest * bytes_per_number
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
    # The page's MyKVCache, whatever the window.
    ("ch7-ex-kv-cache", "the page's growing cache"): """
import torch
class RollingKVCache:
    def __init__(self, window):
        self.keys = self.values = None
    @property
    def length(self):
        return 0 if self.keys is None else self.keys.shape[2]
    def append(self, keys, values):
        if self.keys is None:
            self.keys, self.values = keys, values
        else:
            self.keys = torch.cat([self.keys, keys], dim=2)
            self.values = torch.cat([self.values, values], dim=2)
        return self.keys, self.values
""",
    # The package's cache, whatever the window.
    ("ch7-ex-kv-cache", "the package's KVCache"): """
from attention_from_scratch import KVCache
class RollingKVCache(KVCache):
    def __init__(self, window):
        super().__init__()
""",
    # The page's cache cut to the last window: right tokens, no ring.
    ("ch7-ex-kv-cache", "concatenate, then keep the last window"): """
import torch
class RollingKVCache:
    def __init__(self, window):
        self.window, self.length = window, 0
        self.keys = self.values = None
    def append(self, keys, values):
        if self.keys is not None:
            keys = torch.cat([self.keys, keys], dim=2)
            values = torch.cat([self.values, values], dim=2)
        self.length += keys.shape[2] - (0 if self.keys is None else self.keys.shape[2])
        self.keys, self.values = keys[:, :, -self.window:], values[:, :, -self.window:]
        return self.keys, self.values
""",
    # The section's formula: columns minus the pads, for left padding only.
    ("ch7-ex-position-ids", "the section's left-padding formula"): """
import torch
def shifted_positions(padding_mask, past):
    columns = torch.arange(padding_mask.shape[1]).expand_as(padding_mask)
    return (columns - padding_mask.sum(1, keepdim=True)).clamp(min=0)
""",
    # A count from each row's first real token that forgets the cache.
    ("ch7-ex-position-ids", "without the cached tokens"): """
import torch
def shifted_positions(padding_mask, past):
    real = (~padding_mask).long()
    return ((real.cumsum(dim=1) - 1) * real).clamp(min=0)
""",
    # The self-check's numbers typed in.
    ("ch7-ex-position-ids", "the public numbers"): """
import torch
def shifted_positions(padding_mask, past):
    return torch.tensor([[0, 2, 3, 4, 0, 0], [0, 1, 0, 0, 0, 0], [0] * 6])
""",
    # The library's softmax: the output, none of the states.
    ("ch7-ex-online-softmax", "torch.softmax"): """
import torch
def online_softmax(scores, values, block_size):
    return torch.softmax(scores, dim=-1) @ values
""",
    # The page's online_row, one row at a time, its output only.
    ("ch7-ex-online-softmax", "the page's online_row"): """
import torch
def online_row(scores, values, block_size, safe=True):
    m, ell, o = torch.tensor(float("-inf")), 0.0, torch.zeros(values.shape[1])
    for start in range(0, len(scores), block_size):
        block = scores[start : start + block_size]
        m_new = torch.maximum(m, block.max())
        m_sub = m_new
        if safe and m_new == float("-inf"):
            m_sub = torch.tensor(0.0)
        rescale = torch.exp(m - m_sub)
        p = torch.exp(block - m_sub)
        ell = ell * rescale + p.sum()
        o = o * rescale + p @ values[start : start + block_size]
        m = m_new
    return o / ell
def online_softmax(scores, values, block_size):
    return torch.stack([online_row(row, values, block_size) for row in scores])
""",
    # The recipe as first written: subtracts m' even while it is -inf.
    ("ch7-ex-online-softmax", "the unsafe recipe"): """
import torch
def online_softmax(scores, values, block_size):
    r = scores.shape[0]
    m = torch.full((r,), float("-inf"), dtype=scores.dtype)
    ell = torch.zeros(r, dtype=scores.dtype)
    o = torch.zeros(r, values.shape[1], dtype=scores.dtype)
    states = []
    for start in range(0, scores.shape[1], block_size):
        block = scores[:, start : start + block_size]
        m_new = torch.maximum(m, block.amax(dim=1))
        p = torch.exp(block - m_new[:, None])
        ell = ell * torch.exp(m - m_new) + p.sum(dim=1)
        o = o * torch.exp(m - m_new)[:, None] + p @ values[start : start + block_size]
        m = m_new
        states.append((m, ell, o))
    return tuple(torch.stack(x) for x in zip(*states))
""",
    # SDPA with grouped heads: an output (causal from the wrong corner), no scores.
    ("ch7-ex-group-heads", "SDPA with enable_gqa"): """
import torch
import torch.nn.functional as F
def folded_attention(q, k, v):
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    return out, torch.zeros(1)
""",
    # SDPA with the cache's mask for the output, the package's weights for the scores.
    ("ch7-ex-group-heads", "SDPA and the package's weights"): """
import torch
import torch.nn.functional as F
from attention_from_scratch import GroupedQueryAttention
def folded_attention(q, k, v):
    b, h, t, d_h = q.shape
    h_kv, s = k.shape[1], k.shape[2]
    allowed = torch.ones(s, s, dtype=torch.bool).tril()[s - t:]
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, enable_gqa=True)
    layer = GroupedQueryAttention(h * d_h, h * d_h, s, 0.0, h, h_kv)
    _, weights = layer.attend(q, k, v, ~allowed)
    return out, weights.reshape(b, h_kv, (h // h_kv) * t, s)
""",
    # The page's my_grouped_attention: a group axis, a (t, t) causal mask.
    ("ch7-ex-group-heads", "the page's broadcast form"): """
import torch
def folded_attention(q, k, v):
    b, h, t, d_h = q.shape
    h_kv = k.shape[1]
    groups = q.reshape(b, h_kv, h // h_kv, t, d_h)
    keys, values = k.unsqueeze(2), v.unsqueeze(2)
    scores = groups @ keys.transpose(3, 4) / d_h**0.5
    future = torch.ones(t, t, dtype=torch.bool).triu(1)
    scores = scores.masked_fill(future, float("-inf"))
    z = torch.softmax(scores, dim=-1) @ values
    return z.reshape(b, h, t, d_h), scores.reshape(b, h_kv, -1, scores.shape[-1])
""",
    # The one-pass estimate, whatever the chunk.
    ("ch7-ex-which-path", "the estimate without chunks"): """
def explicit_peak_bytes(tokens, heads, layers, bytes_per_number, chunk):
    return 2 * heads * tokens**2 * bytes_per_number
""",
    # A chunk of queries times every key.
    ("ch7-ex-which-path", "chunk times tokens"): """
def explicit_peak_bytes(tokens, heads, layers, bytes_per_number, chunk):
    return 2 * heads * min(chunk, tokens) * tokens * bytes_per_number
""",
}


@pytest.mark.parametrize(("label", "name"), list(LAZY))
def test_a_lazy_answer_earns_less_than_full_marks(label: str, name: str) -> None:
    for seed in range(3):
        score = grade(label, LAZY[(label, name)], seed=seed)
        assert score.earned < score.possible, seed


def test_a_cache_without_a_ring_loses_only_the_ring() -> None:
    score = grade(
        "ch7-ex-kv-cache", LAZY[("ch7-ex-kv-cache", "concatenate, then keep the last window")]
    )
    assert [c.name for c in score.checks if not c.passed] == ["ring"]


def test_the_unsafe_recipe_loses_the_edges_and_is_told_why() -> None:
    score = grade("ch7-ex-online-softmax", LAZY[("ch7-ex-online-softmax", "the unsafe recipe")])
    (failed,) = [c for c in score.checks if not c.passed]
    assert failed.name == "edges" and "NaN" in failed.reason


def test_the_self_check_fails_a_wrong_answer_with_its_hint() -> None:
    lazy: dict = {}
    exec(LAZY[("ch7-ex-kv-cache", "concatenate, then keep the last window")], lazy)
    result = run_checks("ch7-ex-kv-cache", lazy)
    assert [c.passed for c in result.checks] == [True, False]
    assert "slot p % window" in result.checks[1].hint
    unsafe: dict = {}
    exec(LAZY[("ch7-ex-online-softmax", "the unsafe recipe")], unsafe)
    result = run_checks("ch7-ex-online-softmax", unsafe)
    assert not result.checks[0].passed and "NaN" in result.checks[0].reason
    result = run_checks("ch7-ex-which-path", {"explicit_peak_bytes": lambda *a: 24.6e9})
    assert not any(c.passed for c in result.checks)
    stub = {"folded_attention": ...}
    result = run_checks("ch7-ex-group-heads", stub)
    assert all("still `...`" in c.reason for c in result.checks)


MISTAKES = {
    # Query head i paired with key/value head i % h_kv, not i // g.
    ("ch7-ex-group-heads", "output"): """
import torch
def folded_attention(q, k, v):
    b, h, t, d_h = q.shape
    h_kv, s = k.shape[1], k.shape[2]
    k, v = k.repeat(1, h // h_kv, 1, 1), v.repeat(1, h // h_kv, 1, 1)
    scores = q @ k.transpose(2, 3) / d_h**0.5
    hidden = torch.arange(s) > (s - t + torch.arange(t))[:, None]
    scores = scores.masked_fill(hidden, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v
    return out, scores.reshape(b, h_kv, -1, s)
""",
    # The folded rows' mask repeated row by row (repeat_interleave), not block by block.
    ("ch7-ex-group-heads", "scores"): """
import torch
def folded_attention(q, k, v):
    b, h, t, d_h = q.shape
    h_kv, s = k.shape[1], k.shape[2]
    g = h // h_kv
    scores = q.reshape(b, h_kv, g * t, d_h) @ k.transpose(2, 3) / d_h**0.5
    hidden = torch.arange(s) > (s - t + torch.arange(t))[:, None]
    scores = scores.masked_fill(hidden.repeat_interleave(g, dim=0), float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v).reshape(b, h, t, d_h), scores
""",
}


@pytest.mark.parametrize(("label", "check"), list(MISTAKES))
def test_a_common_mistake_fails_its_check(label: str, check: str) -> None:
    score = grade(label, MISTAKES[(label, check)], seed=2)
    assert check in {c.name for c in score.checks if not c.passed}, failures(score)
