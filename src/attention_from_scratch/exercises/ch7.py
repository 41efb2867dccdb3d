"""Checks for the exercises of chapter 7, "Attention at scale".

Expected values are computed here from first principles (comparisons of positions, the size
formula written out, ``torch.softmax``), never from a learner's code.
"""

from __future__ import annotations

import math

import torch

from ._core import Exercise, answer_tensor

padding_mask = Exercise("ch7-ex-padding-mask", chapter=7)


def _expected_padding() -> torch.Tensor:
    lengths = (5, 3, 1)
    return torch.tensor([[j >= n for j in range(5)] for n in lengths])  # (b, t)


@padding_mask.check(
    points=1,
    hint="`lengths_mask` must be a (3, 5) bool tensor, True at the padded positions: row n is "
    "True from position lengths[n] on.",
)
def lengths_mask_marks_padding(lengths_mask):
    mask = answer_tensor(lengths_mask, (3, 5))
    assert mask.dtype == torch.bool
    assert torch.equal(mask, _expected_padding())


@padding_mask.check(
    points=2,
    hint="`combined_mask` must be a (3, 5, 5) bool tensor, True where j > i (the future) or "
    "where key j is padding: combine the causal mask with lengths_mask[:, None, :].",
)
def combined_mask_hides_future_and_padding(combined_mask):
    mask = answer_tensor(combined_mask, (3, 5, 5))
    assert mask.dtype == torch.bool
    padding = _expected_padding()
    expected = torch.tensor(
        [[[j > i or bool(padding[n, j]) for j in range(5)] for i in range(5)] for n in range(3)]
    )
    assert torch.equal(mask, expected)


online_softmax = Exercise("ch7-ex-online-softmax", chapter=7)


@online_softmax.check(
    points=2,
    hint="`online_softmax(scores, block_size)` must return a tensor equal to "
    "torch.softmax(scores, dim=0), for any block size.",
)
def equals_softmax(online_softmax):
    scores = torch.tensor([0.5, -1.0, 2.0, 0.0, 3.0, -2.0, 1.5], dtype=torch.float64)
    expected = torch.softmax(scores, dim=0)
    for block_size in (1, 2, 3, 7, 10):
        result = online_softmax(scores.clone(), block_size)
        assert isinstance(result, torch.Tensor) and result.shape == scores.shape
        torch.testing.assert_close(result.double(), expected, rtol=1e-6, atol=1e-9)


@online_softmax.check(
    points=1,
    hint="Subtract the running maximum before exp: scores around 1000 must give finite "
    "probabilities (exp(1000) overflows).",
)
def stays_finite_for_large_scores(online_softmax):
    scores = torch.tensor([1000.0, 999.0, 2.0, -5.0, 1001.0])
    result = online_softmax(scores.clone(), 2)
    assert torch.isfinite(result).all()
    denominator = 1 + math.exp(-1) + math.exp(-2) + math.exp(-999) + math.exp(-1006)
    torch.testing.assert_close(
        result[4].double(), torch.tensor(1 / denominator, dtype=torch.float64), rtol=1e-5, atol=0
    )


cache_bytes = Exercise("ch7-ex-cache-bytes", chapter=7)

# 2 tensors (keys, values) x layers x heads x tokens x d_h x bytes per number.
_MHA_BYTES = 2 * 32 * 32 * 4096 * 128 * 2  # 2 GiB


@cache_bytes.check(
    points=1,
    hint="Keys and values: 2 x 32 layers x 32 heads x 4096 tokens x 128 numbers x 2 bytes.",
)
def multi_head_cache(mha_cache_bytes):
    assert int(mha_cache_bytes) == mha_cache_bytes == _MHA_BYTES


@cache_bytes.check(
    points=1,
    hint="Only the key/value heads are cached: 8 of them make the cache 32 / 8 = 4 times "
    "smaller, one makes it 32 times smaller.",
)
def grouped_and_multi_query_caches(gqa_cache_bytes, mqa_cache_bytes):
    assert int(gqa_cache_bytes) == gqa_cache_bytes == _MHA_BYTES // 4
    assert int(mqa_cache_bytes) == mqa_cache_bytes == _MHA_BYTES // 32


which_path = Exercise(
    "ch7-ex-which-path",
    chapter=7,
    manual_points=2,
    rubric="1 point: the explicit path forms (b, h, t, t) weights in every layer, quadratic "
    "in t (about 1 GB per head at 16 000 tokens in float32), times the layers if all are kept. "
    "1 point: a workable alternative, e.g. keep the fused path and recompute the weights of "
    "one layer (or a slice of query rows) without gradients for the plot.",
)
