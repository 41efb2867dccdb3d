"""Chapter 2, "Trainable queries, keys and values": the graded exercises (grader only, never
shipped).

Each draws a student's inputs (sizes, weights, biases) from their variant's generator, has the
student's code called on them in the student's kernel, and judges what comes back against a
reference computed here in float64. The answers are what neither torch nor the course package
computes: a SelfAttentionV1 that carries a SelfAttentionV2's biases as an extra row, the shift
a key bias adds to each row of scores (from the query layer and the key bias alone), the
normaliser of each row of tied attention, and the exact variance of a score when each input
feature has a spread of its own, for so many features that enumerating their sign patterns is
out of reach. ch2-ex-step (a context vector and its derivative by each score) is graded by
hand: autograd takes any derivative a check could compare with.
"""

from __future__ import annotations

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
    ModuleState,
    Raised,
    Step,
    StepResult,
    Tensor,
    call,
    describe,
    problem_with_tensor,
    softmax,
    value_of,
)


def log_sum_exp(scores: np.ndarray) -> np.ndarray:
    """``log(sum(exp(scores)))`` along the last axis, in float64, without overflow."""
    top = scores.max(axis=-1)
    return top + np.log(np.exp(scores - top[..., None]).sum(axis=-1))


def as_number(value: object) -> float | None:
    """A Python number, or a floating tensor with one element, as a float (None otherwise)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, Tensor) and value.array.size == 1 and value.array.dtype.kind == "f":
        return float(value.array.reshape(()))
    return None


def tensors(got: object, count: int, what: str) -> tuple[list[Tensor] | None, str | None]:
    """The ``count`` tensors of a returned tuple, or why it is not one."""
    if isinstance(got, Raised):
        return None, f"it raised {got.type_name}: {got.message}"
    if not isinstance(got, list) or len(got) != count:
        return None, f"expected {what}, got {describe(got)}"
    if not all(isinstance(item, Tensor) for item in got):
        return None, f"expected {what}, got {', '.join(describe(item) for item in got)}"
    return got, None


# ---- SelfAttentionV2 modules drawn here ------------------------------------------------------


def v2_state(rng: np.random.Generator, d_in: int, d_out: int, bias: bool) -> dict[str, np.ndarray]:
    """The state dict of a SelfAttentionV2: weights ``(d_out, d_in)``, uniform within 2.5 times
    nn.Linear's bound 1/sqrt(d_in) (so that the weights are not all close to 1/t), and biases
    of either sign and a sizeable size."""
    bound = 1 / np.sqrt(d_in)
    state = {}
    for role in ROLES:
        weight = rng.uniform(-bound, bound, size=(d_out, d_in)) * 2.5
        state[f"{role}.weight"] = weight.astype(np.float32)
        if bias:
            state[f"{role}.bias"] = rng.uniform(-1.0, 1.0, size=d_out).astype(np.float32)
    return state


def v2_module(state: dict[str, np.ndarray]) -> Module:
    d_out, d_in = state["W_query.weight"].shape
    kwargs = {"d_in": int(d_in), "d_out": int(d_out), "qkv_bias": "W_query.bias" in state}
    return Module("SelfAttentionV2", kwargs, state)


def projection(x: np.ndarray, state: dict[str, np.ndarray], role: str) -> np.ndarray:
    """``x @ weight.T + bias`` of one of the three layers, in float64."""
    weight = state[f"{role}.weight"].astype(np.float64)
    out = x.astype(np.float64) @ weight.T
    if f"{role}.bias" in state:
        out = out + state[f"{role}.bias"].astype(np.float64)
    return out


def v2_output(x: np.ndarray, state: dict[str, np.ndarray]) -> np.ndarray:
    """What SelfAttentionV2 computes, ``(t, d_out)`` or ``(b, t, d_out)``."""
    q, k, v = (projection(x, state, role) for role in ROLES)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(k.shape[-1])
    return softmax(scores) @ v


def v1_output(x: np.ndarray, matrices: Sequence[np.ndarray]) -> np.ndarray:
    """What SelfAttentionV1 computes with ``(d_in, d_out)`` matrices W_query, W_key, W_value,
    in float64: ``softmax(x W_q (x W_k)^T / sqrt(d_out)) x W_v``."""
    x = x.astype(np.float64)
    q, k, v = (x @ m.astype(np.float64) for m in matrices)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(k.shape[-1])
    return softmax(scores) @ v


def inputs(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


# ---- ch2-ex-v2-into-v1 -----------------------------------------------------------------------


class V2IntoV1(GradedExercise):
    label = "ch2-ex-v2-into-v1"
    checks = (
        Check(
            "weights",
            2,
            "a new SelfAttentionV1 with d_in + 1 rows: v2's weights, then its biases",
            "SelfAttentionV1 stores (d_in, d_out) and computes x @ W, nn.Linear stores "
            "(d_out, d_in) and computes x @ weight.T + bias. A last input that is always 1 "
            "adds the last row of W to every projection: what must that row hold, with and "
            "without biases?",
        ),
        Check(
            "function",
            1,
            "its weights, on inputs with a column of ones appended, compute what v2 computes; "
            "v2 unchanged",
            "Call your SelfAttentionV1 on a batch with ones appended as the last feature and "
            "compare with v2 on the batch itself: the grader computes SelfAttentionV1's "
            "forward pass from the weights it returns. Build new parameters from copies: "
            "never write into v2's own.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = []
        for bias in (True, False, True):
            d_in, d_out = int(rng.integers(2, 7)), int(rng.integers(1, 6))
            if not bias:
                d_out = d_in  # square weights: a copy without the transpose has the right shape
            cases.append(self.weights_case(v2_state(rng, d_in, d_out, bias)))
        for bias in (True, False):
            d_in, d_out = int(rng.integers(2, 6)), int(rng.integers(1, 5))
            b, t = int(rng.integers(1, 3)), int(rng.integers(2, 7))
            x = inputs(rng, b, t, d_in)
            cases.append(self.function_case(v2_state(rng, d_in, d_out, bias), x))
        return cases

    @staticmethod
    def expected_weights(state: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = {}
        for role in ROLES:
            weight = state[f"{role}.weight"]
            bias = state.get(f"{role}.bias", np.zeros(weight.shape[0], dtype=np.float32))
            out[role] = np.vstack([weight.T, bias[None, :]])  # (d_in + 1, d_out)
        return out

    def weights_case(self, state: dict[str, np.ndarray]) -> Case:
        expected = self.expected_weights(state)

        def judge(results: Sequence[StepResult]) -> str | None:
            got = value_of(results)
            if isinstance(got, Raised):
                return f"it raised {got.type_name}: {got.message}"
            if not isinstance(got, ModuleState) or got.name != "SelfAttentionV1":
                return f"expected a new SelfAttentionV1, got {describe(got)}"
            for role, want in expected.items():
                problem = problem_with_tensor(
                    got.state.get(role), want, atol=1e-6, rtol=1e-6, what=f"its {role}"
                )
                if problem:
                    return problem
            return None

        module = v2_module(state)
        kwargs = module.kwargs
        shown = (
            f"SelfAttentionV2({kwargs['d_in']}, {kwargs['d_out']}, qkv_bias={kwargs['qkv_bias']})"
        )
        return Case("weights", call("v2_into_v1", module, shown=shown), judge)

    @staticmethod
    def function_case(state: dict[str, np.ndarray], x: np.ndarray) -> Case:
        """The returned module's weights run here, on x with ones appended: its own forward,
        which runs in the student's kernel, is never called."""
        expected = v2_output(x, state)
        ones = np.ones((*x.shape[:-1], 1), dtype=np.float32)
        with_ones = np.concatenate([x, ones], axis=-1)
        module = v2_module(state)
        d_out, d_in = state["W_query.weight"].shape
        shape = (d_in + 1, d_out)

        def judge(results: Sequence[StepResult]) -> str | None:
            got = value_of(results)
            if isinstance(got, Raised):
                return f"it raised {got.type_name}: {got.message}"
            after = results[0].arguments[0] if results[0].arguments else None
            if not isinstance(after, ModuleState):
                return "v2 could not be read back after the call"
            for key, want in state.items():
                kept = after.state.get(key)
                if not isinstance(kept, Tensor) or not np.array_equal(kept.array, want):
                    return f"v2_into_v1 changed v2's {key}: leave v2 as it was"
            if not isinstance(got, ModuleState) or got.name != "SelfAttentionV1":
                return f"expected a new SelfAttentionV1, got {describe(got)}"
            matrices = []
            for role in ROLES:
                matrix = got.state.get(role)
                if not isinstance(matrix, Tensor) or matrix.array.dtype.kind != "f":
                    return f"its {role} should be a floating tensor, got {describe(matrix)}"
                if matrix.shape != shape:
                    return f"its {role} should have shape {shape}, got {matrix.shape}"
                matrices.append(matrix.array)
            with np.errstate(all="ignore"):  # weights with inf or NaN give NaN: a failure
                output = v1_output(with_ones, matrices)
            return problem_with_tensor(
                Tensor(output, "torch.float64"),
                expected,
                atol=2e-5,
                what="what its weights compute on x with ones appended",
            )

        kwargs = module.kwargs
        shown = (
            f"SelfAttentionV2({kwargs['d_in']}, {kwargs['d_out']}, qkv_bias={kwargs['qkv_bias']}) "
            f"on a batch of shape {x.shape}"
        )
        step = Step("v2_into_v1", args=(module,), arguments_after=True)
        return Case("function", Call((step,), shown), judge)


# ---- ch2-ex-qkv-bias -------------------------------------------------------------------------


class KeyBiasShift(GradedExercise):
    """The rise the key bias gives each row of scores, from the inputs, the query layer and the
    key bias alone: without the key weights the scores cannot be computed twice and
    subtracted, so the answer needs q_i . b_k, the same for every key."""

    label = "ch2-ex-qkv-bias"
    manual_points = 1
    rubric = (
        "1/2 point: not only the biases: the query bias takes d_out numbers from the random "
        "stream after the query weight, so the key and value weight matrices differ too (the "
        "query weight matrices agree, the key weight matrices do not). 1/2 point: the key bias "
        "adds q_i . b_k to every score of row i, the same for every key; softmax ignores a "
        "constant added to a row (chapter 1), so the attention weights and the output do not "
        "depend on the key bias."
    )
    checks = (
        Check(
            "shift",
            2,
            "the amount the key bias adds to each row of scores",
            "Expand q_i . (x_j W_k^T + b_k): which term does the key bias add, and why is it "
            "the same for every key j? The query comes from the query layer, weight (d_out, "
            "d_in) as nn.Linear stores it, bias included.",
        ),
        Check(
            "edges",
            1,
            "a batch of sequences, and a module without biases (one call each)",
            "For inputs (b, t, d_in) return (b, t), one number per query of each sequence. A "
            "module built without biases passes None for both biases: nothing is added.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = []
        for _ in range(3):
            d_in, d_out, t = (int(rng.integers(lo, hi)) for lo, hi in ((2, 7), (1, 6), (2, 8)))
            state = v2_state(rng, d_in, d_out, True)
            cases.append(self.case("shift", state, inputs(rng, t, d_in)))
        d_in, d_out = int(rng.integers(2, 6)), int(rng.integers(1, 5))
        b, t = int(rng.integers(2, 4)), int(rng.integers(2, 7))
        cases.append(self.case("edges", v2_state(rng, d_in, d_out, True), inputs(rng, b, t, d_in)))
        t = int(rng.integers(2, 7))
        cases.append(self.case("edges", v2_state(rng, d_in, d_out, False), inputs(rng, t, d_in)))
        return cases

    @staticmethod
    def case(check: str, state: dict[str, np.ndarray], x: np.ndarray) -> Case:
        key_bias = state.get("W_key.bias")
        if key_bias is not None:
            expected = projection(x, state, "W_query") @ key_bias.astype(np.float64)  # (..., t)
        else:
            expected = np.zeros(x.shape[:-1])

        def judge(results: Sequence[StepResult]) -> str | None:
            return problem_with_tensor(
                value_of(results), expected, atol=2e-5, what="the shift of each row"
            )

        d_out, d_in = state["W_query.weight"].shape
        biases = "with biases" if key_bias is not None else "biases None"
        shown = f"d_in = {d_in}, d_out = {d_out}, {biases}, x of shape {x.shape}"
        args = (x, state["W_query.weight"], state.get("W_query.bias"), key_bias)
        return Case(check, call("key_bias_shift", *args, shown=shown), judge)


# ---- ch2-ex-step -----------------------------------------------------------------------------


class ContextAndPull(GradedExercise):
    """Graded by hand only. What the exercise trains is the derivation of pull, and any
    numeric derivative can be taken by autograd (``torch.autograd.functional.jacobian`` of the
    forward pass), which no check of the returned numbers tells apart from a derivation; z
    alone is the page's forward pass, or one call of ``scaled_dot_product_attention``. The
    self-check still checks z and pull for the learner."""

    label = "ch2-ex-step"
    manual_points = 4
    rubric = (
        "1 point: z is token i's context vector, the scores divided by sqrt(d_k) (not d_v) "
        'before the softmax (check("ch2-ex-step") passes, or the values agree with '
        "SelfAttentionV1's row i). 2 points: pull derived by hand, by the chain rule through "
        "the scaled softmax: dz/d omega_ij = sum_j' v_j' alpha_ij' (delta_j'j - alpha_ij) / "
        "sqrt(d_k) = alpha_ij (v_j - z_i) / sqrt(d_k), and the code computes that form (a "
        "Jacobian from autograd alone earns nothing here; one used to check the derived form "
        'is fine). 1 point: from that form, "one" pulls hardest although its weight is the '
        "smallest (0.11), because its value lies farthest from z; the rows add up to "
        "(z - z) / sqrt(d_k) = 0, as raising every score of a row alike changes nothing."
    )


# ---- ch2-ex-symmetric ------------------------------------------------------------------------


class TiedAttention(GradedExercise):
    label = "ch2-ex-symmetric"
    manual_points = 1
    rubric = (
        "1/2 point: with q = k = x W + b, omega_ij = q_i . q_j = q_j . q_i = omega_ji (a dot "
        "product is symmetric). 1/2 point: the weights are not symmetric, because softmax "
        "divides each row by its own sum e^(r_i) and the rows' sums differ; alpha_ij e^(r_i) = "
        "e^(omega_ij / sqrt(d_k)) is symmetric again."
    )
    checks = (
        Check(
            "weights",
            1,
            "the weights with one projection for queries and keys",
            "Queries and keys are both x @ W + b; the scores are their dot products, divided "
            "by the square root of the keys' size before a softmax over each row.",
        ),
        Check(
            "log_sums",
            1,
            "the log of the sum each row of weights is divided by",
            "r_i is the log of the sum of e^(omega_ij / sqrt(d_k)) over the keys j of row i: "
            "the number that makes row i sum to one.",
        ),
        Check(
            "large",
            1,
            "scaled scores in the hundreds, and float64 inputs (one call each)",
            "e^(800) overflows: take the largest scaled score of each row out before "
            "exponentiating, as the stable softmax does, and add it back after the log. Keep "
            "the dtype of x.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = []
        for check in ("weights", "log_sums"):
            for _ in range(2):
                t, d_in, d_out = (int(rng.integers(lo, hi)) for lo, hi in ((3, 9), (2, 7), (1, 5)))
                x, w, b = self.draw(rng, t, d_in, d_out, float(rng.uniform(2, 6)))
                cases.append(self.case(check, x, w, b))
        t, d_in, d_out = int(rng.integers(3, 7)), int(rng.integers(2, 5)), int(rng.integers(1, 4))
        x, w, b = self.draw(rng, t, d_in, d_out, float(rng.uniform(150, 400)))
        cases.append(self.case("large", x, w, b))
        x, w, b = self.draw(rng, t, d_in, d_out)
        cases.append(self.case("large", *(a.astype(np.float64) for a in (x, w, b))))
        return cases

    @staticmethod
    def draw(
        rng: np.random.Generator, t: int, d_in: int, d_out: int, largest: float | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Inputs, a weight and a bias; with ``largest``, scaled so that the largest scaled
        score is about that size."""
        x = rng.standard_normal((t, d_in))
        w = rng.standard_normal((d_in, d_out)) / np.sqrt(d_in)
        b = rng.standard_normal(d_out) * 0.5
        if largest is not None:
            q = x @ w + b
            grow = np.sqrt(largest / np.abs(q @ q.T / np.sqrt(d_out)).max())
            x, b = x * grow, b * grow  # the scores grow by grow squared
        return x.astype(np.float32), w.astype(np.float32), b.astype(np.float32)

    @staticmethod
    def case(check: str, x: np.ndarray, w: np.ndarray, b: np.ndarray) -> Case:
        q = x.astype(np.float64) @ w.astype(np.float64) + b.astype(np.float64)
        scaled = q @ q.T / np.sqrt(w.shape[1])
        weights, sums = softmax(scaled), log_sum_exp(scaled)
        name = FLOAT[x.dtype.type]
        # float32 keeps about 7 digits of a score in the hundreds
        wide, large = x.dtype == np.float64, float(np.abs(scaled).max()) > 50
        atol, rtol = (1e-9, 1e-9) if wide else (1e-4, 1e-5) if large else (2e-5, 2e-5)

        def judge(results: Sequence[StepResult]) -> str | None:
            got, why = tensors(value_of(results), 2, "the pair (weights, log_sums)")
            if why:
                return why
            assert got is not None
            want = {
                "weights": [(0, weights, "`weights`")],
                "log_sums": [(1, sums, "`log_sums`")],
                "large": [(0, weights, "`weights`"), (1, sums, "`log_sums`")],
            }[check]
            for index, expected, what in want:
                problem = problem_with_tensor(
                    got[index], expected, atol=atol, rtol=rtol, dtype=name, what=what
                )
                if problem:
                    return problem
            return None

        t, d_in = x.shape
        top = float(np.abs(scaled).max())
        shown = f"t = {t}, d_in = {d_in}, d_k = {w.shape[1]}, scaled scores up to {top:.0f}, {name}"
        return Case(check, call("tied_attention", x, w, b, shown=shown), judge)


# ---- ch2-ex-sigma ----------------------------------------------------------------------------


class ScoreVariance(GradedExercise):
    label = "ch2-ex-sigma"
    manual_points = 1
    rubric = (
        "Expects Var(q . k) = sigma^4 d_k = 16 * 64 = 1024 (each term q_l k_l has variance "
        "sigma^2 sigma^2) and sigma^4 = 16 after dividing by sqrt(d_k); says the scaling removes "
        "the d_k, not the sigma^4, so the size of the entries (the initialisation) matters too."
        " (The function: sum over l, l' of sigma_l^2 M_ll'^2 sigma_l'^2 with M = W_q W_k^T.)"
    )
    checks = (
        Check(
            "variance",
            2,
            "the exact variance of a score projected from inputs with a spread per feature",
            "Write the score as x M x'^T, a sum of products of one entry of x and one of x'. "
            "Use what independence and mean 0 give: the mean and variance of a product of "
            "independent numbers, which products are correlated, and the variance of a sum. "
            "Each feature l has its own sigma_l.",
        ),
        Check(
            "edges",
            1,
            "tied matrices, and a single column (d_k = 1) in float64 (one call each)",
            "Your derivation holds for any two matrices of the same shape, W_k = W_q and a "
            "single column included; return a number (or a tensor of one number).",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = []
        # d_in of 32 or more: the exact expectation over the 2^d_in sign patterns of each
        # input, which needs no derivation, is out of reach; the sum below is still cheap.
        for _ in range(3):
            d_in, d_k = int(rng.integers(32, 49)), int(rng.integers(2, 7))
            w_query, w_key = (rng.standard_normal((d_in, d_k)) for _ in range(2))
            sigma = rng.uniform(0.3, 3.0, size=d_in)  # spreads that differ a lot
            cases.append(self.case("variance", w_query, w_key, sigma, np.float32))
        d_in = int(rng.integers(32, 49))
        tied = rng.standard_normal((d_in, int(rng.integers(2, 5))))
        sigma = rng.uniform(0.5, 2.0, size=d_in)
        cases.append(self.case("edges", tied, tied, sigma, np.float32))
        column = rng.standard_normal((d_in, 1)), rng.standard_normal((d_in, 1))
        sigma = rng.uniform(0.5, 2.0, size=d_in)
        cases.append(self.case("edges", *column, sigma, np.float64))
        return cases

    @staticmethod
    def case(
        check: str, w_query: np.ndarray, w_key: np.ndarray, sigma: np.ndarray, dtype: type
    ) -> Case:
        w_query, w_key, sigma = w_query.astype(dtype), w_key.astype(dtype), sigma.astype(dtype)
        m = w_query.astype(np.float64) @ w_key.astype(np.float64).T
        spread = sigma.astype(np.float64) ** 2  # (d_in,): the variance of each feature
        expected = float(spread @ m**2 @ spread)

        def judge(results: Sequence[StepResult]) -> str | None:
            got = value_of(results)
            if isinstance(got, Raised):
                return f"it raised {got.type_name}: {got.message}"
            number = as_number(got)
            if number is None:
                return f"expected a number (or a tensor of one number), got {describe(got)}"
            if not abs(number - expected) <= 1e-4 * expected:
                return f"{number:.6g} is not the variance"
            return None

        d_in, d_k = w_query.shape
        low, high = float(sigma.min()), float(sigma.max())
        shown = (
            f"d_in = {d_in}, d_k = {d_k}, sigma from {low:.2f} to {high:.2f}, "
            f"{FLOAT[np.dtype(dtype).type]}"
        )
        return Case(check, call("score_variance", w_query, w_key, sigma, shown=shown), judge)


EXERCISES = [V2IntoV1, KeyBiasShift, ContextAndPull, TiedAttention, ScoreVariance]
