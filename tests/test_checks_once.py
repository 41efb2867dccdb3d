"""One forward pass checks the attention arguments once, on either path (chapter 4)."""

from __future__ import annotations

from unittest import mock

import pytest
import torch

import attention_from_scratch as afs
from attention_from_scratch import _checks, causal, multihead


@pytest.mark.parametrize("fused", [False, True])
def test_multihead_forward_checks_the_attention_inputs_once(fused: bool) -> None:
    torch.manual_seed(0)
    module = afs.MultiHeadAttention(5, 6, 8, 0.0, num_heads=3, fused=fused)
    x = torch.randn(2, 7, 5)
    spy = mock.Mock(wraps=_checks.check_attention_inputs)
    # Both modules bound the name at import: replace it where it is looked up.
    with (
        mock.patch.object(causal, "check_attention_inputs", spy),
        mock.patch.object(multihead, "check_attention_inputs", spy),
    ):
        out = module(x)
    assert spy.call_count == 1
    assert out.shape == (2, 7, 6)


@pytest.mark.parametrize("fused", [False, True])
def test_attend_still_refuses_bad_input_on_both_paths(fused: bool) -> None:
    q = torch.randn(1, 2, 4, 3)
    with pytest.raises(TypeError, match="queries"):
        afs.head_attention([[1.0]], q, q, is_causal=True, fused=fused)
    with pytest.raises(ValueError, match="keys"):
        afs.head_attention(q, torch.randn(1, 2, 4, 5), q, is_causal=True, fused=fused)
    with pytest.raises(ValueError, match="queries"):
        afs.head_attention(torch.randn(3), q, q, is_causal=True, fused=fused)


def test_explicit_causal_path_hides_the_future() -> None:
    torch.manual_seed(0)
    q, k, v = torch.randn(3, 1, 2, 4, 3).unbind(0)
    _, weights = afs.head_attention(q, k, v, is_causal=True)
    above = torch.ones(4, 4, dtype=torch.bool).triu(1)
    assert (weights[..., above] == 0).all()
    assert torch.allclose(weights.sum(-1), torch.ones(1, 2, 4))
