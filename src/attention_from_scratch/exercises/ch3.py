"""Self-checks of the exercises of chapter 3, "Causal attention and dropout".

Each check tries the learner's function on a small example written out here, with numbers a
reader can work out by hand (zero scores give equal weights to the visible keys), or on the
page's kind of module, with a property every right answer has. Grading is not done here: see
:mod:`._core`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..causal import CausalAttention, causal_mask
from ..trainable import SelfAttentionV2
from ._core import Exercise, answer_tensor


def _visible_equally(hide: list[list[int]]) -> torch.Tensor:
    """The weights of zero scores: 1 / (number visible) on each visible key, 0 elsewhere."""
    seen = ~torch.tensor(hide, dtype=torch.bool)
    return seen / seen.sum(dim=-1, keepdim=True).clamp(min=1)


sliding_window = Exercise("ch3-ex-sliding-window", chapter=3)

# window = 2, sinks = 1, six tokens: row i sees keys i - 2 to i, and key 0.
WINDOW_2_SINK_1 = [
    [0, 1, 1, 1, 1, 1],
    [0, 0, 1, 1, 1, 1],
    [0, 0, 0, 1, 1, 1],
    [0, 0, 0, 0, 1, 1],
    [0, 1, 0, 0, 0, 1],
    [0, 1, 1, 0, 0, 0],
]


@sliding_window.check(
    hint="Compare a column of query positions i with a row of key positions j: hide j > i, "
    "and j < i - window unless j < sinks."
)
def the_mask_of_window_2_with_one_sink(window_mask: Callable[..., object]) -> None:
    """window_mask(6, 2, 1): each row sees two keys back, itself and key 0"""
    got = answer_tensor(window_mask(6, 2, 1), (6, 6))
    assert got.dtype == torch.bool, f"expected a bool mask, got {got.dtype}"
    expected = torch.tensor(WINDOW_2_SINK_1, dtype=torch.bool)
    assert not torch.equal(got, ~expected), "the mask is inverted: True must mean hidden"
    assert torch.equal(got, expected), f"got\n{got.int()}"


@sliding_window.check(
    hint="Fill the hidden scores with -inf, then softmax over the last dimension; a sink "
    "in the future of a query stays hidden from it."
)
def equal_scores_share_the_visible_keys(window_attention: Callable[..., object]) -> None:
    """zero scores (2, 6, 6): each row shares its weight equally among its visible keys"""
    got = answer_tensor(window_attention(torch.zeros(2, 6, 6), 2, 1), (2, 6, 6))
    expected = _visible_equally(WINDOW_2_SINK_1).expand(2, 6, 6)
    assert torch.allclose(got, expected, atol=1e-6), f"got\n{got[0]}"
    one_back = answer_tensor(window_attention(torch.zeros(3, 3), 0, 3), (3, 3))
    assert torch.allclose(one_back, _visible_equally([[0, 1, 1], [0, 0, 1], [0, 0, 0]])), (
        "window 0 with 3 sinks: the sinks are the whole past, the future stays hidden"
    )


dropout_order = Exercise("ch3-ex-dropout-order", chapter=3)


@dropout_order.check(
    hint="Multiply by keep, then divide each row by its own sum (keepdim=True); a row "
    "whose sum is 0 comes out as zeros, not nan."
)
def drop_then_renormalise_three_rows(drop_then_renormalise: Callable[..., object]) -> None:
    """three rows: one keeps a single weight, one keeps two, one loses both"""
    masked = torch.tensor([[0.6, 0.4, 0.0], [0.2, 0.3, 0.5], [0.5, 0.5, 0.0]])
    keep = torch.tensor([[2.0, 0.0, 0.0], [0.0, 2.0, 2.0], [0.0, 0.0, 2.0]])
    got = answer_tensor(drop_then_renormalise(masked, keep), (3, 3))
    assert not got.isnan().any(), "a row that lost every weight must be zeros, not nan"
    expected = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.375, 0.625], [0.0, 0.0, 0.0]])
    assert torch.allclose(got, expected, atol=1e-6), f"got\n{got}"


@dropout_order.check(
    hint="Go through every way to keep or drop the visible keys: each has probability "
    "(1 - p) per kept key times p per dropped one, and gives the kept weights divided by "
    "their sum (zeros when none is kept). Add them up, weighted by their probabilities."
)
def expected_weights_of_two_rows(expected_drop_first: Callable[..., object]) -> None:
    """p = 0.5: "Your"'s row keeps 1 half the time; a row of 0.75 and 0.25"""
    alone = answer_tensor(expected_drop_first(torch.tensor([1.0, 0.0, 0.0]), 0.5), (3,))
    assert torch.allclose(alone, torch.tensor([0.5, 0.0, 0.0]), atol=1e-6), f"got {alone}"
    # Both kept (1/4): 0.75 and 0.25; one kept (1/4 each): 1; none kept (1/4): 0.
    two = answer_tensor(expected_drop_first(torch.tensor([0.75, 0.25, 0.0]), 0.5), (3,))
    expected = torch.tensor([0.4375, 0.3125, 0.0])
    assert torch.allclose(two, expected, atol=1e-6), f"got {two}"


all_masked = Exercise("ch3-ex-all-masked", chapter=3)


@all_masked.check(
    hint="Padding comes first: sequence k starts with t - lengths[k] padding tokens. OR "
    "the padding mask, (b, 1, t), with the causal mask, then set the rows with no visible "
    "key to zero."
)
def equal_scores_with_two_padding_tokens(padded_causal_weights: Callable[..., object]) -> None:
    """zero scores (2, 4, 4), lengths 4 and 2: the second sequence's rows 0 and 1 are zero"""
    got = answer_tensor(
        padded_causal_weights(torch.zeros(2, 4, 4), torch.tensor([4, 2])), (2, 4, 4)
    )
    assert not got.isnan().any(), "a padding query's row must be zeros, not nan"
    full = _visible_equally(causal_mask(4).int().tolist())
    padded = torch.tensor(
        [[0.0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0.5, 0.5]]
    )  # rows 0 and 1 are padding queries
    assert torch.allclose(got[0], full, atol=1e-6), f"no padding: got\n{got[0]}"
    assert torch.allclose(got[1], padded, atol=1e-6), f"two padding tokens: got\n{got[1]}"


@all_masked.check(
    hint="Use a softmax that subtracts the row maximum (torch.softmax does) after filling "
    "the hidden scores with -inf: scores in the hundreds must not overflow."
)
def scores_in_the_hundreds(padded_causal_weights: Callable[..., object]) -> None:
    """scores 300 j for key j, lengths 3 and 1: each real query picks its newest key"""
    scores = (300.0 * torch.arange(3.0)).expand(2, 3, 3)
    got = answer_tensor(padded_causal_weights(scores, torch.tensor([3, 1])), (2, 3, 3))
    expected = torch.tensor(
        [[[1.0, 0, 0], [0, 1, 0], [0, 0, 1]], [[0, 0, 0], [0, 0, 0], [0, 0, 1]]]
    )
    assert torch.allclose(got, expected, atol=1e-6), f"got\n{got}"


dropout_rate = Exercise("ch3-ex-dropout-rate", chapter=3)


@dropout_rate.check(
    hint="An entry survives when its number is at least p; divide the survivors by 1 - p "
    "and zero the others."
)
def four_entries_at_one_half(my_dropout: Callable[..., object]) -> None:
    """x = 1, 2, 3, 4 with numbers 0.1, 0.5, 0.29, 0.9 and p = 0.5"""
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    draws = torch.tensor([[0.1, 0.5, 0.29, 0.9]])
    got = answer_tensor(my_dropout(x, 0.5, draws), (1, 4))
    assert torch.allclose(got, torch.tensor([[0.0, 4.0, 0.0, 8.0]])), f"got {got}"


@dropout_rate.check(
    hint="Let p broadcast against x, each entry scaled by its own 1 / (1 - p); a rate of "
    "1 drops everything, and 0 * inf is nan: choose each entry's scale with torch.where."
)
def rates_of_0_one_half_and_1(my_dropout: Callable[..., object]) -> None:
    """a rate per row, 0, 0.5 and 1, on a (3, 4) tensor of ones"""
    rates = torch.tensor([[0.0], [0.5], [1.0]])
    draws = torch.tensor([[0.3, 0.7, 0.1, 0.9]]).expand(3, 4)
    got = answer_tensor(my_dropout(torch.ones(3, 4), rates, draws), (3, 4))
    assert not got.isnan().any(), "a rate of 1 must give zeros, not nan"
    expected = torch.tensor([[1.0, 1, 1, 1], [0, 2, 0, 2], [0, 0, 0, 0]])
    assert torch.allclose(got, expected), f"got\n{got}"


causality_test = Exercise("ch3-ex-causality-test", chapter=3)


def _layers() -> tuple[torch.nn.Module, torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    causal = CausalAttention(3, 2, context_length=6, dropout=0.0).eval()
    open_layer = SelfAttentionV2(3, 2)
    # Run on its input detached, as inference code may: no gradient reaches x, though the
    # output depends on every token.
    open_layer.register_forward_pre_hook(_detach_inputs)
    return causal, open_layer, torch.randn(2, 5, 3)


def _detach_inputs(module: torch.nn.Module, inputs: tuple[object, ...]) -> tuple[object, ...]:
    return tuple(x.detach() if isinstance(x, torch.Tensor) else x for x in inputs)


@causality_test.check(
    hint="Edit one token at a time in a copy of x, run the module on both, and mark "
    "entry (i, j) True when output row i differs in any sequence of the batch."
)
def dependence_of_a_causal_and_an_open_layer(dependence: Callable[..., object]) -> None:
    """a causal layer: the lower triangle; an unmasked layer on detached input: everything"""
    causal, open_layer, x = _layers()
    given = x.clone()
    got = answer_tensor(dependence(causal, given), (5, 5))
    assert torch.equal(given, x), "dependence changed x in place: edit a copy"
    assert got.dtype == torch.bool, f"expected a bool tensor, got {got.dtype}"
    assert torch.equal(got, ~causal_mask(5)), f"causal layer: got\n{got.int()}"
    everything = answer_tensor(dependence(open_layer, x), (5, 5))
    assert everything.all(), f"layer with no mask: got\n{everything.int()}"


@causality_test.check(
    hint="A module is causal when no output row depends on a later token: nothing above "
    "the diagonal of the dependence."
)
def verdict_on_the_two_layers(is_causal: Callable[..., object]) -> None:
    """is_causal: True for the causal layer, False for the unmasked one (input detached)"""
    causal, open_layer, x = _layers()
    assert _verdict(is_causal(causal, x)) is True, "the causal layer: expected True"
    assert _verdict(is_causal(open_layer, x)) is False, "the layer with no mask: expected False"


def _verdict(value: object) -> bool:
    """True or False, or a tensor of one bool (a check fails otherwise)."""
    if isinstance(value, torch.Tensor) and value.dtype == torch.bool and value.numel() == 1:
        return bool(value)
    assert isinstance(value, bool), f"expected True or False, got {type(value).__name__}"
    return value
