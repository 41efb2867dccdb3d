"""Chapter 1, "Simplified attention": the graded exercises (grader only, never shipped).

Each draws a student's inputs from their variant's generator, has the student's function
called on them in the student's kernel, and judges what comes back against a reference
computed here in float64.
"""

from __future__ import annotations

import numpy as np
from grader.spec import (
    Case,
    Check,
    GradedExercise,
    Raised,
    Tensor,
    call,
    describe,
    problem_with_tensor,
    softmax,
    value_of,
)


def embeddings(rng: np.random.Generator, t: int, d_in: int, scale: float = 1.0) -> np.ndarray:
    """``t`` random embeddings of ``d_in`` numbers with unequal lengths."""
    lengths = rng.uniform(0.5, 1.5, size=(t, 1))
    return rng.standard_normal((t, d_in)) * lengths * scale


def as_number(value: object) -> float | None:
    """A Python number, or a tensor with one element, as a float (None for anything else)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, Tensor) and value.array.size == 1 and value.array.dtype.kind == "f":
        return float(value.array.reshape(()))
    return None


class TopKContext(GradedExercise):
    label = "ch1-ex-step-context"
    checks = (
        Check(
            "top_k",
            2,
            "the context vector from the k best-matching tokens",
            "Score token i against every token, keep the k largest scores, softmax those "
            "alone and weight their tokens; the others get weight 0.",
        ),
        Check(
            "edges",
            1,
            "k = 1, k = t, scores in the hundreds, and float64 inputs (one call each)",
            "Check k = 1 (one token, weight 1) and k = t (chapter 1's context vector), scores "
            "in the hundreds, and the dtype of the inputs.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = []
        for _ in range(3):
            t, d_in = int(rng.integers(4, 10)), int(rng.integers(2, 7))
            x = embeddings(rng, t, d_in).astype(np.float32)
            cases.append(self.case("top_k", x, int(rng.integers(t)), int(rng.integers(2, t))))
        t, d_in = int(rng.integers(3, 8)), int(rng.integers(2, 6))
        x = embeddings(rng, t, d_in).astype(np.float32)
        cases.append(self.case("edges", x, int(rng.integers(t)), 1))
        cases.append(self.case("edges", x, int(rng.integers(t)), t))
        big = embeddings(rng, t, d_in, scale=12.0).astype(np.float32)  # scores past 100
        cases.append(self.case("edges", big, int(rng.integers(t)), int(rng.integers(2, t + 1))))
        x64 = embeddings(rng, t, d_in)
        cases.append(self.case("edges", x64, int(rng.integers(t)), int(rng.integers(1, t + 1))))
        return cases

    @staticmethod
    def case(check: str, x: np.ndarray, i: int, k: int) -> Case:
        wide = x.astype(np.float64)
        scores = wide @ wide[i]  # (t,)
        top = np.argsort(-scores, kind="stable")[:k]
        expected = softmax(scores[top]) @ wide[top]  # (d_in,)
        dtype = "torch.float64" if x.dtype == np.float64 else "torch.float32"
        atol = 1e-9 if x.dtype == np.float64 else 2e-5
        shown = f"t = {x.shape[0]}, d_in = {x.shape[1]}, i = {i}, k = {k}, {dtype}"
        return Case(
            check,
            call("topk_context", x, i, k, shown=shown),
            lambda r: problem_with_tensor(value_of(r), expected, atol=atol, dtype=dtype),
        )


class TemperatureFor(GradedExercise):
    label = "ch1-ex-temperature"
    manual_points = 1
    rubric = (
        "As T -> 0 the weights become one-hot on the largest score (an argmax); as T grows "
        "they approach the uniform 1/t. The largest weight falls steadily as T grows, which is "
        "why a search over T (bisection) finds the one temperature that gives the target."
    )
    checks = (
        Check(
            "target",
            2,
            "finds the temperature that gives the largest weight asked for",
            "The largest weight falls steadily as the temperature grows: search for it (for "
            "example by bisection) until it equals the target.",
        ),
        Check(
            "extremes",
            1,
            "targets near 1/t and near 1, scores in the hundreds",
            "Near a target of 1 the temperature is tiny and the scaled scores huge: compute "
            "the weights so that they never overflow, and search far enough in both "
            "directions.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = []
        for _ in range(3):
            t = int(rng.integers(3, 9))
            scores = rng.standard_normal(t) * 2
            cases.append(self.case("target", scores, float(rng.uniform(1.5 / t, 0.95))))
        t = int(rng.integers(3, 9))
        scores = rng.standard_normal(t) * 300  # scores in the hundreds
        cases.append(self.case("extremes", scores, 0.999))
        cases.append(self.case("extremes", scores, float(1 / t + 0.01)))
        cases.append(self.case("extremes", rng.standard_normal(t) * 2, 0.9999))
        return cases

    @staticmethod
    def case(check: str, scores: np.ndarray, target: float) -> Case:
        scores = scores.astype(np.float32)
        wide = scores.astype(np.float64)

        def judge(results: list) -> str | None:
            got = value_of(results)
            if isinstance(got, Raised):
                return f"it raised {got.type_name}: {got.message}"
            temperature = as_number(got)
            if temperature is None:
                return f"expected a number (or a tensor of one number), got {describe(got)}"
            if not temperature > 0 or not np.isfinite(temperature):
                return f"expected a temperature > 0, got {temperature:.3g}"
            with np.errstate(all="ignore"):
                largest = float(softmax(wide / temperature).max())
            # Written so that a NaN (a temperature so small that the scores overflow) fails.
            if not abs(largest - target) <= 1e-4:
                return f"at that temperature the largest weight is {largest:.5f}"
            return None

        shown = f"t = {scores.size}, target {target:.4f}"
        return Case(check, call("temperature_for", scores, target, shown=shown), judge)


class ReceivedFromOthers(GradedExercise):
    label = "ch1-ex-rows-columns"
    manual_points = 1
    rubric = (
        "Rows are normalised by softmax (each query hands out one unit); columns are not: a "
        "column sum is the attention a token receives, larger for tokens that match many "
        "others; together the column sums add up to t."
    )
    checks = (
        Check(
            "received",
            2,
            "the attention each token receives when no token may attend to itself",
            "Leave the diagonal out of each row's softmax (its weight is 0, and the row's "
            "other weights still sum to 1), then sum each column.",
        ),
        Check(
            "edges",
            1,
            "two tokens, scores in the hundreds, and float64 inputs (one call each)",
            "With two tokens each gives all its weight to the other. Keep the exponents from "
            "overflowing, and keep the dtype of the inputs.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = []
        for _ in range(3):
            t, d_in = int(rng.integers(3, 10)), int(rng.integers(2, 7))
            cases.append(self.case("received", embeddings(rng, t, d_in).astype(np.float32)))
        d_in = int(rng.integers(2, 6))
        cases.append(self.case("edges", embeddings(rng, 2, d_in).astype(np.float32)))
        cases.append(self.case("edges", embeddings(rng, 6, d_in, 12.0).astype(np.float32)))
        cases.append(self.case("edges", embeddings(rng, 5, d_in)))
        return cases

    @staticmethod
    def case(check: str, x: np.ndarray) -> Case:
        wide = x.astype(np.float64)
        scores = wide @ wide.T
        np.fill_diagonal(scores, -np.inf)
        expected = softmax(scores).sum(axis=0)  # (t,)
        dtype = "torch.float64" if x.dtype == np.float64 else "torch.float32"
        atol = 1e-9 if x.dtype == np.float64 else 2e-5
        shown = f"t = {x.shape[0]}, d_in = {x.shape[1]}, {dtype}"
        return Case(
            check,
            call("received_from_others", x, shown=shown),
            lambda r: problem_with_tensor(value_of(r), expected, atol=atol, dtype=dtype),
        )


class ScaleToWin(GradedExercise):
    """The student gets row i of the scores alone, not the embeddings nor the whole score
    matrix (from which embeddings can be rebuilt as a Gram matrix's factor): a search that
    scales token i and recomputes its row needs to know what scaling does to each score (c
    squared for its own, c for the others)."""

    label = "ch1-ex-self"
    manual_points = 2
    rubric = (
        "1 point: the score with itself is the squared length, with another token length "
        "times length times cos(angle). 1 point: a longer token pointing in a similar "
        "direction (here 'journey') can beat the token itself; scaling token i by c multiplies "
        "its own score by c squared and the others by c."
    )
    checks = (
        Check(
            "factor",
            2,
            "the smallest scale at which a token attends most to itself",
            "Scaling token i by c multiplies its score with itself by c squared and its score "
            "with any other token by c: compare the two for the strongest rival in its row of "
            "scores.",
        ),
        Check(
            "already",
            1,
            "a token that already attends most to itself",
            "When no other token outscores token i, no scaling is needed: the answer is 1.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        found: dict[str, list[Case]] = {"factor": [], "already": []}
        while min(len(kept) for kept in found.values()) < 3:
            t, d_in = int(rng.integers(3, 9)), int(rng.integers(2, 6))
            x = embeddings(rng, t, d_in)
            i = int(rng.integers(t))
            row = (x @ x[i]).astype(np.float32)  # (t,): all the student gets
            wide = row.astype(np.float64)
            rivals = np.delete(wide, i) / wide[i]
            factor = max(1.0, float(rivals.max()))
            if 1.0 < factor < 1.0 + 1e-3:
                continue  # too close to call in float32
            check = "factor" if factor > 1.0 else "already"
            if len(found[check]) < 3:
                found[check].append(self.case(check, row, i, factor))
        return found["factor"] + found["already"]

    @staticmethod
    def case(check: str, row: np.ndarray, i: int, factor: float) -> Case:
        def judge(results: list) -> str | None:
            got = value_of(results)
            if isinstance(got, Raised):
                return f"it raised {got.type_name}: {got.message}"
            number = as_number(got)
            if number is None:
                return f"expected a number, got {describe(got)}"
            if not abs(number - factor) <= 1e-4 * factor:  # a NaN fails too
                return f"expected another factor than {number:.5g}"
            return None

        shown = f"row i of the scores of t = {row.shape[0]} tokens, i = {i}"
        return Case(check, call("scale_to_win", row, i, shown=shown), judge)


class Shift(GradedExercise):
    label = "ch1-ex-shift"
    manual_points = 2
    rubric = (
        "1 point: dividing by the sum changes under a shift, (w_j + c) / (sum w + t c): the "
        "weights tend to the uniform 1/t as c grows, and explode and change sign where the "
        "denominator crosses 0 (c near minus the mean score, about -1.1 here). 1 point: a "
        "constant per row cancels in the softmax (it multiplies the whole row by e^c); a "
        "constant per column does not."
    )


EXERCISES = [TopKContext, Shift, TemperatureFor, ReceivedFromOthers, ScaleToWin]
