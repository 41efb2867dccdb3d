"""Chapter 8, "A fused attention kernel": the graded exercises (grader only, never shipped).

Each answer is a ``@triton.jit`` kernel with a fixed signature. The grader never calls it in
the student's kernel: it reads the kernel's source out of the notebook, compiles it for a GPU
and launches it in Triton's interpreter in a fresh sandboxed process, with its own grid
``(cdiv(t, BLOCK), b * h)``, its own block size (16 or 32) and head size, on float32 inputs
it drew here, lengths that are not multiples of the block (``tools/grader/kernels.py``). Every
input lies between NaN, every output starts as NaN between sentinels, and every load and store
is checked lane by lane (masked lanes excepted): a kernel that reads past a tensor, writes past
it or leaves rows unwritten shows it. Memory touched outside the kernel's own (a read outside
every tensor it got, a store outside its output or into an input), which the page forbids ("It
must never read or write past a tensor"), costs the exercise's main check (window, lengths,
groups) only: the other check judges what its title says, on a right output. The references
are attention in float64, computed here. The *skips* checks read which key and value elements
each program's loads addressed (masked lanes included): a kernel that visits a key block it
should skip fails, even when a mask keeps its numbers out. The *lengths* check reads which
ones a live lane read: a kernel that reads padding fails, even when it throws it away.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from grader.spec import (
    Case,
    Check,
    Input,
    Judge,
    KernelExercise,
    Launch,
    Output,
    StepResult,
    launched,
)

LOG2E = 1.4426950408889634
# The parameters every kernel starts and ends with: the tensors it reads; the scale of the
# scores (log2(e) / sqrt(D), for tl.exp2), then its block and head sizes.
QKV = ("q_ptr", "k_ptr", "v_ptr")
SCALE = ("qk_scale", "BLOCK", "D")


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def sizes(rng: np.random.Generator) -> tuple[int, int]:
    """The block size and head size of a variant: one pair, so that one compile serves."""
    return int(rng.choice([16, 32])), int(rng.choice([16, 32]))


def ragged(rng: np.random.Generator, block: int, low: int, high: int) -> int:
    """A length of ``low`` to ``high - 1`` blocks and a part of one more: never a multiple."""
    return int(rng.integers(low, high)) * block + int(rng.integers(1, block))


def normal(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, hidden: np.ndarray) -> np.ndarray:
    """Attention in float64: ``hidden`` (broadcast to (..., t, s)) True where a query does not
    see a key; every query sees at least one."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])  # (b, h, t, s)
    scores = np.where(hidden, -np.inf, scores)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (weights / weights.sum(axis=-1, keepdims=True)) @ v  # (b, h, t, d)


def output_problem(got: np.ndarray, expected: np.ndarray) -> str | None:
    """Why the output is not attention's, where first (batch, head, query), or None."""
    if np.isnan(got).all():
        return "the kernel wrote no output (every number is still the NaN it started as)"
    wrong = np.isnan(got) | ~np.isclose(got, expected, atol=1e-5, rtol=1e-4)
    if not wrong.any():
        return None
    b, h, row, _ = (int(i) for i in np.argwhere(wrong)[0])
    rows = int(wrong.any(axis=-1).sum())
    where = f"{rows} query row(s) wrong, the first at batch {b}, head {h}, query {row}"
    if np.isnan(got).any():
        return f"{where}: NaN (never written, or a NaN read or made on the way)"
    gap = float(np.abs(got - expected)[wrong].max())
    return f"{where}: off by up to {gap:.3g}"


def judge_of(
    launch: Launch,
    expected: np.ndarray,
    names: tuple[str, ...],
    main: bool,
    needed: np.ndarray | None = None,
    lengths: Sequence[int] | None = None,
) -> Judge:
    """The judge of one launch: where it is a case of the exercise's ``main`` check, the memory
    the kernel touched outside its tensors (``names``: its parameters); its output against
    ``expected``; then, where ``needed`` is given (``needed[qb, bh]``: the first and last key
    any query of program (qb, bh) sees), the loads of its traced keys and values against the
    blocks that hold those keys; where ``lengths`` is given, what they read against the
    padding."""
    keys = [arg for arg in launch.args if isinstance(arg, Input) and arg.traced]
    block = launch.constexprs["BLOCK"]

    def judge(results: Sequence[StepResult]) -> str | None:
        done = launched(results, launch, names, trespass=main)
        if isinstance(done, str):
            return done
        problem = output_problem(done.outputs[0], expected)
        if problem and needed is not None:
            return f"{problem}: skipping is judged on a right output"
        if problem:
            return problem
        for index, spec in enumerate(keys):  # the keys, then the values
            what = ("keys", "values")[index]
            if needed is not None:
                _, _, s, d = spec.array.shape
                problem = outside(done.addressed[index], spec.pad, s, d, block, needed, what)
            if lengths is not None and not problem:
                shape = spec.array.shape
                problem = padding_read(done.read[index], spec.pad, shape, lengths, block, what)
            if problem:
                return problem
        return None

    return judge


def padding_read(
    read: np.ndarray,
    pad: int,
    shape: tuple[int, ...],
    lengths: Sequence[int],
    block: int,
    what: str,
) -> str | None:
    """Why a program read padding (a live lane at a key position at or past the length of its
    batch element), or None. ``read`` is (query blocks, b * h, 1, buffer elements) for a
    ``shape`` (b, h, s, d) tensor; what lies outside the tensor is judged as a stray read."""
    b, h, s, d = shape
    qb, bh, _, element = np.nonzero(read)
    element = element - pad
    inside = (element >= 0) & (element < b * h * s * d)
    qb, bh, element = qb[inside], bh[inside], element[inside]
    position, batch = element // d % s, element // (h * s * d)
    padding = position >= np.asarray(lengths)[batch]
    if not padding.any():
        return None
    i = int(np.argmax(padding))
    q0 = int(qb[i]) * block
    return (
        f"the program of queries {q0}-{q0 + block - 1} of head {bh[i]} reads the {what} of "
        f"position {position[i]} of batch element {batch[i]}, padding (its length is "
        f"{lengths[batch[i]]}), even if it throws them away"
    )


def outside(
    touched: np.ndarray, pad: int, s: int, d: int, block: int, needed: np.ndarray, what: str
) -> str | None:
    """Why a program's loads addressed a block of keys (or values) it never needs, or None.

    ``touched`` is (query blocks, b * h, 1, buffer elements) for a (b, h, s, d) tensor.
    Positions are counted from the program's own head, so that the masked lanes of a ragged
    last block (which point past its head) count as that block."""
    for qb in range(touched.shape[0]):
        for bh in range(touched.shape[1]):
            elements = np.flatnonzero(touched[qb, bh, 0]) - pad
            if elements.size == 0:
                continue
            position = elements // d - bh * s
            first, last = needed[qb, bh]
            key_blocks = np.unique(position // block)
            unneeded = key_blocks[(key_blocks < first // block) | (key_blocks > last // block)]
            if unneeded.size:
                start = int(unneeded[0]) * block
                q0 = qb * block
                return (
                    f"the program of queries {q0}-{q0 + block - 1} of head {bh} loads the "
                    f"{what} of positions {start}-{start + block - 1}, a block none of its "
                    f"queries sees (they see keys {first}-{last})"
                )
    return None


# ---- ch8-ex-sliding-window --------------------------------------------------------------------


class SlidingWindow(KernelExercise):
    label = "ch8-ex-sliding-window"
    kernel = "window_kernel"
    parameters = (*QKV, "out_ptr", "t", "window", *SCALE)
    constexprs = ("BLOCK", "D")
    checks = (
        Check(
            "window",
            2,
            "each query attends to its last `window` keys, its own included, at any length",
            "Compare your kernel with attention written out in torch, with the window's mask, "
            "on a length that is not a multiple of BLOCK and on windows of 1, of less than a "
            "block and of more: look at the first and last rows of each block. A row that sees "
            "none of a block's keys must take nothing from it, and no NaN either.",
        ),
        Check(
            "skips",
            1,
            "no program loads a block of keys or values outside the windows of its queries",
            "For one block of queries, work out the first key its first row sees and the last "
            "key its last row sees: only the key blocks between them are needed. Print the "
            "range your loop runs over for each block of queries, on a small example.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        block, d = sizes(rng)
        cases = []
        t = ragged(rng, block, 2, 4)
        windows = [1, int(rng.integers(2, block)), int(rng.integers(block + 1, 2 * block))]
        for window in windows:
            cases.append(self.case("window", rng, block, d, t, window, traced=False))
        cases.append(self.case("window", rng, block, d, t, t + int(rng.integers(0, 9)), False))
        t = ragged(rng, block, 3, 5)
        cases.append(self.case("skips", rng, block, d, t, int(rng.integers(2, block)), True))
        return cases

    @staticmethod
    def case(
        check: str,
        rng: np.random.Generator,
        block: int,
        d: int,
        t: int,
        window: int,
        traced: bool,
    ) -> Case:
        b, h = int(rng.integers(1, 3)), int(rng.integers(1, 3))
        q, k, v = (normal(rng, b, h, t, d) for _ in range(3))
        pad = 4 * block * d
        query, key = np.arange(t)[:, None], np.arange(t)[None, :]
        expected = attention(q, k, v, (key > query) | (key <= query - window))
        launch = Launch(
            (cdiv(t, block), b * h, 1),
            (
                Input(q, pad),
                Input(k, pad, traced=traced),
                Input(v, pad, traced=traced),
                Output((b, h, t, d), pad),
                t,
                window,
                d**-0.5 * LOG2E,
            ),
            {"BLOCK": block, "D": d},
            f"b = {b}, h = {h}, t = {t}, window {window}, BLOCK = {block}, D = {d}",
        )
        rows = np.arange(0, cdiv(t, block) * block, block)
        needed = np.stack(
            [np.maximum(rows - window + 1, 0), np.minimum(rows + block - 1, t - 1)], axis=-1
        )
        needed = np.repeat(needed[:, None], b * h, axis=1)
        main = check == "window"
        judge = judge_of(launch, expected, SlidingWindow.parameters, main, None if main else needed)
        return Case(check, launch, judge)


# ---- ch8-ex-key-lengths -----------------------------------------------------------------------


class KeyLengths(KernelExercise):
    label = "ch8-ex-key-lengths"
    kernel = "lengths_kernel"
    parameters = (*QKV, "lengths_ptr", "out_ptr", "h", "t", "s", *SCALE)
    constexprs = ("BLOCK", "D")
    checks = (
        Check(
            "lengths",
            2,
            "each batch element attends to its own real keys; the padding is never read",
            "Each program reads the length of its own batch element; every key at or past it is "
            "padding, whose memory may hold anything (here NaN). Try a length in the middle of a "
            "block, one on a block's boundary, the whole of s, and 1.",
        ),
        Check(
            "skips",
            1,
            "no program visits a key block that holds no real key",
            "Which key blocks hold at least one real key of a batch element? Print how many "
            "blocks each program's loop visits, on a small example with a short length.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        block, d = sizes(rng)
        cases = []
        for _ in range(2):
            s = ragged(rng, block, 2, 4)
            lengths = [s, 1, block * int(rng.integers(1, s // block + 1))]
            lengths.append(int(rng.integers(2, s)))
            cases.append(self.case("lengths", rng, block, d, s, lengths))
        s = ragged(rng, block, 2, 4)
        short = [int(rng.integers(1, block + 1)), int(rng.integers(block + 1, 2 * block)), s]
        cases.append(self.case("skips", rng, block, d, s, short))
        return cases

    @staticmethod
    def case(
        check: str,
        rng: np.random.Generator,
        block: int,
        d: int,
        s: int,
        lengths: list[int],
    ) -> Case:
        b, h = len(lengths), int(rng.integers(1, 3))
        t = ragged(rng, block, 1, 3)
        q = normal(rng, b, h, t, d)
        k, v = normal(rng, b, h, s, d), normal(rng, b, h, s, d)
        real = np.arange(s)[None, :] < np.array(lengths)[:, None]  # (b, s)
        expected = attention(q, k, v, ~real[:, None, None, :])
        padding = np.broadcast_to(~real[:, None, :], (b, h, s))
        k[padding], v[padding] = np.nan, np.nan  # a load of the padding poisons its row
        pad = 4 * block * d
        launch = Launch(
            (cdiv(t, block), b * h, 1),
            (
                Input(q, pad),
                Input(k, pad, traced=True),  # the lengths check judges what is read
                Input(v, pad, traced=True),
                Input(np.array(lengths, dtype=np.int32), pad, fill=-1),
                Output((b, h, t, d), pad),
                h,
                t,
                s,
                d**-0.5 * LOG2E,
            ),
            {"BLOCK": block, "D": d},
            f"b = {b}, h = {h}, t = {t}, s = {s}, lengths {lengths}, BLOCK = {block}, D = {d}",
        )
        last = np.array(lengths)[np.arange(b * h) // h] - 1  # (b h,): the last real key
        needed = np.stack([np.zeros_like(last), last], axis=-1)
        needed = np.repeat(needed[None], cdiv(t, block), axis=0)
        names = KeyLengths.parameters
        if check == "lengths":
            judge = judge_of(launch, expected, names, True, lengths=lengths)
        else:
            judge = judge_of(launch, expected, names, False, needed=needed)
        return Case(check, launch, judge)


# ---- ch8-ex-grouped-heads ---------------------------------------------------------------------


class GroupedHeads(KernelExercise):
    label = "ch8-ex-grouped-heads"
    kernel = "grouped_kernel"
    parameters = (*QKV, "out_ptr", "h", "h_kv", "t", "s", *SCALE)
    constexprs = ("BLOCK", "D")
    checks = (
        Check(
            "groups",
            2,
            "each query head reads the key/value head of its group, in place",
            "Write down, for h = 6 and h_kv = 2, which key/value head each query head reads "
            "(chapter 7), then where that head starts in k, whose batch elements hold h_kv "
            "heads each, not h.",
        ),
        Check(
            "edges",
            1,
            "one key/value head for every query head, and one per query head",
            "Check your head arithmetic at its two ends, where you know the answer: every "
            "query head sharing one key/value head (multi-query), and none sharing "
            "(multi-head, chapter 4).",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        block, d = sizes(rng)
        shared = [(4, 2), (6, 2), (6, 3)]
        chosen = rng.choice(len(shared), size=2, replace=False)
        cases = [self.case("groups", rng, block, d, *shared[int(i)]) for i in chosen]
        cases.append(self.case("edges", rng, block, d, int(rng.integers(2, 5)), 1))
        heads = int(rng.integers(2, 4))
        cases.append(self.case("edges", rng, block, d, heads, heads))
        return cases

    @staticmethod
    def case(check: str, rng: np.random.Generator, block: int, d: int, h: int, h_kv: int) -> Case:
        b = 2
        t, s = ragged(rng, block, 1, 3), ragged(rng, block, 1, 3)
        q = normal(rng, b, h, t, d)
        k, v = normal(rng, b, h_kv, s, d), normal(rng, b, h_kv, s, d)
        group = h // h_kv
        expanded = (np.repeat(x, group, axis=1) for x in (k, v))  # (b, h, s, d)
        expected = attention(q, *expanded, np.zeros((t, s), dtype=bool))
        pad = 4 * block * d
        tensors = (Input(q, pad), Input(k, pad), Input(v, pad), Output((b, h, t, d), pad))
        launch = Launch(
            (cdiv(t, block), b * h, 1),
            (*tensors, h, h_kv, t, s, d**-0.5 * LOG2E),
            {"BLOCK": block, "D": d},
            f"b = {b}, h = {h}, h_kv = {h_kv}, t = {t}, s = {s}, BLOCK = {block}, D = {d}",
        )
        main = check == "groups"
        return Case(check, launch, judge_of(launch, expected, GroupedHeads.parameters, main))


EXERCISES = [SlidingWindow, KeyLengths, GroupedHeads]
