"""Position encodings of chapter 6: the sinusoidal formula, learned tables, rotary embeddings."""

from __future__ import annotations

import math

import pytest
import torch

from attention_from_scratch import (
    CachedCausalModel,
    LearnedPositions,
    MultiHeadAttention,
    RotaryEmbedding,
    RotaryGroupedQueryAttention,
    RotaryMultiHeadAttention,
    SinusoidalPositions,
    TinyCausalModel,
    show_source,
    sinusoidal_positions,
    train,
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


def test_rotary_frequencies_stay_float64_on_the_cpu_whatever_the_model_moves_to() -> None:
    # Module.to moves buffers and keeps their dtype: a float64 buffer could not go to Apple's
    # MPS, and .to(torch.bfloat16) would round it. The frequencies are no buffer.
    model = TinyCausalModel(16, d_model=32, context_length=64, positions="rotary")
    tensors = [*model.parameters(), *model.buffers()]
    assert tensors and all(t.dtype != torch.float64 for t in tensors)
    model.to(torch.bfloat16).to("meta")
    rope = model.blocks[0].attention.rope
    assert rope.inv_freq.dtype == torch.float64 and rope.inv_freq.device.type == "cpu"
    assert model.head.weight.device.type == "meta"


def test_rotary_in_bfloat16_rotates_like_float32_then_cast() -> None:
    torch.manual_seed(9)
    layer = RotaryMultiHeadAttention(6, 16, 8, 0.0, num_heads=2).to(torch.bfloat16)
    x = torch.randn(2, 2, 5, 8)  # (b, h, t, d_h)
    for offset in [0, 1000, 4000]:
        expected = RotaryEmbedding(8)(x, offset).to(torch.bfloat16)
        got = layer.rope(x.to(torch.bfloat16), offset)
        assert got.dtype == torch.bfloat16
        # bfloat16 keeps 8 bits: a few of its steps at |x| < 4. Frequencies rounded to
        # bfloat16 would be off by up to 0.2 at position 1000.
        torch.testing.assert_close(got.float(), expected.float(), rtol=0, atol=0.05)


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
        (lambda: RotaryEmbedding(8, interleaved=1), TypeError, "interleaved"),
        (lambda: RotaryMultiHeadAttention(8, 6, 4, 0.0, 2), ValueError, "head_dim"),
        (lambda: RotaryMultiHeadAttention(4, 8, 4, 0.0, 2)(torch.zeros(1, 5, 4)), ValueError, "5"),
        (
            lambda: RotaryMultiHeadAttention(4, 8, 4, 0.0, 2)(torch.zeros(1, 2, 3)),
            ValueError,
            "d_in",
        ),
        (
            lambda: RotaryMultiHeadAttention(4, 8, 4, 0.0, 2)(torch.zeros(1, 2, 4), "yes"),
            TypeError,
            "return_weights",
        ),
    ],
)
def test_bad_arguments_are_named(build, error, match: str) -> None:
    with pytest.raises(error, match=match):
        build()


def test_rotate_half_pairs_feature_i_with_feature_i_plus_half() -> None:
    torch.manual_seed(4)
    rope = RotaryEmbedding(head_dim=6, interleaved=False)
    x = torch.randn(5, 6)  # (t, d_h)
    out = rope(x)
    for p in range(5):
        # Pair i is features (i, i + 3): gather them side by side and rotate by hand.
        side_by_side = x[p].view(2, 3).T.reshape(6)  # (x0, x3, x1, x4, x2, x5)
        expected = rotary_by_hand(side_by_side, p).view(3, 2).T.reshape(6)
        assert torch.allclose(out[p].double(), expected, atol=1e-6)


def test_the_two_conventions_agree_up_to_a_permutation() -> None:
    torch.manual_seed(5)
    d_h = 8
    interleaved = RotaryEmbedding(d_h)
    rotate_half = RotaryEmbedding(d_h, interleaved=False)
    # Features (2i, 2i + 1) moved to (i, i + d_h / 2): evens first, then odds.
    perm = torch.cat([torch.arange(0, d_h, 2), torch.arange(1, d_h, 2)])
    x = torch.randn(2, 3, 7, d_h)  # (b, h, t, d_h)
    assert torch.allclose(rotate_half(x[..., perm]), interleaved(x)[..., perm], atol=1e-6)
    # ... and the same permutation of queries and keys leaves every score unchanged.
    q, k = torch.randn(7, d_h), torch.randn(7, d_h)
    scores = interleaved(q) @ interleaved(k).T  # (t, t)
    permuted = rotate_half(q[:, perm]) @ rotate_half(k[:, perm]).T  # (t, t)
    assert torch.allclose(scores, permuted, atol=1e-5)
    # Without the permutation they differ: the conventions are not interchangeable.
    assert not torch.allclose(rotate_half(x), interleaved(x), atol=1e-3)


def _rotary_and_plain(num_heads: int = 2) -> tuple[RotaryMultiHeadAttention, MultiHeadAttention]:
    torch.manual_seed(6)
    rotary = RotaryMultiHeadAttention(6, 8, 10, 0.0, num_heads)
    plain = MultiHeadAttention(6, 8, 10, 0.0, num_heads)
    plain.load_state_dict(rotary.state_dict(), strict=False)
    return rotary.eval(), plain.eval()


def test_rotary_attention_keeps_chapter_4s_weights_and_names() -> None:
    rotary, plain = _rotary_and_plain()
    assert isinstance(rotary, MultiHeadAttention)
    assert set(rotary.state_dict()) == set(plain.state_dict())
    assert list(rotary.parameters()) != [] and len(list(rotary.parameters())) == len(
        list(plain.parameters())
    )


def test_rotary_attention_with_zero_angles_is_plain_attention() -> None:
    rotary, plain = _rotary_and_plain()
    x = torch.randn(3, 7, 6)
    # With every frequency zero, every rotation is the identity.
    rotary.rope.inv_freq.zero_()
    out, weights = rotary(x, return_weights=True)
    expected, expected_weights = plain(x, return_weights=True)
    assert torch.allclose(out, expected, atol=1e-6)
    assert torch.allclose(weights, expected_weights, atol=1e-6)


def test_rotary_attention_rotates_queries_and_keys_after_the_head_split() -> None:
    rotary, plain = _rotary_and_plain()
    x = torch.randn(2, 9, 6)
    b, t, h, d_h = 2, 9, 2, 4
    q = plain.W_query(x).view(b, t, h, d_h).transpose(1, 2)  # (b, h, t, d_h)
    k = plain.W_key(x).view(b, t, h, d_h).transpose(1, 2)  # (b, h, t, d_h)
    v = plain.W_value(x).view(b, t, h, d_h).transpose(1, 2)  # (b, h, t, d_h)
    rope = RotaryEmbedding(d_h)
    scores = rope(q) @ rope(k).transpose(2, 3) / math.sqrt(d_h)  # (b, h, t, t)
    scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # (b, h, t, t)
    context = (weights @ v).transpose(1, 2).reshape(b, t, h * d_h)  # (b, t, d_out)
    out, got_weights = rotary(x, return_weights=True)
    assert torch.allclose(got_weights, weights, atol=1e-6)
    assert torch.allclose(out, plain.out_proj(context), atol=1e-6)
    # Positions matter now: the plain layer gives another output.
    assert not torch.allclose(out, plain(x), atol=1e-3)


def test_rotary_attention_scores_depend_on_distance_not_on_absolute_position() -> None:
    rotary, _ = _rotary_and_plain(num_heads=1)
    torch.manual_seed(7)
    tokens = torch.randn(1, 3, 6)
    shifted = torch.cat([torch.randn(1, 4, 6), tokens], dim=1)  # the same 3 tokens at 4..6
    _, near = rotary(tokens, return_weights=True)
    q, k, _ = rotary.project(shifted)
    scores = q[..., 4:, :] @ k[..., 4:, :].transpose(2, 3)  # (b, h, 3, 3)
    q0, k0, _ = rotary.project(tokens)
    assert torch.allclose(scores, q0 @ k0.transpose(2, 3), atol=1e-5)
    assert near.shape == (1, 1, 3, 3)


def test_keys_cached_rotated_give_the_full_pass() -> None:
    rotary, _ = _rotary_and_plain()
    x = torch.randn(2, 8, 6)
    full = rotary(x)
    # Decode token by token: each new key is rotated once, for its position, and cached.
    cached_keys, cached_values, outputs = [], [], []
    for p in range(8):
        q, k, v = rotary.project(x[:, p : p + 1], offset=p)  # (b, h, 1, d_h)
        cached_keys.append(k)
        cached_values.append(v)
        keys = torch.cat(cached_keys, dim=2)  # (b, h, p + 1, d_h)
        values = torch.cat(cached_values, dim=2)  # (b, h, p + 1, d_h)
        weights = torch.softmax(q @ keys.transpose(2, 3) / 2.0, dim=-1)  # (b, h, 1, p + 1)
        context = (weights @ values).transpose(1, 2).reshape(2, 1, 8)  # (b, 1, d_out)
        outputs.append(rotary.out_proj(context))
    assert torch.allclose(torch.cat(outputs, dim=1), full, atol=1e-5)


def test_rotary_attention_trains_and_runs_in_float64() -> None:
    rotary, _ = _rotary_and_plain()
    rotary = rotary.double().train()
    x = torch.randn(2, 5, 6, dtype=torch.float64)
    out = rotary(x)
    assert out.dtype == torch.float64
    out.sum().backward()
    assert rotary.W_query.weight.grad is not None and rotary.W_key.weight.grad.abs().sum() > 0


@pytest.mark.parametrize(
    "obj",
    [
        LearnedPositions,
        sinusoidal_positions,
        SinusoidalPositions,
        RotaryEmbedding,
        RotaryMultiHeadAttention,
        TinyCausalModel,
        train,
    ],
    ids=lambda obj: obj.__name__,
)
def test_the_code_chapter_6_displays_fits_its_79_columns(obj: object) -> None:
    for line in str(show_source(obj, docstrings=False)).split("\n"):
        assert len(line) <= 79, f"{obj.__name__}: {line!r}"


def test_a_rotary_tiny_model_rotates_inside_every_layer_and_adds_nothing() -> None:
    torch.manual_seed(8)
    model = TinyCausalModel(10, d_model=8, context_length=6, num_layers=2, positions="rotary")
    assert model.positions is None
    assert all(
        isinstance(layer, RotaryMultiHeadAttention)
        for layer in (block.attention for block in model.blocks)
    )
    tokens = torch.tensor([[1, 2, 3, 1, 2, 3]])
    logits, weights = model(tokens, return_weights=True)
    assert logits.shape == (1, 6, 10) and [w.shape for w in weights] == [(1, 1, 6, 6)] * 2
    # The same token at positions 0 and 3 gets different outputs: positions reach the model.
    assert not torch.allclose(logits[0, 0], logits[0, 3], atol=1e-4)
    # Chapter 7's model combines rotary positions with its cache and grouped heads.
    cached = CachedCausalModel(10, d_model=8, context_length=6, positions="rotary")
    assert all(isinstance(block.attention, RotaryGroupedQueryAttention) for block in cached.blocks)


def test_rotary_attention_fused_path_equals_the_explicit_one() -> None:
    rotary, _ = _rotary_and_plain()
    x = torch.randn(2, 7, 6)
    explicit = rotary(x)
    rotary.fused = True
    assert torch.allclose(rotary(x), explicit, atol=1e-5)
    with pytest.raises(ValueError, match="return_weights"):
        rotary(x, return_weights=True)
