"""Chapter 6, "Attention that learns": the graded exercises (grader only, never shipped).

Each draws a student's inputs (sizes, weights, token ids, permutations) from their variant's
generator, has the student's code called on them in the student's kernel, and judges what
comes back against a reference computed here in float64. The models are small
TinyCausalModels built in the kernel from weights drawn here; their reference forward pass is
written out below, independently of the package. The answers are what neither torch nor the
package computes: rotary positions on only the first r features of a head, from one start
position per sequence, negative ones included (GPT-NeoX's partial rotary on a left-padded
batch); the accuracy at every position of sequences placed at other positions; the logits with
one head switched off; where the predictions change when the tokens are reordered; and, from
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


# ---- rotary on the first r features, in the rotate-half convention ---------------------------


def partial_rotary(
    x: np.ndarray,
    offset: int | np.ndarray,
    r: int,
    *,
    over: int | None = None,
    interleaved: bool = False,
    clamp: bool = False,
) -> np.ndarray:
    """``x`` ``(..., t, d_h)`` with its first ``r`` features rotated for positions
    ``offset, offset + 1, ...`` and the others as they are, in float64 (the reference).
    ``offset`` is an int, or a ``(b,)`` array of start positions, one per sequence of ``x``
    ``(b, ..., t, d_h)``.

    Pair ``i`` is features ``(i, i + r / 2)`` (or ``(2i, 2i + 1)`` when ``interleaved``),
    turned by ``p * 10000**(-2i / over)``; ``over`` is ``r`` (right) or another size, and
    ``clamp`` turns negative positions into 0 (mistakes to recognise)."""
    x = x.astype(np.float64)
    t = x.shape[-2]
    half = r // 2
    theta = 10000.0 ** (-2 * np.arange(half) / (over or r))  # (r / 2,)
    start = np.asarray(offset, dtype=np.float64)  # () or (b,)
    positions = start[..., None] + np.arange(t)  # (t,) or (b, t)
    if clamp:
        positions = np.maximum(positions, 0.0)
    if positions.ndim == 2:  # one row per sequence, the same for the axes after b
        positions = positions.reshape(len(start), *[1] * (x.ndim - 3), t)
    angles = positions[..., None] * theta  # (..., t, r / 2)
    cos, sin = np.cos(angles), np.sin(angles)
    first = np.arange(0, r, 2) if interleaved else np.arange(half)
    second = first + 1 if interleaved else first + half
    a, b = x[..., first], x[..., second]
    out = x.copy()
    out[..., first] = a * cos - b * sin
    out[..., second] = a * sin + b * cos
    return out


def start_positions(rng: np.random.Generator, b: int, t: int, far: bool = False) -> np.ndarray:
    """A ``(b,)`` int64 array of distinct start positions, at least one negative (the padding
    of a left-padded batch): ``past - pads``, or far ones beside a negative one."""
    while True:
        pads = rng.integers(0, t, size=b)  # padding before each sequence's first token
        past = int(rng.integers(2000, 9000)) if far else int(rng.integers(0, 25))
        offset = past - pads
        offset[rng.integers(b)] = -int(rng.integers(1, t))  # a sequence still padded
        if b == 1 or len(set(offset.tolist())) == b:
            return offset.astype(np.int64)


class PartialRotary(GradedExercise):
    label = "ch6-ex-rotate-half"
    checks = (
        Check(
            "partial",
            2,
            "the first r features rotated in the rotate-half convention, one start position "
            "per sequence",
            "Only features 0 to r - 1 turn; the rotate-half pairs and the frequencies theta_i "
            "are those of a head of size r, and features r to d_h - 1 stay as they are. With "
            "a (b,) offset, sequence n counts its positions from offset[n]: build a (b, t) "
            "table of positions and broadcast it over the axes between b and t.",
        ),
        Check(
            "edges",
            1,
            "r = d_h on five axes, r = 2, negative and far positions in float64, one sequence; "
            "x and offset unchanged",
            "A position below 0 is a rotation by a negative angle, like any other: the formula "
            "needs no special case. Compute the angles in float64 so that far positions keep "
            "their digits, and return a new tensor of x's dtype.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = []
        for middle in ((), (int(rng.integers(1, 4)),), (2, int(rng.integers(1, 4)))):
            b = int(rng.integers(2, 5))
            d_h = 2 * int(rng.integers(3, 9))  # 6 to 16
            r = 2 * int(rng.integers(1, d_h // 2))  # 2 to d_h - 2
            t = int(rng.integers(3, 8))
            x = rng.standard_normal((b, *middle, t, d_h)).astype(np.float32)
            cases.append(self.case("partial", x, start_positions(rng, b, t), r))
        d_h, t = 2 * int(rng.integers(3, 9)), int(rng.integers(2, 7))
        x = rng.standard_normal((t, d_h)).astype(np.float32)  # one sequence, an int offset
        r = 2 * int(rng.integers(1, d_h // 2))
        cases.append(self.case("partial", x, int(rng.integers(1, 40)), r))
        t, d_h = int(rng.integers(3, 6)), 2 * int(rng.integers(2, 6))
        x = rng.standard_normal((2, 2, 2, t, d_h)).astype(np.float32)  # (b, h_kv, g, t, d_h)
        cases.append(self.case("edges", x, start_positions(rng, 2, t), d_h))
        x = rng.standard_normal((t, d_h)).astype(np.float32)
        cases.append(self.case("edges", x, int(rng.integers(1, 20)), 2))
        d_h = 2 * int(rng.integers(4, 9))
        x = rng.standard_normal((2, 2, t, d_h))
        cases.append(self.case("edges", x, start_positions(rng, 2, t, far=True), d_h - 2))
        x = rng.standard_normal((1, t, d_h)).astype(np.float32)
        cases.append(self.case("edges", x, start_positions(rng, 1, t), d_h - 2))
        return cases

    @staticmethod
    def case(check: str, x: np.ndarray, offset: int | np.ndarray, r: int) -> Case:
        expected = partial_rotary(x, offset, r)
        d_h = x.shape[-1]
        dtype = FLOAT[x.dtype.type]
        atol = 1e-9 if x.dtype == np.float64 else 2e-5
        mistakes = {
            "pairs (2i, 2i + 1) are the interleaved convention; rotate-half pairs feature i "
            "with feature i + r / 2": partial_rotary(x, offset, r, interleaved=True),
            "theta_i belongs to a head of size r, not d_h": partial_rotary(x, offset, r, over=d_h),
            "every feature was rotated: features r to d_h - 1 pass unchanged": partial_rotary(
                x, offset, d_h
            ),
            "positions must start at `offset`, not at 0": partial_rotary(x, 0, r),
        }
        if isinstance(offset, np.ndarray):
            mistakes |= {
                "each sequence has its own start: offset[n] is for x[n]": partial_rotary(
                    x, int(offset[0]), r
                ),
                "a position below 0 turns the other way; it is not left unturned": (
                    partial_rotary(x, offset, r, clamp=True)
                ),
            }

        def judge(results: Sequence[StepResult]) -> str | None:
            got = value_of(results)
            problem = problem_with_tensor(got, expected, atol=atol, rtol=1e-5, dtype=dtype)
            if problem and isinstance(got, Tensor) and got.shape == expected.shape:
                for reason, wrong in mistakes.items():
                    if not np.allclose(expected, wrong, atol=1e-3) and np.allclose(
                        got.array.astype(np.float64), wrong, atol=atol, rtol=1e-5
                    ):
                        return reason
            if problem:
                return problem
            arguments = results[0].arguments
            if isinstance(offset, np.ndarray):
                why = unchanged(arguments[1] if len(arguments) > 1 else None, offset, "offset")
                if why:
                    return why
            return unchanged(arguments[0] if arguments else None, x, "x")

        if isinstance(offset, np.ndarray):
            start = f"offset = tensor({offset.tolist()})"
        else:
            start = f"offset = {offset}"
        shown = f"x of shape {x.shape} ({dtype}), {start}, r = {r}"
        step = Step("rotate_half", args=(x, offset, r), arguments_after=True)
        return Case(check, Call((step,), shown), judge)


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


def tokens_with_clear_predictions(
    rng: np.random.Generator, module: Module, b: int, t: int, tries: int = 200
) -> np.ndarray:
    """Token ids ``(b, t)`` whose predictions are clear at every position (redrawn until)."""
    vocab = module.kwargs["vocab_size"]
    for _ in range(tries):
        tokens = rng.integers(0, vocab, size=(b, t))
        if clear_margin(logits_of(module, tokens)).all():
            return tokens
    raise RuntimeError("no tokens with clear predictions")  # never with these weights


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
        "back looks the same everywhere), with a reason for each."
    )
    checks = (
        Check(
            "positions",
            2,
            "the accuracy at every position of sequences placed at positions offset, offset + "
            "1, ...",
            "The model's forward pass starts every sequence at position 0: run its steps "
            "yourself, as the page does when it removes a path, giving the offset to the "
            "embedding, where learned and sinusoidal positions enter. A rotary layer sees only "
            "the distance between a query and a key, which an offset shared by both leaves as "
            "it is: its blocks need none. Then average the right predictions over the "
            "sequences, one column at a time, counting only the targets that are not "
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
            "A head's output exists on its own only before out_proj mixes the heads: set "
            "that head's d_h context features to zero there (a forward pre-hook on out_proj "
            "sees them), and let out_proj add its bias as usual.",
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


class PredictionChanges(GradedExercise):
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
            "changes",
            2,
            "where the predicted token changes when the sequence is reordered",
            "Run the model on the sequence and on tokens[order] together, take each position's "
            "most likely next token, and compare them position by position.",
        ),
        Check(
            "bag",
            1,
            "models without positions, reorderings that move equal tokens; tokens unchanged",
            "Reorder with tokens[order] (position p receives the token at order[p]), compare "
            "predicted tokens, not logits, and leave the caller's tokens as they are.",
        ),
    )

    def cases(self, rng: np.random.Generator) -> list[Case]:
        cases = []
        for positions, kind in zip(
            ("learned", "rotary", "sinusoidal"),
            rng.permutation(["swap", "cycle", "shuffle"]),
            strict=True,
        ):
            module = draw_model(rng, positions, heads=2)
            cases.append(self.case("changes", rng, module, str(kind)))
        module = draw_model(rng, "none", heads=2)
        cases.append(self.case("bag", rng, module, "cycle"))
        cases.append(self.case("bag", rng, module, "shuffle"))
        cases.append(self.case("bag", rng, draw_model(rng, "learned"), "equal"))
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
        else:  # two equal tokens swapped
            i, j = (int(p) for p in np.flatnonzero(tokens == tokens[0])[:2])
            order[[i, j]] = order[[j, i]]
        return order

    def case(self, check: str, rng: np.random.Generator, module: Module, kind: str) -> Case:
        t = int(rng.integers(7, 11))
        while True:
            tokens = tokens_with_clear_predictions(rng, module, 1, t)[0]
            if kind != "equal" or (tokens == tokens[0]).sum() >= 2:
                break
        order = self.order(rng, t, kind, tokens)
        pair = np.stack([tokens, tokens[order]])
        logits = logits_of(module, pair)
        predicted = logits.argmax(axis=-1)
        clear = clear_margin(logits).all(axis=0)  # (t,): positions float32 agrees on
        expected = predicted[0] != predicted[1]
        inverse = np.argsort(order)
        moved_back = logits_of(module, np.stack([tokens, tokens[inverse]])).argmax(axis=-1)

        def judge(results: Sequence[StepResult]) -> str | None:
            got = value_of(results)
            if isinstance(got, Raised):
                return f"it raised {got.type_name}: {got.message}"
            if not isinstance(got, Tensor) or got.shape != (t,):
                return f"expected a ({t},) bool tensor, got {describe(got)}"
            if got.array.dtype != np.bool_:
                return f"expected a bool tensor, got {got.dtype}"
            if np.array_equal(got.array[clear], ~expected[clear]):
                return "True must mean that the prediction changes"
            if not np.array_equal(got.array[clear], expected[clear]):
                if kind == "cycle" and np.array_equal(
                    got.array[clear], (moved_back[0] != moved_back[1])[clear]
                ):
                    return "the sequence was reordered the other way: use tokens[order]"
                where = np.flatnonzero(got.array).tolist()
                return f"True at positions {where}: not where the predictions change"
            return unchanged(results[0].arguments[1], tokens, "tokens")

        shown = f"{shown_model(module)}, tokens {tokens.tolist()}, order {order.tolist()}"
        step = Step("prediction_changes", args=(module, tokens, order), arguments_after=True)
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
            "At position i the reader knows only the bag of the tokens in its window, the "
            "min(i, window) before i. Two rows of the cumulative counts tell how often each "
            "token occurs between them: guess the most frequent, and average count / size "
            "over the sequences.",
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


EXERCISES = [PartialRotary, AccuracyByPosition, HeadSwitchedOff, PredictionChanges, WindowedBound]
