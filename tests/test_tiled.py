"""Tiled attention (chapter 7): the online softmax with masked first blocks, and the
recomputing backward pass of TiledAttention, checked against scaled_dot_product_attention."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attention_from_scratch import TiledAttention, tiled_attention


def _inputs(b: int, h: int, t: int, s: int, d_h: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, t, d_h, generator=generator, dtype=torch.float64)
    k = torch.randn(b, h, s, d_h, generator=generator, dtype=torch.float64)
    v = torch.randn(b, h, s, d_h, generator=generator, dtype=torch.float64)
    return q, k, v


def _allowed(t: int, s: int, causal: bool, pad: torch.Tensor | None) -> torch.Tensor:
    """True where query i (at position s - t + i) may see key j: (b or 1, 1, t, s)."""
    rows = torch.arange(s - t, s)[:, None]
    allowed = torch.ones(t, s, dtype=torch.bool)
    if causal:
        allowed = torch.arange(s)[None, :] <= rows  # (t, s)
    allowed = allowed[None, None]  # (1, 1, t, s)
    if pad is not None:
        allowed = allowed & ~pad[:, None, None, :]  # (b, 1, t, s)
    return allowed


def _reference(q, k, v, causal, pad):
    """SDPA with an explicit mask; rows that see no key set to zero."""
    allowed = _allowed(q.shape[2], k.shape[2], causal, pad)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    return out.masked_fill(~allowed.any(-1, keepdim=True), 0.0)


LEFT_PADDING = torch.tensor([[False] * 9, [True] * 5 + [False] * 4, [True] * 9])


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("block_size", [1, 2, 4, 9, 16])
@pytest.mark.parametrize("pad", [None, LEFT_PADDING], ids=["no-padding", "left-padding"])
def test_forward_and_gradients_match_sdpa(causal: bool, block_size: int, pad) -> None:
    q, k, v = _inputs(3, 2, 9, 9, 4)
    grad_out = torch.randn(q.shape, generator=torch.Generator().manual_seed(1), dtype=q.dtype)
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    ours = TiledAttention.apply(*leaves, block_size, causal, pad)
    ours.backward(grad_out)
    refs = [x.clone().requires_grad_() for x in (q, k, v)]
    expected = _reference(*refs, causal, pad)
    expected.backward(grad_out)
    plain = tiled_attention(q, k, v, block_size, causal, key_padding_mask=pad)
    assert not ours.isnan().any()
    torch.testing.assert_close(ours, expected)
    torch.testing.assert_close(plain, expected)
    for mine, theirs in zip(leaves, refs, strict=True):
        assert mine.grad.isfinite().all()
        torch.testing.assert_close(mine.grad, theirs.grad)


def test_a_fully_masked_first_block_gives_no_nan() -> None:
    # Scores [-inf, 1, 2] for the last query, one key per block: the first block is all -inf.
    q = torch.ones(1, 1, 3, 1, dtype=torch.float64)
    k = torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64).view(1, 1, 3, 1)
    v = torch.arange(3.0, dtype=torch.float64).view(1, 1, 3, 1)
    pad = torch.tensor([[True, False, False]])
    out = tiled_attention(q, k, v, block_size=1, key_padding_mask=pad)
    # Query 0 sees nothing (zero), query 1 sees key 1 only, query 2 keys 1 and 2.
    weight_2 = math.exp(2.0) / (math.exp(1.0) + math.exp(2.0))
    expected = torch.tensor([0.0, 1.0, 1.0 * (1 - weight_2) + 2.0 * weight_2], dtype=q.dtype)
    torch.testing.assert_close(out.view(3), expected)


def test_queries_after_cached_keys_and_gradcheck() -> None:
    q, k, v = _inputs(1, 2, 3, 7, 2, seed=3)  # the last 3 of 7 tokens: s > t
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    torch.testing.assert_close(
        TiledAttention.apply(*leaves, 2, True, None), _reference(q, k, v, True, None)
    )
    assert torch.autograd.gradcheck(
        lambda a, b, c: TiledAttention.apply(a, b, c, 2, True, None), tuple(leaves)
    )
    pad = torch.tensor([[True, True, True, False, False, False, False]])
    assert torch.autograd.gradcheck(
        lambda a, b, c: TiledAttention.apply(a, b, c, 3, True, pad), tuple(leaves)
    )


def test_the_log_sum_exp_is_that_of_each_rows_scaled_scores() -> None:
    q, k, v = _inputs(2, 2, 5, 5, 4, seed=4)
    pad = torch.tensor([[False] * 5, [True] * 2 + [False] * 3])
    _, lse = tiled_attention(q, k, v, block_size=2, key_padding_mask=pad, return_lse=True)
    scores = (q @ k.transpose(2, 3)) / 2.0  # d_h = 4: divided by sqrt(4)
    scores = scores.masked_fill(~_allowed(5, 5, True, pad), float("-inf"))
    expected = torch.logsumexp(scores, dim=-1)  # (b, h, t); -inf where no key is seen
    assert torch.equal(lse.isinf(), expected.isinf())
    torch.testing.assert_close(lse[expected.isfinite()], expected[expected.isfinite()])


def _saved_bytes(fn, *inputs: torch.Tensor) -> int:
    kept: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        kept[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
        return tensor

    given = {x.untyped_storage().data_ptr() for x in inputs}
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
        fn(*inputs)
    return sum(n for ptr, n in kept.items() if ptr not in given)


def test_recomputation_saves_only_the_output_and_the_log_sum_exp() -> None:
    t = 256
    q, k, v = (x.float().requires_grad_() for x in _inputs(1, 2, t, t, 8, seed=5))
    output_bytes = 1 * 2 * t * 8 * 4
    lse_bytes = 1 * 2 * t * 4
    saved = _saved_bytes(lambda a, b, c: TiledAttention.apply(a, b, c, 32, True, None), q, k, v)
    assert saved == output_bytes + lse_bytes
    # Plain autograd through the same loop keeps every tile: more than one (t, t) matrix.
    through_autograd = _saved_bytes(lambda a, b, c: tiled_attention(a, b, c, 32), q, k, v)
    assert through_autograd > 2 * t * t * 4 // 2


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"key_padding_mask": torch.zeros(1, 4)}, TypeError, "key_padding_mask"),
        ({"key_padding_mask": torch.zeros(1, 3, dtype=torch.bool)}, ValueError, "(b, s)"),
        ({"return_lse": 1}, TypeError, "return_lse"),
    ],
)
def test_bad_arguments_are_named(kwargs: dict, error: type, message: str) -> None:
    q, k, v = _inputs(1, 1, 4, 4, 2)
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        tiled_attention(q, k, v, **kwargs)
