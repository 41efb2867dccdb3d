"""Chapter 7's exercises: a correct answer earns every point on every variant, lazy answers do
not, and the self-check passes a correct answer and fails a wrong one with its hint.

The correct answers below are written as a student would write them, independently of the
grader's references (``grading/ch7.py``) and of the book's solutions (which the slow test
grades as a submission).
"""

from __future__ import annotations

import pytest
from grading_helpers import failures, full_marks, grade, graded_exercise

from attention_from_scratch.exercises import get_exercise, run_checks

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

def merge_states(m1, ell1, o1, m2, ell2, o2):
    m = torch.where(m1 > m2, m1, m2)
    base = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    w1, w2 = torch.exp(m1 - base), torch.exp(m2 - base)
    return m, w1 * ell1 + w2 * ell2, w1[:, None] * o1 + w2[:, None] * o2

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


# The page's solution: one token per append, a chunk refused (its first queries would need keys
# the ring has overwritten). The grader and the self-check send one token at a time.
ONE_TOKEN_ONLY = """
import torch

class RollingKVCache:
    def __init__(self, window):
        self.window, self.length = window, 0
        self.keys = self.values = None

    def append(self, keys, values):
        if keys.shape[2] != 1:
            raise ValueError(f"keys: expected one token, got {keys.shape[2]}")
        if self.keys is None:
            shape = (*keys.shape[:2], self.window, keys.shape[3])
            self.keys, self.values = keys.new_empty(shape), values.new_empty(shape)
        self.keys[:, :, self.length % self.window] = keys[:, :, 0]
        self.values[:, :, self.length % self.window] = values[:, :, 0]
        self.length += 1
        held = min(self.length, self.window)
        order = (self.length - held + torch.arange(held)) % self.window
        return self.keys[:, :, order], self.values[:, :, order]
"""


@pytest.mark.parametrize("seed", range(3))
def test_a_cache_that_refuses_chunks_earns_every_point(seed: int) -> None:
    score = grade("ch7-ex-kv-cache", ONE_TOKEN_ONLY, seed=seed)
    assert full_marks(score), failures(score)


def test_the_self_check_passes_a_cache_that_refuses_chunks() -> None:
    namespace: dict = {}
    exec(ONE_TOKEN_ONLY, namespace)
    result = run_checks("ch7-ex-kv-cache", namespace)
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
    # lazyC's trick: keep every token (the package's KVCache) and build the "buffers" from the
    # last window at each read.
    ("ch7-ex-kv-cache", "every token kept, buffers rebuilt at each read"): """
import torch
from attention_from_scratch.kv_cache import KVCache
class RollingKVCache:
    def __init__(self, window):
        self.window = window
        self._all = KVCache()
    @property
    def length(self):
        return self._all.length
    def append(self, keys, values):
        k, v = self._all.append(keys, values)
        return k[:, :, -self.window:], v[:, :, -self.window:]
    def _buffer(self, x):
        last = x[:, :, -self.window:]
        if last.shape[2] < self.window:
            pad = last.new_zeros(*last.shape[:2], self.window - last.shape[2], last.shape[3])
            return torch.cat([last, pad], dim=2)
        return torch.roll(last, self.length % self.window, dims=2)
    @property
    def keys(self):
        return None if self._all.keys is None else self._buffer(self._all.keys)
    @property
    def values(self):
        return None if self._all.values is None else self._buffer(self._all.values)
""",
    # The right ring, but append returns a trimmed copy kept beside it, never reading the
    # ring out (lazyC's answer).
    ("ch7-ex-kv-cache", "a copy beside the ring"): """
import torch
class RollingKVCache:
    def __init__(self, window):
        self.window, self.length = window, 0
        self.keys = self.values = self._k = self._v = None
    def append(self, keys, values):
        if self.keys is None:
            shape = (*keys.shape[:2], self.window, keys.shape[3])
            self.keys, self.values = keys.new_zeros(shape), values.new_zeros(shape)
            self._k, self._v = keys, values
        else:
            self._k = torch.cat([self._k, keys], 2)[:, :, -self.window:]
            self._v = torch.cat([self._v, values], 2)[:, :, -self.window:]
        for i in range(keys.shape[2]):
            self.keys[:, :, (self.length + i) % self.window] = keys[:, :, i]
            self.values[:, :, (self.length + i) % self.window] = values[:, :, i]
        self.length += keys.shape[2]
        return self._k, self._v
""",
    # The right slots, but new buffers at every append (index_copy out of place).
    ("ch7-ex-kv-cache", "a new ring at every append"): """
import torch
class RollingKVCache:
    def __init__(self, window):
        self.window, self.length = window, 0
        self.keys = self.values = None
    def append(self, keys, values):
        if self.keys is None:
            shape = (*keys.shape[:2], self.window, keys.shape[3])
            self.keys, self.values = keys.new_zeros(shape), values.new_zeros(shape)
        slots = (self.length + torch.arange(keys.shape[2])) % self.window
        self.keys = self.keys.index_copy(2, slots, keys)
        self.values = self.values.index_copy(2, slots, values)
        self.length += keys.shape[2]
        held = min(self.length, self.window)
        order = (self.length - held + torch.arange(held)) % self.window
        return self.keys[:, :, order], self.values[:, :, order]
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
    # The page's step pasted in (tiled_attention's inner loop): it takes a block of scores,
    # and a merge gets none.
    ("ch7-ex-online-softmax", "the page's step"): """
import torch
def merge_states(m, ell, o, block_scores, block_values):
    m_new = torch.maximum(m, block_scores.amax(dim=1))
    m_safe = m_new.masked_fill(m_new == float("-inf"), 0.0)
    rescale = torch.exp(m - m_safe)
    p = torch.exp(block_scores - m_safe[:, None])
    return m_new, ell * rescale + p.sum(dim=1), o * rescale[:, None] + p @ block_values
""",
    # The two sums added as they are, each measured from its own maximum.
    ("ch7-ex-online-softmax", "no rescaling"): """
import torch
def merge_states(m1, ell1, o1, m2, ell2, o2):
    return torch.maximum(m1, m2), ell1 + ell2, o1 + o2
""",
    # The step's rescaling on one side only: right where the second part holds the maximum.
    ("ch7-ex-online-softmax", "one part rescaled"): """
import torch
def merge_states(m1, ell1, o1, m2, ell2, o2):
    m = torch.maximum(m1, m2)
    base = m.masked_fill(m == float("-inf"), 0.0)
    rescale = torch.exp(m1 - base)
    return m, ell1 * rescale + ell2, o1 * rescale[:, None] + o2
""",
    # The recipe as first written: subtracts m even while it is -inf.
    ("ch7-ex-online-softmax", "the unsafe recipe"): """
import torch
def merge_states(m1, ell1, o1, m2, ell2, o2):
    m = torch.maximum(m1, m2)
    w1, w2 = torch.exp(m1 - m), torch.exp(m2 - m)
    return m, w1 * ell1 + w2 * ell2, w1[:, None] * o1 + w2[:, None] * o2
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


@pytest.mark.parametrize(
    ("name", "failed"),
    [
        ("concatenate, then keep the last window", ["ring"]),
        ("every token kept, buffers rebuilt at each read", ["window", "ring"]),
        ("a new ring at every append", ["ring"]),
        ("a copy beside the ring", ["window"]),
    ],
)
def test_a_cache_that_skips_the_ring_loses_its_check(name: str, failed: list[str]) -> None:
    for seed in range(3):
        score = grade("ch7-ex-kv-cache", LAZY[("ch7-ex-kv-cache", name)], seed=seed)
        assert [c.name for c in score.checks if not c.passed] == failed, seed


def test_a_copy_beside_the_ring_is_told_to_read_the_buffers() -> None:
    lazy = LAZY[("ch7-ex-kv-cache", "a copy beside the ring")]
    (failed,) = [c for c in grade("ch7-ex-kv-cache", lazy).checks if not c.passed]
    assert "read its tokens out of them" in failed.reason, failed.reason


def test_buffers_rebuilt_at_each_read_are_told_so() -> None:
    lazy = LAZY[("ch7-ex-kv-cache", "every token kept, buffers rebuilt at each read")]
    (failed,) = [c for c in grade("ch7-ex-kv-cache", lazy).checks if c.name == "ring"]
    assert "allocated once and written in place" in failed.reason, failed.reason


def test_a_merge_without_both_rescalings_loses_the_merge() -> None:
    for name in ("the page's step", "no rescaling", "one part rescaled"):
        score = grade("ch7-ex-online-softmax", LAZY[("ch7-ex-online-softmax", name)])
        assert "merge" in {c.name for c in score.checks if not c.passed}, name


def test_the_unsafe_recipe_loses_the_edges_and_is_told_why() -> None:
    score = grade("ch7-ex-online-softmax", LAZY[("ch7-ex-online-softmax", "the unsafe recipe")])
    (failed,) = [c for c in score.checks if not c.passed]
    assert failed.name == "edges" and "NaN" in failed.reason


def test_the_self_check_fails_a_wrong_answer_with_its_hint() -> None:
    for name, passed in (
        ("concatenate, then keep the last window", [True, False]),
        ("every token kept, buffers rebuilt at each read", [False, False]),
        ("a copy beside the ring", [False, True]),
    ):
        lazy: dict = {}
        exec(LAZY[("ch7-ex-kv-cache", name)], lazy)
        result = run_checks("ch7-ex-kv-cache", lazy)
        assert [c.passed for c in result.checks] == passed, name
        assert all("in place" in c.hint for c in result.checks)
    unsafe: dict = {}
    exec(LAZY[("ch7-ex-online-softmax", "the unsafe recipe")], unsafe)
    result = run_checks("ch7-ex-online-softmax", unsafe)
    assert [c.passed for c in result.checks] == [True, False]
    assert "NaN" in result.checks[1].reason
    result = run_checks("ch7-ex-which-path", {"explicit_peak_bytes": lambda *a: 24.6e9})
    assert not any(c.passed for c in result.checks)
    stub = {"folded_attention": ...}
    result = run_checks("ch7-ex-group-heads", stub)
    assert all("still `...`" in c.reason for c in result.checks)


# What a hint must not spell out (a lazy read typed the old hints in): the running count's
# function, the fold's reshape, the folded rows' query and head.
SPELLED_OUT = ("cumsum", "reshape", "% t", "// t", "// g", "r % ", "j g +", "- t + r")


@pytest.mark.parametrize("label", ["ch7-ex-position-ids", "ch7-ex-group-heads"])
def test_the_hints_name_a_method_not_the_code(label: str) -> None:
    hints = [check.hint for check in graded_exercise(label).checks]
    hints += [check.hint for check in get_exercise(label).checks]
    for hint in hints:
        assert not [word for word in SPELLED_OUT if word in hint], hint


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
