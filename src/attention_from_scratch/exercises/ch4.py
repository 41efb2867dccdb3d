"""Self-checks of the exercises of chapter 4, "Multi-head attention".

Each check tries the learner's function on the page's example (its module of two heads on the
toy sentence, the sizes of its modules, the error of ``d_out = 10`` with four heads) or on a
packed tensor of the numbers 0 to 23, and compares it with the numbers written out here or with
properties every right answer has. The packed split is checked by properties only: they hold
for more than one grouping of the packed axis, so they cannot be searched for the layout.
Grading is not done here: see :mod:`._core`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import torch
from torch import nn

from ..causal import CausalAttention
from ..multihead import MultiHeadAttention
from ..toy import toy_sentence
from ._core import Exercise, answer_tensor


def _page_module(num_heads: int = 2, d_out: int = 4, qkv_bias: bool = False) -> MultiHeadAttention:
    """The page's module: ``MultiHeadAttention(3, d_out, 6, 0.0, ...)`` after seed 123."""
    torch.manual_seed(123)  # the check runs in a forked random state
    return MultiHeadAttention(3, d_out, 6, 0.0, num_heads=num_heads, qkv_bias=qkv_bias).eval()


def _toy_batch() -> torch.Tensor:
    _, inputs = toy_sentence()
    return inputs.unsqueeze(0)  # (b, t, d_in) = (1, 6, 3)


def _number(value: object) -> int:
    """An int, or a tensor of one integer, as an int (a check fails otherwise)."""
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_floating_point():
        return int(value)
    assert isinstance(value, int) and not isinstance(value, bool), (
        f"expected an int, got {type(value).__name__}"
    )
    return value


one_head = Exercise("ch4-ex-one-head", chapter=4)


def _head(
    as_causal_and_linear: Callable[..., object], mha: MultiHeadAttention, m: int
) -> tuple[CausalAttention, nn.Linear]:
    answer = as_causal_and_linear(mha, m)
    assert isinstance(answer, tuple | list) and len(answer) == 2, "return (causal, linear)"
    causal, linear = answer
    assert isinstance(causal, CausalAttention), f"causal: got {type(causal).__name__}"
    assert isinstance(linear, nn.Linear), f"linear: got {type(linear).__name__}"
    assert linear.bias is None, "the linear layer should have no bias"
    d_h = mha.head_dim
    got = tuple(causal.W_query.weight.shape)
    assert got == (d_h, mha.d_in), f"causal should have d_out = d_h = {d_h}: W_query is {got}"
    got = tuple(linear.weight.shape)
    assert got == (mha.d_out, d_h), f"linear should map {d_h} to {mha.d_out}: its weight is {got}"
    return causal.eval(), linear.eval()


@one_head.check(
    hint="Head m owns a block of d_h rows of W_query, W_key and W_value and the matching "
    "block of d_h columns of out_proj's weight; its CausalAttention has d_out = d_h."
)
def head_1_of_the_pages_module(as_causal_and_linear: Callable[..., object]) -> None:
    """head 1 of the page's mha (two heads of size 2): its share of the last token's output"""
    mha = _page_module()
    causal, linear = _head(as_causal_and_linear, mha, 1)
    with torch.no_grad():
        got = answer_tensor(linear(causal(_toy_batch())), (1, 6, 4))[0, -1]
    expected = torch.tensor([-0.1662, 0.1383, -0.0125, 0.1264])
    assert torch.allclose(got, expected, atol=1e-4), f"got {got.tolist()}"


@one_head.check(
    hint="Every head writes into the output through its own block of out_proj: the heads' "
    "linear(causal(x)) add up to mha(x) once out_proj.bias is added."
)
def the_heads_add_up_to_the_module(as_causal_and_linear: Callable[..., object]) -> None:
    """the heads' shares plus out_proj.bias give mha(x), with two heads and with one"""
    x = _toy_batch()
    for mha in (_page_module(), _page_module(num_heads=1, qkv_bias=True)):
        total = mha.out_proj.bias.detach().clone()
        with torch.no_grad():
            for m in range(mha.num_heads):
                causal, linear = _head(as_causal_and_linear, mha, m)
                total = total + answer_tensor(linear(causal(x)), (1, 6, 4))
            expected = mha(x)
        gap = float((total - expected).abs().max())
        assert gap < 1e-5, f"{mha.num_heads} head(s): the sum is off by up to {gap:.3g}"


count_parameters = Exercise("ch4-ex-count-parameters", chapter=4)


@count_parameters.check(
    hint="Each projection maps d_in numbers to num_heads * head_dim, out_proj maps those to "
    "d_out; count each weight and each bias."
)
def the_pages_wide_and_split_modules(parameter_count: Callable[..., object]) -> None:
    """8 wide heads of size 50 (80,050) and 10 split heads of size 5 (10,050)"""
    for sizes, expected in (((50, 50, 8, 50, False), 80_050), ((50, 50, 10, 5, False), 10_050)):
        got = _number(parameter_count(*sizes))
        assert got == expected, f"parameter_count{sizes}: got {got:,d}, expected {expected:,d}"


@count_parameters.check(
    hint="Which layers have a bias when qkv_bias is False, and which when it is True?"
)
def heads_of_size_2_and_3_on_the_toy_sizes(parameter_count: Callable[..., object]) -> None:
    """d_in = 3, d_out = 4, two heads: of size 2 with biases (68), of size 3 without (82)"""
    for sizes, expected in (((3, 4, 2, 2, True), 68), ((3, 4, 2, 3, False), 82)):
        got = _number(parameter_count(*sizes))
        assert got == expected, f"parameter_count{sizes}: got {got}, expected {expected}"


divisible = Exercise("ch4-ex-divisible", chapter=4)


def _split(split_qkv: Callable[..., object], qkv: torch.Tensor, layout: str) -> list[torch.Tensor]:
    answer = split_qkv(qkv.clone(), 2, layout)
    assert isinstance(answer, tuple | list) and len(answer) == 3, "return (queries, keys, values)"
    parts = [answer_tensor(part, (1, 2, 2, 2)) for part in answer]  # (b, h, t, d_h)
    for part, role in zip(parts, ("queries", "keys", "values"), strict=True):
        assert part.dtype == qkv.dtype, f"{layout!r}, {role}: dtype {part.dtype}, not {qkv.dtype}"
    return parts


def _numbers(*parts: torch.Tensor) -> list[int]:
    return sorted(int(n) for part in parts for n in part.flatten())


@divisible.check(
    hint="Give the last axis one size per level of its grouping, outermost first, then bring "
    "the roles to the front and the heads in front of the tokens."
)
def the_numbers_0_to_23_in_both_layouts(split_qkv: Callable[..., object]) -> None:
    """two tokens of 12 packed numbers, two heads of size 2: each role (in "roles") and each
    head (in "heads") gets its own run of the numbers"""
    qkv = torch.arange(24.0).view(1, 2, 12)  # (b, t, 3 * d_out): token 1 is token 0 + 12
    split = {layout: _split(split_qkv, qkv, layout) for layout in ("roles", "heads")}
    for layout, parts in split.items():
        for part, role in zip(parts, ("queries", "keys", "values"), strict=True):
            assert torch.equal(part[:, :, 1], part[:, :, 0] + 12), (
                f"{layout!r}, {role}: token 1 should hold token 0's numbers + 12"
            )
        token_0 = [part[:, :, 0] for part in parts]
        assert _numbers(*token_0) == list(range(12)), (
            f"{layout!r}: token 0's 12 numbers should each land once, got {_numbers(*token_0)}"
        )
    for r, role in enumerate(("queries", "keys", "values")):
        got = _numbers(split["roles"][r][:, :, 0])
        assert got == list(range(4 * r, 4 * r + 4)), f"'roles', {role}: got numbers {got}"
    for m in range(2):
        got = _numbers(*(part[:, m, 0] for part in split["heads"]))
        assert got == list(range(6 * m, 6 * m + 6)), (
            f"'heads': head {m}'s query, key and value hold numbers {got}"
        )


@divisible.check(
    hint="Before any reshape, check that num_heads divides d_out (a third of the last "
    "size), and raise a ValueError whose message names both numbers."
)
def ten_numbers_cannot_make_four_heads(split_qkv: Callable[..., object]) -> None:
    """d_out = 10 and four heads: a ValueError that names 10 and 4, in both layouts"""
    for layout in ("roles", "heads"):
        try:
            split_qkv(torch.zeros(2, 6, 30), 4, layout)
        except ValueError as error:
            numbers = re.findall(r"\d+", str(error))
            assert "10" in numbers and "4" in numbers, f"the message: {error}"
            continue
        raise AssertionError(f"{layout!r}: no ValueError was raised")


permute_heads = Exercise("ch4-ex-permute-heads", chapter=4)

PERM = [2, 0, 3, 1]


def _permuted(
    permute_heads: Callable[..., object],
) -> tuple[MultiHeadAttention, MultiHeadAttention]:
    """Four heads of size 2 with biases, and the learner's module with its heads in PERM's
    order."""
    original = _page_module(num_heads=4, d_out=8, qkv_bias=True)
    permuted = permute_heads(original, list(PERM))
    assert isinstance(permuted, MultiHeadAttention), (
        f"expected a MultiHeadAttention, got {type(permuted).__name__}"
    )
    assert permuted is not original, "return a new module"
    return original, permuted.eval()


@permute_heads.check(
    hint="New head m is old head perm[m]: its rows of W_query, W_key and W_value are old "
    "block perm[m]. out_proj reads the heads' outputs: its columns follow the heads."
)
def four_heads_reordered_on_the_toy_sentence(permute_heads: Callable[..., object]) -> None:
    """perm = [2, 0, 3, 1]: new head m has old head perm[m]'s weights; the output is the same"""
    original, permuted = _permuted(permute_heads)
    x = _toy_batch()
    with torch.no_grad():
        out, weights = original(x, return_weights=True)
        out_p, weights_p = permuted(x, return_weights=True)
    for m, p in enumerate(PERM):
        assert torch.allclose(weights_p[:, m], weights[:, p], atol=1e-6), (
            f"new head {m} should attend as the module's head {p}"
        )
    assert torch.allclose(out_p, out, atol=1e-5), "the output changed"


@permute_heads.check(
    hint="The biases of the projections have one block of d_h numbers per head, like the "
    "rows; out_proj's bias belongs to the output features."
)
def the_biases_move_with_their_heads(permute_heads: Callable[..., object]) -> None:
    """new head 0's key bias is old head 2's; out_proj's bias stays"""
    original, permuted = _permuted(permute_heads)
    # The key bias adds one number to a whole row of scores: the weights cannot show it.
    assert torch.equal(permuted.W_key.bias[0:2], original.W_key.bias[4:6]), (
        "W_key.bias: new head 0's block should be old head 2's"
    )
    assert torch.equal(permuted.out_proj.bias, original.out_proj.bias), "out_proj.bias moved"
