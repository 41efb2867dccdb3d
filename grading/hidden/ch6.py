"""Hidden checks of chapter 6: loaded by the grader, never shipped to students."""

from __future__ import annotations

import torch

from attention_from_scratch import evaluate
from attention_from_scratch.exercises import answer_module, answer_tensor, get_exercise
from attention_from_scratch.exercises.ch6 import held_out_induction, rotated_half_by_formula

rotate_half = get_exercise("ch6-ex-rotate-half")


@rotate_half.check(
    points=1,
    hint="`rotate_half` must work for any leading axes and head size, with positions "
    "counted from `offset` along the second-to-last axis.",
    hidden=True,
)
def any_shape_and_offset(rotate_half):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 4, 6, dtype=torch.float64)  # (b, h, t, d_h)
    out = answer_tensor(rotate_half(x, 7), (2, 3, 4, 6)).double()
    for p in range(4):
        expected = rotated_half_by_formula(x[1, 2, p].tolist(), 7 + p)
        assert torch.allclose(out[1, 2, p], expected, atol=1e-5)


ablate_induction = get_exercise("ch6-ex-ablate-induction")


@ablate_induction.check(
    points=1,
    hint="Remove the hook after measuring: `induction_model` must predict as well as "
    "before once the measurement is done.",
    hidden=True,
)
def the_model_is_unchanged(without_induction_head, induction_model):
    assert isinstance(without_induction_head, (int, float))
    # A copy keeps the learner's hooks: one left behind still switches the layer off.
    assert evaluate(answer_module(induction_model), *held_out_induction()) > 0.95
