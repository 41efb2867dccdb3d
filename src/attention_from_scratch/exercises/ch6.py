"""Checks for the exercises of chapter 6, "Attention that learns".

Expected values are computed here from the formulas with ``math.sin`` and ``math.cos``, or from
which tokens each causal query can see, never from a learner's code or the package's.
"""

from __future__ import annotations

import math

import torch

from ._core import Exercise, answer_tensor


def sinusoid_by_formula(num_positions: int, d: int) -> torch.Tensor:
    """The sinusoidal encoding written out one entry at a time (the reference of the checks).

    Introduced in chapter 6.
    """
    rows = []
    for p in range(num_positions):
        row = []
        for column in range(d):
            angle = p / 10000 ** (2 * (column // 2) / d)
            row.append(math.sin(angle) if column % 2 == 0 else math.cos(angle))
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float64)  # (t, d)


def rotated_by_formula(x: list[float], m: int) -> torch.Tensor:
    """A vector rotated for position ``m``, pair by pair (the reference of the checks).

    Introduced in chapter 6.
    """
    d_h = len(x)
    out = []
    for i in range(d_h // 2):
        angle = m * 10000 ** (-2 * i / d_h)
        a, b = x[2 * i], x[2 * i + 1]
        out += [
            a * math.cos(angle) - b * math.sin(angle),
            a * math.sin(angle) + b * math.cos(angle),
        ]
    return torch.tensor(out, dtype=torch.float64)  # (d_h,)


sinusoidal = Exercise("ch6-ex-sinusoidal", chapter=6)


@sinusoidal.check(
    points=1, hint="`my_sinusoidal(8, 6)` must return a float tensor of shape (8, 6)."
)
def returns_a_table(my_sinusoidal):
    table = my_sinusoidal(8, 6)
    assert isinstance(table, torch.Tensor) and table.is_floating_point()
    assert tuple(table.shape) == (8, 6)


@sinusoidal.check(
    points=2,
    hint="Column 2i holds sin(p / 10000**(2i / d)) and column 2i + 1 the cos of the same "
    "angle; rows are positions p = 0, 1, ...",
)
def follows_the_formula(my_sinusoidal):
    table = answer_tensor(my_sinusoidal(8, 6), (8, 6)).double()
    assert torch.allclose(table, sinusoid_by_formula(8, 6), atol=1e-5)


rotate_pair = Exercise("ch6-ex-rotate-pair", chapter=6)

_VECTOR = [0.5, -1.0, 2.0, 0.25, -0.75, 1.5, 1.0, -2.0]


@rotate_pair.check(
    points=2,
    hint="`rotate(x, m)` must rotate features (2i, 2i + 1) of x by the angle m * theta_i, "
    "theta_i = 10000**(-2i / d_h): (a cos - b sin, a sin + b cos).",
)
def rotates_each_pair(rotate):
    x = torch.tensor(_VECTOR)
    rotated = answer_tensor(rotate(x, 5), (8,)).double()
    assert torch.allclose(rotated, rotated_by_formula(_VECTOR, 5), atol=1e-5)


@rotate_pair.check(points=1, hint="A rotation keeps the length: |rotate(x, m)| = |x|.")
def keeps_the_length(rotate):
    x = torch.tensor(_VECTOR)
    rotated = answer_tensor(rotate(x, 37), (8,))
    assert math.isclose(float(rotated.norm()), math.sqrt(sum(v * v for v in _VECTOR)), rel_tol=1e-5)
    # A rotation by a non-zero angle must move the vector.
    assert not torch.allclose(rotated, x)


causal_bag = Exercise("ch6-ex-causal-bag", chapter=6)


@causal_bag.check(
    points=2,
    hint="`unchanged` must be a (6,) bool tensor. Query i sees tokens 0..i: after swapping "
    "tokens 1 and 2, which queries see the same tokens, with the same token of their own?",
)
def which_outputs_stay(unchanged):
    answer = answer_tensor(unchanged, (6,))
    assert answer.dtype == torch.bool
    # Query i reads the bag {0..i}; swapping 1 and 2 changes the bag of query 1 and the own
    # token of queries 1 and 2 only.
    expected = [i == 0 or i >= 3 for i in range(6)]
    assert answer.tolist() == expected


why_order_blind = Exercise(
    "ch6-ex-why-order-blind",
    chapter=6,
    manual_points=2,
    rubric="1 point: without positions the model sees only the bag of earlier tokens; as "
    "tokens are independent, every order is equally likely, so the token three back is any "
    "earlier token with equal probability and the most frequent one is the best guess. "
    "1 point: in long sequences all tokens become about equally frequent, so that guess "
    "approaches 1/16.",
)
