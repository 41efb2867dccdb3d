"""Chapter 4, "Multi-head attention": the graded exercises (grader only, never shipped).

Each draws a student's inputs (sizes, weights, permutations) from their variant's generator,
has the student's code called on them in the student's kernel, and judges what comes back
against a reference computed here in float64. The answers are what neither torch nor the
course package computes: one head of a module as chapter 3's CausalAttention and its own block
of out_proj, the parameters of heads whose size is not d_out / h, queries, keys and values
split out of one packed projection in two layouts, and a module with its heads reordered.

A module the student returns is never run: its state dict comes back, and the grader computes
what those weights do in its own process (a returned object's ``forward`` is the student's).
"""

from __future__ import annotations

import re
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
    Result,
    Step,
    StepResult,
    Tensor,
    call,
    describe,
    problem_with_tensor,
    raised,
    softmax,
    value_of,
)


def inputs(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


# ---- MultiHeadAttention modules drawn here ----------------------------------------------------


def mha_state(rng: np.random.Generator, d_in: int, d_out: int, bias: bool) -> dict[str, np.ndarray]:
    """The state dict of a MultiHeadAttention: weights as nn.Linear draws them (uniform within
    1/sqrt(fan_in)), larger, so that the heads' weights are far from uniform; biases of either
    sign."""
    state = {}
    for role, fan_in, fan_out in (*((r, d_in, d_out) for r in ROLES), ("out_proj", d_out, d_out)):
        bound = 1 / np.sqrt(fan_in)
        weight = rng.uniform(-bound, bound, size=(fan_out, fan_in)) * 3.0
        state[f"{role}.weight"] = weight.astype(np.float32)
        if bias or role == "out_proj":
            state[f"{role}.bias"] = rng.uniform(-1.0, 1.0, size=fan_out).astype(np.float32)
    return state


def mha_module(
    state: dict[str, np.ndarray], num_heads: int, context_length: int, dropout: float = 0.0
) -> Module:
    d_out, d_in = state["W_query.weight"].shape
    kwargs = {
        "d_in": int(d_in),
        "d_out": int(d_out),
        "context_length": int(context_length),
        "dropout": float(dropout),
        "num_heads": int(num_heads),
        "qkv_bias": "W_query.bias" in state,
    }
    return Module("MultiHeadAttention", kwargs, state)


def shown_module(module: Module) -> str:
    k = module.kwargs
    return (
        f"MultiHeadAttention({k['d_in']}, {k['d_out']}, {k['context_length']}, {k['dropout']}, "
        f"num_heads={k['num_heads']}, qkv_bias={k['qkv_bias']})"
    )


def linear(x: np.ndarray, state: dict[str, np.ndarray], role: str) -> np.ndarray:
    """``x @ weight.T + bias`` of one layer, in float64."""
    out = x.astype(np.float64) @ state[f"{role}.weight"].astype(np.float64).T
    if f"{role}.bias" in state:
        out = out + state[f"{role}.bias"].astype(np.float64)
    return out


def mha_forward(
    x: np.ndarray, state: dict[str, np.ndarray], h: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What MultiHeadAttention computes on ``x`` (b, t, d_in), in float64: the output
    (b, t, d_out), the weights (b, h, t, t) and each head's context (b, h, t, d_h)."""
    b, t, _ = x.shape
    q, k, v = (linear(x, state, role) for role in ROLES)  # (b, t, d_out) each
    d_out = q.shape[-1]
    d_h = d_out // h
    q, k, v = (a.reshape(b, t, h, d_h).transpose(0, 2, 1, 3) for a in (q, k, v))
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d_h)  # (b, h, t, t)
    scores = np.where(np.triu(np.ones((t, t), dtype=bool), 1), -np.inf, scores)
    weights = softmax(scores)
    context = weights @ v  # (b, h, t, d_h)
    merged = context.transpose(0, 2, 1, 3).reshape(b, t, d_out)
    return linear(merged, state, "out_proj"), weights, context


def causal_forward(x: np.ndarray, state: dict[str, np.ndarray]) -> np.ndarray:
    """What chapter 3's CausalAttention with these weights computes on ``x`` (b, t, d_in), in
    float64: scores scaled by the square root of its own d_out, the size of its keys."""
    q, k, v = (linear(x, state, role) for role in ROLES)  # (b, t, d) each
    t = x.shape[1]
    scores = q @ k.transpose(0, 2, 1) / np.sqrt(k.shape[-1])  # (b, t, t)
    scores = np.where(np.triu(np.ones((t, t), dtype=bool), 1), -np.inf, scores)
    return softmax(scores) @ v


def weights_of(
    made: ModuleState, shapes: dict[str, tuple[int, ...]], what: str
) -> tuple[dict[str, np.ndarray], str | None]:
    """The arrays of a returned module's state dict, and why they are not of ``shapes`` (a
    key missing or of another shape; keys not in ``shapes`` are left out). A bias of
    ``shapes`` the module does not have is left out too: the module adds none."""
    arrays = {}
    for key, shape in shapes.items():
        got = made.state.get(key)
        if got is None and key.endswith(".bias"):
            continue
        if not isinstance(got, Tensor):
            return {}, f"{what} has no {key}"
        if got.shape != shape:
            return {}, f"{what}'s {key} should have shape {shape}, got {got.shape}"
        arrays[key] = got.array.astype(np.float64)
    return arrays, None


def unchanged_module(results: Sequence[StepResult], state: dict[str, np.ndarray]) -> str | None:
    """Why the module passed to the first step came back changed, or None."""
    after = results[0].arguments[0] if results[0].arguments else None
    if not isinstance(after, ModuleState):
        return "the module passed in could not be read back after the call"
    for key, want in state.items():
        got = after.state.get(key)
        if not isinstance(got, Tensor) or not np.array_equal(got.array, want):
            return f"the call changed the module's {key}: build a new module"
    return None


# ---- ch4-ex-one-head ---------------------------------------------------------------------------


class OneHead(GradedExercise):
    label = "ch4-ex-one-head"
    manual_points = 1
    rubric = (
        "CausalAttention divides the scores by the square root of its own output size, the "
        "size of its keys; the module divides each head's scores by sqrt(d_h). A head's "
        "CausalAttention has d_out = d_h, so the two agree; with one head d_h = d_out."
    )
    checks = (
        Check(
            "one_head",
            1,
            "a module with one head: its CausalAttention and the linear layer after it",
            "With one head the split and the merge change nothing: which layers of the module "
            "does each of yours copy? The linear layer has no bias: the module adds "
            "out_proj.bias once.",
        ),
        Check(
            "heads",
            2,
            "head m of a module with several heads, for any m",
            "Head m owns a block of d_h rows of each projection (weights and biases) and the "
            "matching block of d_h columns of out_proj's weight. Size the CausalAttention so "
            "that it accepts every input the module accepts.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = []
        for bias in (True, False):
            d_in, d_out = int(rng.integers(2, 6)), int(rng.integers(2, 6))
            cases.append(self.case("one_head", rng, d_in, d_out, 1, 0, bias))
        for bias in (True, False, True):
            h, d_h = int(rng.integers(2, 5)), int(rng.integers(1, 4))
            m = int(rng.choice([h - 1, int(rng.integers(1, h))]))
            cases.append(self.case("heads", rng, int(rng.integers(2, 6)), h * d_h, h, m, bias))
        return cases

    @staticmethod
    def case(
        check: str,
        rng: np.random.Generator,
        d_in: int,
        d_out: int,
        h: int,
        m: int,
        bias: bool,
    ) -> Case:
        context_length = int(rng.integers(3, 8))
        b = int(rng.integers(1, 3))
        x = inputs(rng, b, context_length, d_in)  # as long as the module accepts
        state = mha_state(rng, d_in, d_out, bias)
        module = mha_module(state, h, context_length, float(rng.choice([0.0, 0.1])))
        _, _, context = mha_forward(x, state, h)
        d_h = d_out // h
        block = state["out_proj.weight"].astype(np.float64)[:, m * d_h : (m + 1) * d_h]
        expected = context[:, m] @ block.T  # (b, t, d_out): head m's share, no bias
        # One head's sizes: a CausalAttention with d_out = d_h, a d_h -> d_out linear layer.
        head = {f"{role}.weight": (d_h, d_in) for role in ROLES}
        head |= {f"{role}.bias": (d_h,) for role in ROLES}
        steps = (
            Step("as_causal_and_linear", args=(module, m), arguments_after=True),
            Step(Result(0), "__getitem__", (0,), send_back=False),
            Step(Result(1), "context_length", called=False),
        )

        def judge(results: Sequence[StepResult]) -> str | None:
            made = value_of(results, 0)
            if isinstance(made, Raised):
                return f"it raised {made.type_name}: {made.message}"
            if not isinstance(made, list) or len(made) != 2:
                return f"expected a pair (causal, linear), got {describe(made)}"
            causal, layer = made
            if not isinstance(causal, ModuleState) or causal.name != "CausalAttention":
                return f"the first module should be a CausalAttention, got {describe(causal)}"
            if not isinstance(layer, ModuleState) or layer.name != "Linear":
                return f"the second module should be an nn.Linear, got {describe(layer)}"
            if "bias" in layer.state:
                return "the linear layer should have no bias: the module adds out_proj.bias once"
            arrays, why = weights_of(causal, head, "the CausalAttention")
            if why:
                return f"{why}: one head's CausalAttention has d_out = d_h = {d_h}"
            out, why = weights_of(layer, {"weight": (d_out, d_h)}, "the linear layer")
            if why:
                return f"{why}: it reads one head's {d_h} outputs"
            why = unchanged_module(results, state) or raised(results)
            if why:
                return why
            accepts = value_of(results)
            if isinstance(accepts, bool) or not isinstance(accepts, int):
                return f"the CausalAttention's context_length: got {describe(accepts)}"
            if accepts < context_length:
                return (
                    f"the CausalAttention accepts {accepts} tokens, the module "
                    f"{context_length}: it should accept every input the module accepts"
                )
            # What those weights compute, here: the returned objects are not run.
            share = causal_forward(x, arrays) @ out["weight"].T
            return problem_with_tensor(
                Tensor(share, "torch.float64"),
                expected,
                atol=1e-5,
                what="linear(causal(x)), computed from the weights returned,",
            )

        shown = f"{shown_module(module)}, head m = {m}, x of shape {x.shape}"
        return Case(check, Call(steps, shown), judge)


# ---- ch4-ex-count-parameters -------------------------------------------------------------------


def parameters(d_in: int, d_out: int, h: int, d_h: int, bias: bool) -> int:
    """Three d_in -> h d_h projections, with biases when asked, and a d_out-output out_proj
    with its bias."""
    return 3 * (d_in * h * d_h + (h * d_h if bias else 0)) + h * d_h * d_out + d_out


class CountParameters(GradedExercise):
    label = "ch4-ex-count-parameters"
    manual_points = 1
    rubric = (
        "With head_dim = d_out / num_heads the projections have num_heads * head_dim = d_out "
        "outputs whatever num_heads is: more heads are smaller heads, not more weights. With a "
        "fixed head_dim (wide heads, or Bhojanapalli et al.'s choice) the projections and "
        "out_proj's input grow in proportion to num_heads."
    )
    checks = (
        Check(
            "count",
            2,
            "the parameters of heads whose size is not d_out / num_heads",
            "Count layer by layer: each projection maps d_in numbers to num_heads * head_dim, "
            "and out_proj maps those to d_out; a weight has in * out numbers, a bias one per "
            "output. Which layers have a bias when qkv_bias is False?",
        ),
        Check(
            "edges",
            1,
            "the package's split heads, wide heads and a single head of size 1",
            "The same count covers head_dim = d_out / num_heads (MultiHeadAttention) and "
            "head_dim = d_in = d_out (wide heads); return an int.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = []
        for bias in (False, True, bool(rng.integers(2))):
            while True:
                d_in, d_out = int(rng.integers(2, 400)), int(rng.integers(2, 400))
                h, d_h = int(rng.integers(2, 17)), int(rng.integers(1, 129))
                if h * d_h != d_out:
                    break
            cases.append(self.case("count", d_in, d_out, h, d_h, bias))
        h, d_h = int(rng.integers(2, 17)), int(rng.integers(1, 65))
        cases.append(self.case("edges", int(rng.integers(2, 400)), h * d_h, h, d_h, True))
        d = int(rng.integers(2, 300))
        cases.append(self.case("edges", d, d, int(rng.integers(2, 13)), d, False))
        cases.append(
            self.case("edges", int(rng.integers(2, 50)), int(rng.integers(2, 50)), 1, 1, True)
        )
        return cases

    @staticmethod
    def case(check: str, d_in: int, d_out: int, h: int, d_h: int, bias: bool) -> Case:
        expected = parameters(d_in, d_out, h, d_h, bias)

        def judge(results: Sequence[StepResult]) -> str | None:
            got = value_of(results)
            if isinstance(got, Raised):
                return f"it raised {got.type_name}: {got.message}"
            if isinstance(got, Tensor) and got.array.size == 1 and got.array.dtype.kind in "iu":
                got = int(got.array.reshape(()))
            if isinstance(got, bool) or not isinstance(got, int):
                return f"expected an int, got {describe(got)}"
            if got == expected:
                return None
            if got == expected - d_out:
                return "out_proj's bias is missing"
            if bias and got == expected - 3 * h * d_h:
                return "the projections' biases are missing"
            if not bias and got == expected + 3 * h * d_h:
                return "qkv_bias is False, yet the projections' biases are counted"
            if h * d_h != d_out and got == parameters(d_in, d_out, 1, d_out, bias):
                return "head_dim and num_heads are ignored: the heads need not share d_out"
            return f"{got:,d} is not the number of parameters of that layer"

        shown = (
            f"d_in = {d_in}, d_out = {d_out}, num_heads = {h}, head_dim = {d_h}, qkv_bias = {bias}"
        )
        return Case(check, call("parameter_count", d_in, d_out, h, d_h, bias, shown=shown), judge)


# ---- ch4-ex-divisible --------------------------------------------------------------------------


def split_reference(qkv: np.ndarray, h: int, layout: str) -> list[np.ndarray]:
    """Queries, keys and values (b, h, t, d_h) of a packed (b, t, 3 d_out) projection."""
    b, t, packed = qkv.shape
    d_h = packed // (3 * h)
    if layout == "roles":  # (b, t, 3, h, d_h): all queries, all keys, all values
        grouped = qkv.reshape(b, t, 3, h, d_h).transpose(2, 0, 3, 1, 4)
    else:  # (b, t, h, 3, d_h): head 0's query, key and value, then head 1's, ...
        grouped = qkv.reshape(b, t, h, 3, d_h).transpose(3, 0, 2, 1, 4)
    return [grouped[r] for r in range(3)]  # (b, h, t, d_h) each


class SplitPacked(GradedExercise):
    label = "ch4-ex-divisible"
    manual_points = 1
    rubric = (
        "Says that view(b, t, h, d_h) cuts d_out into h heads of the same size d_h, so d_out "
        "must be h * d_h exactly; names the two fixes (a d_out that num_heads divides, e.g. "
        "12, or a num_heads that divides d_out, e.g. 2 or 5)."
    )
    checks = (
        Check(
            "layouts",
            2,
            "queries, keys and values of each head, in both layouts",
            "Give the last axis one size per level of its grouping, outermost first: in "
            "'roles' the role (3), then the head, then the feature; in 'heads' the head, then "
            "the role, then the feature. Then bring the heads in front of the tokens.",
        ),
        Check(
            "edges",
            1,
            "a ValueError for heads of unequal size; one head, one token, float64",
            "Check that num_heads divides d_out before any reshape, and raise a ValueError "
            "whose message names both numbers. Keep the dtype of the input.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = []
        for layout in ("roles", "heads", "roles", "heads"):
            b, t = int(rng.integers(1, 3)), int(rng.integers(2, 6))
            # Heads of size 1 would not tell the groupings (h, 3, d_h) and (h, d_h, 3) apart.
            h, d_h = int(rng.integers(2, 5)), int(rng.integers(2, 4))
            cases.append(self.split_case("layouts", inputs(rng, b, t, 3 * h * d_h), h, layout))
        for layout in ("roles", "heads"):
            h = int(rng.integers(2, 6))
            d_out = h * int(rng.integers(1, 4)) + int(rng.integers(1, h))
            cases.append(self.error_case(inputs(rng, 2, 3, 3 * d_out), h, d_out, layout))
        one = inputs(rng, 1, int(rng.integers(2, 5)), 3 * int(rng.integers(2, 5)))
        cases.append(self.split_case("edges", one, 1, str(rng.choice(["roles", "heads"]))))
        h = int(rng.integers(2, 4))
        wide = rng.standard_normal((2, 1, 3 * h * int(rng.integers(1, 4))))
        cases.append(self.split_case("edges", wide, h, "heads"))
        return cases

    @staticmethod
    def split_case(check: str, qkv: np.ndarray, h: int, layout: str) -> Case:
        expected = split_reference(qkv, h, layout)
        dtype = FLOAT[qkv.dtype.type]

        def judge(results: Sequence[StepResult]) -> str | None:
            got = value_of(results)
            if isinstance(got, Raised):
                return f"it raised {got.type_name}: {got.message}"
            if not isinstance(got, list) or len(got) != 3:
                return f"expected (queries, keys, values), got {describe(got)}"
            for item, want, role in zip(got, expected, ("queries", "keys", "values"), strict=True):
                problem = problem_with_tensor(
                    item, want, atol=0.0, rtol=0.0, dtype=dtype, what=f"the tensor of {role}"
                )
                if problem:
                    return problem
            return None

        shown = f"qkv of shape {qkv.shape}, num_heads = {h}, layout = {layout!r}, {dtype}"
        return Case(check, call("split_qkv", qkv, h, layout, shown=shown), judge)

    @staticmethod
    def error_case(qkv: np.ndarray, h: int, d_out: int, layout: str) -> Case:
        def judge(results: Sequence[StepResult]) -> str | None:
            got = value_of(results)
            where = f"d_out = {d_out}, num_heads = {h}"
            if not isinstance(got, Raised):
                return f"{where}: no ValueError was raised"
            if got.type_name != "ValueError":
                return f"{where}: it raised {got.type_name} (before your own check?): {got.message}"
            numbers = set(re.findall(r"\d+", got.message))
            if not {str(d_out), str(h)} <= numbers or len(numbers) > 6:
                return f"{where}: the message should name d_out and num_heads: {got.message!r}"
            return None

        shown = f"qkv of shape {qkv.shape}, num_heads = {h}, layout = {layout!r}"
        return Case("edges", call("split_qkv", qkv, h, layout, shown=shown), judge)


# ---- ch4-ex-permute-heads ----------------------------------------------------------------------


def draw_permutation(rng: np.random.Generator, h: int) -> list[int]:
    """A permutation that moves every head and, from three heads on, is not its own inverse."""
    while True:
        perm = [int(p) for p in rng.permutation(h)]
        inverse = [perm.index(i) for i in range(h)]
        if all(p != i for i, p in enumerate(perm)) and (h < 3 or inverse != perm):
            return perm


class PermuteHeads(GradedExercise):
    label = "ch4-ex-permute-heads"
    manual_points = 1
    rubric = (
        "Says that out_proj's columns read the heads' outputs in their order: if they stay, "
        "each head's output meets another head's block of out_proj and the output changes, "
        "while each head's weights are still right."
    )
    checks = (
        Check(
            "heads",
            1,
            "head m of the new module computes the weights of the module's head perm[m]",
            "Head p owns a block of d_h rows of W_query, W_key and W_value: new block m is "
            "old block perm[m] (not the other way round).",
        ),
        Check(
            "output",
            1,
            "the heads moved and the new module's output equals the module's; the module is "
            "unchanged",
            "out_proj reads the heads' outputs: which of its axes follows the heads? Build the "
            "new module from copies, without writing into the module passed in.",
        ),
        Check(
            "biases",
            1,
            "the biases move with their heads; modules without biases",
            "The query, key and value biases have one block of d_h numbers per head, like the "
            "rows; out_proj's bias belongs to the output features, not to a head. A module "
            "built with qkv_bias=False has no such biases.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = []
        for check, bias in (
            ("heads", False),
            ("heads", True),
            ("output", True),
            ("output", False),
            ("biases", True),
            ("biases", False),
        ):
            h = int(rng.integers(3, 6))
            d_in, d_h = int(rng.integers(2, 6)), int(rng.integers(1, 4))
            cases.append(self.case(check, rng, d_in, h, d_h, bias))
        return cases

    @staticmethod
    def case(check: str, rng: np.random.Generator, d_in: int, h: int, d_h: int, bias: bool) -> Case:
        d_out = h * d_h
        t = int(rng.integers(3, 7))
        x = inputs(rng, int(rng.integers(1, 3)), t, d_in)
        state = mha_state(rng, d_in, d_out, bias)
        perm = draw_permutation(rng, h)
        module = mha_module(state, h, t)
        out, weights, _ = mha_forward(x, state, h)
        index = np.concatenate([np.arange(p * d_h, (p + 1) * d_h) for p in perm])
        shapes = {key: value.shape for key, value in state.items()}
        step = Step("permute_heads", args=(module, list(perm)), arguments_after=True)

        def judge(results: Sequence[StepResult]) -> str | None:
            made = value_of(results, 0)
            if isinstance(made, Raised):
                return f"it raised {made.type_name}: {made.message}"
            if not isinstance(made, ModuleState) or made.name != "MultiHeadAttention":
                return f"expected a new MultiHeadAttention, got {describe(made)}"
            if check == "biases":
                return biases_problem(made, state, index)
            arrays, why = weights_of(made, shapes, "the new module")
            if why:
                return why
            # What the new module's weights compute with the module's h heads, here: the
            # returned object is not run.
            out_new, weights_new, _ = mha_forward(x, arrays, h)
            order = head_order(weights_new, weights)
            if check == "heads":
                return heads_problem(order, perm)
            if order == list(range(h)):
                return "the heads are still in their old order: no head moved"
            return problem_with_tensor(
                Tensor(out_new, "torch.float64"), out, atol=2e-5, what="the output"
            ) or unchanged_module(results, state)

        shown = f"{shown_module(module)}, perm = {perm}, x of shape {x.shape}"
        return Case(check, Call((step,), shown), judge)


def head_order(got: np.ndarray, weights: np.ndarray) -> list[int | None]:
    """For each head m of ``got`` (b, h, t, t), the module's head whose weights it computes
    (None if none or several do)."""
    h = weights.shape[1]
    order: list[int | None] = []
    for m in range(h):
        same = [p for p in range(h) if np.allclose(got[:, m], weights[:, p], atol=2e-5)]
        order.append(same[0] if len(same) == 1 else None)
    return order


def heads_problem(order: list[int | None], perm: list[int]) -> str | None:
    """Why the new module's heads, which compute the weights of the module's heads ``order``,
    are not in perm's order."""
    h = len(perm)
    if order == perm:
        return None
    if order == list(range(h)):
        return "the heads are still in their old order"
    if order == [perm.index(i) for i in range(h)]:
        return "new head m holds the module's head perm.index(m): the inverse permutation"
    return "some head's weights are none of the module's heads' in perm's order"


def biases_problem(
    made: ModuleState, state: dict[str, np.ndarray], index: np.ndarray
) -> str | None:
    """Why the new module's biases are not the module's, moved with their heads."""
    for role in ROLES:
        key = f"{role}.bias"
        got = made.state.get(key)
        if key not in state:
            if got is not None:
                return f"the module has no {key}, the new one has"
            continue
        if not isinstance(got, Tensor) or not np.array_equal(got.array, state[key][index]):
            return f"{key}: new block m should be the module's block perm[m]"
    got = made.state.get("out_proj.bias")
    if not isinstance(got, Tensor) or not np.array_equal(got.array, state["out_proj.bias"]):
        return "out_proj.bias should stay as it is"
    return None


EXERCISES = [OneHead, CountParameters, SplitPacked, PermuteHeads]
