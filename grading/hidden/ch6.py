"""Hidden checks of chapter 6: loaded by the grader, never shipped to students.

They call the answers on other sizes, offsets, dtypes and edge cases than the public checks.
"""

from __future__ import annotations

import torch

from attention_from_scratch.exercises import get_exercise
from attention_from_scratch.exercises.ch6 import (
    call_rotate_half,
    check_accuracy_from,
    check_bound_by_position,
    check_head_ablation,
    check_prediction_changes,
    compare_rotation,
)

rotate_half = get_exercise("ch6-ex-rotate-half")


@rotate_half.check(
    points=1,
    hint="Keep the dtype of x (compute the angles in float64, then convert), and leave x "
    "itself unchanged: return a new tensor.",
    hidden=True,
)
def keeps_float64_and_the_input(rotate_half):
    def draw():
        generator = torch.Generator().manual_seed(71)
        return torch.randn(1, 4, 16, generator=generator, dtype=torch.float64)

    out, x = call_rotate_half(rotate_half, draw, 300)
    assert out.dtype == torch.float64, f"expected float64 as x, got {out.dtype}"
    compare_rotation(out, x, 300, atol=1e-4)


@rotate_half.check(
    points=1,
    hint="Small heads far from position 0: d_h = 2 has one pair, feature 0 with feature 1; "
    "d_h = 6 has three, each with its own frequency.",
    hidden=True,
)
def small_heads_far_away(rotate_half):
    for d_h in (2, 6):

        def draw(d_h=d_h):  # (t, d_h)
            return torch.randn(3, d_h, generator=torch.Generator().manual_seed(72))

        out, x = call_rotate_half(rotate_half, draw, 1000)
        compare_rotation(out, x, 1000, atol=1e-3)


extrapolate = get_exercise("ch6-ex-extrapolate")


@extrapolate.check(
    points=1,
    hint="`start` is an argument: nothing about 32 or 64 may be built in.",
    hidden=True,
)
def any_start(accuracy_from):
    check_accuracy_from(accuracy_from, seed=73, b=5, t=11, vocab=4, start=0)
    check_accuracy_from(accuracy_from, seed=74, b=30, t=11, vocab=4, start=10)


ablate_induction = get_exercise("ch6-ex-ablate-induction")


@ablate_induction.check(
    points=1,
    hint="Any layer and any head of any TinyCausalModel, rotary ones included.",
    hidden=True,
)
def any_layer_and_head(logits_without_head):
    check_head_ablation(logits_without_head, 75, 3, 2, "rotary", layer=0, head=1)


causal_bag = get_exercise("ch6-ex-causal-bag")


@causal_bag.check(
    points=1,
    hint="i may come after j, and the model may rotate its queries and keys.",
    hidden=True,
)
def either_order(prediction_changes):
    check_prediction_changes(prediction_changes, 86, "learned", i=7, j=3, sharpness=1.0)
    check_prediction_changes(prediction_changes, 65, "rotary", i=1, j=4)


why_order_blind = get_exercise("ch6-ex-why-order-blind")


@why_order_blind.check(
    points=1,
    hint="The vocabulary size and k are arguments: nothing about 16 or 3 may be built in.",
    hidden=True,
)
def other_vocab_and_k(bound_by_position):
    check_bound_by_position(bound_by_position, seed=77, b=20, t=12, vocab=3, k=4)
