"""Chapter 7's exercises: a correct answer earns every point, a lazy one does not.

The correct answers below are written as a student would write them, independently of the
package's classes and of the checks' reference functions.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn.functional as F

from attention_from_scratch import GroupedQueryAttention, KVCache
from attention_from_scratch.exercises import load_hidden, run_checks

ROOT = Path(__file__).resolve().parent.parent
load_hidden(ROOT / "grading" / "hidden", chapters=[7])


def full_marks(label: str, namespace: dict) -> bool:
    result = run_checks(label, namespace, hidden=True)
    return result.passed and result.earned == result.possible > 0


def reasons(label: str, namespace: dict, hidden: bool = True) -> str:
    result = run_checks(label, namespace, hidden=hidden)
    assert result.earned < result.possible
    return " | ".join(c.reason for c in result.checks if not c.passed)


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


def test_kv_cache_a_preallocated_cache_earns_full_marks() -> None:
    assert full_marks("ch7-ex-kv-cache", {"PreallocatedKVCache": Preallocated})


def test_kv_cache_concatenation_and_the_package_are_refused() -> None:
    assert "torch.cat" in reasons("ch7-ex-kv-cache", {"PreallocatedKVCache": Concatenating})
    assert "KVCache" in reasons("ch7-ex-kv-cache", {"PreallocatedKVCache": PackageCache})


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


def only_the_fold_fails(answer) -> str:
    result = run_checks("ch7-ex-group-heads", {"folded_attention": answer}, hidden=True)
    failed = [c for c in result.checks if not c.passed]
    assert [c.name for c in failed] == ["multiplies_without_a_group_broadcast"]
    return failed[0].reason


def test_group_heads_copies_of_the_keys_lose_the_fold_point() -> None:
    assert "g times the size of the keys" in only_the_fold_fails(gathered)
    assert "g times the size of the keys" in only_the_fold_fails(selected)


def test_group_heads_a_loop_over_the_heads_loses_the_fold_point() -> None:
    assert "a loop over the heads" in only_the_fold_fails(head_by_head)
    assert "a loop over the heads" in only_the_fold_fails(head_by_head_in_place)


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


def test_group_heads_a_broadcast_product_loses_the_fold_point() -> None:
    result = run_checks("ch7-ex-group-heads", {"folded_attention": broadcast}, hidden=True)
    failed = [c for c in result.checks if not c.passed]
    assert [c.name for c in failed] == ["multiplies_without_a_group_broadcast"]
    assert "group axis" in failed[0].reason


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


def test_which_path_the_estimate_earns_full_marks() -> None:
    assert full_marks("ch7-ex-which-path", {"explicit_peak_bytes": estimate})


def test_which_path_common_mistakes_are_named() -> None:
    assert "layer" in reasons("ch7-ex-which-path", {"explicit_peak_bytes": times_layers})
    assert "one (t, t) tensor" in reasons("ch7-ex-which-path", {"explicit_peak_bytes": one_matrix})
    assert "off by" in reasons("ch7-ex-which-path", {"explicit_peak_bytes": page_value})
