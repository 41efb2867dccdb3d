"""Chapter 6, "Attention that learns": the graded exercises (grader only, never shipped).

Each draws a student's inputs (sizes, weights, token ids, permutations) from their variant's
generator, has the student's code called on them in the student's kernel, and judges what
comes back against a reference computed here in float64. The models are small
TinyCausalModels built in the kernel from weights drawn here; their reference forward pass is
written out below, independently of the package. The answers are what neither torch nor the
package computes: query and key weights of a checkpoint whose heads rotate their first r
features in interleaved pairs, converted for rotate-half pairs (GPT-NeoX's partial rotary),
judged by the scores of the two layers, not by the tensors; the accuracy at every position of
sequences placed at other positions; the logits with one head switched off; from the tokens
alone, where a one-layer model without positions, seeing all earlier tokens or a sliding
window of them, can change its prediction when they are reordered; and, from
cumulative counts alone, the best order-blind guess of a reader that sees a window of earlier
tokens.
"""

from __future__ import annotations

import math
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

IGNORE_INDEX = -100
CONTEXT = 24  # the context length of the models of ch6-ex-extrapolate


def unchanged(after: object, sent: np.ndarray, what: str) -> str | None:
    """Why an argument came back changed, or None."""
    if isinstance(after, Tensor) and np.array_equal(after.array, sent):
        return None
    return f"the call changed its argument `{what}`: work on a copy"


# ---- ch6-ex-rotate-half: a checkpoint converted from interleaved to rotate-half pairs --------


def partial_rotary(x: np.ndarray, offset: int, r: int, *, interleaved: bool) -> np.ndarray:
    """``x`` ``(..., t, d_h)`` with its first ``r`` features rotated for positions ``offset,
    offset + 1, ...`` and the others as they are, in float64 (the reference). Pair ``i`` is
    features ``(2i, 2i + 1)`` when ``interleaved``, else ``(i, i + r / 2)``, turned by
    ``p * 10000**(-2i / r)``."""
    x = x.astype(np.float64)
    half = r // 2
    theta = 10000.0 ** (-2 * np.arange(half) / r)  # (r / 2,)
    angles = (offset + np.arange(x.shape[-2]))[:, None] * theta  # (t, r / 2)
    cos, sin = np.cos(angles), np.sin(angles)
    first = np.arange(0, r, 2) if interleaved else np.arange(half)
    second = first + 1 if interleaved else first + half
    a, b = x[..., first], x[..., second]
    out = x.copy()
    out[..., first] = a * cos - b * sin
    out[..., second] = a * sin + b * cos
    return out


def rotary_scores(
    weights: Sequence[np.ndarray],
    heads: int,
    r: int,
    x: np.ndarray,
    offset: int,
    *,
    interleaved: bool,
) -> np.ndarray:
    """The scores ``(b, h, t, t)`` of a layer whose query and key projections are
    ``weights`` = ``(w_query, w_key)`` or ``(w_query, w_key, b_query, b_key)``, for inputs
    ``x`` ``(b, t, d_in)`` at positions ``offset, ...``: every query with every key (the
    mask plays no part in the question), each head's first ``r`` features rotated."""
    b, t, _ = x.shape
    projected = []
    for role in range(2):
        w = weights[role].astype(np.float64)
        y = x @ w.T  # (b, t, d_out)
        if len(weights) == 4:
            y = y + weights[2 + role].astype(np.float64)
        d_h = w.shape[0] // heads
        y = y.reshape(b, t, heads, d_h).transpose(0, 2, 1, 3)  # (b, h, t, d_h)
        projected.append(partial_rotary(y, offset, r, interleaved=interleaved))
    q, k = projected
    return q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1])  # (b, h, t, t)


def moved_rows(w: np.ndarray, heads: int, r: int, *, inverse: bool = False) -> np.ndarray:
    """``w`` with the first ``r`` rows of each head's block of ``d_out / heads`` rows put
    evens first, then odds (or back, when ``inverse``): a reference to recognise answers by,
    the judge itself compares scores."""
    span = w.shape[0] // heads
    inside = np.concatenate([np.arange(0, r, 2), np.arange(1, r, 2), np.arange(r, span)])
    if inverse:
        inside = np.argsort(inside)
    rows = (np.arange(w.shape[0] // span)[:, None] * span + inside).reshape(-1)  # (d_out,)
    return w[rows]


class RotaryConversion(GradedExercise):
    label = "ch6-ex-rotate-half"
    checks = (
        Check(
            "partial",
            2,
            "query and key weights of interleaved heads converted to rotate-half heads that "
            "rotate only their first r features: the same scores",
            "Where does feature j of head n of a query come from in W_query? Which feature "
            "does the interleaved layer pair with it, and which does the rotate-half layer "
            "pair with it? Write the two pairings of the first r features of one head side by "
            "side, and check your answer on the scores of two layers you compose from "
            "RotaryEmbedding(r) as the exercise asks.",
        ),
        Check(
            "edges",
            1,
            "every feature rotated, biases, one head, r = 2, float64; the weights unchanged",
            "A bias holds one number per feature of the query or the key, as a weight holds "
            "one row. Return a new tensor of the shape and dtype of `w`.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = []
        for d_h in rng.permutation([16, 24, 32]):
            d_h = int(d_h)
            r = d_h // 4 if d_h == 32 else 2 * int(rng.integers(6, d_h // 2))  # 12 to d_h - 2
            heads = int(rng.integers(2, 5))
            cases.append(self.case("partial", rng, heads, d_h, r, bias=False))
        d_h = 2 * int(rng.integers(6, 13))
        cases.append(self.case("edges", rng, int(rng.integers(2, 5)), d_h, d_h, bias=True))
        cases.append(self.case("edges", rng, 1, 32, 8, bias=True, dtype=np.float64))
        cases.append(self.case("edges", rng, 3, 16, 2, bias=False))
        return cases

    @staticmethod
    def case(
        check: str,
        rng: np.random.Generator,
        heads: int,
        d_h: int,
        r: int,
        *,
        bias: bool,
        dtype: type = np.float32,
    ) -> Case:
        d_out, d_in = heads * d_h, int(rng.integers(8, 25))
        shapes = [(d_out, d_in)] * 2 + ([(d_out,)] * 2 if bias else [])
        weights = [(rng.standard_normal(s) / math.sqrt(d_in)).astype(dtype) for s in shapes]
        x = rng.standard_normal((2, int(rng.integers(4, 8)), d_in))
        offsets = (int(rng.integers(0, 50)), int(rng.integers(1000, 5000)))
        expected = [
            rotary_scores(weights, heads, r, x, offset, interleaved=True) for offset in offsets
        ]
        names = ["w_query", "w_key", "b_query", "b_key"][: len(weights)]
        dtype_name = FLOAT[np.dtype(dtype).type]
        w = weights[0]
        mistakes = {
            "these are the weights as they were: the rotate-half layer pairs other features": w,
            "the rows moved the other way round: the inverse of the permutation": moved_rows(
                w, heads, r, inverse=True
            ),
            "the features of one head are its own block of d_h rows: convert head by head": (
                moved_rows(w, 1, r)
            ),
            "the features of one head are its own block of d_h rows: convert head by head, "
            "as the page's order does for one head": moved_rows(w, 1, w.shape[0]),
            "only the first r features of each head rotate: the others keep their "
            "place": moved_rows(w, heads, d_h),
        }

        def judge(results: Sequence[StepResult]) -> str | None:
            got = []
            for name, sent, result in zip(names, weights, results, strict=True):
                value = result.value  # its values are judged by the scores
                if isinstance(value, Raised):
                    return f"for {name} it raised {value.type_name}: {value.message}"
                if not isinstance(value, Tensor) or value.shape != sent.shape:
                    return f"for {name} expected a tensor of shape {sent.shape}, got " + (
                        describe(value)
                    )
                if value.dtype != dtype_name:
                    return f"for {name} expected {dtype_name} like {name}, got {value.dtype}"
                if not np.isfinite(value.array).all():
                    return f"the converted {name} holds NaN or infinity"
                got.append(value.array)
            for offset, want in zip(offsets, expected, strict=True):
                scores = rotary_scores(got, heads, r, x, offset, interleaved=False)
                if not np.allclose(scores, want, atol=1e-4, rtol=1e-4):
                    for reason, wrong in mistakes.items():
                        if np.allclose(got[0], wrong):
                            return reason
                    gap = float(np.abs(scores - want).max())
                    return (
                        f"the rotate-half layer's scores at positions {offset}, ... differ "
                        f"from the interleaved layer's by up to {gap:.3g}"
                    )
            if check == "partial":
                return None
            for name, sent, result in zip(names, weights, results, strict=True):
                why = unchanged(result.arguments[0] if result.arguments else None, sent, name)
                if why:
                    return why
            return None

        steps = tuple(
            Step("to_rotate_half", args=(w, heads, r), arguments_after=True) for w in weights
        )
        shown = (
            f"{', '.join(names)} of a layer with {heads} head{'s' * (heads > 1)} of d_h = "
            f"{d_h} features, d_in = "
            f"{d_in} ({dtype_name}), r = {r}"
        )
        return Case(check, Call(steps, shown), judge)


# ---- TinyCausalModels drawn here ---------------------------------------------------------------


def model_state(
    rng: np.random.Generator, vocab: int, d: int, context: int, layers: int, positions: str
) -> dict[str, np.ndarray]:
    """The state dict of a TinyCausalModel (no perceptron, no LayerNorm, no qkv bias), with
    weights larger than nn.Linear draws them so that attention and predictions are sharp."""

    def uniform(shape: tuple[int, ...], bound: float) -> np.ndarray:
        return rng.uniform(-bound, bound, size=shape).astype(np.float32)

    state = {"embedding.weight": rng.standard_normal((vocab, d)).astype(np.float32)}
    if positions == "learned":
        state["positions.table.weight"] = rng.standard_normal((context, d)).astype(np.float32)
    for layer in range(layers):
        prefix = f"blocks.{layer}.attention."
        for role, scale in zip(ROLES, (3.0, 3.0, 1.5), strict=True):
            state[prefix + role + ".weight"] = uniform((d, d), scale / math.sqrt(d))
        state[prefix + "out_proj.weight"] = uniform((d, d), 1.5 / math.sqrt(d))
        state[prefix + "out_proj.bias"] = uniform((d,), 0.5)
    state["head.weight"] = uniform((vocab, d), 4.0 / math.sqrt(d))
    state["head.bias"] = uniform((vocab,), 0.3)
    return state


def draw_model(
    rng: np.random.Generator,
    positions: str,
    *,
    layers: int = 1,
    heads: int = 1,
    context: int = 12,
    dropout: float = 0.0,
    training: bool = False,
) -> Module:
    vocab, d = int(rng.integers(5, 9)), 12 if heads == 3 else int(rng.choice([8, 12]))
    kwargs = {
        "vocab_size": vocab,
        "d_model": d,
        "context_length": context,
        "num_layers": layers,
        "num_heads": heads,
        "positions": positions,
        "dropout": dropout,
    }
    return Module(
        "TinyCausalModel", kwargs, model_state(rng, vocab, d, context, layers, positions), training
    )


def shown_model(module: Module) -> str:
    k = module.kwargs
    mode = ", in training mode" if module.training else ""
    return (
        f"TinyCausalModel({k['vocab_size']}, d_model={k['d_model']}, num_layers="
        f"{k['num_layers']}, num_heads={k['num_heads']}, positions={k['positions']!r}, "
        f"dropout={k['dropout']}){mode}"
    )


def sinusoidal(t: int, d: int) -> np.ndarray:
    angles = np.arange(t)[:, None] / 10000.0 ** (np.arange(0, d, 2) / d)  # (t, d / 2)
    table = np.zeros((t, d))
    table[:, 0::2], table[:, 1::2] = np.sin(angles), np.cos(angles[:, : d // 2])
    return table


def logits_of(
    module: Module,
    tokens: np.ndarray,
    off: tuple[int, int] | None = None,
    offset: int = 0,
) -> np.ndarray:
    """What the TinyCausalModel computes for ``tokens`` ``(b, t)`` in evaluation mode, in
    float64: ``(b, t, vocab)``; ``off = (layer, head)`` sets that head's context to zero;
    the tokens sit at positions ``offset, offset + 1, ...``."""
    state = {key: value.astype(np.float64) for key, value in module.state.items()}
    k = module.kwargs
    b, t = tokens.shape
    d, h = k["d_model"], k["num_heads"]
    d_h = d // h
    x = state["embedding.weight"][tokens]  # (b, t, d)
    if k["positions"] == "learned":
        x = x + state["positions.table.weight"][offset : offset + t]
    elif k["positions"] == "sinusoidal":
        x = x + sinusoidal(offset + t, d)[offset:]
    future = np.triu(np.ones((t, t), dtype=bool), 1)
    for layer in range(k["num_layers"]):
        prefix = f"blocks.{layer}.attention."
        q, key, v = (
            (x @ state[prefix + role + ".weight"].T).reshape(b, t, h, d_h).transpose(0, 2, 1, 3)
            for role in ROLES
        )
        if k["positions"] == "rotary":
            q = partial_rotary(q, offset, d_h, interleaved=True)
            key = partial_rotary(key, offset, d_h, interleaved=True)
        scores = np.where(future, -np.inf, q @ key.transpose(0, 1, 3, 2) / math.sqrt(d_h))
        context = softmax(scores) @ v  # (b, h, t, d_h)
        if off is not None and off[0] == layer:
            context[:, off[1]] = 0.0
        merged = context.transpose(0, 2, 1, 3).reshape(b, t, d)
        x = x + merged @ state[prefix + "out_proj.weight"].T + state[prefix + "out_proj.bias"]
    return x @ state["head.weight"].T + state["head.bias"]


def clear_margin(logits: np.ndarray) -> np.ndarray:
    """Where the largest logit beats the second by enough that float32 agrees on it."""
    top = np.sort(logits, axis=-1)
    return top[..., -1] - top[..., -2] > 1e-3


# ---- ch6-ex-extrapolate ------------------------------------------------------------------------


class AccuracyByPosition(GradedExercise):
    label = "ch6-ex-extrapolate"
    manual_points = 1
    rubric = (
        "Predicts, before measuring, that the learned table fails beyond position 31 (its rows "
        "32 to 63 were never trained: far below its 100 %), that the sinusoidal model does "
        "better than chance but far worse than on seen positions (its inputs there are new), "
        "and that the rotary model keeps much of its accuracy on long sequences and all of it "
        "on the short ones moved to positions 32 to 63 (it sees only distances, and three "
        "back looks the same everywhere), with a reason for each; and says why the rotary "
        "model's blocks, which rotate from position 0 whatever the offset, give the accuracy "
        "that rotations shifted by the offset would (a common shift changes no distance, "
        "hence no score)."
    )
    checks = (
        Check(
            "positions",
            2,
            "the accuracy at every position of sequences placed at positions offset, offset + "
            "1, ...",
            "The model's forward pass starts every sequence at position 0: run its steps "
            "yourself, as the page does when it removes a path, and ask where each kind of "
            "position enters and what an offset changes there. Then compare the predictions "
            "with the targets one column at a time, counting only the targets that are not "
            "IGNORE_INDEX.",
        ),
        Check(
            "edges",
            1,
            "columns without a scored target, a model handed over in training mode, the last "
            "positions of the context",
            "A column whose targets are all IGNORE_INDEX has no accuracy: NaN. Dropout must "
            "not change a measurement: which mode should the model be in?",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = []
        # Three of the four kinds: learned or sinusoidal, or both, among them.
        for positions in rng.permutation(["learned", "sinusoidal", "rotary", "none"])[:3]:
            module = draw_model(
                rng, str(positions), layers=int(rng.integers(1, 3)), heads=2, context=CONTEXT
            )
            cases.append(self.case("positions", rng, module, ignored_columns=0))
        module = draw_model(rng, "learned", heads=2, context=CONTEXT)
        cases.append(self.case("edges", rng, module, ignored_columns=int(rng.integers(1, 4))))
        module = draw_model(rng, "sinusoidal", heads=2, context=CONTEXT, dropout=0.5, training=True)
        cases.append(self.case("edges", rng, module, ignored_columns=0, b=40))
        module = draw_model(rng, "learned", heads=2, context=CONTEXT)
        cases.append(self.case("edges", rng, module, ignored_columns=0, last=True))
        return cases

    @staticmethod
    def case(
        check: str,
        rng: np.random.Generator,
        module: Module,
        ignored_columns: int,
        b: int = 0,
        last: bool = False,
    ) -> Case:
        b = b or int(rng.integers(6, 14))
        t = int(rng.integers(ignored_columns + 4, 11))
        offset = CONTEXT - t if last else int(rng.integers(1, CONTEXT - t))
        vocab = module.kwargs["vocab_size"]
        while True:  # every column past the ignored ones keeps a target float32 agrees on
            tokens = rng.integers(0, vocab, size=(b, t))
            logits = logits_of(module, tokens, offset=offset)
            clear = clear_margin(logits)  # (b, t)
            if clear[:, ignored_columns:].any(axis=0).all():
                break
        predicted = logits.argmax(axis=-1)  # (b, t)
        # Each column gets its own share of right answers; a wrong target is any other token.
        right = rng.random((b, t)) < rng.uniform(0.1, 0.9, size=t)
        wrong = (predicted + rng.integers(1, vocab, size=(b, t))) % vocab
        targets = np.where(right, predicted, wrong)
        ignored = (rng.random((b, t)) < 0.2) | ~clear
        for column in range(ignored_columns, t):
            ignored[rng.choice(np.flatnonzero(clear[:, column])), column] = False
        ignored[:, :ignored_columns] = True
        targets = np.where(ignored, IGNORE_INDEX, targets).astype(np.int64)
        scored = targets != IGNORE_INDEX
        counted = scored.sum(axis=0)

        def accuracies(predictions: np.ndarray) -> np.ndarray:
            with np.errstate(invalid="ignore", divide="ignore"):
                right = ((targets == predictions) & scored).sum(axis=0) / counted
            return np.where(counted == 0, np.nan, right)

        expected = accuracies(predicted)
        from_zero = accuracies(logits_of(module, tokens).argmax(axis=-1))

        def judge(results: Sequence[StepResult]) -> str | None:
            got = value_of(results)
            problem = problem_with_tensor(got, expected, atol=1e-6, what="the accuracies")
            if problem and isinstance(got, Tensor) and got.shape == expected.shape:
                if got.array.dtype.kind != "f":
                    return f"the accuracies should be floats, got {got.dtype}"
                counted_wrong = ((targets == predicted) & scored).sum(axis=0) / b
                if np.allclose(got.array, counted_wrong, atol=1e-6):
                    return "the ignored targets were counted as wrong answers"
                if np.allclose(got.array, from_zero, atol=1e-6, equal_nan=True):
                    return "these are the accuracies of the sequences at positions 0, 1, ..."
            return problem

        shown = f"{shown_model(module)}, {b} sequences of {t} tokens, offset = {offset}"
        return Case(
            check,
            call("accuracy_by_position", module, tokens, targets, offset, shown=shown),
            judge,
        )


# ---- ch6-ex-ablate-induction -------------------------------------------------------------------


class HeadSwitchedOff(GradedExercise):
    label = "ch6-ex-ablate-induction"
    manual_points = 1
    rubric = (
        "Predicts, before measuring, that the two-layer model without its induction head does "
        "worse than the one-layer model (near chance): layer 0 was trained to collect the "
        "previous token for layer 1, not to predict; a layer trained as part of a circuit does "
        "not do the circuit's job alone."
    )
    checks = (
        Check(
            "one_head",
            2,
            "the logits with one head of one layer switched off",
            "A head's output exists on its own only before out_proj mixes the heads: which "
            "features are that head's there? A hook lets you change what a module receives.",
        ),
        Check(
            "restored",
            1,
            "the model as it was afterwards: same weights, same logits",
            "Change nothing of the model for good: remove every hook once the logits are "
            "computed, even when the forward pass raises (try/finally).",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = []
        for positions in ("learned", "rotary", "none"):
            layers, heads = int(rng.integers(2, 4)), int(rng.choice([2, 3]))
            module = draw_model(rng, positions, layers=layers, heads=heads)
            layer, head = int(rng.integers(layers)), int(rng.integers(heads))
            cases.append(self.case("one_head", rng, module, layer, head))
        module = draw_model(rng, "sinusoidal", layers=2, heads=1)  # one head: all but the bias
        cases.append(self.case("one_head", rng, module, 1, 0))
        for positions in ("learned", "rotary"):
            module = draw_model(rng, positions, layers=2, heads=2)
            cases.append(
                self.case("restored", rng, module, int(rng.integers(2)), int(rng.integers(2)))
            )
        return cases

    @staticmethod
    def case(check: str, rng: np.random.Generator, module: Module, layer: int, head: int) -> Case:
        b, t = int(rng.integers(2, 5)), int(rng.integers(4, 10))
        tokens = rng.integers(0, module.kwargs["vocab_size"], size=(b, t))
        expected = logits_of(module, tokens, (layer, head))
        intact = logits_of(module, tokens)
        steps = (
            # torch.nn.Module.eval(model) returns the model: the same object for later steps.
            Step("torch", "nn", called=False, send_back=False),
            Step(Result(0), "Module", called=False, send_back=False),
            Step(Result(1), "eval", (module,), send_back=False),
            Step(
                "logits_without_head", args=(Result(2), tokens, layer, head), arguments_after=True
            ),
            Step(Result(2), args=(tokens,)),
        )

        def judge(results: Sequence[StepResult]) -> str | None:
            why = raised(results[:4])
            if why:
                return why
            got = value_of(results, 3)
            problem = problem_with_tensor(got, expected, atol=1e-4)
            if problem and isinstance(got, Tensor) and got.shape == expected.shape:
                if np.allclose(got.array, intact, atol=1e-4):
                    return "these are the logits of the intact model"
                if np.isfinite(got.array).all():
                    return problem + " (a whole layer, or features after out_proj, switched off?)"
            if problem:
                return problem
            if check == "one_head":
                return None
            after = results[3].arguments[0] if results[3].arguments else None
            if not isinstance(after, ModuleState):
                return "the model could not be read back after the call"
            for key, want in module.state.items():
                weight = after.state.get(key)
                if not isinstance(weight, Tensor) or not np.array_equal(weight.array, want):
                    return f"the call changed the model's {key}"
            why = raised(results)
            if why:
                return f"the model fails afterwards: {why}"
            if problem_with_tensor(value_of(results), intact, atol=1e-4):
                return "afterwards the model no longer gives its own logits: a hook is left on"
            return None

        shown = f"{shown_model(module)}, tokens of shape {tokens.shape}, layer {layer}, head {head}"
        return Case(check, Call(steps, shown), judge)


# ---- ch6-ex-causal-bag -------------------------------------------------------------------------


def changed_views(
    tokens: np.ndarray,
    order: np.ndarray,
    window: int | None,
    *,
    own: bool = True,
    width: int = 1,
    as_bag: bool = True,
) -> np.ndarray:
    """``(t,)`` bool: where a query of a one-layer causal model without positions sees other
    things in ``tokens`` and ``tokens[order]``: its own token, or the bag of the tokens it
    sees (itself and the ``window`` tokens before it, all earlier ones when None) (the
    reference). ``own=False`` forgets the query's own token, ``width=0`` makes the window
    one token shorter, ``as_bag=False`` compares what it sees in order (mistakes to
    recognise)."""
    moved = tokens[order]
    out = np.zeros(len(tokens), dtype=bool)
    for p in range(len(tokens)):
        start = 0 if window is None else max(0, p - window + 1 - width)
        seen, seen_moved = tokens[start : p + 1], moved[start : p + 1]
        if as_bag:
            seen, seen_moved = np.sort(seen), np.sort(seen_moved)
        out[p] = not np.array_equal(seen, seen_moved) or (own and tokens[p] != moved[p])
    return out


class PositionsThatCanChange(GradedExercise):
    label = "ch6-ex-causal-bag"
    manual_points = 1
    rubric = (
        "Predicts, before running, that without positions only positions 3 and 4 can change "
        "(a later query sees the same bag with the same own token; 0 to 2 see nothing new), "
        "and that the model with learned positions changes its answers three places after the "
        "swapped tokens, at 6 and 7, where the copied token moved."
    )
    checks = (
        Check(
            "bags",
            2,
            "where a one-layer causal model without positions can change its prediction when "
            "the sequence is reordered, with every earlier token in view or a sliding window",
            "Ask what the query at position p is and what it sees, in the sequence and in "
            "tokens[order], and which of those a model without positions can tell apart. "
            "Then check your rule on a model without positions: where its logits change.",
        ),
        Check(
            "edges",
            1,
            "a window of 0 tokens, a window longer than the sequence, equal tokens swapped; "
            "tokens unchanged",
            "A window of 0 tokens leaves the query itself; a window of t tokens or more is "
            "the causal mask alone. Return a (t,) bool tensor and leave `tokens` as it is.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = []
        kinds = rng.permutation(["swap", "cycle", "shuffle", "all"])
        windows: list[int | None] = [None, None, 1, 2]
        rng.shuffle(windows)  # type: ignore[arg-type]
        for kind, window in zip(kinds, windows, strict=True):
            t = int(rng.integers(10, 17))
            if window is not None:
                window = int(rng.integers(2, t // 2))
            cases.append(self.case("bags", rng, t, str(kind), window))
        t = int(rng.integers(8, 13))
        cases.append(self.case("edges", rng, t, "shuffle", 0))
        cases.append(self.case("edges", rng, t, "all", t + int(rng.integers(0, 3))))
        cases.append(self.case("edges", rng, t, "equal", int(rng.integers(1, 4))))
        return cases

    @staticmethod
    def order(rng: np.random.Generator, t: int, kind: str, tokens: np.ndarray) -> np.ndarray:
        order = np.arange(t)
        if kind == "swap":
            i, j = rng.choice(t, size=2, replace=False)  # i may come after j
            order[[i, j]] = order[[j, i]]
        elif kind == "cycle":  # three positions in a ring: tokens[order] is not its inverse
            i, j, k = sorted(rng.choice(t, size=3, replace=False))
            order[[i, j, k]] = [j, k, i]
        elif kind == "shuffle":  # a stretch in the middle
            start = int(rng.integers(1, t - 3))
            stop = int(rng.integers(start + 3, t))
            order[start:stop] = rng.permutation(np.arange(start, stop))
        elif kind == "all":
            order = rng.permutation(t)
        else:  # two equal tokens swapped
            i, j = (int(p) for p in np.flatnonzero(tokens == tokens[0])[:2])
            order[[i, j]] = order[[j, i]]
        return order

    def case(
        self, check: str, rng: np.random.Generator, t: int, kind: str, window: int | None
    ) -> Case:
        while True:  # few kinds of token: some repeat, and some moves change nothing
            tokens = rng.integers(0, int(rng.integers(3, 6)), size=t).astype(np.int64)
            order = self.order(rng, t, kind, tokens) if (tokens == tokens[0]).sum() > 1 else None
            if order is None:
                continue
            expected = changed_views(tokens, order, window)
            # A draw that tells a right answer from the usual wrong ones: some positions
            # change and some do not, and a short window changes other positions than the
            # causal mask alone.
            short = window is not None and window < t
            if kind == "equal" or (
                0 < expected.sum() < t - 1
                and not (short and np.array_equal(expected, changed_views(tokens, order, None)))
            ):
                break
        mistakes = {
            "True where the token changed: ask what the queries see, not only what they are": (
                tokens[order] != tokens
            ),
            "True where a token moved: ask what the queries see, not only what they are": (
                order != np.arange(t)
            ),
            "the sequence was reordered the other way: use tokens[order]": changed_views(
                tokens, np.argsort(order), window
            ),
            "a model without positions cannot tell the order of the tokens a query sees": (
                changed_views(tokens, order, window, as_bag=False)
            ),
            "the query is a token too, not only one of those it sees": changed_views(
                tokens, order, window, own=False
            ),
        }
        if window is not None:
            mistakes[
                "the query sees itself and the `window` tokens before it: one more than that"
            ] = changed_views(tokens, order, window, width=0)

        def judge(results: Sequence[StepResult]) -> str | None:
            got = value_of(results)
            if isinstance(got, Raised):
                return f"it raised {got.type_name}: {got.message}"
            if not isinstance(got, Tensor) or got.shape != (t,):
                return f"expected a ({t},) bool tensor, got {describe(got)}"
            if got.array.dtype != np.bool_:
                return f"expected a bool tensor, got {got.dtype}"
            if not np.array_equal(got.array, expected):
                for reason, wrong in mistakes.items():
                    if np.array_equal(got.array, wrong):
                        return reason
                where = np.flatnonzero(got.array).tolist()
                return f"True at positions {where}: not where the prediction can change"
            return unchanged(results[0].arguments[0], tokens, "tokens")

        shown = f"tokens {tokens.tolist()}, order {order.tolist()}, window = {window}"
        step = Step("positions_that_can_change", args=(tokens, order, window), arguments_after=True)
        return Case(check, Call((step,), shown), judge)


# ---- ch6-ex-why-order-blind --------------------------------------------------------------------


def windowed_bound(
    inputs: np.ndarray, vocab: int, k: int, window: int, *, shift: int = 0, size: int = 0
) -> np.ndarray:
    """At each position ``i = k .. t - 1``, the best order-blind guess's chance of being right
    when it sees tokens ``max(0, i - window) .. i - 1``, averaged over the sequences (the
    reference, one position at a time). ``shift`` moves the window by that many tokens, and
    ``size`` divides by it instead of the window's size (mistakes to recognise)."""
    t = inputs.shape[1]
    out = np.empty(t - k)
    for i in range(k, t):
        seen = inputs[:, max(0, i + shift - window) : i + shift]  # (b, n)
        counts = np.stack([(seen == v).sum(axis=1) for v in range(vocab)], axis=1)
        out[i - k] = (counts.max(axis=1) / (size or seen.shape[1])).mean()
    return out


class WindowedBound(GradedExercise):
    label = "ch6-ex-why-order-blind"
    manual_points = 1
    rubric = (
        "Predicts that the bound falls with the length, towards 1/16: the guess is the most "
        "frequent of the i earlier tokens, right with probability count / i, and in a long "
        "sequence all 16 tokens occur about equally often, so the most frequent one's share of "
        "the bag approaches 1/16. A window keeps the bag small, so the bound stops falling "
        "once the window is full."
    )
    checks = (
        Check(
            "window",
            2,
            "the bound at every position for a reader that sees a window of earlier tokens, "
            "from the cumulative counts",
            "At position i the reader knows only the bag of the tokens in its window. What "
            "do two rows of the cumulative counts tell together? From the bag, the best guess "
            "and its chance are the page's order-blind ones.",
        ),
        Check(
            "edges",
            1,
            "a window as long as the sequence, a window of k tokens, one sequence",
            "A window of t tokens or more sees every earlier token; one of k tokens sees "
            "exactly k at every scored position. Row i of the counts counts the tokens before "
            "i, not token i itself. Return a float tensor of t - k numbers.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = []
        for _ in range(3):
            t, k = int(rng.integers(10, 25)), int(rng.integers(1, 5))
            window = int(rng.integers(k, t - 3))
            cases.append(self.case("window", rng, int(rng.integers(5, 30)), t, k, window))
        t, k = int(rng.integers(8, 20)), int(rng.integers(1, 4))
        cases.append(
            self.case("edges", rng, int(rng.integers(5, 30)), t, k, t + int(rng.integers(0, 5)))
        )
        cases.append(self.case("edges", rng, int(rng.integers(5, 30)), t, k, k))
        cases.append(self.case("edges", rng, 1, t, 1, int(rng.integers(2, t - 2))))
        return cases

    @staticmethod
    def case(check: str, rng: np.random.Generator, b: int, t: int, k: int, window: int) -> Case:
        vocab = int(rng.integers(2, 7))
        weights = rng.uniform(0.2, 1.2, size=vocab)  # tokens not equally frequent
        inputs = rng.choice(vocab, size=(b, t), p=weights / weights.sum()).astype(np.int64)
        # Row i counts each token among tokens 0 .. i - 1: (b, t + 1, vocab).
        counts = np.zeros((b, t + 1, vocab), dtype=np.int64)
        counts[:, 1:] = np.cumsum(inputs[..., None] == np.arange(vocab), axis=1)
        expected = windowed_bound(inputs, vocab, k, window)
        mistakes = {
            "this is the bound of a reader that sees every earlier token": windowed_bound(
                inputs, vocab, k, t
            ),
            "the window takes in token i itself: row i of the counts counts the tokens "
            "before i": windowed_bound(inputs, vocab, k, window, shift=1),
            "before the window is full, the reader sees only the i tokens before i, not "
            "`window` of them": windowed_bound(inputs, vocab, k, window, size=window),
        }

        def judge(results: Sequence[StepResult]) -> str | None:
            got = value_of(results)
            problem = problem_with_tensor(got, expected, atol=1e-6, what="the bounds")
            if problem and isinstance(got, Tensor) and got.shape == expected.shape:
                for reason, wrong in mistakes.items():
                    if not np.allclose(expected, wrong) and np.allclose(
                        got.array, wrong, atol=1e-6
                    ):
                        return reason
            if problem:
                return problem
            return unchanged(results[0].arguments[0], counts, "counts")

        shown = (
            f"counts of {b} sequences of {t} tokens, (b, t + 1, vocab) = {counts.shape}, "
            f"k = {k}, window = {window}"
        )
        step = Step("bound_by_position", args=(counts, k, window), arguments_after=True)
        return Case(check, Call((step,), shown), judge)


EXERCISES = [
    RotaryConversion,
    AccuracyByPosition,
    HeadSwitchedOff,
    PositionsThatCanChange,
    WindowedBound,
]
