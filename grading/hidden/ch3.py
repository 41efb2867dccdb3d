"""Hidden checks of chapter 3: loaded by the grader, never shipped to students.

They call the same answers as the public checks on what those never try: the smallest and
largest windows, scores with more batch dimensions and float64, rows of huge scores, a single
token, p = 0, a small leak of the future, and a leak that skips the next token.
"""

from __future__ import annotations

import torch

from attention_from_scratch import causal_mask
from attention_from_scratch.exercises import get_exercise
from attention_from_scratch.exercises.ch3 import (
    WINDOW_SHORTCUTS,
    _as_tensor,
    _assert_dropped_first,
    _attention_with_mask,
    _call_dropout,
    _call_order,
    _call_window_mask,
    _check_changed_rows,
    _check_is_causal,
    _check_masked_softmax,
    _generator,
    _order_inputs,
    _refusing,
    _renormalise,
    _window_reference,
)

sliding_window = get_exercise("ch3-ex-sliding-window")


@sliding_window.check(
    points=1,
    hint="Try the edges: window 0 leaves each token only itself, a window of t or more is "
    "the causal mask, and t = 1 is a (1, 1) mask.",
    hidden=True,
)
def window_edges(window_mask):
    for t, window in ((6, 0), (4, 4), (5, 9), (1, 0), (1, 3)):
        mask = _call_window_mask(window_mask, t, window)
        assert mask.dtype == torch.bool
        assert torch.equal(mask, _window_reference(t, window)), (t, window)
    assert torch.equal(_call_window_mask(window_mask, 8, 7), causal_mask(8))


@sliding_window.check(
    points=1,
    hint="`window_attention` must work for any number of leading dimensions, e.g. "
    "(b, h, t, t), and keep the dtype of the scores.",
    hidden=True,
)
def window_attention_heads_float64(window_attention):
    scores = torch.randn(2, 3, 6, 6, generator=_generator(41), dtype=torch.float64)
    with _refusing(*WINDOW_SHORTCUTS, write="the window mask"):
        weights = window_attention(scores.clone(), 0)
    weights = _as_tensor(weights, (2, 3, 6, 6))
    expected = torch.softmax(scores.masked_fill(_window_reference(6, 0), float("-inf")), -1)
    assert weights.dtype == torch.float64
    assert torch.allclose(weights, expected, atol=1e-10)


dropout_order = get_exercise("ch3-ex-dropout-order")


@dropout_order.check(
    points=1,
    hint="Both orders must work on a single (t, t) matrix as well as on a batch, and keep float64.",
    hidden=True,
)
def both_orders_unbatched_float64(renormalise_then_drop, drop_then_renormalise):
    masked, keep = _order_inputs(9, b=1, t=5, p=0.5)
    masked, keep = masked[0].double(), keep[0].double()  # (t, t)
    after = _as_tensor(_call_order(renormalise_then_drop, masked, keep), (5, 5))
    before = _as_tensor(_call_order(drop_then_renormalise, masked, keep), (5, 5))
    assert after.dtype == before.dtype == torch.float64
    assert torch.allclose(after, _renormalise(masked) * keep, atol=1e-10)
    _assert_dropped_first(before, _renormalise(masked * keep), atol=1e-10)


all_masked = get_exercise("ch3-ex-all-masked")


@all_masked.check(
    points=1,
    hint="`masked_softmax` must stay finite for huge scores (hundreds) and work when the "
    "query and key counts differ, e.g. (b, 3, 9).",
    hidden=True,
)
def huge_scores_and_rectangles(masked_softmax):
    _check_masked_softmax(masked_softmax, (3, 4, 9), scale=400.0, seed=12)


dropout_rate = get_exercise("ch3-ex-dropout-rate")


@dropout_rate.check(
    points=1,
    hint="With p = 0 nothing is dropped and nothing scaled; the output keeps the input's "
    "shape (any number of dimensions) and dtype.",
    hidden=True,
)
def no_dropout_and_any_shape(my_dropout):
    x = torch.rand(3, 40, 50, generator=_generator(4), dtype=torch.float64) + 0.5
    assert torch.equal(_call_dropout(my_dropout, x, 0.0, seed=5), x)
    out = _call_dropout(my_dropout, x, 0.2, seed=6)
    assert out.dtype == torch.float64
    kept = out != 0
    assert abs((~kept).double().mean().item() - 0.2) < 0.02
    assert torch.allclose(out[kept], x[kept] / 0.8)


causality = get_exercise("ch3-ex-causality-test")


@causality.check(
    points=1,
    hint="A leak can be small: the check also tries a leaking module whose outputs are a "
    "hundred times smaller. Compare with a tight tolerance, and on other sizes.",
    hidden=True,
)
def small_leak_other_sizes(changed_rows, is_causal):
    _check_changed_rows(changed_rows, b=1, t=9, d_in=3, seed=23, leak=0.01)
    _check_is_causal(is_causal, b=3, t=4, d_in=6, seed=24, leak=0.01)


@causality.check(
    points=1,
    hint="A leak need not reach the very next token: the check also tries a layer whose "
    "token i sees token i + 2 but not i + 1. Test whether any earlier row changes, not "
    "just the row before the edited token.",
    hidden=True,
)
def leak_that_skips_the_next_token(is_causal):
    t, d_in = 7, 4
    i = torch.arange(t).unsqueeze(1)  # (t, 1) queries
    j = torch.arange(t).unsqueeze(0)  # (1, t) keys
    hide = causal_mask(t) & (j != i + 2)  # (t, t): the future hidden, except two ahead
    module = _attention_with_mask(d_in, t, hide, seed=25)
    x = torch.randn(2, t, d_in, generator=_generator(26))
    with _refusing(write="the test"):
        verdict = is_causal(module, x.clone())
    assert isinstance(verdict, bool), f"expected a bool, got {type(verdict).__name__}"
    assert verdict is False, "a layer whose token i sees token i + 2: expected False, got True"
