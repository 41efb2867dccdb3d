"""Self-checks of the exercises of chapter 2, "Trainable queries, keys and values".

Each check tries the learner's answer on the page's example (the toy sentence, the modules
built under ``torch.manual_seed(789)``, the matrices drawn under ``torch.manual_seed(123)``)
and compares it with numbers written out here or with a property every right answer has.
Grading is not done here: see :mod:`._core`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..toy import toy_sentence
from ..trainable import SelfAttentionV1, SelfAttentionV2
from ._core import Exercise, answer_tensor


def _toy() -> torch.Tensor:
    _, inputs = toy_sentence()
    return inputs  # (t, d_in) = (6, 3)


def _seed_789(qkv_bias: bool) -> SelfAttentionV2:
    """The page's SelfAttentionV2(3, 2) built under torch.manual_seed(789)."""
    torch.manual_seed(789)  # the check runs inside fork_rng: the notebook's stream is kept
    return SelfAttentionV2(3, 2, qkv_bias=qkv_bias)


def _seed_123() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The chapter's W_query, W_key and W_value, (3, 2) each, drawn under seed 123."""
    torch.manual_seed(123)
    return torch.rand(3, 2), torch.rand(3, 2), torch.rand(3, 2)


def _pair(value: object, shapes: tuple[tuple[int, ...], ...], what: str) -> list[torch.Tensor]:
    assert isinstance(value, tuple | list) and len(value) == 2, f"expected {what}"
    return [answer_tensor(item, shape) for item, shape in zip(value, shapes, strict=True)]


def _number(value: object) -> float:
    """A Python number, or a tensor of one number, as a float (a check fails otherwise)."""
    if isinstance(value, torch.Tensor):
        assert value.numel() == 1, f"expected one number, got a tensor of shape {value.shape}"
        return float(value)
    assert isinstance(value, int | float) and not isinstance(value, bool), (
        f"expected a number, got {type(value).__name__}"
    )
    return float(value)


v2_into_v1 = Exercise("ch2-ex-v2-into-v1", chapter=2)


def _with_ones(x: torch.Tensor) -> torch.Tensor:
    return torch.cat([x, torch.ones(*x.shape[:-1], 1)], dim=-1)


@v2_into_v1.check(
    hint="Return a new SelfAttentionV1(d_in + 1, d_out). Row l of each of its matrices "
    "multiplies input feature l: which row meets the column of ones, and what must it hold? "
    "The other rows must do what the layer's weight does, in SelfAttentionV1's layout."
)
def the_seed_789_module_with_biases(
    v2_into_v1: Callable[[SelfAttentionV2], SelfAttentionV1],
) -> None:
    """SelfAttentionV2(3, 2, qkv_bias=True), seed 789: the same output on inputs with ones"""
    v2 = _seed_789(qkv_bias=True)
    before = {name: p.detach().clone() for name, p in v2.named_parameters()}
    v1 = v2_into_v1(v2)
    assert type(v1) is SelfAttentionV1, f"expected a SelfAttentionV1, got {type(v1).__name__}"
    shape = tuple(v1.W_query.shape)
    assert shape == (4, 2), f"W_query has shape {shape}, expected (d_in + 1, d_out) = (4, 2)"
    for name, p in v2.named_parameters():
        assert torch.equal(p.detach(), before[name]), f"v2's {name} changed: leave v2 as it was"
    with torch.no_grad():
        got = answer_tensor(v1(_with_ones(_toy())), (6, 2))
    expected = torch.tensor(  # v2's output on the toy sentence
        [
            [-0.3427, -0.2720],
            [-0.3439, -0.2692],
            [-0.3438, -0.2693],
            [-0.3417, -0.2728],
            [-0.3412, -0.2736],
            [-0.3426, -0.2714],
        ]
    )
    assert torch.allclose(got, expected, atol=1e-4), f"got {got.tolist()}"


@v2_into_v1.check(hint="Without biases nothing is added to the projections.")
def the_seed_789_module_without_biases(
    v2_into_v1: Callable[[SelfAttentionV2], SelfAttentionV1],
) -> None:
    """SelfAttentionV2(3, 2), seed 789: the last rows are 0, the output the page's"""
    v1 = v2_into_v1(_seed_789(qkv_bias=False))
    for name in ("W_query", "W_key", "W_value"):
        last = answer_tensor(getattr(v1, name), (4, 2))[-1]
        assert torch.equal(last, torch.zeros(2)), f"the last row of {name} is {last.tolist()}"
    with torch.no_grad():
        got = answer_tensor(v1(_with_ones(_toy())), (6, 2))
    assert torch.allclose(got[0], torch.tensor([-0.0739, 0.0713]), atol=1e-4), got[0].tolist()


qkv_bias = Exercise("ch2-ex-qkv-bias", chapter=2)


def _biases(v2: SelfAttentionV2) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """What key_bias_shift gets of a module: the query layer's weight and bias, the key bias."""
    return v2.W_query.weight, v2.W_query.bias, v2.W_key.bias


@qkv_bias.check(
    hint="Expand q_i . (x_j W_k^T + b_k): the key bias adds a term that does not depend on "
    "the key j. The query is x @ weight.T + bias, the query bias included."
)
def the_shift_of_the_seed_789_module(key_bias_shift: Callable[..., object]) -> None:
    """SelfAttentionV2(3, 2, qkv_bias=True), seed 789: the shift of each row of its scores"""
    with torch.no_grad():
        got = answer_tensor(key_bias_shift(_toy(), *_biases(_seed_789(qkv_bias=True))), (6,))
    expected = torch.tensor([-0.5596, -0.7342, -0.7290, -0.5592, -0.5199, -0.6247])
    assert torch.allclose(got, expected, atol=1e-4), f"got {got.tolist()}"


@qkv_bias.check(hint="Without biases nothing is added; a batch gets one row per sequence.")
def no_bias_and_a_batch(key_bias_shift: Callable[..., object]) -> None:
    """no shift without biases (both None); a batch of two toy sentences gives (2, 6)"""
    with torch.no_grad():
        none = answer_tensor(key_bias_shift(_toy(), *_biases(_seed_789(qkv_bias=False))), (6,))
        both = answer_tensor(
            key_bias_shift(torch.stack([_toy(), _toy()]), *_biases(_seed_789(qkv_bias=True))),
            (2, 6),
        )
    assert torch.equal(none, torch.zeros(6)), f"got {none.tolist()}"
    assert torch.allclose(both[0], both[1]), "the two copies of the sentence differ"


step = Exercise("ch2-ex-step", chapter=2)


@step.check(
    hint="z: token i's query against every key, scaled softmax, weighted sum of the values. "
    "pull: differentiate z = sum_j' alpha_j' v_j' with the chapter's d alpha / d omega, "
    "and mind the division by sqrt(d_k)."
)
def the_context_of_step_and_its_pull(context_vector: Callable[..., object]) -> None:
    """ "step" (i = 5) with the seed-123 matrices: z = row 5 of SelfAttentionV1's output"""
    z, pull = _pair(context_vector(_toy(), *_seed_123(), 5), ((2,), (6, 2)), "the pair (z, pull)")
    assert torch.allclose(z, torch.tensor([0.2990, 0.8040]), atol=1e-4), f"z is {z.tolist()}"
    journey = torch.tensor([0.01422, 0.02954])  # the pull of the key of "journey"
    assert torch.allclose(pull[1], journey, atol=1e-5), f"pull[1] is {pull[1].tolist()}"


@step.check(
    hint="Raising every score of the row by the same amount changes nothing, so the rows of "
    "pull must add up to zero."
)
def the_pulls_add_up_to_zero(context_vector: Callable[..., object]) -> None:
    """the pulls of "journey" (i = 1) add up to zero"""
    _, pull = _pair(context_vector(_toy(), *_seed_123(), 1), ((2,), (6, 2)), "(z, pull)")
    total = pull.sum(dim=0)
    assert torch.allclose(total, torch.zeros(2), atol=1e-6), f"they add up to {total.tolist()}"
    assert pull.abs().max() > 1e-3, "every pull is 0"


symmetric = Exercise("ch2-ex-symmetric", chapter=2)


@symmetric.check(
    hint="Queries and keys are both x @ W + b; scale the scores by 1/sqrt(d_k); r_i is the "
    "log of the sum that softmax divides row i by (torch.logsumexp keeps it finite)."
)
def the_toy_sentence_with_w_query(tied_attention: Callable[..., object]) -> None:
    """the toy sentence with W = the seed-123 W_query and b = 0"""
    weights, sums = _pair(
        tied_attention(_toy(), _seed_123()[0], torch.zeros(2)),
        ((6, 6), (6,)),
        "the pair (weights, log_sums)",
    )
    expected = torch.tensor([2.7111, 3.0535, 3.0360, 2.4714, 2.3720, 2.6818])
    assert torch.allclose(sums, expected, atol=1e-4), f"log_sums is {sums.tolist()}"
    row = torch.tensor([0.1565, 0.2405, 0.2353, 0.1154, 0.1016, 0.1508])
    assert torch.allclose(weights[1], row, atol=1e-4), f"row 1 is {weights[1].tolist()}"


@symmetric.check(
    hint="Each row of weights sums to one, and multiplying row i back by e^(r_i) undoes the "
    "division: the result must be symmetric."
)
def weights_times_their_sums_are_symmetric(tied_attention: Callable[..., object]) -> None:
    """ten random tokens, d_in = 16, d_out = 4, with a bias: alpha_ij e^(r_i) is symmetric"""
    torch.manual_seed(3)
    x, w, b = torch.randn(10, 16), torch.randn(16, 4) / 4, torch.randn(4)
    weights, sums = _pair(tied_attention(x, w, b), ((10, 10), (10,)), "(weights, log_sums)")
    assert torch.allclose(weights.sum(dim=-1), torch.ones(10), atol=1e-5), "rows must sum to 1"
    undone = weights * sums.exp()[:, None]
    assert torch.allclose(undone, undone.T, rtol=1e-4), "alpha_ij e^(r_i) is not symmetric"


sigma = Exercise("ch2-ex-sigma", chapter=2)


@sigma.check(
    hint="With W_q = W_k = the identity the inputs are the queries and keys, and the score a "
    "sum of d_k products of two independent numbers: what is the variance of one product?"
)
def identity_matrices(score_variance: Callable[..., object]) -> None:
    """W_q = W_k = the 64 by 64 identity, every sigma_l = 2: the variance is 16 * 64 = 1024"""
    eye = torch.eye(64)
    got = _number(score_variance(eye, eye, torch.full((64,), 2.0)))
    assert abs(got - 1024) < 1e-2, f"got {got}"


@sigma.check(
    hint="Write the score as x M x'^T, a sum of products of one entry of x and one of x': "
    "which of these products are correlated, what is the variance of each, and of their sum?"
)
def a_small_example(score_variance: Callable[..., object]) -> None:
    """a 3 by 2 W_q and W_k, sigma = (1, 1, 1) and then (1, 2, 0.5)"""
    w_query = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    w_key = torch.tensor([[1.0, 2.0], [0.0, 1.0], [1.0, 0.0]])
    for values, expected in (((1.0, 1.0, 1.0), 18.0), ((1.0, 2.0, 0.5), 36.5625)):
        got = _number(score_variance(w_query, w_key, torch.tensor(values)))
        assert abs(got - expected) < 1e-4, f"sigma = {values}: got {got}"
