"""Every number the source notebooks print, reproduced through the public API with their seeds.

The expected values are typed from the notebooks' printed output (four decimals), so each
comparison allows 1e-4: half a unit of the last printed digit for the rounding, plus room for
float32 arithmetic.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import attention_from_scratch as afs

ATOL = 1e-4


def assert_printed(actual: torch.Tensor, expected: object, atol: float = ATOL) -> None:
    """Compare a tensor with the numbers a notebook printed."""
    expected_tensor = torch.tensor(expected, dtype=torch.float32)
    torch.testing.assert_close(
        actual.detach().to(torch.float32), expected_tensor, rtol=0.0, atol=atol
    )


# ---------------------------------------------------------------------------------------------
# Seed 000 and 001, part 1: simplified attention on the toy sentence (no trainable weights).
# ---------------------------------------------------------------------------------------------

TOY_EMBEDDINGS = [
    [0.4300, 0.1500, 0.8900],
    [0.5500, 0.8700, 0.6600],
    [0.5700, 0.8500, 0.6400],
    [0.2200, 0.5800, 0.3300],
    [0.7700, 0.2500, 0.1000],
    [0.0500, 0.8000, 0.5500],
]

SCORES_2 = [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865]
SUM_NORMALISED_2 = [0.1455, 0.2278, 0.2249, 0.1285, 0.1077, 0.1656]
SOFTMAX_2 = [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581]
CONTEXT_2 = [0.4419, 0.6515, 0.5683]

SCORES = [
    [0.9995, 0.9544, 0.9422, 0.4753, 0.4576, 0.6310],
    [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865],
    [0.9422, 1.4754, 1.4570, 0.8296, 0.7154, 1.0605],
    [0.4753, 0.8434, 0.8296, 0.4937, 0.3474, 0.6565],
    [0.4576, 0.7070, 0.7154, 0.3474, 0.6654, 0.2935],
    [0.6310, 1.0865, 1.0605, 0.6565, 0.2935, 0.9450],
]

WEIGHTS = [
    [0.2098, 0.2006, 0.1981, 0.1242, 0.1220, 0.1452],
    [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581],
    [0.1390, 0.2369, 0.2326, 0.1242, 0.1108, 0.1565],
    [0.1435, 0.2074, 0.2046, 0.1462, 0.1263, 0.1720],
    [0.1526, 0.1958, 0.1975, 0.1367, 0.1879, 0.1295],
    [0.1385, 0.2184, 0.2128, 0.1420, 0.0988, 0.1896],
]

ALL_CONTEXT = [
    [0.4421, 0.5931, 0.5790],
    [0.4419, 0.6515, 0.5683],
    [0.4431, 0.6496, 0.5671],
    [0.4304, 0.6298, 0.5510],
    [0.4671, 0.5910, 0.5266],
    [0.4177, 0.6503, 0.5645],
]

GRAM_3X3 = [
    [1.4561, 1.3876, 1.2876],
    [1.3876, 2.5408, 1.9081],
    [1.2876, 1.9081, 2.0587],
]


def test_toy_sentence_tokens_and_embeddings() -> None:
    tokens, inputs = afs.toy_sentence()
    assert tokens == ["Your", "journey", "starts", "with", "one", "step"]
    assert inputs.shape == (6, 3)
    assert inputs.dtype == torch.float32
    assert_printed(inputs, TOY_EMBEDDINGS, atol=0.0)


def test_scores_of_query_2(toy_inputs: torch.Tensor) -> None:
    query = toy_inputs[1]
    scores = torch.stack([torch.dot(x_i, query) for x_i in toy_inputs])
    assert_printed(scores, SCORES_2)
    # Seed 001 also prints the dot products in full float32 precision.
    full = [
        0.9544000625610352,
        1.4950001239776611,
        1.4754000902175903,
        0.8434000015258789,
        0.7070000171661377,
        1.0865000486373901,
    ]
    assert_printed(scores, full, atol=1e-6)


def test_sum_normalised_weights_of_query_2(toy_inputs: torch.Tensor) -> None:
    scores = toy_inputs @ toy_inputs[1]
    weights = scores / scores.sum()
    assert_printed(weights, SUM_NORMALISED_2)
    assert_printed(weights.sum(), 1.0)


def test_softmax_weights_of_query_2(toy_inputs: torch.Tensor) -> None:
    scores = toy_inputs @ toy_inputs[1]
    for softmax in (afs.softmax_naive, afs.softmax_stable):
        weights = softmax(scores)
        assert_printed(weights, SOFTMAX_2)
        assert_printed(weights.sum(), 1.0)
        # The seed's naive softmax sums over dim=0; for a vector that is the same as dim=-1.
        assert_printed(softmax(scores, dim=0), SOFTMAX_2)


def test_context_vector_2(toy_inputs: torch.Tensor) -> None:
    weights = afs.softmax_stable(toy_inputs @ toy_inputs[1])
    context = torch.zeros(3)
    for weight, x_i in zip(weights, toy_inputs, strict=True):
        context += weight * x_i
    assert_printed(context, CONTEXT_2)
    assert_printed(afs.simplified_attention(toy_inputs)[1], CONTEXT_2)
    assert_printed(afs.simplified_attention_loop(toy_inputs)[1], CONTEXT_2)


def test_all_scores(toy_inputs: torch.Tensor) -> None:
    assert_printed(toy_inputs @ toy_inputs.T, SCORES)


def test_all_weights_and_context_vectors(toy_inputs: torch.Tensor) -> None:
    for attention in (afs.simplified_attention, afs.simplified_attention_loop):
        context, weights = attention(toy_inputs, return_weights=True)
        assert weights.shape == (6, 6)
        assert_printed(weights, WEIGHTS)
        assert_printed(weights.sum(dim=-1), [1.0] * 6)
        assert context.shape == (6, 3)
        assert_printed(context, ALL_CONTEXT)


def test_simplified_attention_on_a_batch(toy_batch: torch.Tensor) -> None:
    context, weights = afs.simplified_attention(toy_batch, return_weights=True)
    assert weights.shape == (2, 6, 6)
    assert_printed(weights, [WEIGHTS, WEIGHTS])
    assert_printed(context, [ALL_CONTEXT, ALL_CONTEXT])


def test_inputs_transposed_times_inputs(toy_inputs: torch.Tensor) -> None:
    assert_printed(toy_inputs.T @ toy_inputs, GRAM_3X3)


# ---------------------------------------------------------------------------------------------
# Seed 000 and 001, part 2: trainable weights, seed 123, d_in = 3, d_out = 2.
# ---------------------------------------------------------------------------------------------

W_QUERY_123 = [[0.2961, 0.5166], [0.2517, 0.6886], [0.0740, 0.8665]]
QUERY_2 = [0.4306, 1.4551]
ATTN_SCORES_2 = [1.2705, 1.8524, 1.8111, 1.0795, 0.5577, 1.5440]
QUERIES_KEYS_T = [
    [0.9231, 1.3545, 1.3241, 0.7910, 0.4032, 1.1330],
    [1.2705, 1.8524, 1.8111, 1.0795, 0.5577, 1.5440],
    [1.2544, 1.8284, 1.7877, 1.0654, 0.5508, 1.5238],
    [0.6973, 1.0167, 0.9941, 0.5925, 0.3061, 0.8475],
    [0.6114, 0.8819, 0.8626, 0.5121, 0.2707, 0.7307],
    [0.8995, 1.3165, 1.2871, 0.7682, 0.3937, 1.0996],
]
KEYS_QUERIES_T = [
    [0.9231, 1.2705, 1.2544, 0.6973, 0.6114, 0.8995],
    [1.3545, 1.8524, 1.8284, 1.0167, 0.8819, 1.3165],
    [1.3241, 1.8111, 1.7877, 0.9941, 0.8626, 1.2871],
    [0.7910, 1.0795, 1.0654, 0.5925, 0.5121, 0.7682],
    [0.4032, 0.5577, 0.5508, 0.3061, 0.2707, 0.3937],
    [1.1330, 1.5440, 1.5238, 0.8475, 0.7307, 1.0996],
]
ATTN_WEIGHTS_2 = [0.1500, 0.2264, 0.2199, 0.1311, 0.0906, 0.1820]
CONTEXT_VEC_2 = [0.3061, 0.8210]
V1_OUTPUT = [
    [0.2996, 0.8053],
    [0.3061, 0.8210],
    [0.3058, 0.8203],
    [0.2948, 0.7939],
    [0.2927, 0.7891],
    [0.2990, 0.8040],
]


def _seed_123_matrices() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The seed's three torch.rand(3, 2) matrices, drawn in the order query, key, value."""
    torch.manual_seed(123)
    w_query = torch.rand(3, 2)
    w_key = torch.rand(3, 2)
    w_value = torch.rand(3, 2)
    return w_query, w_key, w_value


def test_seed_123_query_weights_and_query_2(toy_inputs: torch.Tensor) -> None:
    w_query, _, _ = _seed_123_matrices()
    assert_printed(w_query, W_QUERY_123)
    # Multiplying a one-hot row picks out a row of the matrix; [1, 0, 1] adds rows 0 and 2.
    assert_printed(torch.tensor([1.0, 0.0, 0.0]) @ w_query, [0.2961, 0.5166])
    assert_printed(torch.tensor([0.0, 1.0, 0.0]) @ w_query, [0.2517, 0.6886])
    assert_printed(torch.tensor([1.0, 0.0, 1.0]) @ w_query, [0.3701, 1.3831])
    assert_printed(toy_inputs[1] @ w_query, QUERY_2)


def test_self_attention_v1_draws_the_seed_weights_in_order() -> None:
    w_query, w_key, w_value = _seed_123_matrices()
    torch.manual_seed(123)
    module = afs.SelfAttentionV1(3, 2)
    assert_printed(module.W_query, W_QUERY_123)
    torch.testing.assert_close(module.W_query.detach(), w_query, rtol=0, atol=0)
    torch.testing.assert_close(module.W_key.detach(), w_key, rtol=0, atol=0)
    torch.testing.assert_close(module.W_value.detach(), w_value, rtol=0, atol=0)


def test_seed_123_scores_weights_and_context_of_query_2(toy_inputs: torch.Tensor) -> None:
    w_query, w_key, w_value = _seed_123_matrices()
    queries = toy_inputs @ w_query
    keys = toy_inputs @ w_key
    values = toy_inputs @ w_value
    assert keys.shape == (6, 2)
    assert values.shape == (6, 2)
    assert queries.shape == (6, 2)
    query_2 = queries[1]
    assert_printed(torch.dot(query_2, keys[1]), 1.8524)
    assert_printed(query_2 @ keys.T, ATTN_SCORES_2)
    assert_printed(keys @ query_2, ATTN_SCORES_2)
    assert_printed(queries @ keys.T, QUERIES_KEYS_T)
    assert_printed(keys @ queries.T, KEYS_QUERIES_T)
    weights_2 = afs.softmax_stable(query_2 @ keys.T / 2**0.5)
    assert_printed(weights_2, ATTN_WEIGHTS_2)
    assert_printed(weights_2 @ values, CONTEXT_VEC_2)


def test_self_attention_v1_seed_123(toy_inputs: torch.Tensor) -> None:
    torch.manual_seed(123)
    module = afs.SelfAttentionV1(3, 2)
    context, weights = module(toy_inputs, return_weights=True)
    assert context.shape == (6, 2)
    assert_printed(context, V1_OUTPUT)
    assert_printed(weights[1], ATTN_WEIGHTS_2)
    assert_printed(module(toy_inputs), V1_OUTPUT)


# ---------------------------------------------------------------------------------------------
# Seed 001: SelfAttentionV2 (seed 789) and causal masking.
# ---------------------------------------------------------------------------------------------

V2_OUTPUT = [
    [-0.0739, 0.0713],
    [-0.0748, 0.0703],
    [-0.0749, 0.0702],
    [-0.0760, 0.0685],
    [-0.0763, 0.0679],
    [-0.0754, 0.0693],
]
V2_WEIGHTS = [
    [0.1921, 0.1646, 0.1652, 0.1550, 0.1721, 0.1510],
    [0.2041, 0.1659, 0.1662, 0.1496, 0.1665, 0.1477],
    [0.2036, 0.1659, 0.1662, 0.1498, 0.1664, 0.1480],
    [0.1869, 0.1667, 0.1668, 0.1571, 0.1661, 0.1564],
    [0.1830, 0.1669, 0.1670, 0.1588, 0.1658, 0.1585],
    [0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529],
]
V2_WEIGHTS_TIMES_TRIL = [
    [0.1921, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
    [0.2041, 0.1659, 0.0000, 0.0000, 0.0000, 0.0000],
    [0.2036, 0.1659, 0.1662, 0.0000, 0.0000, 0.0000],
    [0.1869, 0.1667, 0.1668, 0.1571, 0.0000, 0.0000],
    [0.1830, 0.1669, 0.1670, 0.1588, 0.1658, 0.0000],
    [0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529],
]
MASKED_RENORMALISED = [
    [1.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
    [0.5517, 0.4483, 0.0000, 0.0000, 0.0000, 0.0000],
    [0.3800, 0.3097, 0.3103, 0.0000, 0.0000, 0.0000],
    [0.2758, 0.2460, 0.2462, 0.2319, 0.0000, 0.0000],
    [0.2175, 0.1983, 0.1984, 0.1888, 0.1971, 0.0000],
    [0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529],
]
INF = float("inf")
MASKED_SCORES = [
    [0.2899, -INF, -INF, -INF, -INF, -INF],
    [0.4656, 0.1723, -INF, -INF, -INF, -INF],
    [0.4594, 0.1703, 0.1731, -INF, -INF, -INF],
    [0.2642, 0.1024, 0.1036, 0.0186, -INF, -INF],
    [0.2183, 0.0874, 0.0882, 0.0177, 0.0786, -INF],
    [0.3408, 0.1270, 0.1290, 0.0198, 0.1290, 0.0078],
]


def _v2_seed_789() -> afs.SelfAttentionV2:
    torch.manual_seed(789)
    return afs.SelfAttentionV2(3, 2)


def test_self_attention_v2_seed_789(toy_inputs: torch.Tensor) -> None:
    module = _v2_seed_789()
    context, weights = module(toy_inputs, return_weights=True)
    assert_printed(context, V2_OUTPUT)
    assert weights.shape == (6, 6)
    assert_printed(weights, V2_WEIGHTS)


def test_masking_after_softmax_then_renormalising(toy_inputs: torch.Tensor) -> None:
    _, weights = _v2_seed_789()(toy_inputs, return_weights=True)
    tril = torch.tril(torch.ones(6, 6))
    assert_printed(
        tril,
        [
            [1.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            [1.0, 1.0, 0.0, 0.0, 0.0, 0.0],
            [1.0, 1.0, 1.0, 0.0, 0.0, 0.0],
            [1.0, 1.0, 1.0, 1.0, 0.0, 0.0],
            [1.0, 1.0, 1.0, 1.0, 1.0, 0.0],
            [1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
        ],
        atol=0.0,
    )
    masked = weights * tril
    assert_printed(masked, V2_WEIGHTS_TIMES_TRIL)
    assert_printed(masked / masked.sum(dim=-1, keepdim=True), MASKED_RENORMALISED)


def test_masked_unscaled_scores_and_softmax(toy_inputs: torch.Tensor) -> None:
    module = _v2_seed_789()
    scores = module.W_query(toy_inputs) @ module.W_key(toy_inputs).T
    masked = scores.masked_fill(afs.causal_mask(6), float("-inf"))
    assert_printed(masked, MASKED_SCORES)
    assert_printed(torch.softmax(masked / 2**0.5, dim=1), MASKED_RENORMALISED)


def test_causal_attention_with_v2_weights_gives_the_masked_matrix(toy_batch: torch.Tensor) -> None:
    source = _v2_seed_789()
    module = afs.CausalAttention(3, 2, context_length=6, dropout=0.0)
    module.load_state_dict(source.state_dict())
    _, weights = module(toy_batch, return_weights=True)
    assert_printed(weights, [MASKED_RENORMALISED, MASKED_RENORMALISED])


def test_triu_diagonals_and_causal_mask() -> None:
    ones = torch.ones(6, 6)
    assert_printed(
        torch.triu(ones, diagonal=0),
        [
            [1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
            [0.0, 1.0, 1.0, 1.0, 1.0, 1.0],
            [0.0, 0.0, 1.0, 1.0, 1.0, 1.0],
            [0.0, 0.0, 0.0, 1.0, 1.0, 1.0],
            [0.0, 0.0, 0.0, 0.0, 1.0, 1.0],
            [0.0, 0.0, 0.0, 0.0, 0.0, 1.0],
        ],
        atol=0.0,
    )
    diagonal_1 = [
        [0.0, 1.0, 1.0, 1.0, 1.0, 1.0],
        [0.0, 0.0, 1.0, 1.0, 1.0, 1.0],
        [0.0, 0.0, 0.0, 1.0, 1.0, 1.0],
        [0.0, 0.0, 0.0, 0.0, 1.0, 1.0],
        [0.0, 0.0, 0.0, 0.0, 0.0, 1.0],
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    ]
    assert_printed(torch.triu(ones, diagonal=1), diagonal_1, atol=0.0)
    assert_printed(
        torch.triu(ones, diagonal=2),
        [
            [0.0, 0.0, 1.0, 1.0, 1.0, 1.0],
            [0.0, 0.0, 0.0, 1.0, 1.0, 1.0],
            [0.0, 0.0, 0.0, 0.0, 1.0, 1.0],
            [0.0, 0.0, 0.0, 0.0, 0.0, 1.0],
            [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        ],
        atol=0.0,
    )
    mask = afs.causal_mask(6)
    assert mask.dtype == torch.bool
    assert mask.shape == (6, 6)
    assert mask.tolist() == [[value == 1.0 for value in row] for row in diagonal_1]


@pytest.mark.xfail(
    torch.__version__.startswith("2.5"),
    reason="PyTorch 2.5 draws other dropout masks from the same seed (chapter 3 says so)",
    strict=True,
)
def test_dropout_matrix_of_seed_123() -> None:
    # The book prints this matrix; it relies on the CPU generator giving the seed's numbers.
    torch.manual_seed(123)
    dropped = nn.Dropout(0.5)(torch.ones(6, 6))
    assert_printed(
        dropped,
        [
            [2.0, 2.0, 0.0, 2.0, 2.0, 0.0],
            [0.0, 0.0, 0.0, 2.0, 0.0, 2.0],
            [2.0, 2.0, 2.0, 2.0, 0.0, 2.0],
            [0.0, 2.0, 2.0, 0.0, 0.0, 2.0],
            [0.0, 2.0, 0.0, 2.0, 0.0, 2.0],
            [0.0, 2.0, 2.0, 2.0, 2.0, 0.0],
        ],
        atol=0.0,
    )


def test_causal_attention_seed_123_shape(toy_batch: torch.Tensor) -> None:
    assert toy_batch.shape == (2, 6, 3)
    torch.manual_seed(123)
    module = afs.CausalAttention(3, 2, context_length=6, dropout=0.0)
    context = module(toy_batch)
    assert context.shape == (2, 6, 2)
    # Both batch elements are the same sentence, so they get the same context vectors.
    torch.testing.assert_close(context[0], context[1])


# ---------------------------------------------------------------------------------------------
# Seed 001: multi-head attention, seed 123.
# ---------------------------------------------------------------------------------------------

WRAPPER_OUTPUT = [
    [-0.4519, 0.2216, 0.4772, 0.1063],
    [-0.5874, 0.0058, 0.5891, 0.3257],
    [-0.6300, -0.0632, 0.6202, 0.3860],
    [-0.5675, -0.0843, 0.5478, 0.3589],
    [-0.5526, -0.0981, 0.5321, 0.3428],
    [-0.5299, -0.1081, 0.5077, 0.3493],
]
MHA_OUTPUT = [
    [0.3190, 0.4858],
    [0.2943, 0.3897],
    [0.2856, 0.3593],
    [0.2693, 0.3873],
    [0.2639, 0.3928],
    [0.2575, 0.4028],
]


def test_multi_head_attention_wrapper_seed_123(toy_batch: torch.Tensor) -> None:
    torch.manual_seed(123)
    module = afs.MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2)
    context = module(toy_batch)
    assert context.shape == (2, 6, 4)
    assert_printed(context, [WRAPPER_OUTPUT, WRAPPER_OUTPUT])


def test_multi_head_attention_seed_123(toy_batch: torch.Tensor) -> None:
    torch.manual_seed(123)
    module = afs.MultiHeadAttention(3, 2, 6, 0.0, num_heads=2)
    context = module(toy_batch)
    assert context.shape == (2, 6, 2)
    assert_printed(context, [MHA_OUTPUT, MHA_OUTPUT])


def test_multi_head_attention_seed_123_fused(toy_batch: torch.Tensor) -> None:
    torch.manual_seed(123)
    module = afs.MultiHeadAttention(3, 2, 6, 0.0, num_heads=2, fused=True)
    context = module(toy_batch)
    assert context.shape == (2, 6, 2)
    assert_printed(context, [MHA_OUTPUT, MHA_OUTPUT])


# ---------------------------------------------------------------------------------------------
# Seed 002: a d_model = 2 module checked step by step against hand computation, seed 42.
# ---------------------------------------------------------------------------------------------

ENCODINGS = [[1.16, 0.23], [0.57, 1.36], [4.41, -2.16]]
# The notebook prints each weight transposed, i.e. as (d_in, d_out).
W_Q_T = [[0.5406, -0.1657], [0.5869, 0.6496]]
W_K_T = [[0.6233, 0.6146], [-0.5188, 0.1323]]
W_V_T = [[-0.1549, -0.3443], [0.1427, 0.4153]]
Q = [[0.7621, -0.0428], [1.1063, 0.7890], [1.1164, -2.1336]]
K = [[0.6038, 0.7434], [-0.3502, 0.5303], [3.8695, 2.4246]]
V = [[-0.1469, -0.3038], [0.1057, 0.3685], [-0.9914, -2.4152]]
SIMS = [[0.4283, -0.2896, 2.8452], [1.2545, 0.0310, 6.1939], [-0.9121, -1.5224, -0.8533]]
SCALED_SIMS = [[0.3029, -0.2048, 2.0119], [0.8871, 0.0219, 4.3797], [-0.6449, -1.0765, -0.6034]]
PERCENTS = [[0.1403, 0.0845, 0.7752], [0.0292, 0.0123, 0.9586], [0.3715, 0.2413, 0.3872]]
SEED_002_OUTPUT = [[-0.7802, -1.8837], [-0.9534, -2.3194], [-0.4130, -0.9592]]


def _seed_002_module() -> afs.SelfAttentionV2:
    """Draw three layers in the order query, VALUE, key and copy them in.

    Chapter 2 shows that this order of creation, not the module's own, changes every number
    after the queries; ``test_seed_002_in_the_modules_order`` checks the module's own order.
    """
    torch.manual_seed(42)
    w_q = nn.Linear(2, 2, bias=False)
    w_v = nn.Linear(2, 2, bias=False)
    w_k = nn.Linear(2, 2, bias=False)
    module = afs.SelfAttentionV2(2, 2)
    with torch.no_grad():
        module.W_query.weight.copy_(w_q.weight)
        module.W_key.weight.copy_(w_k.weight)
        module.W_value.weight.copy_(w_v.weight)
    return module


def test_seed_002_weights() -> None:
    module = _seed_002_module()
    assert_printed(module.W_query.weight.T, W_Q_T)
    assert_printed(module.W_key.weight.T, W_K_T)
    assert_printed(module.W_value.weight.T, W_V_T)


def test_seed_002_step_by_step() -> None:
    module = _seed_002_module()
    x = torch.tensor(ENCODINGS)
    q = module.W_query(x)
    k = module.W_key(x)
    v = module.W_value(x)
    assert_printed(q, Q)
    assert_printed(k, K)
    assert_printed(v, V)
    sims = q @ k.T
    assert_printed(sims, SIMS)
    scaled = sims / 2**0.5
    assert_printed(scaled, SCALED_SIMS)
    percents = torch.softmax(scaled, dim=1)
    assert_printed(percents, PERCENTS)
    by_hand = percents @ v
    assert_printed(by_hand, SEED_002_OUTPUT)

    out, weights = module(x, return_weights=True)
    assert_printed(out, SEED_002_OUTPUT)
    assert_printed(weights, PERCENTS)
    torch.testing.assert_close(out, by_hand)
    torch.testing.assert_close(weights, percents)


# Built straight after the seed, the module creates its layers in the order query, key, value:
# its key layer takes the second draw, which the order above gives to the value layer.
SEED_002_MODULE_ORDER_OUTPUT = [[1.0100, 1.0641], [0.2040, 0.7057], [3.4989, 2.2427]]


def test_seed_002_in_the_modules_order() -> None:
    torch.manual_seed(42)
    module = afs.SelfAttentionV2(2, 2)
    assert_printed(module.W_query.weight.T, W_Q_T)
    assert_printed(module.W_key.weight.T, W_V_T)
    assert_printed(module.W_value.weight.T, W_K_T)
    with torch.no_grad():
        assert_printed(module(torch.tensor(ENCODINGS)), SEED_002_MODULE_ORDER_OUTPUT)


# ---------------------------------------------------------------------------------------------
# Seed 003: shapes and strides of single-head and wide multi-head attention on 50-d vectors.
# ---------------------------------------------------------------------------------------------

SENTENCE_003 = ["the", "cat", "walks", "on", "the", "street"]


def _sentence_003() -> torch.Tensor:
    # Stand-in vectors have GloVe's shape; only shapes and strides are checked here.
    vectors = afs.GloVe.standin(SENTENCE_003, dim=50)
    x = torch.stack([vectors[word] for word in SENTENCE_003])
    assert x.shape == (6, 50)
    x = x.view(1, x.shape[0], x.shape[1])
    assert x.shape == (1, 6, 50)
    return x


def test_seed_003_single_head_shapes_and_strides() -> None:
    x = _sentence_003()
    torch.manual_seed(0)
    module = afs.WideMultiHeadAttention(50, num_heads=1)
    out, weights = module(x, return_weights=True)
    assert out.shape == (1, 6, 50)
    weights = weights[:, 0]  # the only head
    assert weights.shape == (1, 6, 6)
    transposed = weights.transpose(1, 2)
    layout = afs.describe_layout(transposed)
    assert layout.stride == (36, 1, 6)
    assert layout.is_contiguous is False
    layout = afs.describe_layout(transposed.contiguous())
    assert layout.stride == (36, 6, 1)
    assert layout.is_contiguous is True


def test_seed_003_wide_multi_head_shapes() -> None:
    x = _sentence_003()
    num_heads = 8
    torch.manual_seed(0)
    module = afs.WideMultiHeadAttention(50, num_heads=num_heads)
    projected = module.W_query(x)
    assert projected.shape == (1, 6, 400)
    assert projected.view(1, 6, num_heads, 50).shape == (1, 6, 8, 50)
    heads = afs.split_heads(projected, num_heads)
    assert heads.shape == (1, 8, 6, 50)
    # The seed folds batch and heads together: (1 * 8, 6, 50).
    assert heads.reshape(1 * num_heads, 6, 50).shape == (8, 6, 50)
    assert afs.merge_heads(heads).shape == (1, 6, 400)
    out, weights = module(x, return_weights=True)
    assert weights.shape == (1, 8, 6, 6)
    assert out.shape == (1, 6, 50)
    assert module.unify_heads.in_features == 400
    assert module.unify_heads.out_features == 50


# ---------------------------------------------------------------------------------------------
# Seed 004: masked self-attention on random (B, T, C) input.
# ---------------------------------------------------------------------------------------------


def test_seed_004_shape() -> None:
    torch.manual_seed(1337)
    x = torch.randn(4, 8, 32)  # (B, T, C)
    module = afs.CausalAttention(32, 16, context_length=8, dropout=0.0)
    out, weights = module(x, return_weights=True)
    assert out.shape == (4, 8, 16)
    assert weights.shape == (4, 8, 8)
    # The first token can only see itself; nothing above the diagonal gets any weight.
    torch.testing.assert_close(weights[:, 0, 0], torch.ones(4))
    assert torch.all(weights.masked_select(afs.causal_mask(8)) == 0)
    torch.testing.assert_close(weights.sum(dim=-1), torch.ones(4, 8))
