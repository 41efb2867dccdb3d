"""Chapter 3, "Causal attention and dropout": the graded exercises (grader only, never shipped).

Each draws a student's inputs from their variant's generator, has the student's code called
on them in the student's kernel, and judges what comes back against a reference computed here
in float64. The answers are variations that neither torch nor the course package computes: a
sliding window with attention sinks, dropout before the renormalisation and its exact
expectation, the weights of a left-padded causal batch, dropout from given random numbers and
per-row rates, and the dependence of a module's outputs on its inputs, measured from outside.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
from grader.spec import (
    FLOAT,
    ROLES,
    Call,
    Case,
    Check,
    GradedExercise,
    Module,
    Raised,
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


def tolerance(array: np.ndarray) -> float:
    return 1e-9 if array.dtype == np.float64 else 2e-5


def softmax_hidden(scores: np.ndarray, hide: np.ndarray) -> np.ndarray:
    """The softmax over the keys ``hide`` leaves visible, in float64; a row with every key
    hidden is all zeros."""
    wide = np.where(hide, -np.inf, scores.astype(np.float64))
    top = wide.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    exps = np.exp(wide - top)  # hidden keys: exp(-inf) = 0
    total = exps.sum(axis=-1, keepdims=True)
    return np.where(total > 0, exps / np.where(total > 0, total, 1.0), 0.0)


def causal(size: int) -> np.ndarray:
    """True strictly above the diagonal: the future."""
    return np.triu(np.ones((size, size), dtype=bool), k=1)


def unchanged(results: Sequence[StepResult], sent: np.ndarray, what: str) -> str | None:
    """Why the argument ``sent`` came back changed from the call, or None."""
    arguments = results[0].arguments
    if not arguments or not isinstance(arguments[0], Tensor):
        return None
    if not np.array_equal(arguments[0].array, sent, equal_nan=True):
        return f"{what} changed {what.split()[-1]} in place: work on a copy"
    return None


# ---- ch3-ex-sliding-window --------------------------------------------------------------------


def window_reference(t: int, window: int, sinks: int) -> np.ndarray:
    i = np.arange(t)[:, None]  # (t, 1) queries
    j = np.arange(t)[None, :]  # (1, t) keys
    return (j > i) | ((j < i - window) & (j >= sinks))  # (t, t), True = hidden


class SlidingWindow(GradedExercise):
    label = "ch3-ex-sliding-window"
    checks = (
        Check(
            "window",
            1,
            "window_mask hides the future and the keys more than `window` back",
            "Compare a column of query positions i with a row of key positions j: hide "
            "j > i, and j < i - window. Try window = 0 and a window longer than the text.",
        ),
        Check(
            "sinks",
            1,
            "window_mask keeps the first `sinks` keys visible, but never in the future",
            "A sink is a key j < sinks: the distant past stays hidden except at the sinks, "
            "and the future stays hidden, sinks included (query 0 sees only itself).",
        ),
        Check(
            "weights",
            1,
            "window_attention: the softmax over the visible keys, any leading dimensions",
            "Fill the hidden scores with -inf before the softmax (not after it), on scores "
            "(..., t, t) of any dtype, without changing the scores you were given.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = []
        for _ in range(3):
            t = int(rng.integers(6, 13))
            cases.append(self.mask_case("window", t, int(rng.integers(1, t - 2)), 0))
        t = int(rng.integers(4, 9))
        cases.append(self.mask_case("window", t, 0, 0))
        cases.append(self.mask_case("window", t, t + int(rng.integers(0, 3)), 0))
        for _ in range(3):
            t = int(rng.integers(7, 13))
            window, sinks = int(rng.integers(1, t - 4)), int(rng.integers(1, 4))
            cases.append(self.mask_case("sinks", t, window, sinks))
        t = int(rng.integers(5, 9))
        cases.append(self.mask_case("sinks", t, 0, int(rng.integers(2, 4))))
        cases.append(self.mask_case("sinks", t, 1, t))
        for shape, dtype in (
            ((int(rng.integers(1, 3)), int(rng.integers(1, 4))), np.float32),
            ((), np.float64),
            ((int(rng.integers(1, 4)),), np.float32),
        ):
            t = int(rng.integers(5, 11))
            scores = (rng.standard_normal((*shape, t, t)) * rng.uniform(1, 20)).astype(dtype)
            window, sinks = int(rng.integers(0, t - 2)), int(rng.integers(0, 3))
            cases.append(self.weights_case(scores, window, sinks))
        return cases

    @staticmethod
    def mask_case(check: str, t: int, window: int, sinks: int) -> Case:
        expected = window_reference(t, window, sinks)
        shown = f"t = {t}, window = {window}, sinks = {sinks}"

        def judge(results: Sequence[StepResult]) -> str | None:
            got = value_of(results)
            if isinstance(got, Tensor) and got.shape == expected.shape:
                values = got.array.astype(bool)
                if np.array_equal(values, ~expected):
                    return "the mask is inverted: True must mean hidden"
            return problem_with_tensor(got, expected, dtype="torch.bool", what="the mask")

        return Case(check, call("window_mask", t, window, sinks, shown=shown), judge)

    @staticmethod
    def weights_case(scores: np.ndarray, window: int, sinks: int) -> Case:
        t = scores.shape[-1]
        expected = softmax_hidden(scores, window_reference(t, window, sinks))
        dtype, atol = dtype_name(scores), tolerance(scores)
        shown = f"scores {scores.shape}, {dtype}, window = {window}, sinks = {sinks}"
        sent = scores.copy()

        def judge(results: Sequence[StepResult]) -> str | None:
            problem = problem_with_tensor(
                value_of(results), expected, atol=atol, dtype=dtype, what="the weight tensor"
            )
            return problem or unchanged(results, sent, "window_attention changed its scores")

        step = Step("window_attention", None, (scores, window, sinks), arguments_after=True)
        return Case("weights", Call((step,), shown), judge)


# ---- ch3-ex-dropout-order ---------------------------------------------------------------------


def drop_then_renormalise(masked: np.ndarray, keep: np.ndarray) -> np.ndarray:
    dropped = masked.astype(np.float64) * keep
    sums = dropped.sum(axis=-1, keepdims=True)
    return np.where(sums > 0, dropped / np.where(sums > 0, sums, 1.0), 0.0)


def expected_drop_first(row: np.ndarray, p: float) -> np.ndarray:
    """The exact expectation of dropping, then renormalising, one row: every pattern of its
    visible keys, weighted by its probability; a pattern that drops them all gives zeros."""
    wide = row.astype(np.float64)
    visible = np.flatnonzero(wide)
    expected = np.zeros_like(wide)
    for kept in itertools.product((False, True), repeat=len(visible)):
        chosen = visible[list(kept)]
        if not len(chosen):
            continue
        chance = (1 - p) ** len(chosen) * p ** (len(visible) - len(chosen))
        expected[chosen] += chance * wide[chosen] / wide[chosen].sum()
    return expected


class DropoutOrder(GradedExercise):
    label = "ch3-ex-dropout-order"
    manual_points = 1
    rubric = (
        "Dropout after the renormalisation keeps each weight's expected value (kept with "
        "probability 1 - p, scaled by 1 / (1 - p)). Before it, the factor 1 / (1 - p) cancels "
        "in the division: the survivors are rescaled by whatever makes up for the weight "
        "dropped in their row, a row that loses every visible weight has nothing left, and "
        "on average a row of n visible keys sums to 1 - p^n, not 1 (the first token's row "
        "to 1 - p)."
    )
    checks = (
        Check(
            "before",
            1,
            "drop_then_renormalise: dropout, then each row divided by its own sum",
            "Multiply by keep first, then divide each row by its sum (keepdim=True); a row "
            "whose sum is 0 has no weight left and comes out as zeros, not nan.",
        ),
        Check(
            "expected",
            2,
            "expected_drop_first: the exact expected weights when dropout comes first",
            "Go through every way to keep or drop the visible keys (itertools.product): its "
            "probability is (1 - p) per kept key times p per dropped one, and it gives the "
            "kept weights divided by their sum. Add them up, weighted by probability.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = [
            self.before_case(rng, (int(rng.integers(2, 4)),), np.float32),
            self.before_case(rng, (int(rng.integers(1, 3)), int(rng.integers(2, 4))), np.float32),
            self.before_case(rng, (), np.float64),
        ]
        for dtype in (np.float64, np.float64, np.float32):
            s = int(rng.integers(4, 9))
            row = self.row(rng, s, int(rng.integers(2, min(s, 7) + 1)), dtype)
            cases.append(self.expected_case(row, round(float(rng.uniform(0.1, 0.8)), 3)))
        s = int(rng.integers(3, 7))
        cases.append(self.expected_case(self.row(rng, s, 1, np.float64), 0.25))
        cases.append(self.expected_case(self.row(rng, s, s, np.float64), 0.0))
        return cases

    @staticmethod
    def row(rng: np.random.Generator, s: int, visible: int, dtype: type) -> np.ndarray:
        """A row of way 1's weights: ``visible`` positive entries, the others 0."""
        weights = np.exp(rng.standard_normal(s))
        weights /= weights.sum()
        shown = rng.permutation(s)[:visible]
        row = np.zeros(s)
        row[shown] = weights[shown]
        return row.astype(dtype)

    @staticmethod
    def before_case(rng: np.random.Generator, lead: tuple[int, ...], dtype: type) -> Case:
        t, s = int(rng.integers(4, 8)), int(rng.integers(4, 8))
        scores = rng.standard_normal((*lead, t, s))
        weights = np.exp(scores) / np.exp(scores).sum(axis=-1, keepdims=True)
        visible = rng.random((*lead, t, s)) < 0.7
        visible[..., 0, :] = False  # a row hidden already
        visible[..., 1, :2] = True  # a row that dropout will empty
        p = float(rng.choice([0.25, 0.4, 0.5, 0.6]))
        keep = (rng.random((*lead, t, s)) >= p) / (1 - p)
        keep[..., 1, :] = 0.0
        keep[..., 2, :] = 1 / (1 - p)  # a row that keeps everything
        masked = (weights * visible).astype(dtype)
        keep = keep.astype(dtype)
        expected = drop_then_renormalise(masked, keep)
        dtype_ = dtype_name(masked)
        shown = f"masked {masked.shape}, {dtype_}, p = {p}"
        return Case(
            "before",
            call("drop_then_renormalise", masked, keep, shown=shown),
            lambda r: problem_with_tensor(
                value_of(r), expected, atol=tolerance(masked), dtype=dtype_
            ),
        )

    @staticmethod
    def expected_case(row: np.ndarray, p: float) -> Case:
        expected = expected_drop_first(row, p)
        dtype = dtype_name(row)
        atol = 1e-7 if row.dtype == np.float64 else 2e-5
        visible = int((row != 0).sum())
        shown = f"a row of {row.size} weights, {visible} visible, p = {p}, {dtype}"
        return Case(
            "expected",
            call("expected_drop_first", row, p, shown=shown),
            lambda r: problem_with_tensor(value_of(r), expected, atol=atol, dtype=dtype),
        )


# ---- ch3-ex-all-masked ------------------------------------------------------------------------


def left_padding(t: int, lengths: np.ndarray) -> np.ndarray:
    """(b, t), True at the padding: the first t - length positions of each sequence."""
    return np.arange(t)[None, :] < (t - lengths)[:, None]


class AllMasked(GradedExercise):
    label = "ch3-ex-all-masked"
    manual_points = 1
    rubric = (
        "A row of only -inf gives nan: 0 / 0, and the stable softmax computes -inf - (-inf) = "
        "nan. triu(..., diagonal=0) also hides the diagonal, so the first token has no key "
        "left; causal_mask keeps the diagonal visible, so every row keeps at least one key."
    )
    checks = (
        Check(
            "real",
            2,
            "the weights of every real query: causal, and blind to the padding",
            "Build the padding mask from the lengths (sequence k starts with t - lengths[k] "
            "padding tokens), give it a dimension for the queries, and OR it with the causal "
            "mask: (b, 1, t) | (t, t) -> (b, t, t). Then fill with -inf and softmax.",
        ),
        Check(
            "padding",
            1,
            "a padding query's row is all zeros, with no nan anywhere",
            "A padding query sees only padding keys, so every key of its row is hidden and "
            "the softmax gives nan: find those rows from the mask and set them to zero. Keep "
            "the dtype of the scores.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = []
        for scale in (2.0, 2.0, 300.0):
            b, t = int(rng.integers(2, 5)), int(rng.integers(4, 10))
            lengths = rng.integers(1, t + 1, size=b)
            lengths[0] = t  # one sequence without padding
            lengths[1] = int(rng.integers(1, t))  # and one with some
            scores = (rng.standard_normal((b, t, t)) * scale).astype(np.float32)
            cases.append(self.case("real", scores, lengths))
        for dtype in (np.float32, np.float64):
            b, t = int(rng.integers(2, 4)), int(rng.integers(4, 9))
            lengths = rng.integers(1, t, size=b)
            lengths[-1] = 1
            cases.append(
                self.case("padding", rng.standard_normal((b, t, t)).astype(dtype), lengths)
            )
        return cases

    @staticmethod
    def case(check: str, scores: np.ndarray, lengths: np.ndarray) -> Case:
        t = scores.shape[-1]
        lengths = lengths.astype(np.int64)
        padding = left_padding(t, lengths)  # (b, t)
        hide = padding[:, None, :] | causal(t)  # (b, t, t)
        expected = softmax_hidden(scores, hide)
        dtype, atol = dtype_name(scores), tolerance(scores)
        real = ~padding  # (b, t): the rows of real queries
        shown = f"scores {scores.shape}, {dtype}, lengths {lengths.tolist()}"

        def judge(results: Sequence[StepResult]) -> str | None:
            got = value_of(results)
            whole = problem_with_tensor(got, expected, atol=atol, dtype=dtype)
            if check == "padding" or whole is None:
                return whole
            if not isinstance(got, Tensor) or got.shape != expected.shape or got.dtype != dtype:
                return whole  # a wrong kind, shape or dtype
            rows = Tensor(got.array[real], got.dtype)  # the padding queries' rows left out
            return problem_with_tensor(
                rows,
                expected[real],
                atol=atol,
                what="the weight tensor (the padding rows left out)",
            )

        return Case(check, call("padded_causal_weights", scores, lengths, shown=shown), judge)


# ---- ch3-ex-dropout-rate ----------------------------------------------------------------------


def uniform_draws(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Uniform numbers in [0, 1) as float32, none of them a multiple of 1/32 (a rate)."""
    draws = rng.random(shape).astype(np.float32)
    on_a_rate = (draws * 32) == np.round(draws * 32)
    draws[on_a_rate] += np.float32(1 / 128)
    return draws


def grid_draws(rng: np.random.Generator, shape: tuple[int, ...], steps: int) -> np.ndarray:
    """Numbers k / steps in [0, 1) as float32: some equal a rate on that grid exactly, so the
    boundary (a number equal to p survives) is tested."""
    return (rng.integers(0, steps, size=shape) / steps).astype(np.float32)


def dropout_reference(x: np.ndarray, p: float | np.ndarray, draws: np.ndarray) -> np.ndarray:
    rate = np.broadcast_to(np.asarray(p, dtype=np.float64), x.shape)
    keep = draws.astype(np.float64) >= rate
    scale = np.where(rate < 1, 1 / np.where(rate < 1, 1 - rate, 1.0), 0.0)
    return np.where(keep, x.astype(np.float64) * scale, 0.0)


class DropoutRate(GradedExercise):
    label = "ch3-ex-dropout-rate"
    manual_points = 1
    rubric = (
        "About 30 % of the entries are zero, and the survivors are 1 / (1 - 0.3) = 1.4286: "
        "scaling the survivors by 1 / (1 - p) keeps the expected value of every entry, "
        "(1 - p) x / (1 - p) + p 0 = x, so the mean stays near 1."
    )
    checks = (
        Check(
            "drops",
            2,
            "drops the entries whose number is below p and scales the others",
            "An entry survives when its number is at least p, which happens with probability "
            "1 - p; divide the survivors by 1 - p, as nn.Dropout does, and zero the rest.",
        ),
        Check(
            "rates",
            1,
            "a rate per row, rates of 0 and 1, and the dtype of x",
            "Let p broadcast against x, so each entry is scaled by its own 1 / (1 - p). With "
            "a rate of 1 every entry is dropped: 0 * inf is nan, so choose each entry's "
            "scale, 0 or 1 / (1 - p), with torch.where instead of multiplying by a mask. Keep "
            "the dtype of x.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = []
        for shape in (
            (int(rng.integers(20, 60)), int(rng.integers(20, 60))),
            (2, int(rng.integers(2, 4)), int(rng.integers(8, 20)), int(rng.integers(8, 20))),
            (int(rng.integers(200, 400)),),
        ):
            x = (rng.standard_normal(shape) * 2).astype(np.float32)
            p = float(rng.integers(3, 27)) / 32
            cases.append(self.case("drops", x, p, uniform_draws(rng, x.shape)))
        # Numbers on a grid of eighths: about one in eight equals p, and survives.
        x = (rng.standard_normal(int(rng.integers(200, 400))) * 2).astype(np.float32)
        p = float(rng.choice([0.25, 0.5]))
        cases.append(self.case("drops", x, p, grid_draws(rng, x.shape, 8)))
        b, t, s = int(rng.integers(1, 4)), int(rng.integers(4, 8)), int(rng.integers(8, 30))
        rates = rng.integers(0, 33, size=(t, 1)) / 32
        rates[0], rates[1] = 0.0, 1.0
        x = (rng.standard_normal((b, t, s)) * 2).astype(np.float32)
        # Numbers on the rates' grid, and in each row one equal to its rate (below 1): the
        # boundary again, a number of 0 at the rate 0 included.
        draws = grid_draws(rng, x.shape, 32)
        draws[..., 0] = np.minimum(rates[:, 0], 31 / 32)
        cases.append(self.case("rates", x, rates.astype(np.float32), draws))
        x64 = rng.standard_normal((b, t, s)) * 2
        for p_of_x64 in (rng.permutation(rates), 1.0):
            cases.append(self.case("rates", x64, p_of_x64, uniform_draws(rng, x64.shape)))
        cases.append(self.case("rates", x, 0.0, uniform_draws(rng, x.shape)))
        return cases

    @staticmethod
    def case(check: str, x: np.ndarray, p: float | np.ndarray, draws: np.ndarray) -> Case:
        expected = dropout_reference(x, p, draws)
        dtype = dtype_name(x)
        atol = 1e-9 if x.dtype == np.float64 else 1e-5
        rate = f"p = {p}" if isinstance(p, float) else f"a rate per row {p.shape}"
        shown = f"x {x.shape}, {dtype}, {rate}"

        def judge(results: Sequence[StepResult]) -> str | None:
            got = value_of(results)
            if isinstance(got, Tensor) and got.shape == x.shape:
                zeros = got.array == 0
                if check == "drops" and np.array_equal(zeros, draws >= p):
                    return "the entries whose number is below p must be the ones dropped"
                rate = np.broadcast_to(np.asarray(p, dtype=np.float64), x.shape)
                at_rate = (draws == rate) & (rate < 1)
                if at_rate.any() and np.array_equal(zeros, draws <= rate):
                    return "an entry whose number equals p survives: only those below p drop"
            return problem_with_tensor(got, expected, atol=atol, dtype=dtype)

        return Case(check, call("my_dropout", x, p, draws, shown=shown), judge)


# ---- ch3-ex-causality-test --------------------------------------------------------------------


def projection(rng: np.random.Generator, rows: int, columns: int) -> np.ndarray:
    return (rng.standard_normal((rows, columns)) / np.sqrt(columns)).astype(np.float32)


def with_leak(hide: np.ndarray, t: int, rng: np.random.Generator) -> np.ndarray:
    """``hide`` with one future key of the first ``t`` tokens made visible."""
    leaky = hide.copy()
    i = int(rng.integers(0, t - 1))
    leaky[i, int(rng.integers(i + 1, t))] = False
    return leaky


# How much the "tiny" layer's one leak moves its output row when the future token gets +1:
# less than any absolute tolerance an answer might pick (1e-7 and up), yet large next to the
# row itself (its values shrink with it; 2 % of it or more), so an exact comparison finds it.
TINY = 3e-8


def edit_change(
    weights: dict[str, np.ndarray], hide: np.ndarray, x: np.ndarray, j: int
) -> np.ndarray:
    """How much each output row of a causal attention layer (weights, no bias, the mask
    ``hide``) moves, at most over the batch and the features, when token ``j`` of ``x`` gets
    +1; in float64, shape (t,)."""
    t, d_out = x.shape[1], weights["W_query.weight"].shape[0]
    w_q, w_k, w_v = (weights[f"{name}.weight"].astype(np.float64) for name in ROLES)

    def rows(inputs: np.ndarray) -> np.ndarray:
        scores = (inputs @ w_q.T) @ (inputs @ w_k.T).transpose(0, 2, 1)  # (b, t, t)
        weighted = softmax_hidden(scores / np.sqrt(d_out), hide[:t, :t])
        return weighted @ (inputs @ w_v.T)  # (b, t, d_out)

    edited = x.astype(np.float64)
    edited[:, j] += 1.0
    return np.abs(rows(edited) - rows(x.astype(np.float64))).max(axis=(0, 2))


class CausalityTest(GradedExercise):
    label = "ch3-ex-causality-test"
    manual_points = 1
    rubric = (
        "No earlier token may attend to a later one, so editing the last token changes only "
        "its own row, and editing the first changes every row, since every token sees the "
        "first one (and the first token's own query, key and value change): the dependence "
        "of a causal layer is lower triangular, and the module without a mask fails."
    )
    checks = (
        Check(
            "dependence",
            2,
            "the (t, t) dependence of each output row on each token, measured",
            "Edit one token at a time in a copy of x, run the module on the original and on "
            "the copy, and mark the output rows that differ in any sequence of the batch. A "
            "leak can be tiny: compare exactly (a row that cannot see the token comes out "
            "bitwise the same). Trust no mask attribute, and "
            "no gradient: a module may detach its input, and still depend on it.",
        ),
        Check(
            "verdict",
            1,
            "is_causal tells causal modules from leaky ones, whatever they hold",
            "A module is causal when no output row depends on a later token, however "
            "slightly: nothing above the diagonal of the dependence, measured as tightly as "
            "the dependence itself. It need not depend on every earlier token, and "
            "what a module stores (a mask, or none) says nothing about what it computes.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = []
        for kind in ("leak", "window", "small", "heads", "fused", "open", "wrapper", "detached"):
            cases.append(self.case("dependence", kind, rng))
        for kind in ("causal", "last", "outside", "fused", "window", "tiny", "open", "detached"):
            cases.append(self.case("verdict", kind, rng))
        return cases

    @staticmethod
    def case(check: str, kind: str, rng: np.random.Generator) -> Case:
        t, b = int(rng.integers(4, 8)), int(rng.integers(1, 4))
        d_in, d_out = int(rng.integers(2, 6)), 2 * int(rng.integers(1, 3))
        size = t + int(rng.integers(1, 3))  # context_length: the module's mask is bigger
        x = rng.standard_normal((b, t, d_in)).astype(np.float32)
        module, depends, name = CausalityTest.module(kind, rng, x, size, d_out)
        shown = f"{name}, x of shape {x.shape}"
        if check == "dependence":
            return Case(
                check,
                Call((Step("dependence", None, (module, x), arguments_after=True),), shown),
                CausalityTest.dependence_judge(depends, x),
            )
        truth = not bool(np.triu(depends, k=1).any())

        def verdict(results: Sequence[StepResult]) -> str | None:
            got = value_of(results)
            if isinstance(got, Raised):
                return f"it raised {got.type_name}: {got.message}"
            if isinstance(got, Tensor) and got.array.size == 1 and got.dtype == "torch.bool":
                got = bool(got.array.reshape(()))
            if not isinstance(got, bool):
                return f"expected True or False, got {describe(got)}"
            if got != truth:
                return f"expected {truth}, got {got}"
            return None

        return Case(check, call("is_causal", module, x, shown=shown), verdict)

    @staticmethod
    def dependence_judge(depends: np.ndarray, x: np.ndarray):
        def judge(results: Sequence[StepResult]) -> str | None:
            problem = problem_with_tensor(
                value_of(results), depends, dtype="torch.bool", what="the dependence"
            )
            return problem or unchanged(results, x, "dependence changed x")

        return judge

    @staticmethod
    def module(
        kind: str, rng: np.random.Generator, x: np.ndarray, size: int, d_out: int
    ) -> tuple[Module, np.ndarray, str]:
        """A module of the package, what its first ``t`` output rows depend on, and its name
        in the feedback."""
        t, d_in = x.shape[1:]
        lower = ~causal(t)  # (t, t): a causal layer that sees every earlier token
        heads = int(rng.integers(1, 3))
        weights = {
            f"W_{name}.weight": projection(rng, d_out, d_in) for name in ("query", "key", "value")
        }
        # Small scores: every visible key keeps a weight a float32 measurement can see, so
        # the dependence is a fact of the layer, not of one unlucky draw.
        for name in ("W_query.weight", "W_key.weight"):
            weights[name] = weights[name] * np.float32(0.5)
        settings = {"d_in": d_in, "d_out": d_out, "context_length": size, "dropout": 0.0}
        if kind in ("heads", "fused"):
            mixed = {
                **weights,
                "out_proj.weight": projection(rng, d_out, d_out),
                "out_proj.bias": rng.standard_normal(d_out).astype(np.float32),
            }
            if kind == "heads":  # causal through is_causal, with no mask to read
                state = mixed
                made = Module("MultiHeadAttention", {**settings, "num_heads": heads}, state)
                return made, lower, "a causal multi-head layer with no mask attribute"
            # The fused path's is_causal ignores the stored mask: the layer is causal, its
            # mask buffer says it is not.
            state = {**mixed, "mask": np.zeros((size, size), dtype=bool)}
            kwargs = {**settings, "num_heads": heads, "fused": True}
            made = Module("CachedAttention", kwargs, state)
            return made, lower, "a causal layer whose mask attribute hides nothing"
        if kind == "open":
            made = Module("SelfAttentionV2", {"d_in": d_in, "d_out": d_out}, weights)
            return made, np.ones((t, t), dtype=bool), "an attention layer with no mask"
        if kind == "wrapper":
            state = {f"heads.{h}.{key}": value for h in (0, 1) for key, value in weights.items()}
            state["heads.1.W_query.weight"] = projection(rng, d_out, d_in) * np.float32(0.5)
            state["heads.0.mask"] = causal(size)
            leaky = with_leak(causal(size), t, rng)
            state["heads.1.mask"] = leaky
            made = Module("MultiHeadAttentionWrapper", {**settings, "num_heads": 2}, state)
            return made, ~leaky[:t, :t], "two heads, the second with a leak"
        hide = causal(size)
        name = "a causal attention layer"
        if kind in ("leak", "detached", "tiny"):
            hide = with_leak(hide, t, rng)
            name = "a layer with one leak"
        if kind == "detached":  # the same leak, which no gradient shows
            made = Module("CausalAttention", settings, {**weights, "mask": hide}, detached=True)
            return made, ~hide[:t, :t], "a layer with one leak, run on its input detached"
        if kind == "tiny":  # one leak, its effect scaled down to TINY with the values
            ((i, j),) = np.argwhere(~hide[:t, :t] & causal(t))
            moves = edit_change(weights, hide, x, int(j))[i]
            weights["W_value.weight"] = weights["W_value.weight"] * np.float32(TINY / moves)
            name = "a layer with one tiny leak"
        if kind == "small":  # a leak, and every output, a hundred times smaller
            weights["W_value.weight"] = weights["W_value.weight"] * np.float32(0.01)
            i = np.arange(size)[:, None]
            j = np.arange(size)[None, :]
            hide &= j != i + 2  # sees token i + 2, not i + 1
            name = "a layer with small outputs whose token i sees token i + 2"
        if kind == "last":
            hide[t - 2, t - 1] = False
            name = "a layer whose second-to-last token sees the last"
        if kind == "window":
            i = np.arange(size)[:, None]
            j = np.arange(size)[None, :]
            hide |= j < i - int(rng.integers(0, 3))
            name = "a causal layer with a sliding window"
        if kind == "outside":
            hide[:, t:] = False  # rows the input never reaches: the layer stays causal
            name = "a causal layer whose stored mask is bigger than the input"
        made = Module("CausalAttention", settings, {**weights, "mask": hide})
        return made, ~hide[:t, :t], name


EXERCISES = [SlidingWindow, DropoutOrder, AllMasked, DropoutRate, CausalityTest]
