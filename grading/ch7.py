"""Chapter 7, "Attention at scale": the graded exercises (grader only, never shipped).

Each draws a student's inputs from their variant's generator, has the student's code called
on them in the student's kernel, and judges what comes back against a reference computed here
in float64. The answers return what neither torch nor the course package exposes: the slots
of a ring buffer (whose two buffers must keep their address across appends and be written in
place), the online-softmax state over two parts of the keys merged from the parts' states
(drawn here over scores the student never sees, so that only the rescaling can answer), the
scores of the folded grouped product.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from grader.spec import (
    FLOAT,
    Call,
    Case,
    Check,
    GradedExercise,
    Raised,
    Result,
    Step,
    StepResult,
    Tensor,
    call,
    describe,
    problem_with_tensor,
    value_of,
)


def dtype_name(array: np.ndarray) -> str:
    return FLOAT[array.dtype.type]


def tensors(got: object, count: int, what: str) -> tuple[list[Tensor] | None, str | None]:
    """The ``count`` tensors of a returned tuple, or why it is not one."""
    if isinstance(got, Raised):
        return None, f"it raised {got.type_name}: {got.message}"
    if not isinstance(got, list) or len(got) != count:
        return None, f"expected {what}, got {describe(got)}"
    if not all(isinstance(item, Tensor) for item in got):
        return None, f"expected {what}, got {', '.join(describe(item) for item in got)}"
    return got, None


def first_raised(results: Sequence[StepResult]) -> str | None:
    """Why a step of the call raised (the first one), or None."""
    for result in results:
        if isinstance(result.value, Raised):
            return f"it raised {result.value.type_name}: {result.value.message}"
    return None


# ---- ch7-ex-kv-cache ---------------------------------------------------------------------------


class RollingCache(GradedExercise):
    label = "ch7-ex-kv-cache"
    checks = (
        Check(
            "window",
            2,
            "each append returns the last `window` tokens, read out of the buffers oldest "
            "first; `length` counts all",
            "Keep count of every token appended; after an append the cache holds the newest "
            "min(length, window) of them. Read them out of the ring starting at the oldest "
            "slot, at every append: what the buffers hold may have been changed in place "
            "since the last one.",
        ),
        Check(
            "ring",
            1,
            "two buffers allocated once and written in place, token p in slot p mod window",
            "Allocate the (b, h_kv, window, d_h) buffers once, at the first append, with the "
            "keys' dtype, and write each append into them in place: `keys` read after the "
            "first append is the very tensor read after the last. Token p goes into slot "
            "p % window: the token after the last slot goes into slot 0.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        # One token per append, as the exercise says: a chunk's first queries would need keys
        # that a ring of `window` slots has overwritten.
        cases = []
        for dtype, negate in ((np.float32, False), (np.float32, True), (np.float64, True)):
            window = int(rng.integers(2, 7))
            total = 2 * window + int(rng.integers(1, window + 1))
            cases.append(self.case("window", rng, window, total, dtype, negate))
        for dtype in (np.float16, np.float64, np.float32):
            window = int(rng.integers(3, 8))
            total = window + int(rng.integers(1, window))
            cases.append(self.case("ring", rng, window, total, dtype))
        return cases

    @staticmethod
    def case(
        check: str,
        rng: np.random.Generator,
        window: int,
        total: int,
        dtype: type,
        negate: bool = False,
    ) -> Case:
        """``negate``: between appends, negate both buffers in place (as a model that edits
        its cache would): each append must return what the buffers then hold."""
        b, h_kv, d_h = int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(1, 5))
        keys = rng.standard_normal((b, h_kv, total, d_h)).astype(dtype)
        values = rng.standard_normal((b, h_kv, total, d_h)).astype(dtype)
        steps = [Step("RollingKVCache", args=(window,), send_back=False)]
        reads = []  # the ring check: where each append's buffers were read
        appends = []  # where each append's result is
        for i in range(total):  # append i sends token i alone
            if negate and i > 0:
                at = len(steps)
                steps += [
                    Step(Result(0), "keys", called=False, send_back=False),
                    Step(Result(0), "values", called=False, send_back=False),
                    Step(Result(at), "neg_", send_back=False),
                    Step(Result(at + 1), "neg_", send_back=False),
                ]
            appends.append(len(steps))
            steps.append(
                Step(
                    Result(0),
                    "append",
                    (keys[:, :, i : i + 1], values[:, :, i : i + 1]),
                    send_back=check == "window",
                )
            )
            if check == "ring":
                # Read both buffers (kept in the kernel) and send back their addresses.
                at = len(steps)
                reads.append(at)
                steps += [
                    Step(Result(0), "keys", called=False, send_back=False),
                    Step(Result(0), "values", called=False, send_back=False),
                    Step(Result(at), "data_ptr"),
                    Step(Result(at + 1), "data_ptr"),
                ]
        if check == "window":
            steps.append(Step(Result(0), "length", called=False))
        else:
            # The tensors read after the first append, as they are now, then the last ones.
            steps += [Step(Result(at), called=False) for at in (reads[0], reads[0] + 1)]
            steps += [Step(Result(at), called=False) for at in (reads[-1], reads[-1] + 1)]
        name = dtype_name(keys)
        shown = f"window {window}, {total} appends of one token, b = {b}, h_kv = {h_kv}, {name}"
        if negate:
            shown += ", the buffers negated in place between appends"

        def judge(results: Sequence[StepResult]) -> str | None:
            raised = first_raised(results)
            if raised:
                return raised
            if check == "window":
                for i in range(total):
                    start, end = max(0, i + 1 - window), i + 1
                    got, why = tensors(results[appends[i]].value, 2, "the pair (keys, values)")
                    if why:
                        return f"append {i}: {why}"
                    assert got is not None
                    # Token p, written by append p, was negated by each append since.
                    written = np.arange(start, end)
                    signs = (-1.0) ** (i - written) if negate else np.ones(end - start)
                    for item, source, what in zip(
                        got, (keys, values), ("keys", "values"), strict=True
                    ):
                        problem = problem_with_tensor(
                            item,
                            source[:, :, start:end] * signs[:, None],
                            atol=0,
                            rtol=0,
                            what=f"the {what} returned by append {i} (after {end} tokens)",
                        )
                        unread = (signs < 0).any() and not problem_with_tensor(
                            item, source[:, :, start:end], atol=0, rtol=0
                        )
                        if problem and unread:
                            return (
                                f"the {what} returned by append {i} are not what the buffers "
                                "hold: both were negated in place before it, and append must "
                                "read its tokens out of them, oldest first"
                            )
                        if problem:
                            return problem
                length = value_of(results)
                if length != total or isinstance(length, bool):
                    return (
                        f"`length` should be {total} after {total} tokens, got {describe(length)}"
                    )
                return None
            # Slot j holds the newest token p with p % window == j.
            order = [max(p for p in range(total) if p % window == j) for j in range(window)]
            for item, source, what in zip(
                results[-2:], (keys, values), ("keys", "values"), strict=True
            ):
                problem = problem_with_tensor(
                    item.value,
                    source[:, :, order],
                    atol=0,
                    rtol=0,
                    dtype=name,
                    what=f"the buffer `{what}`",
                )
                if problem:
                    return problem
            for offset, what in enumerate(("keys", "values")):
                addresses = [results[at + 2 + offset].value for at in reads]
                first = addresses[0]
                for i, address in enumerate(addresses):
                    if not isinstance(address, int) or isinstance(address, bool):
                        return f"`{what}.data_ptr()` gave {describe(address)}"
                    if address != first:
                        return (
                            f"`{what}` read after append {i} is not the tensor read after "
                            "append 0 (it lies elsewhere in memory): the buffers should be "
                            "allocated once and written in place"
                        )
            for item, source, what in zip(
                results[-4:-2], (keys, values), ("keys", "values"), strict=True
            ):
                problem = problem_with_tensor(
                    item.value,
                    source[:, :, order],
                    atol=0,
                    rtol=0,
                    what=f"`{what}` read after append 0, looked at after the last append,",
                )
                if problem:
                    return (
                        f"{problem}: the tensor read after the first append should be the "
                        "buffer itself, written in place by every later append"
                    )
            return None

        return Case(check, Call(tuple(steps), shown), judge)


# ---- ch7-ex-position-ids -----------------------------------------------------------------------


def padded_on_both_sides(rng: np.random.Generator, b: int, t: int) -> np.ndarray:
    """A ``(b, t)`` padding mask, pads before and after each row's real tokens (at least one
    row with pads on both sides when ``t >= 3``)."""
    rows = []
    for row in range(b):
        if row == 0 and t >= 3:
            real = int(rng.integers(1, t - 1))  # 1 to t - 2 real tokens
            left = int(rng.integers(1, t - real))  # at least one pad on each side
        else:
            real = int(rng.integers(1, t + 1))
            left = int(rng.integers(0, t - real + 1))
        rows.append([True] * left + [False] * real + [True] * (t - real - left))
    return np.array(rows, dtype=bool)


def positions(padding_mask: np.ndarray, past: np.ndarray) -> np.ndarray:
    """The ids of the real tokens counted one by one (the reference), 0 at every pad."""
    ids = np.zeros(padding_mask.shape, dtype=np.int64)
    for row, mask in enumerate(padding_mask):
        seen = int(past[row])
        for column, is_pad in enumerate(mask):
            if not is_pad:
                ids[row, column] = seen
                seen += 1
    return ids


class PositionIds(GradedExercise):
    label = "ch7-ex-position-ids"
    checks = (
        Check(
            "counts",
            1,
            "ids counted from each row's first real token, 0 at every pad",
            "A real token's id is the number of real tokens before it in its row; a pad gets 0 "
            "wherever it sits, before or after the real tokens. Which running operation over a "
            "row counts what came before?",
        ),
        Check(
            "past",
            1,
            "ids that go on from the tokens already in the cache",
            "Each row goes on from the real tokens in its own cache, and its pads still get "
            "0: work out by hand the ids of one padded row with `past` = 3 and compare them "
            "with what your function gives.",
        ),
        Check(
            "edges",
            1,
            "rows of padding only, rows without padding, one column; integer ids",
            "Try a row that is all padding (every id 0, whatever `past`), a row without any, "
            "and a chunk of one token; the ids must be an integer tensor.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = []
        for _ in range(3):
            b, t = int(rng.integers(2, 6)), int(rng.integers(4, 11))
            mask = padded_on_both_sides(rng, b, t)
            cases.append(self.case("counts", mask, np.zeros(b, dtype=np.int64)))
        for _ in range(3):
            b, t = int(rng.integers(2, 6)), int(rng.integers(3, 11))
            past = rng.integers(1, 30, size=b).astype(np.int64)
            cases.append(self.case("past", padded_on_both_sides(rng, b, t), past))
        t = int(rng.integers(3, 9))
        edges = np.array([[True] * t, [False] * t, [False] * (t - 1) + [True]])
        cases.append(self.case("edges", edges, rng.integers(0, 20, size=3).astype(np.int64)))
        column = np.array([[True], [False], [False]])
        cases.append(self.case("edges", column, np.array([5, 0, 7], dtype=np.int64)))
        return cases

    @staticmethod
    def case(check: str, mask: np.ndarray, past: np.ndarray) -> Case:
        expected = positions(mask, past)

        def judge(results: Sequence[StepResult]) -> str | None:
            got = value_of(results)
            problem = problem_with_tensor(got, expected, atol=0, rtol=0, what="the tensor of ids")
            if problem and isinstance(got, Tensor) and got.shape == expected.shape:
                wrong_pads = (got.array != expected) & mask
                if wrong_pads.any():
                    return "a pad got a nonzero id: every pad gets 0, on either side"
            if problem:
                return problem
            assert isinstance(got, Tensor)
            if got.array.dtype.kind not in "iu":
                return f"the ids should be an integer tensor, got {got.dtype}"
            return None

        rows = ["".join("p" if pad else "x" for pad in row) for row in mask]
        shown = f"rows {' '.join(rows)} (p = pad), past = {past.tolist()}"
        return Case(check, call("shifted_positions", mask, past, shown=shown), judge)


# ---- ch7-ex-online-softmax ---------------------------------------------------------------------


def state_over(scores: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, ...]:
    """``m``, ``ell`` and ``o`` of each row over these scores, from their definitions (the
    reference, in float64): ``(r,)``, ``(r,)``, ``(r, d)``; -inf, 0 and 0 over no visible
    score."""
    scores, values = scores.astype(np.float64), values.astype(np.float64)
    r, d = scores.shape[0], values.shape[1]
    if scores.shape[1] == 0:
        return np.full(r, -np.inf), np.zeros(r), np.zeros((r, d))
    m = scores.max(axis=1)  # (r,)
    safe = np.where(np.isneginf(m), 0.0, m)
    p = np.exp(scores - safe[:, None])  # (r, s), 0 at hidden keys
    return m, p.sum(axis=1), p @ values


class OnlineSoftmax(GradedExercise):
    label = "ch7-ex-online-softmax"
    checks = (
        Check(
            "merge",
            2,
            "the state over both parts' keys, from two parts' states the grader draws",
            "Each part's ell and o were measured from its own maximum: measure both from the "
            "larger one, m = max(m1, m2), before adding them. The part whose maximum is "
            "smaller is scaled down; which part that is changes from row to row.",
        ),
        Check(
            "edges",
            1,
            "parts that saw only hidden keys, one or both; scores near 1000 in float32; "
            "the dtype of the states",
            "A part that saw only hidden keys has m = -inf, ell = 0, o = 0, and may be either "
            "part, or both: subtract 0 instead of m while m is -inf, so that nothing becomes "
            "NaN; every exponent must be at most 0; keep the dtype of the states.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = []
        for _ in range(3):
            r = int(rng.integers(3, 6))
            first = 3 * rng.standard_normal((r, int(rng.integers(1, 7))))
            second = 3 * rng.standard_normal((r, int(rng.integers(1, 7))))
            # Row 0's larger maximum is in the first part, row 1's in the second.
            first[0] += second[0].max() - first[0].max() + rng.uniform(1, 4)
            second[1] += first[1].max() - second[1].max() + rng.uniform(1, 4)
            shown = "row 0's maximum is in the first part, row 1's in the second"
            cases.append(self.case("merge", rng, first, second, shown))
        # Row 0's first part saw only hidden keys, row 1's second, row 2's both; row 3's
        # first part hides some of its keys.
        first = 3 * rng.standard_normal((4, int(rng.integers(2, 6))))
        second = 3 * rng.standard_normal((4, int(rng.integers(1, 6))))
        first[[0, 2]] = -np.inf
        second[[1, 2]] = -np.inf
        first[3, 0] = -np.inf
        shown = "row 0's first part, row 1's second and both of row 2's saw only hidden keys"
        cases.append(self.case("edges", rng, first, second, shown))
        # Scores near 1000, in float32: row 0's second part peaks about 8 higher, row 1's
        # first part about 2 higher.
        first = 1000 + 3 * rng.standard_normal((2, int(rng.integers(2, 7))))
        second = 1000 + 3 * rng.standard_normal((2, int(rng.integers(1, 4))))
        second[0] += first[0].max() - second[0].max() + 8
        first[1] += second[1].max() - first[1].max() + 2
        cases.append(self.case("edges", rng, first, second, "scores near 1000", np.float32))
        # Float32 states: the merged state keeps their dtype.
        first = 3 * rng.standard_normal((3, int(rng.integers(1, 5))))
        second = 3 * rng.standard_normal((3, int(rng.integers(1, 5))))
        cases.append(self.case("edges", rng, first, second, "any two parts", np.float32))
        return cases

    @staticmethod
    def case(
        check: str,
        rng: np.random.Generator,
        first: np.ndarray,
        second: np.ndarray,
        shown: str,
        dtype: type = np.float64,
    ) -> Case:
        """Merge the states of two parts of the same rows' keys (the student sees only the
        states, never the scores)."""
        r, d = first.shape[0], int(rng.integers(1, 4))
        first, second = first.astype(dtype), second.astype(dtype)
        values = [rng.standard_normal((part.shape[1], d)).astype(dtype) for part in (first, second)]
        states = [state_over(part, v) for part, v in zip((first, second), values, strict=True)]
        sent = [x.astype(dtype) for state in states for x in state]
        expected = state_over(np.concatenate([first, second], axis=1), np.concatenate(values))
        name = dtype_name(first)
        atol, rtol = (1e-9, 1e-9) if dtype == np.float64 else (1e-4, 1e-4)

        def judge(results: Sequence[StepResult]) -> str | None:
            got, why = tensors(value_of(results), 3, "the triple (m, ell, o)")
            if why:
                return why
            assert got is not None
            for item, want, what in zip(got, expected, ("m", "ell", "o"), strict=True):
                problem = problem_with_tensor(
                    item, want, atol=atol, rtol=rtol, dtype=name, what=f"the merged `{what}`"
                )
                if problem:
                    if what != "m" and isinstance(item, Tensor) and np.isnan(item.array).any():
                        return (
                            f"the merged `{what}` is NaN: where both parts saw only hidden "
                            "keys, m is -inf and e^(m1 - m) is e^(-inf + inf)"
                        )
                    return problem
            return None

        sizes = f"{first.shape[1]} and {second.shape[1]} keys"
        described = f"r = {r}, parts of {sizes}, d = {d}, {name}: {shown}"
        return Case(check, call("merge_states", *sent, shown=described), judge)


# ---- ch7-ex-group-heads ------------------------------------------------------------------------


def grouped_by_heads(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Grouped-query attention after a cache, one query head at a time (the reference): the
    output ``(b, h, t, d_h)`` and the folded scores ``(b, h_kv, g t, s)``."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    b, h, t, d_h = q.shape
    h_kv, s = k.shape[1], k.shape[2]
    g = h // h_kv
    hidden = np.arange(s)[None, :] > (s - t + np.arange(t))[:, None]  # (t, s)
    scores = np.empty((b, h, t, s))
    out = np.empty((b, h, t, d_h))
    for head in range(h):
        head_scores = q[:, head] @ k[:, head // g].transpose(0, 2, 1) / math.sqrt(d_h)
        head_scores[:, hidden] = -np.inf
        exps = np.exp(head_scores - head_scores.max(axis=-1, keepdims=True))
        out[:, head] = exps / exps.sum(axis=-1, keepdims=True) @ v[:, head // g]
        scores[:, head] = head_scores
    return out, scores.reshape(b, h_kv, g * t, s)


class FoldedAttention(GradedExercise):
    label = "ch7-ex-group-heads"
    checks = (
        Check(
            "output",
            1,
            "the output of grouped-query attention after a cache",
            "Which key/value head does each query head read, and which keys may each new "
            "query see after the cache? Compare your output with plain attention computed "
            "one query head at a time, as in chapter 4, on a small case.",
        ),
        Check(
            "scores",
            1,
            "the scaled scores of the folded product, -inf where hidden",
            "Which query, at which position, sits in each row of the folded matrix? Fill a "
            "small q with each query's position, fold it as your code does and read the rows: "
            "each row must hide the keys after the position it holds.",
        ),
        Check(
            "edges",
            1,
            "one new token, h_kv = h, h_kv = 1, float32",
            "Try t = 1 (one decoding step: every key visible), g = 1 (multi-head attention) "
            "and h_kv = 1 (one key/value head for every query head), and keep the dtype of q.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = []
        for check in ("output", "scores"):
            for _ in range(2):
                h_kv, g = int(rng.integers(1, 4)), int(rng.integers(2, 4))
                t = int(rng.integers(2, 6))
                shape = (int(rng.integers(1, 3)), g * h_kv, h_kv, t, t + int(rng.integers(1, 5)))
                cases.append(self.case(check, rng, shape, np.float64))
        b = int(rng.integers(1, 3))
        cases.append(self.case("edges", rng, (b, 4, 2, 1, int(rng.integers(3, 8))), np.float64))
        cases.append(self.case("edges", rng, (b, 3, 3, 3, 5), np.float64))
        cases.append(self.case("edges", rng, (b, 4, 1, 3, 3), np.float32))
        return cases

    @staticmethod
    def case(check: str, rng: np.random.Generator, shape: tuple[int, ...], dtype: type) -> Case:
        b, h, h_kv, t, s = shape
        d_h = int(rng.integers(2, 6))
        q = rng.standard_normal((b, h, t, d_h)).astype(dtype)
        k = rng.standard_normal((b, h_kv, s, d_h)).astype(dtype)
        v = rng.standard_normal((b, h_kv, s, d_h)).astype(dtype)
        out, scores = grouped_by_heads(q, k, v)
        name = dtype_name(q)
        atol = 1e-9 if dtype == np.float64 else 2e-5

        def judge(results: Sequence[StepResult]) -> str | None:
            got, why = tensors(value_of(results), 2, "the pair (output, scores)")
            if why:
                return why
            assert got is not None
            if check in ("output", "edges"):
                problem = problem_with_tensor(got[0], out, atol=atol, dtype=name, what="the output")
                if problem:
                    return problem
            if check in ("scores", "edges"):
                folded = got[1]
                if folded.shape == scores.shape:
                    hidden = np.isneginf(scores)
                    if not np.array_equal(np.isneginf(folded.array), hidden):
                        return "the -inf of the scores are not at the keys each row must not see"
                    kept = np.where(hidden, 0.0, folded.array.astype(np.float64))
                    folded = Tensor(kept, folded.dtype)
                    problem = problem_with_tensor(
                        folded, np.where(hidden, 0.0, scores), atol=atol, dtype=name,
                        what="the tensor of scores",
                    )  # fmt: skip
                else:
                    problem = problem_with_tensor(folded, scores, what="the tensor of scores")
                if problem:
                    return problem
            return None

        shown = f"b = {b}, h = {h}, h_kv = {h_kv}, t = {t}, s = {s}, d_h = {d_h}, {name}"
        return Case(check, call("folded_attention", q, k, v, shown=shown), judge)


# ---- ch7-ex-which-path -------------------------------------------------------------------------


def chunked_peak(tokens: int, heads: int, bytes_per_number: int, chunk: int) -> int:
    """Bytes of the (1, h, rows, keys) scores and weights of the largest chunk (the
    reference): chunk k's queries see every key up to its last one."""
    largest = 0
    for start in range(0, tokens, chunk):
        end = min(start + chunk, tokens)
        largest = max(largest, (end - start) * end)
    return 2 * heads * largest * bytes_per_number


class ExplicitPeak(GradedExercise):
    label = "ch7-ex-which-path"
    manual_points = 1
    rubric = (
        "1 point: a workable way to see the weights that never forms a (t, t) matrix, e.g. "
        "keep the fused path and, under torch.no_grad(), recompute from that layer's queries "
        "and keys (a forward hook calling its project) the weights of the heads and the few "
        "query rows to plot: a (rows, t) slice per head; or feed the prompt in chunks through "
        "KV caches on the explicit path and keep only the rows to plot from each chunk's "
        "(chunk, s) weights."
    )
    checks = (
        Check(
            "one_pass",
            1,
            "the peak of the scores and weights for a prompt in one pass",
            "Which (1, h, t, t) tensors of the explicit attend are alive at the same moment? "
            "Under torch.no_grad(), is anything of one layer still held when the next runs?",
        ),
        Check(
            "chunks",
            1,
            "the peak when the prompt goes through KV caches in chunks",
            "A chunk's queries meet every key cached so far, their own included: compare the "
            "last full chunk with the shorter last one.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = []
        for _ in range(3):
            tokens = int(rng.integers(1_000, 40_000))
            chunk = tokens + int(rng.integers(0, 2)) * int(rng.integers(1, 5000))
            cases.append(self.case("one_pass", rng, tokens, chunk))
        for partial_wins in (False, True, False):
            while True:
                chunk = int(rng.integers(64, 4096))
                tokens = chunk * int(rng.integers(2, 12)) + int(rng.integers(1, chunk))
                full = (tokens // chunk) * chunk * chunk
                partial = (tokens % chunk) * tokens
                if (partial > full) == partial_wins:
                    break
            cases.append(self.case("chunks", rng, tokens, chunk))
        return cases

    @staticmethod
    def case(check: str, rng: np.random.Generator, tokens: int, chunk: int) -> Case:
        heads = int(rng.integers(1, 33))
        layers = int(rng.integers(2, 49))
        size = int(rng.choice([2, 4, 8]))
        expected = chunked_peak(tokens, heads, size, chunk)

        def judge(results: Sequence[StepResult]) -> str | None:
            got = value_of(results)
            if isinstance(got, Raised):
                return f"it raised {got.type_name}: {got.message}"
            if isinstance(got, Tensor) and got.array.size == 1:
                got = got.array.reshape(()).item()
            if isinstance(got, bool) or not isinstance(got, int | float):
                return f"expected a number of bytes, got {describe(got)}"
            if math.isclose(got, expected, rel_tol=1e-6):
                return None
            if math.isclose(got, expected * layers, rel_tol=1e-6):
                return "the estimate grows with the number of layers"
            if math.isclose(got, expected / 2, rel_tol=1e-6):
                return "the estimate counts one of the tensors alive at once"
            return f"the estimate {got:.4g} is not the peak"

        shown = (
            f"tokens = {tokens}, heads = {heads}, layers = {layers}, "
            f"bytes_per_number = {size}, chunk = {chunk}"
        )
        return Case(
            check,
            call("explicit_peak_bytes", tokens, heads, layers, size, chunk, shown=shown),
            judge,
        )


EXERCISES = [RollingCache, PositionIds, OnlineSoftmax, FoldedAttention, ExplicitPeak]
