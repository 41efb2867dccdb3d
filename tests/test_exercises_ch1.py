"""Chapter 1's exercises: a correct answer earns every point, a lazy one does not.

The correct answers below are written as a student would write them, with loops and
exponentials, independently of the package's functions under test.
"""

from __future__ import annotations

from pathlib import Path

import torch
from exercise_helpers import full_marks, reasons

from attention_from_scratch import simplified_attention, softmax_stable, toy_sentence
from attention_from_scratch.exercises import load_hidden, run_checks

ROOT = Path(__file__).resolve().parent.parent
load_hidden(ROOT / "grading" / "hidden", chapters=[1])

TOKENS, INPUTS = toy_sentence()


def by_hand_softmax(scores: torch.Tensor) -> torch.Tensor:
    """A stable softmax over the last dimension, written out."""
    e = torch.exp(scores - scores.max(dim=-1, keepdim=True).values)
    return e / e.sum(dim=-1, keepdim=True)


# ch1-ex-step-context -------------------------------------------------------------------------


def context_vector(inputs: torch.Tensor, i: int) -> torch.Tensor:
    t, d_in = inputs.shape
    scores = torch.zeros(t, dtype=inputs.dtype)
    for j in range(t):
        scores[j] = torch.dot(inputs[i], inputs[j])
    weights = by_hand_softmax(scores)
    z = torch.zeros(d_in, dtype=inputs.dtype)
    for j in range(t):
        z = z + weights[j] * inputs[j]
    return z


def test_step_context_a_loop_answer_earns_full_marks() -> None:
    assert full_marks("ch1-ex-step-context", {"context_vector": context_vector})
    # The published context vector of "step", row 5 of the chapter's context matrix.
    expected = torch.tensor([0.4177, 0.6503, 0.5645])
    assert torch.allclose(context_vector(INPUTS, 5), expected, atol=1e-4)


def test_step_context_refuses_the_copied_row_the_package_and_matrix_products() -> None:
    context = simplified_attention(INPUTS)
    # The answer on the page: row 5 of `context`, whatever the inputs.
    copied = {"context_vector": lambda inputs, i: context[5]}
    assert "expected shape (4,)" in reasons("ch1-ex-step-context", copied)
    # Row i of the toy sentence's context, of the right size for the public check.
    padded = {"context_vector": lambda x, i: torch.cat([context[i], context[i, :1]])}
    assert "wrong context vector" in reasons("ch1-ex-step-context", padded)
    # Delegation to the package.
    lazy = {"context_vector": lambda inputs, i: simplified_attention(inputs)[i]}
    assert "ShortcutTaken" in reasons("ch1-ex-step-context", lazy)
    # The matrix form instead of the loops.
    matrix = {
        "context_vector": lambda x, i: torch.softmax(x @ x[i], dim=-1) @ x,
    }
    assert "Tensor.matmul" in reasons("ch1-ex-step-context", matrix)
    einsum = {
        "context_vector": lambda x, i: torch.einsum(
            "t,td->d", torch.softmax(torch.einsum("td,d->t", x, x[i]), -1), x
        )
    }
    assert "einsum" in reasons("ch1-ex-step-context", einsum)


def test_step_context_asks_for_no_matrix_product_and_nothing_more() -> None:
    # The exercise says "without matrix products"; loops are one way, elementwise products
    # and sums another, and torch.softmax is allowed (the chapter uses it).
    def elementwise(x, i):
        return (torch.softmax((x * x[i]).sum(-1), 0)[:, None] * x).sum(0)

    assert full_marks("ch1-ex-step-context", {"context_vector": elementwise})


def test_step_context_names_common_mistakes() -> None:
    def weights_only(x, i):
        return by_hand_softmax(torch.stack([torch.dot(x[i], row) for row in x]))

    def raw_scores(x, i):
        scores = torch.stack([torch.dot(x[i], row) for row in x])
        return sum(s * row for s, row in zip(scores, x, strict=True))

    assert "the weights, not the weighted sum" in reasons(
        "ch1-ex-step-context", {"context_vector": weights_only}
    )
    assert "raw scores" in reasons("ch1-ex-step-context", {"context_vector": raw_scores})


def test_step_context_hidden_catches_an_overflowing_or_fixed_dtype_answer() -> None:
    def naive(x, i):
        scores = torch.stack([torch.dot(x[i], row) for row in x])
        e = torch.exp(scores)
        weights = e / e.sum()
        return sum(w * row for w, row in zip(weights, x, strict=True))

    assert run_checks("ch1-ex-step-context", {"context_vector": naive}).passed  # public
    assert "overflowed" in reasons("ch1-ex-step-context", {"context_vector": naive})

    def float32_only(x, i):
        return context_vector(x.float(), i)

    assert run_checks("ch1-ex-step-context", {"context_vector": float32_only}).passed
    assert "dtype" in reasons("ch1-ex-step-context", {"context_vector": float32_only})


# ch1-ex-temperature --------------------------------------------------------------------------


def softmax_temperature(scores: torch.Tensor, t: float) -> torch.Tensor:
    return by_hand_softmax(scores / t)


def test_temperature_a_written_softmax_earns_full_marks() -> None:
    assert full_marks("ch1-ex-temperature", {"softmax_temperature": softmax_temperature})


def test_temperature_refuses_every_ready_made_softmax() -> None:
    for lazy in (
        lambda s, t: torch.softmax(s / t, dim=-1),
        lambda s, t: (s / t).softmax(-1),
        lambda s, t: torch.nn.functional.softmax(s / t, dim=-1),
        lambda s, t: torch.log_softmax(s / t, dim=-1).exp(),
        lambda s, t: softmax_stable(s / t),
        # A ready-made stable softmax in all but name.
        lambda s, t: torch.exp(s / t - torch.logsumexp(s / t, -1, keepdim=True)),
        lambda s, t: torch.exp(s / t - (s / t).logsumexp(-1, keepdim=True)),
    ):
        assert "ShortcutTaken" in reasons("ch1-ex-temperature", {"softmax_temperature": lazy})


def test_temperature_names_common_mistakes() -> None:
    def dim_0(s, t):
        e = torch.exp(s / t - (s / t).max())
        return e / e.sum(dim=0, keepdim=True)

    def multiplied(s, t):
        return by_hand_softmax(s * t)

    def ignored(s, t):
        return by_hand_softmax(s)

    label = "ch1-ex-temperature"
    assert "dimension 0" in reasons(label, {"softmax_temperature": dim_0})
    assert "multiplied" in reasons(label, {"softmax_temperature": multiplied})
    assert "left out" in reasons(label, {"softmax_temperature": ignored})


def test_temperature_public_check_refuses_a_softmax_that_overflows() -> None:
    def naive(s, t):  # the formula as written: e^(s / T) overflows for a small T
        e = torch.exp(s / t)
        return e / e.sum(dim=-1, keepdim=True)

    label = "ch1-ex-temperature"
    # Right wherever the scaled scores stay small, as at the public check's T = 0.5 and 2.
    scores = 3 * torch.randn(3, 5, generator=torch.Generator().manual_seed(202))
    for t in (0.5, 2.0):
        assert torch.allclose(naive(scores, t), softmax_temperature(scores, t))
    # The public check alone, the one a student runs, fails it at T = 0.01, and its hint
    # names the method without code.
    result = run_checks(label, {"softmax_temperature": naive})
    assert not result.passed
    assert "overflowed" in reasons(label, {"softmax_temperature": naive}, hidden=False)
    hint = reasons(label, {"softmax_temperature": naive}, hidden=False, hints=True)
    assert "subtract each row's largest scaled score before exponentiating" in hint
    assert "amax" not in hint and "max(" not in hint
    # The check's own scores overflow a naive exp at T = 0.01 (e^x is inf past x = 88.7).
    assert torch.isinf(torch.exp(scores / 0.01)).any()
    # The correct answer still passes the public check.
    assert run_checks(label, {"softmax_temperature": softmax_temperature}).passed


def test_temperature_hidden_catches_a_hard_coded_dimension() -> None:
    def dim_1(s, t):  # right for the public (3, 5) scores only
        e = torch.exp(s / t - (s / t).amax(dim=1, keepdim=True))
        return e / e.sum(dim=1, keepdim=True)

    label = "ch1-ex-temperature"
    assert run_checks(label, {"softmax_temperature": dim_1}).passed
    assert not run_checks(label, {"softmax_temperature": dim_1}, hidden=True).passed


def test_temperature_catches_one_maximum_for_the_whole_tensor() -> None:
    def global_max(s, t):  # stable only while every row is near the largest score
        e = torch.exp(s / t - (s / t).max())
        return e / e.sum(dim=-1, keepdim=True)

    label = "ch1-ex-temperature"
    # At T = 0.01 the public scores' rows lie hundreds apart: a low row rounds to 0 / 0.
    assert not run_checks(label, {"softmax_temperature": global_max}).passed  # public
    assert "rounded to 0" in reasons(label, {"softmax_temperature": global_max}, hidden=False)
    assert "rounded to 0" in reasons(label, {"softmax_temperature": global_max})


# ch1-ex-rows-columns -------------------------------------------------------------------------


def attention_received(inputs: torch.Tensor) -> torch.Tensor:
    t = inputs.shape[0]
    scores = torch.tensor([[float(torch.dot(a, b)) for b in inputs] for a in inputs])
    weights = by_hand_softmax(scores.to(inputs.dtype))
    return torch.stack([weights[:, j].sum() for j in range(t)])


def test_rows_columns_an_answer_earns_full_marks() -> None:
    assert full_marks("ch1-ex-rows-columns", {"attention_received": attention_received})


def test_rows_columns_refuses_copied_values_row_sums_and_the_package() -> None:
    label = "ch1-ex-rows-columns"
    toy = simplified_attention(INPUTS, return_weights=True)[1].sum(dim=0)
    # The toy sentence's column sums, whatever the inputs: the check's sentence has 7 tokens.
    copied = {"attention_received": lambda x: toy}
    assert not run_checks(label, copied).passed
    padded = {"attention_received": lambda x: torch.cat([toy, toy[:1]])}
    assert "wrong column sums" in reasons(label, padded)

    def rows(x):
        return by_hand_softmax(x @ x.T).sum(dim=-1)

    assert "those are the rows" in reasons(label, {"attention_received": rows})

    def scores(x):
        return (x @ x.T).sum(dim=0)

    assert "summed the scores" in reasons(label, {"attention_received": scores})

    def package(x):
        return simplified_attention(x, return_weights=True)[1].sum(dim=0)

    assert "ShortcutTaken" in reasons(label, {"attention_received": package})


def test_rows_columns_refuses_ready_made_weights() -> None:
    def page_code(x):  # the chapter's own line, summed over the columns
        return torch.softmax(x @ x.T, -1).sum(0)

    def sdpa(x):  # identity values: the output is the weight matrix
        eye = torch.eye(x.shape[0], dtype=x.dtype)
        return torch.nn.functional.scaled_dot_product_attention(x, x, eye, scale=1).sum(0)

    def module(x):  # one head, queries scaled by sqrt(d) against its 1 / sqrt(d)
        d = x.shape[1]
        mha = torch.nn.MultiheadAttention(d, 1, bias=False)
        eye = torch.eye(d)
        with torch.no_grad():
            mha.in_proj_weight.copy_(torch.cat([eye * d**0.5, eye, eye]))
        return mha(x, x, x, need_weights=True)[1].sum(0).detach()

    label = "ch1-ex-rows-columns"
    x = torch.rand(5, 3)
    expected = by_hand_softmax(x @ x.T).sum(0)
    for lazy in (page_code, sdpa, module):
        assert torch.allclose(lazy(x), expected, atol=1e-5)  # right, outside the check
        assert "ShortcutTaken" in reasons(label, {"attention_received": lazy})


# ch1-ex-self ---------------------------------------------------------------------------------


def favourites(inputs: torch.Tensor) -> list[int]:
    picks = []
    for row in inputs:
        scores = [float(torch.dot(row, other)) for other in inputs]
        picks.append(scores.index(max(scores)))  # softmax keeps the order of a row
    return picks


def test_self_an_answer_earns_full_marks() -> None:
    assert full_marks("ch1-ex-self", {"favourites": favourites})
    assert favourites(INPUTS) == [0, 1, 1, 1, 2, 1]  # "with" picks "journey"


def test_self_refuses_the_page_answer_columns_and_self() -> None:
    label = "ch1-ex-self"
    page = [0, 1, 1, 1, 2, 1]  # read off the chapter's heatmap
    assert not run_checks(label, {"favourites": lambda x: page}).passed
    assert not run_checks(label, {"favourites": page}).passed  # a list, not a function

    def columns(x):
        return by_hand_softmax(x @ x.T).argmax(dim=0)

    assert "each column" in reasons(label, {"favourites": columns})
    itself = {"favourites": lambda x: list(range(x.shape[0]))}
    assert "picked itself" in reasons(label, itself)


def test_self_refuses_the_package() -> None:
    def package(x):
        return simplified_attention(x, return_weights=True)[1].argmax(-1).tolist()

    assert package(INPUTS) == [0, 1, 1, 1, 2, 1]  # right, outside the check
    assert "ShortcutTaken" in reasons("ch1-ex-self", {"favourites": package})


# Lazy answers of the second attack: other names for refused calls, answers that compute
# later or compare equal to anything, and answers that reach into the check ---------------


def later_attention_weights(x: torch.Tensor) -> torch.Tensor:
    """Chapter 7's tiled attention as a weight matrix: identity values, padded to t columns."""
    from attention_from_scratch.tiled import tiled_attention

    t, d = x.shape
    width = max(t, d)
    padded = torch.zeros(t, width, dtype=x.dtype)
    padded[:, :d] = x
    eye = torch.eye(t, width, dtype=x.dtype)[None, None]
    q = padded[None, None] * width**0.5  # undoes the kernel's 1 / sqrt(d_h)
    return tiled_attention(q, padded[None, None], eye, causal=False)[0, 0][:, :t]


def later_context(x: torch.Tensor, i: int) -> torch.Tensor:
    from attention_from_scratch.causal import CrossAttention

    d = x.shape[1]
    module = CrossAttention(d, d, d)
    with torch.no_grad():
        module.W_query.weight.copy_(torch.eye(d) * d**0.5)
        module.W_key.weight.copy_(torch.eye(d))
        module.W_value.weight.copy_(torch.eye(d))
        return module(x[None], x[None])[0, i]


class Later(torch.Tensor):
    """A tensor whose values are computed when the check first reads them, outside the
    refusal: `compute` runs on `detach`."""

    compute = None

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func is torch.Tensor.detach and args[0].compute is not None:
            return args[0].compute().detach()
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


def later(shape, compute, dtype=torch.float32) -> torch.Tensor:
    out = torch.zeros(shape, dtype=dtype).as_subclass(Later)
    out.compute = compute
    return out


def test_step_context_refuses_other_names_for_a_matrix_product() -> None:
    aten = torch.ops.aten
    label = "ch1-ex-step-context"
    for lazy in (
        lambda x, i: torch.linalg.matmul(torch.softmax(torch.linalg.matmul(x, x[i]), -1), x),
        lambda x, i: aten.mv(x.T, torch.softmax(aten.mv(x, x[i]), -1)),
        lambda x, i: aten.matmul.default(torch.softmax(aten.matmul.default(x, x[i]), -1), x),
        lambda x, i: x.new_zeros(x.shape[1]).addmv(
            x.T, torch.softmax(x.new_zeros(len(x)).addmv(x, x[i]), -1)
        ),
        later_context,  # chapter 3's cross-attention with identity projections
    ):
        assert "ShortcutTaken" in reasons(label, {"context_vector": lazy})


def test_step_context_refuses_a_tensor_that_computes_later() -> None:
    def lazy(x, i):
        return later(x.shape[1], lambda: simplified_attention(x)[i])

    assert "plain torch.Tensor" in reasons("ch1-ex-step-context", {"context_vector": lazy})


def test_temperature_refuses_private_aten_and_attention_softmaxes() -> None:
    aten = torch.ops.aten

    def tiled(s, t):  # chapter 7's online softmax, with identity keys and values
        from attention_from_scratch.tiled import tiled_attention

        n = s.shape[-1]
        q = (s / t).reshape(1, 1, -1, n) * n**0.5
        eye = torch.eye(n, dtype=s.dtype)[None, None]
        return tiled_attention(q, eye, eye, causal=False).reshape(s.shape)

    for lazy in (
        lambda s, t: aten._softmax(s / t, -1, False),
        lambda s, t: aten.softmax.int(s / t, -1),
        lambda s, t: aten._log_softmax.default(s / t, -1, False).exp(),
        lambda s, t: torch._softmax(s / t, -1, False),
        lambda s, t: torch.nn.functional.softmin(-s / t, -1),
        lambda s, t: torch.exp(s / t - aten.logsumexp(s / t, [-1], True)),
        lambda s, t: torch.exp(s / t - torch.logcumsumexp(s / t, -1)[..., -1:]),
        tiled,
    ):
        assert "ShortcutTaken" in reasons("ch1-ex-temperature", {"softmax_temperature": lazy})


def test_temperature_refuses_a_tensor_that_computes_later() -> None:
    def lazy(s, t):
        return later(s.shape, lambda: torch.softmax(s / t, -1), s.dtype)

    assert "plain torch.Tensor" in reasons("ch1-ex-temperature", {"softmax_temperature": lazy})


def test_rows_columns_refuses_logsumexp_private_softmaxes_and_later_attention() -> None:
    def lse(x):
        s = x @ x.T
        return torch.exp(s - torch.logsumexp(s, -1, keepdim=True)).sum(0)

    label = "ch1-ex-rows-columns"
    for lazy in (
        lse,
        lambda x: torch._softmax(x @ x.T, -1, False).sum(0),
        lambda x: torch.ops.aten._softmax(x @ x.T, -1, False).sum(0),
        lambda x: later_attention_weights(x).sum(0),
    ):
        assert torch.allclose(lazy(INPUTS), attention_received(INPUTS), atol=1e-5)
        assert "ShortcutTaken" in reasons(label, {"attention_received": lazy})
    computes_later = {
        "attention_received": lambda x: later(len(x), lambda: torch.softmax(x @ x.T, -1).sum(0))
    }
    assert "plain torch.Tensor" in reasons(label, computes_later)


def test_self_refuses_lists_that_equal_anything_and_later_attention() -> None:
    class Anything(list):
        def __eq__(self, other):
            return True

        def __ne__(self, other):
            return False

    class AnyInt(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

    label = "ch1-ex-self"
    assert "expected a list" in reasons(label, {"favourites": lambda x: Anything([0] * len(x))})
    any_ints = {"favourites": lambda x: [AnyInt(0)] * len(x)}
    assert "subclass AnyInt" in reasons(label, any_ints)
    tiled = {"favourites": lambda x: later_attention_weights(x).argmax(-1).tolist()}
    assert "ShortcutTaken" in reasons(label, tiled)

    def package_later(x):  # the package runs when the check reads the values
        return later(
            len(x), lambda: simplified_attention(x, return_weights=True)[1].argmax(-1), torch.long
        )

    assert "plain torch.Tensor" in reasons(label, {"favourites": package_later})


def test_an_answer_that_reaches_into_the_check_fails() -> None:
    import sys

    def zero_the_checks_inputs(x):  # uniform weights everywhere: every favourite is 0
        frame = sys._getframe(1)
        while frame is not None:
            for value in list(frame.f_locals.values()):
                if isinstance(value, torch.Tensor) and value.is_floating_point():
                    value.zero_()
            frame = frame.f_back
        return [0] * len(x)

    why = reasons("ch1-ex-self", {"favourites": zero_the_checks_inputs})
    assert "changed the check's own inputs" in why


def test_an_answer_that_leaves_a_torch_mode_on_fails() -> None:
    from torch.utils._python_dispatch import TorchDispatchMode

    class Passthrough(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    def leaves_a_mode(inputs, i):
        mode = Passthrough()
        mode.__enter__()  # never left: it would see every comparison the check makes
        leaves_a_mode.mode = mode
        return context_vector(inputs, i)

    try:
        why = reasons("ch1-ex-step-context", {"context_vector": leaves_a_mode})
    finally:
        # Left the way it was entered: popping torch's stack by hand crashes torch 2.5 later.
        leaves_a_mode.mode.__exit__(None, None, None)
    assert "torch mode switched on" in why


def test_later_attention_refused_by_name_exists() -> None:
    """A renamed class or function would drop out of the refusal silently."""
    import importlib

    from attention_from_scratch.exercises import ch1, ch2

    for name in {*ch1.LATER_ATTENTION, *ch2._LATER_ATTENTION}:
        parts = name.split(".")
        target = importlib.import_module(".".join(parts[:2]))
        for part in parts[2:]:
            target = getattr(target, part)
        assert f"{target.__module__}.{target.__qualname__}" == name
