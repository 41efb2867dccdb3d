"""The one place attention is computed: `attention` (chapter 3) and `head_attention` (chapter 4).

Expectations come from first principles: small inputs whose weights can be worked out by
hand, loops over heads and groups, and `torch.nn.functional.scaled_dot_product_attention`.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attention_from_scratch import (
    CausalAttention,
    CrossAttention,
    MultiHeadAttention,
    WideMultiHeadAttention,
    attention,
    head_attention,
)
from attention_from_scratch import causal as causal_module
from attention_from_scratch import multihead as multihead_module


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_two_keys_by_hand() -> None:
    # One query (1, 0) and keys (2, 0) and (0, 0), d = 2: the scores are 2 / sqrt(2) = sqrt(2)
    # and 0, so the weights are e^sqrt(2) / (e^sqrt(2) + 1) and 1 / (e^sqrt(2) + 1).
    queries = torch.tensor([[1.0, 0.0]])
    keys = torch.tensor([[2.0, 0.0], [0.0, 0.0]])
    values = torch.tensor([[10.0], [20.0]])
    context, weights = attention(queries, keys, values)
    e = math.exp(math.sqrt(2))
    expected = torch.tensor([[e / (e + 1), 1 / (e + 1)]])
    torch.testing.assert_close(weights, expected)
    torch.testing.assert_close(context, torch.tensor([[10 * e / (e + 1) + 20 / (e + 1)]]))


def test_scale_multiplies_the_scores() -> None:
    queries = torch.tensor([[1.0, 0.0]])
    keys = torch.tensor([[2.0, 0.0], [0.0, 0.0]])
    values = torch.eye(2)
    _, weights = attention(queries, keys, values, scale=0.5)  # scores 1 and 0
    expected = torch.tensor([[math.e / (math.e + 1), 1 / (math.e + 1)]])
    torch.testing.assert_close(weights, expected)


def test_causal_mask_hides_the_future_and_rows_sum_to_one() -> None:
    q, k, v = randn(5, 4, seed=1), randn(5, 4, seed=2), randn(5, 3, seed=3)
    hidden = torch.ones(5, 5, dtype=torch.bool).triu(1)
    context, weights = attention(q, k, v, hidden)
    assert (weights[hidden] == 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(5))
    # Row i by hand: a softmax over the first i + 1 keys only.
    for i in range(5):
        scores = torch.stack([q[i] @ k[j] / 2.0 for j in range(i + 1)])
        row = torch.softmax(scores, dim=0)
        torch.testing.assert_close(weights[i, : i + 1], row)
        torch.testing.assert_close(context[i], row @ v[: i + 1])


def test_a_row_with_every_key_hidden_gets_zeros_not_nan() -> None:
    q, k, v = randn(3, 4, seed=1), randn(3, 4, seed=2), randn(3, 2, seed=3)
    hidden = torch.tensor([[False, True, True], [True, True, True], [False, False, True]])
    q.requires_grad_(True)
    context, weights = attention(q, k, v, hidden)
    assert (weights[1] == 0).all() and (context[1] == 0).all()
    assert torch.isfinite(weights).all()
    context.sum().backward()
    assert q.grad is not None and torch.isfinite(q.grad).all()
    fused, _ = head_attention(q.detach(), k, v, hidden, fused=True)
    torch.testing.assert_close(fused, context.detach())


def test_grouped_heads_broadcast_like_a_loop_over_groups() -> None:
    # Grouped-query attention: queries (b, g, r, t, d_h), keys and values (b, g, 1, s, d_h).
    b, g, r, t, s, d_h = 2, 3, 2, 4, 5, 8
    q = randn(b, g, r, t, d_h, seed=1)
    k, v = randn(b, g, 1, s, d_h, seed=2), randn(b, g, 1, s, d_h, seed=3)
    context, weights = attention(q, k, v)
    assert context.shape == (b, g, r, t, d_h) and weights.shape == (b, g, r, t, s)
    for group in range(g):
        for head in range(r):
            scores = q[:, group, head] @ k[:, group, 0].transpose(1, 2) / math.sqrt(d_h)
            expected = torch.softmax(scores, dim=-1) @ v[:, group, 0]  # (b, t, d_h)
            torch.testing.assert_close(context[:, group, head], expected)


@pytest.mark.parametrize("mask_shape", [(4, 6), (2, 1, 4, 6), (2, 1, 1, 6), (1, 3, 4, 6)])
def test_a_mask_broadcasts_to_b_h_t_s(mask_shape: tuple[int, ...]) -> None:
    q, k, v = randn(2, 3, 4, 8, seed=1), randn(2, 3, 6, 8, seed=2), randn(2, 3, 6, 5, seed=3)
    mask = randn(*mask_shape, seed=4) > 0.5
    mask[..., 0] = False  # every query sees key 0
    _, weights = attention(q, k, v, mask)
    full = mask.expand(2, 3, 4, 6)
    assert (weights[full] == 0).all() and (weights[~full] > 0).all()


def test_fused_equals_explicit() -> None:
    q, k, v = randn(2, 3, 6, 8, seed=1), randn(2, 3, 6, 8, seed=2), randn(2, 3, 6, 8, seed=3)
    for is_causal in (False, True):
        explicit, weights = head_attention(q, k, v, is_causal=is_causal)
        fused, none = head_attention(q, k, v, is_causal=is_causal, fused=True)
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
        assert none is None and weights is not None
        torch.testing.assert_close(explicit, fused, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(explicit, expected, atol=1e-5, rtol=1e-5)
    padding = torch.tensor([False, False, True, False, True, False])
    explicit, _ = head_attention(q, k, v, padding)
    fused, _ = head_attention(q, k, v, padding, fused=True)
    torch.testing.assert_close(explicit, fused, atol=1e-5, rtol=1e-5)


def test_is_causal_aligns_query_i_with_key_i() -> None:
    # scaled_dot_product_attention's convention for t != s: query i sees keys 0, ..., i.
    q, k, v = randn(1, 3, 4, seed=1), randn(1, 5, 4, seed=2), randn(1, 5, 4, seed=3)
    _, weights = head_attention(q, k, v, is_causal=True)
    visible = weights[0] > 0
    assert visible.tolist() == [[j <= i for j in range(5)] for i in range(3)]
    fused, _ = head_attention(q, k, v, is_causal=True, fused=True)
    explicit, _ = head_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(explicit, fused, atol=1e-5, rtol=1e-5)


def test_dropout_zero_is_deterministic_and_dropout_drops() -> None:
    q, k, v = randn(2, 5, 4, seed=1), randn(2, 5, 4, seed=2), randn(2, 5, 4, seed=3)
    first, w_first = attention(q, k, v, dropout_p=0.0)
    second, w_second = attention(q, k, v, dropout_p=0.0)
    assert torch.equal(first, second) and torch.equal(w_first, w_second)
    _, plain = attention(q, k, v)
    torch.manual_seed(0)
    _, dropped = attention(q, k, v, dropout_p=0.5)
    kept = dropped != 0
    assert not kept.all() and kept.any()
    torch.testing.assert_close(dropped[kept], 2 * plain[kept])  # survivors scaled by 1/(1-p)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "named"),
    [
        (([[1.0]], torch.ones(1, 1), torch.ones(1, 1)), {}, TypeError, "queries"),
        ((torch.ones(1, 2), torch.ones(1, 3), torch.ones(1, 2)), {}, ValueError, "keys"),
        ((torch.ones(1, 2), torch.ones(3, 2), torch.ones(2, 2)), {}, ValueError, "values"),
        ((torch.ones(2, 1, 2), torch.ones(3, 1, 2), torch.ones(3, 1, 2)), {}, ValueError, "keys"),
        ((torch.ones(1, 2), torch.ones(1, 2).double(), torch.ones(1, 2)), {}, TypeError, "keys"),
        ((torch.ones(2), torch.ones(1, 2), torch.ones(1, 2)), {}, ValueError, "queries"),
        ((torch.ones(1, 2, dtype=torch.long),) * 3, {}, TypeError, "queries"),
        ((torch.ones(2, 2),) * 3, {"mask": torch.ones(2, 2)}, TypeError, "mask"),
        ((torch.ones(2, 2),) * 3, {"mask": torch.ones(3, 2).bool()}, ValueError, "mask"),
        ((torch.ones(2, 2),) * 3, {"mask": torch.ones(4, 2, 2).bool()}, ValueError, "mask"),
        ((torch.ones(2, 2),) * 3, {"dropout_p": 1.0}, ValueError, "dropout_p"),
        ((torch.ones(2, 2),) * 3, {"dropout_p": "0.1"}, TypeError, "dropout_p"),
        ((torch.ones(2, 2),) * 3, {"scale": -1.0}, ValueError, "scale"),
    ],
)
def test_bad_input_is_refused_with_its_name(
    args: tuple[object, ...], kwargs: dict[str, object], error: type[Exception], named: str
) -> None:
    for fn in (attention, head_attention):
        extra = {key: value for key, value in kwargs.items() if fn is attention or key != "scale"}
        if fn is head_attention and "scale" in kwargs:
            continue
        with pytest.raises(error, match=rf"^{named}: expected"):
            fn(*args, **extra)


def test_head_attention_refuses_a_mask_with_is_causal_and_non_bool_flags() -> None:
    q = torch.ones(1, 2, 2)
    with pytest.raises(ValueError, match=r"^mask: expected None with is_causal=True"):
        head_attention(q, q, q, torch.zeros(2, 2, dtype=torch.bool), is_causal=True)
    with pytest.raises(TypeError, match=r"^fused: expected a bool"):
        head_attention(q, q, q, fused=1)
    with pytest.raises(TypeError, match=r"^is_causal: expected a bool"):
        head_attention(q, q, q, is_causal="yes")


def test_every_attention_class_calls_the_one_function(monkeypatch: pytest.MonkeyPatch) -> None:
    # Replace the function in each module that uses it: every class must reach it.
    calls: list[tuple[int, ...]] = []
    real = causal_module.attention

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(tuple(args[0].shape))  # type: ignore[union-attr]
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(causal_module, "attention", counting)
    monkeypatch.setattr(multihead_module, "attention", counting)
    x = randn(2, 6, 4, seed=1)
    modules = [
        lambda: CausalAttention(4, 4, 6, 0.0)(x),
        lambda: CrossAttention(4, 4, 4)(x, x),
        lambda: MultiHeadAttention(4, 4, 6, 0.0, num_heads=2)(x),
        lambda: WideMultiHeadAttention(4, num_heads=2)(x),
    ]
    for run in modules:
        calls.clear()
        run()
        assert len(calls) == 1
