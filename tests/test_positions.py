"""Position encodings of chapter 6: the sinusoidal formula, learned tables, rotary embeddings."""

from __future__ import annotations

import math

import pytest
import torch

from attention_from_scratch import (
    LearnedPositions,
    RotaryEmbedding,
    SinusoidalPositions,
    sinusoidal_positions,
)


def test_sinusoidal_matches_the_formula_entry_by_entry() -> None:
    num_positions, d = 12, 10
    table = sinusoidal_positions(num_positions, d)
    assert table.shape == (num_positions, d) and table.dtype == torch.float32
    for p in range(num_positions):
        for column in range(d):
            angle = p / 10000 ** (2 * (column // 2) / d)
            expected = math.sin(angle) if column % 2 == 0 else math.cos(angle)
            assert table[p, column].item() == pytest.approx(expected, abs=1e-6)


def test_sinusoidal_known_values_and_odd_size() -> None:
    # Position 0: sin 0 = 0, cos 0 = 1; position 1, first pair: sin 1, cos 1.
    table = sinusoidal_positions(2, 5)
    assert table[0].tolist() == [0.0, 1.0, 0.0, 1.0, 0.0]
    assert table[1, 0].item() == pytest.approx(0.8414710, abs=1e-6)
    assert table[1, 1].item() == pytest.approx(0.5403023, abs=1e-6)
    # The last (odd) column is a sine of the third frequency, 10000**(-4/5).
    assert table[1, 4].item() == pytest.approx(math.sin(10000 ** (-4 / 5)), abs=1e-7)


def test_sinusoidal_dot_products_depend_on_distance_only() -> None:
    table = sinusoidal_positions(100, 32).double()
    assert (table[10] @ table[17]).item() == pytest.approx((table[60] @ table[67]).item())
    # Every row has length sqrt(d / 2): one point on each of d / 2 unit circles.
    assert torch.allclose(table.norm(dim=-1), torch.full((100,), 4.0, dtype=torch.float64))


def test_sinusoidal_module_adds_the_table_with_an_offset() -> None:
    module = SinusoidalPositions(context_length=10, d=6)
    x = torch.zeros(2, 4, 6)
    assert torch.equal(module(x)[1], sinusoidal_positions(10, 6)[:4])
    assert torch.equal(module(x, offset=3)[0], sinusoidal_positions(10, 6)[3:7])
    assert list(module.parameters()) == []


def test_learned_positions_add_one_trained_row_per_position() -> None:
    torch.manual_seed(0)
    module = LearnedPositions(context_length=8, d=4)
    x = torch.randn(3, 5, 4)
    out = module(x, offset=2)
    assert out.shape == (3, 5, 4)
    assert torch.allclose(out - x, module.table.weight[2:7].expand(3, 5, 4))
    out.sum().backward()
    assert module.table.weight.grad is not None
    # Rows never used get no gradient.
    assert torch.equal(module.table.weight.grad[:2], torch.zeros(2, 4))


def rotary_by_hand(x: torch.Tensor, position: int, base: float = 10000.0) -> torch.Tensor:
    """One vector rotated pair by pair with 2x2 rotation matrices (independent of the module)."""
    d_h = x.shape[-1]
    out = torch.empty(d_h, dtype=torch.float64)
    for i in range(d_h // 2):
        angle = position * base ** (-2 * i / d_h)
        rotation = torch.tensor(
            [[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]],
            dtype=torch.float64,
        )
        out[2 * i : 2 * i + 2] = rotation @ x[2 * i : 2 * i + 2].double()
    return out


def test_rotary_rotates_each_pair_by_position_times_frequency() -> None:
    torch.manual_seed(0)
    rope = RotaryEmbedding(head_dim=6)
    x = torch.randn(2, 3, 5, 6)  # (b, h, t, d_h)
    out = rope(x)
    assert out.shape == x.shape and out.dtype == x.dtype
    for t in range(5):
        assert torch.allclose(out[1, 2, t].double(), rotary_by_hand(x[1, 2, t], t), atol=1e-6)
    # Position 0 is not rotated.
    assert torch.equal(out[..., 0, :], x[..., 0, :])


@pytest.mark.parametrize("shift", [1, 7, 250])
def test_rotary_scores_depend_only_on_the_distance(shift: int) -> None:
    torch.manual_seed(1)
    rope = RotaryEmbedding(head_dim=16)
    q = torch.randn(1, 1, 1, 16, dtype=torch.float64)
    k = torch.randn(1, 1, 1, 16, dtype=torch.float64)
    for m, n in [(5, 2), (2, 5), (9, 9)]:
        near = (rope(q, offset=m) * rope(k, offset=n)).sum()
        far = (rope(q, offset=m + shift) * rope(k, offset=n + shift)).sum()
        assert near.item() == pytest.approx(far.item(), abs=1e-9)
    # A different distance gives a different score: positions are not simply ignored.
    three = (rope(q, offset=3) * rope(k, offset=0)).sum()
    minus_three = (rope(q, offset=0) * rope(k, offset=3)).sum()
    assert abs(three.item() - minus_three.item()) > 1e-3


def test_rotary_offset_token_by_token_equals_the_full_sequence() -> None:
    torch.manual_seed(2)
    rope = RotaryEmbedding(head_dim=8)
    x = torch.randn(2, 2, 7, 8)  # (b, h, t, d_h)
    full = rope(x)
    one_by_one = torch.cat([rope(x[:, :, p : p + 1], offset=p) for p in range(7)], dim=2)
    assert torch.allclose(one_by_one, full, atol=1e-6)
    # A chunk starting at position 3 equals the same rows of the full sequence.
    assert torch.allclose(rope(x[:, :, 3:], offset=3), full[:, :, 3:], atol=1e-6)


def test_rotary_preserves_norms() -> None:
    torch.manual_seed(3)
    rope = RotaryEmbedding(head_dim=32)
    x = torch.randn(3, 4, 9, 32)
    assert torch.allclose(rope(x, offset=1000).norm(dim=-1), x.norm(dim=-1), atol=1e-5)


@pytest.mark.parametrize(
    ("build", "error", "match"),
    [
        (lambda: sinusoidal_positions(0, 4), ValueError, "num_positions"),
        (lambda: sinusoidal_positions(4, 2.0), TypeError, "d: expected"),
        (lambda: sinusoidal_positions(4, 4, base=1.0), ValueError, "base"),
        (lambda: RotaryEmbedding(7), ValueError, "head_dim: expected an even"),
        (lambda: RotaryEmbedding(8, base="big"), TypeError, "base"),
        (lambda: RotaryEmbedding(8)(torch.zeros(1, 2, 3, 6)), ValueError, "head_dim=8"),
        (lambda: RotaryEmbedding(8)(torch.zeros(3, 8), offset=-1), ValueError, "offset"),
        (lambda: RotaryEmbedding(8)(torch.zeros(3, 8), offset=1.5), TypeError, "offset"),
        (lambda: RotaryEmbedding(8)(torch.zeros(3, 8, dtype=torch.long)), TypeError, "x"),
        (lambda: LearnedPositions(4, 3)(torch.zeros(1, 5, 3)), ValueError, "context_length=4"),
        (lambda: LearnedPositions(4, 3)(torch.zeros(1, 2, 3), offset=3), ValueError, "offset"),
        (lambda: SinusoidalPositions(4, 3)(torch.zeros(1, 2, 5)), ValueError, "d=3"),
    ],
)
def test_bad_arguments_are_named(build, error, match: str) -> None:
    with pytest.raises(error, match=match):
        build()
