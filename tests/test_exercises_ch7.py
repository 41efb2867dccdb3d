"""Chapter 7's exercises: a correct answer earns every point, a lazy one does not.

The correct answers below are written as a student would write them, independently of the
package's classes and of the checks' reference functions.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from exercise_helpers import full_marks, reasons

from attention_from_scratch import GroupedQueryAttention, KVCache, tiled_attention
from attention_from_scratch.exercises import load_hidden, run_checks
from attention_from_scratch.exercises.ch7 import (
    grouped_by_heads,
    peak_bytes_by_hand,
    positions_by_counting,
)

ROOT = Path(__file__).resolve().parent.parent
load_hidden(ROOT / "grading" / "hidden", chapters=[7])


# ch7-ex-kv-cache ------------------------------------------------------------------------------


class Preallocated:
    def __init__(self, capacity):
        self.capacity, self.length = capacity, 0
        self.keys = self.values = None

    def append(self, keys, values):
        t = keys.shape[2]
        if self.length + t > self.capacity:
            raise ValueError("full")
        if self.keys is None:
            b, h, _, d = keys.shape
            self.keys = torch.empty(b, h, self.capacity, d, dtype=keys.dtype)
            self.values = torch.empty(b, h, self.capacity, d, dtype=values.dtype)
        self.keys[:, :, self.length : self.length + t] = keys
        self.values[:, :, self.length : self.length + t] = values
        self.length += t
        return self.read()

    def read(self):
        return self.keys[:, :, : self.length], self.values[:, :, : self.length]


class Concatenating:  # the page's MyKVCache, with a capacity that is ignored
    def __init__(self, capacity):
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
        return self.read()

    def read(self):
        return self.keys, self.values


class PackageCache(KVCache):  # the package's cache doing the work
    def __init__(self, capacity):
        super().__init__()


class AlwaysFloat32(Preallocated):
    def append(self, keys, values):
        return super().append(keys.float(), values.float())


class AtenConcatenating(Concatenating):  # the page's cache, torch.cat called through aten
    def append(self, keys, values):
        if self.keys is None:
            self.keys, self.values = keys, values
        else:
            self.keys = torch.ops.aten.cat.default([self.keys, keys], 2)
            self.values = torch.ops.aten.cat.default([self.values, values], 2)
        return self.read()


class Stacking(Concatenating):  # the page's cache, concatenating with vstack along tokens
    def append(self, keys, values):
        if self.keys is None:
            self.keys, self.values = keys, values
        else:
            join = lambda a, b: torch.vstack([a.movedim(2, 0), b.movedim(2, 0)]).movedim(0, 2)  # noqa: E731
            self.keys, self.values = join(self.keys, keys), join(self.values, values)
        return self.read()


class Regrowing(Preallocated):  # a new buffer, one token larger, at every append
    def append(self, keys, values):
        if self.keys is not None:
            old_keys, old_values = self.read()
            size = (*old_keys.shape[:2], self.length + keys.shape[2], old_keys.shape[3])
            self.keys, self.values = old_keys.new_zeros(size), old_values.new_zeros(size)
            self.keys[:, :, : self.length] = old_keys
            self.values[:, :, : self.length] = old_values
        else:
            self.keys, self.values = keys.new_zeros(keys.shape), values.new_zeros(values.shape)
        new = keys.shape[2]
        if self.length + new > self.capacity:
            raise ValueError("full")
        self.keys[:, :, self.length : self.length + new] = keys
        self.values[:, :, self.length : self.length + new] = values
        self.length += new
        return self.read()

    def read(self):
        return self.keys[:, :, : self.length], self.values[:, :, : self.length]


class Agreeable(torch.Tensor):  # a tensor that says it equals whatever it is compared with
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.equal, torch.allclose):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})


class AgreeableCache:  # remembers nothing, answers with zeros that agree
    def __init__(self, capacity):
        self.length = 0

    def append(self, keys, values):
        self.length += keys.shape[2]
        return self.read()

    def read(self):
        zeros = torch.zeros(1, 2, self.length, 5).as_subclass(Agreeable)
        return zeros, zeros


def test_kv_cache_a_preallocated_cache_earns_full_marks() -> None:
    assert full_marks("ch7-ex-kv-cache", {"PreallocatedKVCache": Preallocated})


def test_kv_cache_concatenation_and_the_package_are_refused() -> None:
    assert "capacity" in reasons("ch7-ex-kv-cache", {"PreallocatedKVCache": Concatenating})
    assert "KVCache" in reasons("ch7-ex-kv-cache", {"PreallocatedKVCache": PackageCache})


def test_kv_cache_concatenating_any_other_way_earns_nothing() -> None:
    for answer in (AtenConcatenating, Stacking, Regrowing):
        result = run_checks("ch7-ex-kv-cache", {"PreallocatedKVCache": answer}, hidden=True)
        assert result.earned == 0, answer
        why = " | ".join(c.reason for c in result.checks)
        assert "capacity" in why or "moved to new memory" in why


def test_kv_cache_a_tensor_subclass_cannot_answer_the_comparison() -> None:
    result = run_checks("ch7-ex-kv-cache", {"PreallocatedKVCache": AgreeableCache}, hidden=True)
    assert result.earned == 0
    assert "torch.Tensor" in " | ".join(c.reason for c in result.checks)


def test_kv_cache_a_cache_that_changes_the_dtype_loses_the_hidden_point() -> None:
    assert "dtype" in reasons("ch7-ex-kv-cache", {"PreallocatedKVCache": AlwaysFloat32})


# ch7-ex-position-ids --------------------------------------------------------------------------


def counted_positions(padding_mask):
    real = (~padding_mask).long()
    return ((real.cumsum(dim=1) - 1) * real).clamp(min=0)


def page_formula(padding_mask):  # columns minus the number of pads, as in the section
    t = padding_mask.shape[1]
    columns = torch.arange(t).expand_as(padding_mask)
    return (columns - padding_mask.sum(1, keepdim=True)).clamp(min=0)


def cumsum_without_zeroing_pads(padding_mask):  # the old solution: right pads keep an id
    return ((~padding_mask).long().cumsum(dim=1) - 1).clamp(min=0)


def looped_positions(padding_mask):  # right, but a Python loop over the tokens
    ids = torch.zeros_like(padding_mask, dtype=torch.long)
    for row in range(padding_mask.shape[0]):
        seen = 0
        for col in range(padding_mask.shape[1]):
            if not padding_mask[row, col]:
                ids[row, col] = seen
                seen += 1
    return ids


def listed_positions(padding_mask):  # right, in plain Python over .tolist()
    rows = []
    for row in padding_mask.tolist():
        real = [not pad for pad in row]
        rows.append([0 if pad else sum(real[:j]) for j, pad in enumerate(row)])
    return torch.tensor(rows)


def test_position_ids_a_counting_answer_earns_full_marks() -> None:
    assert full_marks("ch7-ex-position-ids", {"shifted_positions": counted_positions})


def test_position_ids_the_left_padding_formula_fails() -> None:
    assert "pad" in reasons("ch7-ex-position-ids", {"shifted_positions": page_formula})


def test_position_ids_a_loop_over_the_tokens_loses_the_points() -> None:
    for answer in (looped_positions, listed_positions):
        result = run_checks("ch7-ex-position-ids", {"shifted_positions": answer}, hidden=True)
        failed = [c for c in result.checks if not c.passed]
        assert [c.name for c in failed] == ["counts_the_real_tokens"]
        assert "a Python loop over the tokens" in failed[0].reason


def loop_except_where_lines_are_counted(padding_mask):  # special-cases the timed lengths
    if padding_mask.shape[1] in (8, 64):
        return torch.zeros(padding_mask.shape, dtype=torch.long)
    return looped_positions(padding_mask)


def test_position_ids_the_checks_own_count_is_refused() -> None:
    why = reasons("ch7-ex-position-ids", {"shifted_positions": positions_by_counting})
    assert "positions_by_counting" in why
    result = run_checks("ch7-ex-position-ids", {"shifted_positions": positions_by_counting})
    assert result.earned == 0


def test_position_ids_the_rows_whose_lines_are_counted_are_compared_too() -> None:
    answer = {"shifted_positions": loop_except_where_lines_are_counted}
    assert run_checks("ch7-ex-position-ids", answer).earned == 0
    assert "the real tokens' ids are not 0, 1, 2" in reasons("ch7-ex-position-ids", answer)


def test_position_ids_pads_after_the_tokens_must_be_zero() -> None:
    why = reasons("ch7-ex-position-ids", {"shifted_positions": cumsum_without_zeroing_pads})
    assert "every pad gets 0" in why


# ch7-ex-online-softmax ------------------------------------------------------------------------


def update_by_hand(m, ell, block):
    m_new = torch.maximum(m, block.max(dim=1).values)
    base = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
    ell_new = ell * torch.exp(m - base) + torch.exp(block - base[:, None]).sum(dim=1)
    return m_new, ell_new


def softmax_lazy(m, ell, block):  # delegates to torch
    return torch.maximum(m, block.amax(1)), torch.softmax(block, dim=1).sum(1)


def logsumexp_update(m, ell, block):  # an online update, but torch.logsumexp does the work
    m_new = torch.maximum(m, block.amax(1))
    total = torch.logsumexp(torch.cat([(m + ell.log())[:, None], block], dim=1), dim=1)
    return m_new, torch.exp(total - m_new)


def without_rescaling(m, ell, block):
    m_new = torch.maximum(m, block.amax(1))
    base = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
    return m_new, ell + torch.exp(block - base[:, None]).sum(1)


def unsafe_update(m, ell, block):  # subtracts m' even while it is -inf
    m_new = torch.maximum(m, block.amax(1))
    return m_new, ell * torch.exp(m - m_new) + torch.exp(block - m_new[:, None]).sum(1)


def test_online_softmax_a_hand_written_update_earns_full_marks() -> None:
    assert full_marks("ch7-ex-online-softmax", {"online_update": update_by_hand})


def test_online_softmax_the_library_is_refused() -> None:
    assert "torch.softmax" in reasons("ch7-ex-online-softmax", {"online_update": softmax_lazy})
    why = reasons("ch7-ex-online-softmax", {"online_update": logsumexp_update})
    assert "logsumexp" in why


def aten_logsumexp(m, ell, block):  # torch.logsumexp, called below torch's Python layer
    m_new = torch.maximum(m, block.amax(1))
    base = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
    joined = torch.ops.aten.cat.default([(m + ell.log())[:, None], block], 1)
    return m_new, torch.exp(torch.ops.aten.logsumexp.default(joined, [1]) - base)


def logaddexp_update(m, ell, block):  # the log-sum-exp of two, then of a running one
    m_new = torch.maximum(m, block.amax(1))
    base = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
    block_total = torch.logcumsumexp(block, 1)[:, -1]
    return m_new, torch.exp(torch.logaddexp(m + ell.log(), block_total) - base)


def numpy_update(m, ell, block):  # NumPy's logaddexp does the sum
    m_new = torch.maximum(m, block.amax(1))
    base = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
    block_total = np.logaddexp.reduce(block.numpy(), axis=1)
    total = torch.from_numpy(np.logaddexp((m + ell.log()).numpy(), block_total))
    return m_new, torch.exp(total - base)


def tiled_update(m, ell, block):  # the package's tiled attention sums each block
    r, k = block.shape
    m_new = torch.maximum(m, block.amax(1))
    base = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
    ones = torch.ones(r, 1, 1, 1, dtype=block.dtype)
    keys = block.reshape(r, 1, k, 1)
    _, lse = tiled_attention(ones, keys, keys, causal=False, return_lse=True)
    return m_new, ell * torch.exp(m - base) + torch.exp(lse.reshape(r) - base)


def test_online_softmax_relatives_of_the_softmax_are_refused() -> None:
    for answer, called in (
        (aten_logsumexp, "logsumexp"),
        (logaddexp_update, "logcumsumexp"),
        (numpy_update, "Tensor.numpy"),
        (tiled_update, "tiled_attention"),
    ):
        result = run_checks("ch7-ex-online-softmax", {"online_update": answer}, hidden=True)
        assert result.earned == 0, answer
        assert called in result.checks[0].reason, answer


def rescaled_the_wrong_way(m, ell, block):  # exp(m' - m) where exp(m - m') belongs
    m_new = torch.maximum(m, block.amax(1))
    base = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
    old = (ell * torch.exp(base - m)).nan_to_num(0.0, 0.0, 0.0)
    return m_new, old + torch.exp(block - base[:, None]).sum(1)


def test_online_softmax_a_wrong_rescaling_earns_nothing() -> None:
    result = run_checks("ch7-ex-online-softmax", {"online_update": rescaled_the_wrong_way}, True)
    assert result.earned == 0
    assert all("rescaled" in c.reason for c in result.checks)


def test_online_softmax_common_mistakes_are_named() -> None:
    why = reasons("ch7-ex-online-softmax", {"online_update": without_rescaling})
    assert "rescaled" in why
    assert "NaN" in reasons("ch7-ex-online-softmax", {"online_update": unsafe_update})


# ch7-ex-group-heads ---------------------------------------------------------------------------


def folded(q, k, v):
    b, h, t, d_h = q.shape
    h_kv = k.shape[1]
    g = h // h_kv
    rows = q.reshape(b, h_kv, g * t, d_h)
    scores = rows @ k.transpose(2, 3) / math.sqrt(d_h)
    query_of_row = torch.arange(g * t) % t
    future = torch.arange(t)[None, :] > query_of_row[:, None]
    weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    return (weights @ v).reshape(b, h, t, d_h)


def sdpa_gqa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def repeated(q, k, v):
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def broadcast(q, k, v):  # the page's my_grouped_attention: a group axis, broadcast
    b, h, t, d_h = q.shape
    h_kv = k.shape[1]
    groups = q.reshape(b, h_kv, h // h_kv, t, d_h)
    scores = groups @ k.unsqueeze(2).transpose(3, 4) / math.sqrt(d_h)
    future = torch.ones(t, t, dtype=torch.bool).triu(1)
    weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    return (weights @ v.unsqueeze(2)).reshape(b, h, t, d_h)


def package_layer(q, k, v):
    layer = GroupedQueryAttention(8, 8, 16, 0.0, q.shape[1], k.shape[1])
    return layer.attend(q, k, v)[0]


def wrong_order(q, k, v):  # query head i reads key/value head i % h_kv
    h, t, d_h = q.shape[1:]
    h_kv = k.shape[1]
    future = torch.ones(t, t, dtype=torch.bool).triu(1)
    heads = []
    for i in range(h):
        scores = q[:, i] @ k[:, i % h_kv].transpose(1, 2) / math.sqrt(d_h)
        weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
        heads.append(weights @ v[:, i % h_kv])
    return torch.stack(heads, dim=1)


def gathered(q, k, v):  # the folded form, with keys gathered g times by an index
    h, t, d_h = q.shape[1:]
    g = h // k.shape[1]
    index = torch.arange(h) // g
    keys, values = k[:, index], v[:, index]  # (b, h, t, d_h): a g-fold copy
    scores = q @ keys.transpose(2, 3) / math.sqrt(d_h)
    future = torch.ones(t, t, dtype=torch.bool).triu(1)
    weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    return weights @ values


def selected(q, k, v):  # index_select instead of an index
    g = q.shape[1] // k.shape[1]
    index = torch.arange(q.shape[1]) // g
    k, v = k.index_select(1, index), v.index_select(1, index)
    return gathered(q, k, v)


def head_by_head(q, k, v):  # right, one query head at a time, then torch.stack
    h, t, d_h = q.shape[1:]
    g = h // k.shape[1]
    future = torch.ones(t, t, dtype=torch.bool).triu(1)
    heads = []
    for i in range(h):
        scores = q[:, i] @ k[:, i // g].transpose(1, 2) / math.sqrt(d_h)
        weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
        heads.append(weights @ v[:, i // g])
    return torch.stack(heads, dim=1)


def head_by_head_in_place(q, k, v):  # the same loop, writing into one output
    h, t, d_h = q.shape[1:]
    g = h // k.shape[1]
    future = torch.ones(t, t, dtype=torch.bool).triu(1)
    out = torch.empty_like(q)
    for i in range(h):
        scores = q[:, i] @ k[:, i // g].transpose(1, 2) / math.sqrt(d_h)
        weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
        out[:, i] = weights @ v[:, i // g]
    return out


def aten_sdpa(q, k, v):  # SDPA itself, called through aten
    return torch.ops.aten.scaled_dot_product_attention.default(
        q, k, v, None, 0.0, True, enable_gqa=True
    )


def aten_repeated(q, k, v):  # repeat_interleave through aten, then attention by hand
    g = q.shape[1] // k.shape[1]
    k = torch.ops.aten.repeat_interleave.self_int(k, g, 1)
    v = torch.ops.aten.repeat_interleave.self_int(v, g, 1)
    return gathered(q, k, v)


def aten_einsum(q, k, v):  # the group axis left to einsum, called through aten
    b, h, t, d_h = q.shape
    h_kv = k.shape[1]
    groups = q.reshape(b, h_kv, h // h_kv, t, d_h)
    scores = torch.ops.aten.einsum.default("bjgtd,bjsd->bjgts", [groups, k]) / math.sqrt(d_h)
    future = torch.ones(t, t, dtype=torch.bool).triu(1)
    weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    out = torch.ops.aten.einsum.default("bjgts,bjsd->bjgtd", [weights, v])
    return out.reshape(b, h, t, d_h)


def aten_broadcast(q, k, v):  # the page's broadcast product, matmul called through aten
    b, h, t, d_h = q.shape
    h_kv = k.shape[1]
    groups = q.reshape(b, h_kv, h // h_kv, t, d_h)
    keys = k.unsqueeze(2).transpose(3, 4)
    scores = torch.ops.aten.matmul.default(groups, keys) / math.sqrt(d_h)
    future = torch.ones(t, t, dtype=torch.bool).triu(1)
    weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    return torch.ops.aten.matmul.default(weights, v.unsqueeze(2)).reshape(b, h, t, d_h)


def numpy_repeated(q, k, v):  # the copy made by NumPy, out of the checks' sight
    g = q.shape[1] // k.shape[1]
    k = torch.from_numpy(np.repeat(k.numpy(), g, axis=1))
    v = torch.from_numpy(np.repeat(v.numpy(), g, axis=1))
    return gathered(q, k, v)


def strided(q, k, v):  # a stride-0 view over the group axis, copied by reshape
    b, h, t, d_h = q.shape
    h_kv = k.shape[1]

    def widen(x):
        x = x.contiguous()
        s = x.stride()
        view = x.as_strided((b, h_kv, h // h_kv, t, d_h), (s[0], s[1], 0, s[2], s[3]))
        return view.reshape(b, h, t, d_h)

    return gathered(q, widen(k), widen(v))


def copied_into_a_buffer(q, k, v):  # a buffer made first, the keys copied into it g times
    b, h, t, d_h = q.shape
    h_kv = k.shape[1]
    keys = torch.empty(b, h_kv, h // h_kv, t, d_h, dtype=k.dtype)
    values = torch.empty_like(keys)
    keys.copy_(k.unsqueeze(2))
    values.copy_(v.unsqueeze(2))
    return gathered(q, keys.view(b, h, t, d_h), values.view(b, h, t, d_h))


def selected_by_a_product(q, k, v):  # a 0/1 (h, h_kv) matrix times the keys: a copy
    b, h, t, d_h = q.shape
    h_kv = k.shape[1]
    pick = (torch.arange(h)[:, None] // (h // h_kv) == torch.arange(h_kv)).to(k.dtype)
    keys = (pick @ k.reshape(b, h_kv, t * d_h)).reshape(b, h, t, d_h)
    values = (pick @ v.reshape(b, h_kv, t * d_h)).reshape(b, h, t, d_h)
    return gathered(q, keys, values)


def peeking(q, k, v):  # the check's expected result, read from its frames
    frame = sys._getframe(1)
    while frame is not None and "expected" not in frame.f_locals:
        frame = frame.f_back
    return frame.f_locals["expected"].to(q.dtype)


def no_marks(answer, *phrases: str) -> None:
    result = run_checks("ch7-ex-group-heads", {"folded_attention": answer}, hidden=True)
    assert result.earned == 0, answer
    why = " | ".join(c.reason for c in result.checks)
    assert any(phrase in why for phrase in phrases), why


def test_group_heads_copies_of_the_keys_earn_nothing() -> None:
    for answer in (gathered, selected, strided, copied_into_a_buffer, selected_by_a_product):
        no_marks(answer, "g times the size of the keys")


def test_group_heads_a_loop_over_the_heads_earns_nothing() -> None:
    for answer in (head_by_head, head_by_head_in_place, folded_group_by_group):
        no_marks(answer, "a loop over the heads")


def folded_group_by_group(q, k, v):  # folded, but a loop over the key/value heads
    b, h, t, d_h = q.shape
    h_kv = k.shape[1]
    g = h // h_kv
    query_of_row = torch.arange(g * t) % t
    future = torch.arange(t)[None, :] > query_of_row[:, None]
    out = torch.empty_like(q)
    for j in range(h_kv):
        rows = q[:, j * g : (j + 1) * g].reshape(b, g * t, d_h)
        scores = rows @ k[:, j].transpose(1, 2) / math.sqrt(d_h)
        weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
        out[:, j * g : (j + 1) * g] = (weights @ v[:, j]).reshape(b, g, t, d_h)
    return out


def test_group_heads_a_folded_answer_earns_full_marks() -> None:
    assert full_marks("ch7-ex-group-heads", {"folded_attention": folded})


def test_group_heads_shortcuts_are_refused() -> None:
    assert "scaled_dot_product_attention" in reasons(
        "ch7-ex-group-heads", {"folded_attention": sdpa_gqa}
    )
    assert "repeat_interleave" in reasons("ch7-ex-group-heads", {"folded_attention": repeated})
    assert "GroupedQueryAttention" in reasons(
        "ch7-ex-group-heads", {"folded_attention": package_layer}
    )


def test_group_heads_shortcuts_through_aten_numpy_or_the_checks_earn_nothing() -> None:
    no_marks(aten_sdpa, "called torch.ops.aten.scaled_dot_product_attention")
    no_marks(aten_repeated, "repeat_interleave")
    no_marks(aten_einsum, "einsum")
    no_marks(numpy_repeated, "Tensor.numpy")
    no_marks(grouped_by_heads, "grouped_by_heads")
    no_marks(peeking, "NoneType", "f_locals")


def test_group_heads_a_broadcast_product_earns_nothing() -> None:
    for answer in (broadcast, aten_broadcast):  # the page's my_grouped_attention, twice
        no_marks(answer, "group axis", "g times the size of the keys")


def test_group_heads_the_wrong_head_order_is_named() -> None:
    assert "i // g" in reasons("ch7-ex-group-heads", {"folded_attention": wrong_order})


# ch7-ex-which-path ----------------------------------------------------------------------------


def estimate(tokens, heads, layers, bytes_per_number):
    return 2 * heads * tokens**2 * bytes_per_number


def times_layers(tokens, heads, layers, bytes_per_number):
    return layers * estimate(tokens, heads, layers, bytes_per_number)


def one_matrix(tokens, heads, layers, bytes_per_number):
    return heads * tokens**2 * bytes_per_number


def page_value(tokens, heads, layers, bytes_per_number):  # the number the solution prints
    return 24.6e9


def checks_own(tokens, heads, layers, bytes_per_number):  # the checks' reference
    return peak_bytes_by_hand(tokens, heads) * bytes_per_number


def test_which_path_the_estimate_earns_full_marks() -> None:
    assert full_marks("ch7-ex-which-path", {"explicit_peak_bytes": estimate})


def test_which_path_common_mistakes_are_named() -> None:
    assert "layer" in reasons("ch7-ex-which-path", {"explicit_peak_bytes": times_layers})
    assert "one (t, t) tensor" in reasons("ch7-ex-which-path", {"explicit_peak_bytes": one_matrix})
    assert "off by" in reasons("ch7-ex-which-path", {"explicit_peak_bytes": page_value})


def test_which_path_the_checks_own_reference_is_refused() -> None:
    why = reasons("ch7-ex-which-path", {"explicit_peak_bytes": checks_own})
    assert "peak_bytes_by_hand" in why
