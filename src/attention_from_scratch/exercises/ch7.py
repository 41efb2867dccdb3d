"""Checks for the exercises of chapter 7, "Attention at scale".

Every answer is a function or class that the checks call on inputs they draw themselves, from
their own seeded generators. Expected values come from first principles (``torch.cat`` of what
was appended, positions counted token by token, the softmax and one query head at a time
computed outside the answer, after it has run), never from a learner's objects. Where an
exercise asks for what torch or the package already has, the answer runs with that shortcut
refused, under the names torch's Python layer knows and those of ``torch.ops.aten``; the checks'
own reference functions are refused too. Tensors handed back must be plain ``torch.Tensor``s (a
subclass could answer the comparison itself).
"""

from __future__ import annotations

import inspect
import math
import os
import sys
import sysconfig
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from ..cached import CachedAttention
from ..grouped import GroupedQueryAttention
from ..kv_cache import KVCache
from ..memory import TorchDispatchMode, measure_peak_memory
from ..multihead import MultiHeadAttention
from ..tiled import TiledAttention, tiled_attention
from ._core import Exercise, answer_tensor
from ._shortcuts import ShortcutTaken
from ._shortcuts import refusing as _refusing


def _aten(*names: str) -> tuple[Any, ...]:
    """torch.ops.aten's operators of these names that this torch has, as called (the packet)
    and as each of its overloads: calls below torch's Python layer reach a refusal only under
    these names.

    Introduced in chapter 7.
    """
    packets = [getattr(torch.ops.aten, name) for name in names if hasattr(torch.ops.aten, name)]
    return (*packets, *(getattr(op, overload) for op in packets for overload in op.overloads()))


@contextmanager
def refusing(*shortcuts: Any, write: str) -> Iterator[None]:
    """``refusing`` of the exercises' package, naming an aten operator as a learner writes it
    (``torch.ops.aten.cat``).

    Introduced in chapter 7.
    """
    try:
        with _refusing(*shortcuts, write=write):
            yield
    except ShortcutTaken as error:
        message, _, name = str(error).rpartition("called ")
        if name.startswith("torch._ops.aten."):  # aten::op.overload, or <binding>.op
            op = name.split("::")[1].split(".")[0] if "::" in name else name.split(".")[-1]
            name = f"torch.ops.aten.{op}"
        raise ShortcutTaken(f"{message}called {name}") from None


# Ways out of torch, where no refusal and no tracing follows the numbers.
LEAVING_TORCH = (torch.Tensor.numpy, torch.Tensor.__array__, torch.Tensor.tolist)


def plain_tensor(value: object, shape: tuple[int, ...]) -> torch.Tensor:
    """Like ``answer_tensor``, for a plain ``torch.Tensor`` only: a subclass can answer the
    comparison (``torch.equal``, ``allclose``) itself.

    Introduced in chapter 7.
    """
    assert type(value) is torch.Tensor, (
        f"expected a torch.Tensor of shape {shape}, got {type(value).__name__}"
    )
    return answer_tensor(value, shape)


kv_cache = Exercise("ch7-ex-kv-cache", chapter=7)

CONCATENATIONS = (
    torch.cat,
    torch.concat,
    torch.concatenate,
    torch.stack,
    torch.hstack,
    torch.vstack,
    torch.dstack,
    torch.row_stack,
    torch.column_stack,
    *_aten("cat", "_cat", "concat", "concatenate", "stack", "_stack", "hstack", "vstack"),
    *_aten("dstack", "row_stack", "column_stack"),
    KVCache,
)


@contextmanager
def no_concatenation() -> Iterator[None]:
    """Run a cache's methods with concatenation and the package's ``KVCache`` refused.

    Introduced in chapter 7.
    """
    with refusing(*CONCATENATIONS, write="a preallocated cache (written in place)"):
        yield


def cache_length(cache: object) -> int:
    """A learner's cache length, whether ``length`` is a property or a method.

    Introduced in chapter 7.
    """
    length = cache.length  # type: ignore[attr-defined]
    length = length() if callable(length) else length
    assert isinstance(length, int) and not isinstance(length, bool), (
        f"`length` must be an int, got {type(length).__name__}"
    )
    return length


def in_buffers(
    cache: object, capacity: int, first: tuple[int, int] | None = None
) -> tuple[int, int]:
    """Read a learner's cache and check that what it holds lives in buffers with room for
    ``capacity`` tokens, the same buffers as at the first append (``first``, the addresses
    this returned then). Returns the addresses of the keys' and values' memory.

    Introduced in chapter 7.
    """
    read = cache.read()  # type: ignore[attr-defined]
    assert isinstance(read, (tuple, list)) and len(read) == 2, "`read()` must return (keys, values)"
    for name, x in zip(("keys", "values"), read, strict=True):
        assert type(x) is torch.Tensor and x.dim() == 4, (
            f"`read()` must return the {name} as a (b, h_kv, s, d_h) torch.Tensor"
        )
        b, h_kv, _, d_h = x.shape
        room = x.untyped_storage().nbytes() // x.element_size()
        assert room >= b * h_kv * capacity * d_h, (
            f"the cached {name} sit in memory for {room // (b * h_kv * d_h)} token(s), not for "
            f"the capacity of {capacity}: allocate the buffers once, at the first append"
        )
    where = tuple(x.untyped_storage().data_ptr() for x in read)
    assert first is None or where == first, (
        "the cached keys or values moved to new memory: write into the buffers allocated at "
        "the first append"
    )
    return where  # type: ignore[return-value]


def random_tokens(
    generator: torch.Generator, b: int, h_kv: int, s: int, d_h: int, dtype=torch.float64
) -> torch.Tensor:
    """``(b, h_kv, s, d_h)`` random keys or values drawn from the check's own generator.

    Introduced in chapter 7.
    """
    return torch.randn(b, h_kv, s, d_h, generator=generator, dtype=torch.float64).to(dtype)


@kv_cache.check(
    points=1,
    hint="`PreallocatedKVCache(capacity).length` starts at 0 and grows by the number of "
    "tokens each `append` adds; which axis of a (b, h_kv, t, d_h) tensor counts tokens?",
)
def counts_the_cached_tokens(PreallocatedKVCache):
    generator = torch.Generator().manual_seed(71)
    with no_concatenation():
        cache = PreallocatedKVCache(6)
        assert cache_length(cache) == 0
        first = None
        for new, total in ((2, 2), (1, 3), (3, 6)):
            keys = random_tokens(generator, 2, 3, new, 4)
            cache.append(keys, random_tokens(generator, 2, 3, new, 4))
            assert cache_length(cache) == total, (
                f"after appending {new} token(s) the length should be {total}, got "
                f"{cache_length(cache)}"
            )
            first = in_buffers(cache, 6, first)


@kv_cache.check(
    points=2,
    hint="`append(keys, values)` writes the new tokens right after the cached ones and "
    "returns every key and value cached so far, oldest first, as `read()` does.",
)
def returns_every_token_in_order(PreallocatedKVCache):
    generator = torch.Generator().manual_seed(72)
    sizes = (3, 1, 2)
    keys = [random_tokens(generator, 1, 2, s, 5) for s in sizes]
    values = [random_tokens(generator, 1, 2, s, 5) for s in sizes]
    returned, first = [], None
    with no_concatenation():
        cache = PreallocatedKVCache(7)
        for k, v in zip(keys, values, strict=True):
            returned.append(cache.append(k.clone(), v.clone()))
            first = in_buffers(cache, 7, first)
        read = cache.read()
    # computed after the answer ran, outside the refusal
    expected = [
        (torch.cat(keys[: i + 1], dim=2), torch.cat(values[: i + 1], dim=2))
        for i in range(len(sizes))
    ]
    for (all_keys, all_values), (want_keys, want_values) in zip(returned, expected, strict=True):
        shape = tuple(want_keys.shape)
        assert torch.equal(plain_tensor(all_keys, shape), want_keys), (
            "the keys returned by `append` are not the ones appended, in order"
        )
        assert torch.equal(plain_tensor(all_values, shape), want_values), (
            "the values returned by `append` are not the ones appended, in order"
        )
    want_keys, want_values = expected[-1]
    assert torch.equal(plain_tensor(read[0], (1, 2, 6, 5)), want_keys)
    assert torch.equal(plain_tensor(read[1], (1, 2, 6, 5)), want_values)


@kv_cache.check(
    points=1,
    hint="Allocate the (b, h_kv, capacity, d_h) buffers once and write into them: what "
    "`read()` returns should be views of the same memory after every `append`. An `append` "
    "that does not fit must raise a ValueError before it changes anything.",
)
def writes_in_place_and_refuses_overflow(PreallocatedKVCache):
    generator = torch.Generator().manual_seed(73)
    first = random_tokens(generator, 1, 1, 1, 2), random_tokens(generator, 1, 1, 1, 2)
    second = random_tokens(generator, 1, 1, 2, 2), random_tokens(generator, 1, 1, 2, 2)
    extra = random_tokens(generator, 1, 1, 1, 2), random_tokens(generator, 1, 1, 1, 2)
    with no_concatenation():
        cache = PreallocatedKVCache(3)
        cache.append(*first)
        where = in_buffers(cache, 3)
        cache.append(*second)
        in_buffers(cache, 3, where)
        try:
            cache.append(*extra)
        except ValueError:
            pass
        else:
            raise AssertionError("a fourth token fitted into a capacity of 3")
        assert cache_length(cache) == 3, "the refused append changed the length"
        keys, _ = cache.read()
    expected = torch.cat([first[0], second[0]], dim=2)
    assert torch.equal(plain_tensor(keys, (1, 1, 3, 2)), expected), (
        "the refused append changed the cached keys"
    )


position_ids = Exercise("ch7-ex-position-ids", chapter=7)


def positions_by_counting(padding_mask: list[list[bool]]) -> torch.Tensor:
    """Position ids of a padded batch, counted token by token (the checks' reference).

    Each real token gets the number of real tokens before it in its row; every pad gets 0.

    Introduced in chapter 7.
    """
    rows = []
    for row in padding_mask:
        seen, ids = 0, []
        for is_pad in row:
            ids.append(0 if is_pad else seen)
            seen += not is_pad
        rows.append(ids)
    return torch.tensor(rows)  # (b, t)


def padded_on_both_sides(generator: torch.Generator, b: int, t: int) -> list[list[bool]]:
    """A ``(b, t)`` padding mask with random pads before and after each row's real tokens.

    Introduced in chapter 7.
    """
    rows = []
    for _ in range(b):
        real = int(torch.randint(1, t + 1, (1,), generator=generator))
        left = int(torch.randint(0, t - real + 1, (1,), generator=generator))
        rows.append([True] * left + [False] * real + [True] * (t - real - left))
    return rows


def compare_positions(shifted_positions: Callable, mask: list[list[bool]]) -> int:
    """Call the answer on ``mask`` (with the checks' own counting refused) and compare with
    the count, naming the usual mistakes. Returns the lines of Python the answer ran.

    Introduced in chapter 7.
    """
    given = torch.tensor(mask)

    def answer(padding_mask: torch.Tensor) -> object:
        with refusing(positions_by_counting, write="the position ids"):
            return shifted_positions(padding_mask)

    result, lines = python_lines(answer, given.clone())
    result = plain_tensor(result, tuple(given.shape))
    assert not result.is_floating_point() and result.dtype != torch.bool, (
        f"position ids must be integers, got {result.dtype}"
    )
    expected = positions_by_counting(mask)
    result = result.long()
    if torch.equal(result, expected):
        return lines
    wrong_pads = (result != expected) & given
    if wrong_pads.any():
        raise AssertionError(
            "a pad got a nonzero position id: every pad gets 0, before or after the real tokens"
        )
    raise AssertionError(
        "the real tokens' ids are not 0, 1, 2, ... counted from each row's first real token"
    )


_LIBRARY_CODE = tuple(
    os.path.dirname(os.path.abspath(path)) + os.sep
    for path in (
        torch.__file__,
        inspect.getfile(KVCache),  # the package's folder
        *(sysconfig.get_paths()[key] + os.sep for key in ("stdlib", "purelib", "platlib")),
    )
)


def python_lines(fn: Callable, *args: object) -> tuple[object, int]:
    """Call ``fn(*args)`` and count the lines of Python it runs outside torch, this package
    and the standard library: the learner's own code, whose count grows with the length of a
    row when it loops over the tokens (comprehensions included).

    Introduced in chapter 7.
    """
    lines = 0

    def local(frame, event, arg):
        nonlocal lines
        lines += event == "line"
        return local

    def calls(frame, event, arg):
        return None if frame.f_code.co_filename.startswith(_LIBRARY_CODE) else local

    previous = sys.gettrace()
    sys.settrace(calls)
    try:
        result = fn(*args)
        switched_off = sys.gettrace() is not calls
    finally:
        sys.settrace(previous)
    assert not switched_off, "the answer replaced the check's line counter"
    return result, lines


@position_ids.check(
    points=2,
    hint="A real token's id is the number of real tokens before it in its row; a pad gets "
    "0 wherever it sits. Which running operation over a row counts what came before? "
    "Work on whole rows at once: the check counts the Python lines your function runs.",
)
def counts_the_real_tokens(shifted_positions):
    generator = torch.Generator().manual_seed(74)
    compare_positions(shifted_positions, padded_on_both_sides(generator, 5, 9))
    compare_positions(shifted_positions, [[True, False, False, True], [False, False, True, True]])
    short, long = (padded_on_both_sides(generator, 3, t) for t in (8, 64))
    lines_short = compare_positions(shifted_positions, short)
    lines_long = compare_positions(shifted_positions, long)
    assert lines_long <= lines_short + 4, (
        f"your function ran {lines_short} lines of Python for rows of 8 tokens and "
        f"{lines_long} for rows of 64: a Python loop over the tokens; use tensor operations "
        "over whole rows instead"
    )


online_softmax = Exercise("ch7-ex-online-softmax", chapter=7)

# The softmax, the log-sum-exp and their relatives (a log-sum-exp of two, a running one, a
# loss built on one), under torch's names and aten's, the package's tiled attention (whose
# loop is this update), and the ways out to NumPy.
SOFTMAXES = (
    torch.softmax,
    torch.Tensor.softmax,
    F.softmax,
    F.softmin,
    torch.log_softmax,
    torch.Tensor.log_softmax,
    F.log_softmax,
    torch.logsumexp,
    torch.Tensor.logsumexp,
    torch.special.logsumexp,
    torch.special.softmax,
    torch.special.log_softmax,
    torch.logcumsumexp,
    torch.Tensor.logcumsumexp,
    torch.logaddexp,
    torch.Tensor.logaddexp,
    torch.logaddexp2,
    torch.Tensor.logaddexp2,
    torch.masked.softmax,
    torch.masked.log_softmax,
    torch.masked.softmin,
    torch.masked.logsumexp,
    F.cross_entropy,
    F.scaled_dot_product_attention,
    *_aten(
        "softmax", "_softmax", "_safe_softmax", "log_softmax", "_log_softmax",
        "special_softmax", "special_log_softmax", "_masked_softmax", "logsumexp",
        "special_logsumexp", "logcumsumexp", "_logcumsumexp", "logaddexp", "logaddexp2",
        "cross_entropy_loss", "scaled_dot_product_attention",
        "_scaled_dot_product_attention_math", "_scaled_dot_product_flash_attention_for_cpu",
    ),
    tiled_attention,
    TiledAttention,
    *LEAVING_TORCH,
)  # fmt: skip


def fold_blocks(
    online_update: Callable, scores: torch.Tensor, block_size: int
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Run the answer over ``scores`` ``(r, s)`` block by block, from ``m = -inf, ell = 0``.

    Each call sees one block and the running ``(m, ell)`` only; the learner's arguments are
    copies, checked unchanged afterwards. Returns the ``(m, ell)`` after every block.

    Introduced in chapter 7.
    """
    r = scores.shape[0]
    m = torch.full((r,), float("-inf"), dtype=scores.dtype)
    ell = torch.zeros(r, dtype=scores.dtype)
    states = []
    with refusing(*SOFTMAXES, prefix_statistics, write="the online update"):
        for start in range(0, scores.shape[1], block_size):
            block = scores[:, start : start + block_size].clone()
            m_in, ell_in, block_in = m.clone(), ell.clone(), block.clone()
            result = online_update(m_in, ell_in, block_in)
            assert isinstance(result, tuple) and len(result) == 2, (
                "`online_update` must return the pair (m, ell)"
            )
            assert torch.equal(m_in, m) and torch.equal(ell_in, ell), (
                "`online_update` changed its arguments m or ell in place"
            )
            assert torch.equal(block_in, block), "`online_update` changed the block in place"
            m = plain_tensor(result[0], (r,))
            ell = plain_tensor(result[1], (r,))
            assert not ell.isnan().any() and not m.isnan().any(), (
                "ell became NaN: while a row's maximum is still -inf, exp(m - m') is "
                "exp(-inf - (-inf))"
            )
            states.append((m, ell))
    return states


def prefix_statistics(scores: torch.Tensor, end: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The maximum and the sum of ``exp(score - maximum)`` over the first ``end`` columns,
    written out with ``math`` row by row (the checks' reference).

    Introduced in chapter 7.
    """
    maxima, sums = [], []
    for row in scores[:, :end].tolist():
        top = max(row)
        maxima.append(top)
        sums.append(0.0 if top == -math.inf else sum(math.exp(x - top) for x in row))
    return torch.tensor(maxima, dtype=torch.float64), torch.tensor(sums, dtype=torch.float64)


def compare_running_state(online_update: Callable, scores: torch.Tensor, block_size: int) -> None:
    """After every block, ``m`` and ``ell`` must be those of the scores seen so far.

    Introduced in chapter 7.
    """
    states = fold_blocks(online_update, scores, block_size)
    for i, (m, ell) in enumerate(states):
        end = min((i + 1) * block_size, scores.shape[1])
        want_m, want_ell = prefix_statistics(scores.double(), end)
        assert not ell.isnan().any(), (
            "ell became NaN: while a row's maximum is still -inf, exp(m - m') is exp(-inf - (-inf))"
        )
        torch.testing.assert_close(
            m.double(), want_m, msg="`m` must be the largest score seen so far in each row"
        )
        if not torch.allclose(ell.double(), want_ell, rtol=1e-5, atol=1e-8):
            raise AssertionError(
                "`ell` is not the sum of exp(score - m) over the scores seen so far: when "
                "the maximum grows, the old sum must be rescaled to the new maximum"
            )


@online_softmax.check(
    points=2,
    hint="After each block, `m` must be each row's largest score so far and `ell` the sum "
    "of exp(score - m) over the scores so far, measured from the new maximum.",
)
def keeps_the_running_maximum_and_sum(online_update):
    generator = torch.Generator().manual_seed(75)
    scores = 3 * torch.randn(4, 13, generator=generator, dtype=torch.float64)
    for block_size in (1, 5, 13):
        compare_running_state(online_update, scores, block_size)
    states = fold_blocks(online_update, scores, 4)
    m, ell = states[-1]
    probabilities = torch.exp(scores - m.double()[:, None]) / ell.double()[:, None]
    torch.testing.assert_close(probabilities, torch.softmax(scores, dim=-1))


@online_softmax.check(
    points=1,
    hint="Scores around 1000 overflow exp(): every exponent must be taken relative to a "
    "running maximum, so that it is at most 0.",
)
def stays_finite_for_large_scores(online_update):
    scores = torch.tensor([[1000.0, 999.0, 2.0, -5.0, 1001.0], [-3.0, 700.0, 701.0, 0.0, 5.0]])
    _, ell = fold_blocks(online_update, scores, 2)[-1]
    assert torch.isfinite(ell).all(), "ell overflowed"
    compare_running_state(online_update, scores, 2)


@online_softmax.check(
    points=1,
    hint="A row whose first blocks are all -inf (masked keys) keeps m = -inf, and "
    "exp(-inf - (-inf)) is NaN: what can be subtracted instead while m is -inf?",
)
def survives_masked_first_blocks(online_update):
    inf = float("inf")
    scores = torch.tensor([[-inf, -inf, -inf, 1.5, 2.0, -1.0], [0.5, -inf, 2.0, -inf, 1.0, 3.0]])
    for block_size in (1, 2, 3):
        compare_running_state(online_update, scores, block_size)


group_heads = Exercise("ch7-ex-group-heads", chapter=7)

GROUPING_SHORTCUTS = (
    F.scaled_dot_product_attention,
    torch.repeat_interleave,
    torch.Tensor.repeat_interleave,
    torch.Tensor.expand,
    torch.Tensor.expand_as,
    torch.Tensor.repeat,
    torch.broadcast_to,
    torch.broadcast_tensors,
    torch.tile,
    torch.Tensor.tile,
    torch.einsum,
    F.multi_head_attention_forward,
    torch.nn.MultiheadAttention,
    GroupedQueryAttention,
    CachedAttention,
    MultiHeadAttention,
    tiled_attention,
    TiledAttention,
    *_aten(
        "scaled_dot_product_attention", "_scaled_dot_product_attention_math",
        "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_fused_attention_overrideable", "_native_multi_head_attention",
        "repeat_interleave", "expand", "expand_as", "expand_copy", "repeat", "tile",
        "broadcast_to", "broadcast_tensors", "einsum",
    ),
    *LEAVING_TORCH,
)  # fmt: skip


def grouped_by_heads(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal grouped-query attention, one query head at a time (the checks' reference).

    Query head ``i`` reads key/value head ``i // g``. Introduced in chapter 7.
    """
    h, t, d_h = q.shape[1], q.shape[2], q.shape[3]
    g = h // k.shape[1]
    future = torch.ones(t, t, dtype=torch.bool).triu(1)  # (t, t)
    heads = []
    for i in range(h):
        scores = q[:, i] @ k[:, i // g].transpose(1, 2) / math.sqrt(d_h)  # (b, t, t)
        weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
        heads.append(weights @ v[:, i // g])  # (b, t, d_h)
    return torch.stack(heads, dim=1)  # (b, h, t, d_h)


def grouped_inputs(
    b: int, h: int, h_kv: int, t: int, d_h: int, seed: int = 7, dtype=torch.float64
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random queries ``(b, h, t, d_h)`` and keys, values ``(b, h_kv, t, d_h)``.

    Introduced in chapter 7.
    """
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, t, d_h, generator=generator, dtype=torch.float64)
    k = torch.randn(b, h_kv, t, d_h, generator=generator, dtype=torch.float64)
    v = torch.randn(b, h_kv, t, d_h, generator=generator, dtype=torch.float64)
    return q.to(dtype), k.to(dtype), v.to(dtype)


def compare_grouped(folded_attention: Callable, shape: tuple[int, ...], seed: int, dtype) -> None:
    """Run the answer with the grouping shortcuts refused and compare head by head; then
    check that it is the folded form: no product broadcast over a group axis, no ``g``-fold
    copy of the keys or values, and no more work for three times the query heads, in groups
    three times larger or in three times as many groups (each run compared too): one batched
    product over ``(b, h_kv, g t, d_h)``, not a loop over the heads or the groups.

    Introduced in chapter 7.
    """
    b, h, h_kv, t, d_h = shape
    calls, copies, broadcast = compare_values(folded_attention, shape, seed, dtype)
    for more_shape, more_seed in (
        ((b, 3 * h, h_kv, t, d_h), seed + 1),  # g three times larger
        ((b, 3 * h, 3 * h_kv, t, d_h), seed + 2),  # three times as many groups
    ):
        more_calls, more_copies, more_broadcast = compare_values(
            folded_attention, more_shape, more_seed, dtype
        )
        broadcast += more_broadcast
        assert not broadcast, (
            f"a product broadcast over a group axis: operands {broadcast[0][0]} and "
            f"{broadcast[0][1]} (matmul expands the keys g times to compute it)"
        )
        assert more_calls <= calls + 2, (
            f"the answer ran {calls} tensor operations for {h} query heads in {h_kv} groups "
            f"and {more_calls} for {more_shape[1]} in {more_shape[2]}: a loop over the heads "
            "or the groups; fold each group into rows of one batched product instead"
        )
        copies += more_copies
    assert not copies, (
        "a tensor g times the size of the keys or values was built from them (gathered, "
        f"indexed, repeated, stacked or multiplied out: {copies[0]}); fold the queries into "
        "rows instead"
    )


def compare_values(
    folded_attention: Callable, shape: tuple[int, ...], seed: int, dtype
) -> tuple[int, list[str], list[tuple[tuple[int, ...], tuple[int, ...]]]]:
    """One run of :func:`compare_grouped`: compares the result; returns the number of
    operations the answer ran, its copies of the keys or values and its broadcast products.

    Introduced in chapter 7.
    """
    b, h, h_kv, t, d_h = shape
    q, k, v = grouped_inputs(b, h, h_kv, t, d_h, seed, dtype)
    result, calls, copies, broadcast = run_folded(folded_attention, q, k, v)
    result = plain_tensor(result, (b, h, t, d_h)).double()
    expected = grouped_by_heads(q.double(), k.double(), v.double())  # after, outside the refusal
    if not torch.allclose(result, expected, atol=1e-4):
        diagnose_grouped(result, q, k, v)
    return calls, copies, broadcast


def diagnose_grouped(
    result: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
) -> None:
    """Fail a grouped attention that differs from the reference, naming the usual mistake.

    Introduced in chapter 7.
    """
    h, h_kv = q.shape[1], k.shape[1]
    if h_kv < h:
        g = h // h_kv
        k_mod, v_mod = (x.double().repeat(1, g, 1, 1) for x in (k, v))  # head i: i % h_kv
        shuffled = grouped_by_heads(q.double(), k_mod, v_mod)
        if torch.allclose(result, shuffled, atol=1e-4):
            raise AssertionError(
                "query head i read key/value head i % h_kv: the g heads of a group are "
                "neighbours, so head i belongs to key/value head i // g"
            )
    raise AssertionError("the result differs from causal attention computed one head at a time")


@group_heads.check(
    points=2,
    hint="Fold the g query heads of each group into rows of one (g t, d_h) matrix per "
    "key/value head; row r of that matrix is one of the t queries of its head, which one "
    "decides its causal mask.",
)
def matches_one_head_at_a_time(folded_attention):
    compare_grouped(folded_attention, (1, 4, 2, 5, 3), seed=77, dtype=torch.float64)
    compare_grouped(folded_attention, (1, 4, 1, 6, 2), seed=78, dtype=torch.float64)


class _BroadcastProducts(TorchFunctionMode):
    """Records the matrix products whose operands have different batch shapes."""

    PRODUCTS = (
        torch.matmul,
        torch.Tensor.matmul,
        torch.Tensor.__matmul__,
        torch.bmm,
        *_aten("matmul", "bmm"),
    )

    def __init__(self) -> None:
        super().__init__()
        self.broadcast: list[tuple[tuple[int, ...], tuple[int, ...]]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        a, b = [*args, None, None][:2]
        if (
            func in self.PRODUCTS
            and isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.dim() >= 3
            and b.dim() >= 3
            and a.shape[:-2] != b.shape[:-2]
        ):
            self.broadcast.append((tuple(a.shape), tuple(b.shape)))
        return func(*args, **(kwargs or {}))


class _KeyCopies(TorchDispatchMode):  # type: ignore[misc, valid-type]
    """Counts the operations an answer runs, and records every tensor that an operation
    computes or writes from the keys or values, and not from the queries, and that holds
    memory for at least ``g`` times as many numbers as its largest such input: a gathered,
    repeated, stacked or multiplied-out (a 0/1 selection matrix times the keys) copy of them.
    Sizes are those of the memory, so that a broadcast view (``expand``, stride 0) counts as
    the keys it shows, and a copy written into a buffer made beforehand counts as a copy.
    What comes from the queries too (the scores, the weights, the output) is the attention
    itself, never a copy of the keys.

    Introduced in chapter 7.
    """

    def __init__(self, sources: tuple[torch.Tensor, ...], queries: torch.Tensor, g: int) -> None:
        super().__init__()
        self.g = g
        self.calls = 0
        self.copies: list[str] = []
        self.kept = [*sources, queries]  # alive while counted: no address is reused
        self.derived = {x.untyped_storage().data_ptr() for x in sources}
        self.from_queries = {queries.untyped_storage().data_ptr()}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.calls += 1
        inputs = [x for x in tree_flatten((args, kwargs))[0] if isinstance(x, torch.Tensor)]
        tainted = [x for x in inputs if x.untyped_storage().data_ptr() in self.derived]
        queried = any(x.untyped_storage().data_ptr() in self.from_queries for x in inputs)
        outputs = [y for y in tree_flatten(out)[0] if isinstance(y, torch.Tensor)]
        if queried:
            self.from_queries.update(y.untyped_storage().data_ptr() for y in outputs)
            self.kept += outputs
        if tainted:
            largest = max(_numbers_held(x) for x in tainted)
            for y in outputs:
                if y.numel() == 0:
                    continue
                self.derived.add(y.untyped_storage().data_ptr())
                self.kept.append(y)
                if self.g > 1 and not queried and _numbers_held(y) >= self.g * largest:
                    self.copies.append(f"{func} made {tuple(y.shape)}")
        return out


def _numbers_held(x: torch.Tensor) -> int:
    """How many numbers the memory under ``x`` holds (a view counts its whole storage).

    Introduced in chapter 7.
    """
    return x.untyped_storage().nbytes() // max(x.element_size(), 1)


def run_folded(
    folded_attention: Callable, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
) -> tuple[object, int, list[str], list[tuple[tuple[int, ...], tuple[int, ...]]]]:
    """Run the answer on copies of ``q, k, v`` with the shortcuts (and the checks' own
    reference) refused; return its result, how many operations it ran, the ``g``-fold copies
    of the keys or values it made, and its broadcast products.

    Introduced in chapter 7.
    """
    q, k, v = q.clone(), k.clone(), v.clone()
    products, copies = _BroadcastProducts(), _KeyCopies((k, v), q, q.shape[1] // k.shape[1])
    refused = refusing(
        *GROUPING_SHORTCUTS, grouped_by_heads, write="the folded grouped-query attention"
    )
    with refused, products, copies:
        result = folded_attention(q, k, v)
    return result, copies.calls, copies.copies, products.broadcast


@group_heads.check(
    points=1,
    hint="Every product must multiply operands with the same batch axes, and no tensor g "
    "times the size of the keys or values may be built from them: fold each group's query "
    "heads into rows of one matrix per key/value head, with no loop over the heads.",
)
def multiplies_without_a_group_broadcast(folded_attention):
    compare_grouped(folded_attention, (2, 6, 2, 4, 8), seed=79, dtype=torch.float64)


which_path = Exercise(
    "ch7-ex-which-path",
    chapter=7,
    manual_points=1,
    rubric="1 point: a workable way to see the weights that never forms a (t, t) matrix, "
    "e.g. keep the fused path and, under torch.no_grad(), recompute from that layer's "
    "queries and keys (a forward hook calling its project) the weights of the heads and "
    "the few query rows to plot: a (rows, t) slice per head.",
)


def peak_bytes_by_hand(tokens: int, heads: int) -> int:
    """Numbers of the ``(1, h, t, t)`` scores and weights alive at once (the reference).

    Introduced in chapter 7.
    """
    return 2 * heads * tokens * tokens


@which_path.check(
    points=2,
    hint="Look at the explicit attend: which of its (b, h, t, t) tensors are alive at the "
    "same moment? And under torch.no_grad(), is anything of one layer still held when the "
    "next layer runs?",
)
def estimates_the_explicit_peak(explicit_peak_bytes):
    cases = ((16_384, 16, 24, 2), (300, 3, 5, 4), (20_000, 1, 1, 8))
    with refusing(
        measure_peak_memory,
        peak_bytes_by_hand,
        MultiHeadAttention,
        CachedAttention,
        write="the estimate (a formula, not a measurement)",
    ):
        answers = [explicit_peak_bytes(*case) for case in cases]
    for (tokens, heads, layers, size), answer in zip(cases, answers, strict=True):
        assert isinstance(answer, (int, float)) and not isinstance(answer, bool), (
            f"`explicit_peak_bytes` must return a number, got {type(answer).__name__}"
        )
        expected = peak_bytes_by_hand(tokens, heads) * size
        if math.isclose(answer, expected, rel_tol=0.01):
            continue
        if layers > 1 and math.isclose(answer, expected * layers, rel_tol=0.01):
            raise AssertionError(
                "the estimate grows with the number of layers: under torch.no_grad() a "
                "layer's matrices are freed before the next layer runs"
            )
        if math.isclose(answer, expected / 2, rel_tol=0.01):
            raise AssertionError(
                "the estimate counts one (t, t) tensor per head: is the first still alive "
                "when the next is written?"
            )
        raise AssertionError(
            f"for t={tokens}, h={heads}, {layers} layers and {size}-byte numbers the "
            f"estimate is off by more than 1 %"
        )
