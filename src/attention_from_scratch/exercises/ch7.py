"""Self-checks of the exercises of chapter 7, "Attention at scale".

Each check tries the learner's answer on a small public example written out here (tokens
numbered 0, 1, 2, ..., appended one at a time, two rows of scores split in two parts, one
hiding its first keys and one around 1000, a few integer queries and keys, the page's
16 000-token prompt) and compares it with numbers written out here too or with a property
every right answer has. Grading is not done here: see :mod:`._core`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

import torch

from ._core import Exercise, answer_tensor

INF = math.inf


def _pair(value: object, shapes: tuple[tuple[int, ...], ...], what: str) -> list[torch.Tensor]:
    """Two tensors of these shapes (the keys and values, the output and scores), or a
    failure."""
    assert isinstance(value, tuple | list) and len(value) == 2, f"expected {what}"
    return [answer_tensor(item, shape) for item, shape in zip(value, shapes, strict=True)]


kv_cache = Exercise("ch7-ex-kv-cache", chapter=7)


class _RollingCache(Protocol):
    """What the checks use of the learner's cache (their class is not known here)."""

    keys: object
    values: object
    length: object

    def append(self, keys: torch.Tensor, values: torch.Tensor) -> object: ...


def _numbered(start: int, stop: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens ``start`` to ``stop - 1`` as (1, 1, t, 1) keys (their numbers) and values (minus
    their numbers)."""
    keys = torch.arange(start, stop, dtype=dtype).reshape(1, 1, -1, 1)
    return keys, -keys


@kv_cache.check(
    hint="After an append the cache holds the newest min(length, window) tokens: read them "
    "out of the ring from the oldest slot on, at every append (the buffers may have been "
    "changed in place). `length` counts every token appended."
)
def keeps_the_last_four_of_seven_tokens(RollingKVCache: Callable[[int], _RollingCache]) -> None:
    """window 4, tokens 0 to 6 appended one at a time: the last 4, oldest first, and length 7;
    then the buffers negated in place and token 7 appended: what they hold, oldest first"""
    cache = RollingKVCache(4)
    for p in range(7):
        kept = list(range(max(0, p - 3), p + 1))
        keys, values = _pair(
            cache.append(*_numbered(p, p + 1, torch.float32)),
            ((1, 1, len(kept), 1),) * 2,
            "append to return the pair (keys, values)",
        )
        got = keys.flatten().tolist()
        assert got == kept, f"after token {p} the keys are tokens {got}, not {kept}"
        assert values.flatten().tolist() == [-q for q in kept], "the values do not match"
    assert cache.length == 7, f"`length` is {cache.length} after 7 tokens"
    for buffer in (cache.keys, cache.values):
        answer_tensor(buffer, (1, 1, 4, 1))
        assert isinstance(buffer, torch.Tensor)  # for the type checker: answer_tensor says so
        buffer.neg_()  # in place: the learner's buffer itself
    keys, _ = _pair(cache.append(*_numbered(7, 8, torch.float32)), ((1, 1, 4, 1),) * 2, "the pair")
    got = keys.flatten().tolist()
    assert got == [-4, -5, -6, 7], (
        f"after negating the buffers and appending token 7 the keys are {got}, not what the "
        "buffers hold, [-4, -5, -6, 7]: read them out of the buffers"
    )


@kv_cache.check(
    hint="Allocate (b, h_kv, window, d_h) buffers once, in the keys' dtype, and write each "
    "append into them in place, token p into slot p % window: the token after the last slot "
    "goes into slot 0."
)
def puts_token_p_in_slot_p_mod_4(RollingKVCache: Callable[[int], _RollingCache]) -> None:
    """the same tokens in float16: the buffers, allocated once and written in place, hold
    tokens 4, 5, 6, 3 in slots 0 to 3"""
    cache = RollingKVCache(4)
    cache.append(*_numbered(0, 1, torch.float16))
    first = answer_tensor(cache.keys, (1, 1, 4, 1)), answer_tensor(cache.values, (1, 1, 4, 1))
    for p in range(1, 7):
        cache.append(*_numbered(p, p + 1, torch.float16))
    keys = answer_tensor(cache.keys, (1, 1, 4, 1))
    values = answer_tensor(cache.values, (1, 1, 4, 1))
    assert keys.dtype == torch.float16, f"the buffers are {keys.dtype}, the keys float16"
    assert keys.flatten().tolist() == [4, 5, 6, 3], f"the slots hold {keys.flatten().tolist()}"
    assert values.flatten().tolist() == [-4, -5, -6, -3], "the values' slots do not match"
    for before, now, what in zip(first, (keys, values), ("keys", "values"), strict=True):
        assert before.data_ptr() == now.data_ptr(), (
            f"`{what}` after the first append and after the last are not the same buffer"
        )
        assert torch.equal(before, now), (
            f"`{what}` read after the first append was not written in place by the others"
        )


position_ids = Exercise("ch7-ex-position-ids", chapter=7)


@position_ids.check(
    hint="A real token's id is the number of real tokens before it in its row: which running "
    "operation over a row counts what came before? Every pad gets 0."
)
def the_pages_left_padded_prompts(shifted_positions: Callable[..., object]) -> None:
    """the section's two prompts, 4 pads before the short one, nothing cached"""
    mask = torch.tensor([[False] * 8, [True] * 4 + [False] * 4])
    got = answer_tensor(shifted_positions(mask, torch.zeros(2, dtype=torch.long)), (2, 8))
    expected = [list(range(8)), [0, 0, 0, 0, 0, 1, 2, 3]]
    assert not got.is_floating_point() and got.dtype != torch.bool, (
        f"the ids should be integers, got {got.dtype}"
    )
    assert got.tolist() == expected, f"got {got.tolist()}"


@position_ids.check(
    hint="Pads after the real tokens get 0 too, and each row goes on from its own cache: work "
    "out the ids of this example by hand and compare them with yours."
)
def pads_on_both_sides_after_a_cache(shifted_positions: Callable[..., object]) -> None:
    """pads on both sides, after 2, 0 and 5 cached tokens"""
    mask = torch.tensor(
        [[True, False, False, False, True, True], [False, False] + [True] * 4, [True] * 6]
    )
    got = answer_tensor(shifted_positions(mask, torch.tensor([2, 0, 5])), (3, 6))
    expected = [[0, 2, 3, 4, 0, 0], [0, 1, 0, 0, 0, 0], [0] * 6]
    assert got.tolist() == expected, f"got {got.tolist()}"


online_softmax = Exercise("ch7-ex-online-softmax", chapter=7)

# Row 0 hides its first two keys; row 1's maximum, 1001, is its fifth key.
SCORES = torch.tensor([[-INF, -INF, 1.0, 2.0, 0.5, -1.0], [1000.0, 999.0, 2.0, -5.0, 1001.0, 3.0]])
VALUES = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 0.0], [0.0, 2.0], [1.0, -1.0]])


def _state(scores: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """m, ell and o of each row over these keys, from their definitions: (r,), (r,), (r, d_h)."""
    m = scores.amax(dim=1)
    p = torch.exp(scores - m.masked_fill(m == -INF, 0.0)[:, None])
    return m, p.sum(dim=1), p @ values


def _merged(
    merge_states: Callable[..., object],
    first: tuple[torch.Tensor, ...],
    second: tuple[torch.Tensor, ...],
) -> tuple[torch.Tensor, ...]:
    """What the answer merges from two parts' states: (m, ell, o), checked for shape."""
    r, d = first[2].shape
    result = merge_states(*(x.clone() for x in (*first, *second)))
    assert isinstance(result, tuple | list) and len(result) == 3, "expected (m, ell, o)"
    shapes = ((r,), (r,), (r, d))
    return tuple(answer_tensor(x, shape) for x, shape in zip(result, shapes, strict=True))


@online_softmax.check(
    hint="Measure both parts from the larger maximum m = max(m1, m2): rescale each part's "
    "ell and o by e^(m_k - m) before adding them, and subtract 0 while m is -inf."
)
def the_two_rows_split_after_each_key(merge_states: Callable[..., object]) -> None:
    """the page's two rows split after key 1, 2, ..., 5: the state over all six keys"""
    whole = _state(SCORES, VALUES)
    for split in range(1, 6):
        first = _state(SCORES[:, :split], VALUES[:split])
        second = _state(SCORES[:, split:], VALUES[split:])
        m, ell, o = _merged(merge_states, first, second)
        where = f"split after key {split}"
        assert not ell.isnan().any() and not o.isnan().any(), f"{where}: NaN"
        assert torch.equal(m, whole[0]), f"{where}: m is {m.tolist()}"
        assert torch.allclose(ell, whole[1], atol=1e-5), f"{where}: ell is {ell.tolist()}"
        assert torch.allclose(o, whole[2], atol=1e-5), f"{where}: o is {o.tolist()}"


@online_softmax.check(
    hint="A row whose two parts both saw only hidden keys keeps m = -inf, ell = 0 and o = 0; "
    "while m is -inf, subtract 0 instead of m."
)
def two_hidden_parts(merge_states: Callable[..., object]) -> None:
    """row 0's two hidden keys, one per part: m = -inf, ell = 0, o = 0"""
    first = _state(SCORES[:1, :1], VALUES[:1])
    second = _state(SCORES[:1, 1:2], VALUES[1:2])
    m, ell, o = _merged(merge_states, first, second)
    assert m.tolist() == [-INF], f"m is {m.tolist()}"
    assert not ell.isnan().any() and not o.isnan().any(), (
        "NaN: while m is -inf, e^(m1 - m) is e^(-inf + inf)"
    )
    assert ell.tolist() == [0.0] and o.tolist() == [[0.0, 0.0]], (
        f"ell is {ell.tolist()} and o {o.tolist()}, expected 0 (no key seen)"
    )


group_heads = Exercise("ch7-ex-group-heads", chapter=7)

# b = 1, h = 4 query heads in h_kv = 2 groups, t = 2 new tokens after 1 cached, d_h = 4.
Q = torch.tensor(
    [[[[-2, 0, -1, -1], [1, 0, 0, 2]], [[1, -1, 1, -1], [1, 0, 0, -2]],
      [[-1, 0, 1, 1], [-1, -2, -2, -1]], [[1, 1, 1, 0], [-2, 1, -1, -2]]]]
).float()  # fmt: skip
K = torch.tensor(
    [[[[-1, 1, -2, -1], [-1, 0, -2, -2], [2, -1, 2, 0]],
      [[0, -1, 2, 1], [0, 0, 2, 2], [0, 1, -2, 0]]]]
).float()  # fmt: skip
V = torch.tensor(
    [[[[-2, -2, 0, 0], [-2, 0, 1, 0], [-2, -2, 1, 2]],
      [[0, 2, -1, 0], [-1, -2, 0, 0], [-2, -1, 1, 1]]]]
).float()  # fmt: skip
SHAPES = ((1, 4, 2, 4), (1, 2, 4, 3))  # the output (b, h, t, d_h), the scores (b, h_kv, g t, s)


@group_heads.check(
    hint="Which query, at which position, sits in each folded row? Fill q with each query's "
    "position, fold it as your code does and read the rows: each hides the keys after its "
    "position."
)
def the_folded_scores_of_a_small_example(folded_attention: Callable[..., object]) -> None:
    """the (1, 2, 4, 3) folded scores: 4 query heads, 2 key/value heads, 1 cached token"""
    _, scores = _pair(folded_attention(Q, K, V), SHAPES, "the pair (output, scores)")
    expected = torch.tensor(
        [[[[2.5, 3.0, -INF], [-1.5, -2.5, 1.0], [-1.5, -0.5, -INF], [0.5, 1.5, 1.0]],
          [[1.5, 2.0, -INF], [-1.5, -3.0, 1.0], [0.5, 1.0, -INF], [-2.5, -3.0, 1.5]]]]
    )  # fmt: skip
    assert torch.equal(scores, expected), f"the scores are {scores.tolist()}"


@group_heads.check(
    hint="Compare your output with plain attention computed one query head at a time, on the "
    "key/value head of its group, as in chapter 4."
)
def the_output_of_a_small_example(folded_attention: Callable[..., object]) -> None:
    """the (1, 4, 2, 4) output of the same example"""
    out, _ = _pair(folded_attention(Q, K, V), SHAPES, "the pair (output, scores)")
    expected = torch.tensor(
        [[[[-2.0, -0.755081, 0.622459, 0.0], [-2.0, -1.945702, 0.926201, 1.798105]],
          [[-2.0, -0.537883, 0.731059, 0.0], [-2.0, -0.987039, 0.813676, 0.614392]],
          [[-0.622459, -0.489837, -0.377541, 0.0], [-1.834164, -0.792858, 0.834164, 0.90876]],
          [[-0.622459, -0.489837, -0.377541, 0.0], [-1.953624, -0.957415, 0.953624, 0.971416]]]]
    )  # fmt: skip
    assert torch.allclose(out, expected, atol=1e-5), f"the output is {out.tolist()}"


which_path = Exercise("ch7-ex-which-path", chapter=7)


def _bytes(value: object) -> float:
    if isinstance(value, torch.Tensor):
        assert value.numel() == 1, f"expected a number, got a tensor of shape {value.shape}"
        return float(value)
    assert isinstance(value, int | float) and not isinstance(value, bool), (
        f"expected a number, got {type(value).__name__}"
    )
    return float(value)


@which_path.check(
    hint="Which (1, h, t, t) tensors of the explicit attend are alive at once? Under "
    "torch.no_grad(), does a layer still hold them when the next one runs?"
)
def the_colleagues_prompt_in_one_pass(explicit_peak_bytes: Callable[..., object]) -> None:
    """16 000 tokens, 12 heads, 24 layers, float32, in one pass: 24.576 GB"""
    got = _bytes(explicit_peak_bytes(16_000, 12, 24, 4, 16_000))
    assert got == 24_576_000_000, f"got {got:.6g} bytes"


@which_path.check(
    hint="A chunk's queries meet every key cached so far, their own included: the largest "
    "is the last full chunk or the shorter last one."
)
def the_prompt_in_chunks(explicit_peak_bytes: Callable[..., object]) -> None:
    """the same prompt in chunks of 1024 tokens, and 11 tokens in chunks of 4"""
    got = _bytes(explicit_peak_bytes(16_000, 12, 24, 4, 1024))
    assert got == 1_509_949_440, f"chunks of 1024: got {got:.6g} bytes"
    got = _bytes(explicit_peak_bytes(11, 1, 1, 1, 4))
    assert got == 66, f"11 tokens in chunks of 4: got {got:g} bytes"
