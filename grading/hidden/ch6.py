"""Hidden checks of chapter 6: loaded by the grader, never shipped to students."""

from __future__ import annotations

import torch

from attention_from_scratch.exercises import answer_tensor, get_exercise
from attention_from_scratch.exercises.ch6 import rotated_by_formula, sinusoid_by_formula

sinusoidal = get_exercise("ch6-ex-sinusoidal")


@sinusoidal.check(
    points=1,
    hint="`my_sinusoidal` must also work for 50 positions and d = 16 (large angles).",
    hidden=True,
)
def other_sizes(my_sinusoidal):
    table = answer_tensor(my_sinusoidal(50, 16), (50, 16)).double()
    assert torch.allclose(table, sinusoid_by_formula(50, 16), atol=1e-4)


rotate_pair = get_exercise("ch6-ex-rotate-pair")


@rotate_pair.check(
    points=1,
    hint="`rotate(q, m) @ rotate(k, n)` must depend on m - n only, and position 0 must "
    "leave a vector unchanged.",
    hidden=True,
)
def relative_positions(rotate):
    q = [1.0, 0.5, -0.5, 2.0]
    k = [-1.0, 1.5, 0.25, 0.5]
    near = float(answer_tensor(rotate(torch.tensor(q), 9), (4,)) @ rotate(torch.tensor(k), 4))
    far = float(answer_tensor(rotate(torch.tensor(q), 105), (4,)) @ rotate(torch.tensor(k), 100))
    expected = float(rotated_by_formula(q, 9) @ rotated_by_formula(k, 4))
    assert abs(near - expected) < 1e-4 and abs(far - expected) < 1e-4
    assert torch.allclose(answer_tensor(rotate(torch.tensor(q), 0), (4,)), torch.tensor(q))
