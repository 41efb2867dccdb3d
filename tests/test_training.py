"""The tiny model, the synthetic tasks, the training loop and the head scores of chapter 6."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attention_from_scratch import (
    Block,
    MultiHeadAttention,
    TinyCausalModel,
    evaluate,
    induction_scores,
    induction_task,
    k_back_task,
    previous_token_scores,
    train,
)
from attention_from_scratch.tasks import IGNORE_INDEX


def test_k_back_targets_are_the_inputs_k_places_back() -> None:
    inputs, targets = k_back_task(5, 9, 7, 2, seed=0)
    assert inputs.shape == targets.shape == (5, 9)
    assert inputs.dtype == targets.dtype == torch.long
    assert inputs.min() >= 0 and inputs.max() < 7
    assert (targets[:, :2] == IGNORE_INDEX).all()
    for b in range(5):
        for i in range(2, 9):
            assert targets[b, i] == inputs[b, i - 2]


def test_tasks_are_deterministic_per_seed() -> None:
    a = k_back_task(20, 12, 10, 3, seed=4)
    b = k_back_task(20, 12, 10, 3, seed=4)
    c = k_back_task(20, 12, 10, 3, seed=5)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not torch.equal(a[0], c[0])
    d = induction_task(20, 12, 10, min_period=2, max_period=6, seed=4)
    e = induction_task(20, 12, 10, min_period=2, max_period=6, seed=4)
    f = induction_task(20, 12, 10, min_period=2, max_period=6, seed=5)
    assert all(torch.equal(x, y) for x, y in zip(d, e, strict=True))
    assert not torch.equal(d[0], f[0])


def test_induction_sequences_repeat_and_only_the_repeat_is_scored() -> None:
    inputs, targets = induction_task(200, 16, 12, min_period=3, max_period=8, seed=0)
    assert inputs.shape == targets.shape == (200, 16)
    periods = set()
    for b in range(200):
        row, target = inputs[b].tolist(), targets[b].tolist()
        # The period is where the first token comes back.
        n = row.index(row[0], 1)
        periods.add(n)
        assert 3 <= n <= 8
        assert len(set(row[:n])) == n, "the segment's tokens are distinct"
        assert all(row[i] == row[i - n] for i in range(n, 16))
        assert target[:n] == [IGNORE_INDEX] * n
        # Scored targets are the next token, which equals the token after the earlier copy.
        assert all(target[i] == row[i + 1 - n] for i in range(n, 16))
        assert all(target[i] == row[i + 1] for i in range(n, 15))
    assert periods == set(range(3, 9)), "every period in the range occurs"


def test_model_shapes_and_weights() -> None:
    torch.manual_seed(0)
    model = TinyCausalModel(11, 16, 10, num_layers=2, num_heads=2, mlp=True, layer_norm=True)
    tokens = torch.randint(11, (3, 7))
    logits, weights = model(tokens, return_weights=True)
    assert logits.shape == (3, 7, 11)
    assert len(weights) == 2 and all(w.shape == (3, 2, 7, 7) for w in weights)
    assert torch.allclose(weights[1].sum(dim=-1), torch.ones(3, 2, 7))
    assert torch.equal(model(tokens), logits)


@pytest.mark.parametrize("positions", ["none", "learned", "sinusoidal"])
def test_a_later_token_never_changes_an_earlier_output(positions: str) -> None:
    torch.manual_seed(0)
    model = TinyCausalModel(9, 16, 8, num_layers=2, positions=positions, mlp=True)
    tokens = torch.randint(9, (2, 8))
    changed = tokens.clone()
    changed[:, 5] = (changed[:, 5] + 1) % 9
    with torch.no_grad():
        before, after = model(tokens), model(changed)
    assert torch.equal(before[:, :5], after[:, :5])
    assert not torch.allclose(before[:, 5:], after[:, 5:])


def test_positions_make_a_shuffled_prefix_visible() -> None:
    # Without positions the last output sees a bag: shuffling earlier tokens changes nothing.
    tokens = torch.tensor([[1, 2, 3, 4, 5]])
    shuffled = torch.tensor([[3, 1, 4, 2, 5]])
    torch.manual_seed(0)
    blind = TinyCausalModel(6, 8, 5, positions="none")
    torch.manual_seed(0)
    seeing = TinyCausalModel(6, 8, 5, positions="sinusoidal")
    with torch.no_grad():
        assert torch.allclose(blind(tokens)[0, -1], blind(shuffled)[0, -1], atol=1e-6)
        assert not torch.allclose(seeing(tokens)[0, -1], seeing(shuffled)[0, -1], atol=1e-4)


def test_a_block_adds_its_attention_and_its_perceptron_to_the_input() -> None:
    torch.manual_seed(0)
    attention = MultiHeadAttention(8, 8, 6, 0.0, num_heads=2)
    x = torch.randn(2, 6, 8)
    plain = Block(attention)
    out, weights = plain(x)
    torch.testing.assert_close(out, x + attention(x))
    assert weights is None
    out, weights = plain(x, return_weights=True)
    expected, expected_weights = attention(x, return_weights=True)
    torch.testing.assert_close(out, x + expected)
    torch.testing.assert_close(weights, expected_weights)
    full = Block(attention, mlp=True, layer_norm=True)
    assert isinstance(full.attention_norm, nn.LayerNorm) and full.mlp is not None
    out, _ = full(x)
    after_attention = x + attention(full.attention_norm(x))
    torch.testing.assert_close(out, after_attention + full.mlp(after_attention))
    with pytest.raises(TypeError, match=r"^attention: expected a torch\.nn\.Module"):
        Block("attention")  # type: ignore[arg-type]


def test_the_model_is_its_blocks_in_order() -> None:
    torch.manual_seed(0)
    model = TinyCausalModel(10, 8, 6, num_layers=3, num_heads=2, mlp=True, layer_norm=True)
    tokens = torch.randint(10, (2, 6))
    logits, weights = model(tokens, return_weights=True)
    x = model.embed(tokens)
    for block in model.blocks:
        x, _ = block(x)
    torch.testing.assert_close(logits, model.head(model.final_norm(x)))
    assert [w.shape for w in weights] == [(2, 2, 6, 6)] * 3
    assert len(model.blocks) == 3 and all(isinstance(b, Block) for b in model.blocks)


def test_short_training_beats_chance_clearly_on_held_out_data() -> None:
    x_train, y_train = k_back_task(512, 12, 8, 2, seed=1)
    x_test, y_test = k_back_task(256, 12, 8, 2, seed=2)
    torch.manual_seed(0)
    model = TinyCausalModel(8, 32, 12, positions="sinusoidal")
    history = train(model, x_train, y_train, steps=60, batch_size=128, progress=False)
    assert len(history.losses) == len(history.accuracies) == 60
    assert history.losses[-1] < history.losses[0]
    # Chance is 1/8.
    assert evaluate(model, x_test, y_test) > 0.6


def test_training_is_deterministic_with_a_seed() -> None:
    x, y = k_back_task(64, 6, 5, 1, seed=0)
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        model = TinyCausalModel(5, 8, 6)
        runs.append(train(model, x, y, steps=5, batch_size=16, progress=False).losses)
    assert runs[0] == runs[1]


def test_evaluate_counts_only_scored_positions() -> None:
    class Echo(torch.nn.Module):
        """Predicts the input token itself at every position."""

        def __init__(self) -> None:
            super().__init__()
            self.dummy = torch.nn.Parameter(torch.zeros(1))

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.one_hot(tokens, 4).float()  # (b, t, vocab)

    inputs = torch.tensor([[0, 1, 2, 3]])
    targets = torch.tensor([[IGNORE_INDEX, 1, 0, IGNORE_INDEX]])
    assert evaluate(Echo(), inputs, targets) == 0.5


def test_head_scores_recognise_ideal_heads() -> None:
    t, n = 9, 3
    tokens = torch.tensor([[4, 7, 1] * 3])  # period 3
    previous = torch.zeros(1, 1, t, t)
    previous[0, 0, 0, 0] = 1.0
    for i in range(1, t):
        previous[0, 0, i, i - 1] = 1.0
    induction = torch.zeros(1, 1, t, t)
    for i in range(t):
        # Queries from n on look at the key after the latest earlier copy.
        induction[0, 0, i, i - n + 1 if i >= n else 0] = 1.0
    uniform = torch.tril(torch.ones(t, t))
    uniform = (uniform / uniform.sum(dim=-1, keepdim=True))[None, None]
    weights = torch.cat([previous, induction, uniform], dim=1)  # (b, h, t, t), 3 heads
    prev = previous_token_scores(weights)
    ind = induction_scores(weights, tokens)
    # The induction head looks one back only at query 1 (key 0): 1 of the 8 queries.
    uniform_prev = sum(1 / (i + 1) for i in range(1, t)) / 8
    assert prev.tolist() == pytest.approx([1.0, 1 / 8, uniform_prev])
    assert ind[0].item() == pytest.approx(0.0)
    assert ind[1].item() == pytest.approx(1.0)
    # Uniform: query i puts 1/(i+1) on each key; queries 3..8 have 1 or 2 matching keys.
    expected = [(1 if i < 6 else 2) / (i + 1) for i in range(3, 9)]
    assert ind[2].item() == pytest.approx(sum(expected) / len(expected))


@pytest.mark.parametrize(
    ("build", "error", "match"),
    [
        (lambda: k_back_task(4, 5, 3, 5, seed=0), ValueError, "k: expected fewer"),
        (lambda: k_back_task(4, 5, 3, 1, seed=None), TypeError, "seed"),
        (lambda: k_back_task(0, 5, 3, 1, seed=0), ValueError, "num_sequences"),
        (
            lambda: induction_task(4, 10, 5, min_period=2, max_period=6, seed=0),
            ValueError,
            "vocab_size=5",
        ),
        (
            lambda: induction_task(4, 6, 9, min_period=2, max_period=6, seed=0),
            ValueError,
            "num_tokens=6",
        ),
        (
            lambda: induction_task(4, 9, 9, min_period=1, max_period=6, seed=0),
            ValueError,
            "min_period",
        ),
        (lambda: TinyCausalModel(5, 8, 4, positions="rope"), ValueError, "positions"),
        (lambda: TinyCausalModel(5, 9, 4, num_heads=2), ValueError, "d_out"),
        (lambda: TinyCausalModel(5, 8, 4)(torch.zeros(1, 3)), TypeError, "integer"),
        (lambda: TinyCausalModel(5, 8, 4)(torch.zeros(1, 5).long()), ValueError, "at most"),
        (lambda: TinyCausalModel(5, 8, 4)(torch.full((1, 3), 5)), ValueError, "ids in 0..4"),
        (
            lambda: train(TinyCausalModel(5, 8, 4), torch.zeros(2, 3).long(), None, steps=1),
            TypeError,
            "targets",
        ),
        (
            lambda: train(
                TinyCausalModel(5, 8, 4),
                torch.zeros(2, 3).long(),
                torch.zeros(2, 4).long(),
                steps=1,
            ),
            ValueError,
            "targets: expected the shape",
        ),
        (
            lambda: train(
                TinyCausalModel(5, 8, 4), *[torch.zeros(2, 3).long()] * 2, steps=1, lr="1e-3"
            ),
            TypeError,
            "lr: expected a positive number, got str",
        ),
        (
            lambda: train(
                TinyCausalModel(5, 8, 4),
                *[torch.zeros(2, 3).long()] * 2,
                steps=1,
                lr=float("inf"),
            ),
            ValueError,
            "lr: expected a positive, finite number, got inf",
        ),
        (lambda: previous_token_scores(torch.zeros(2, 3, 3).long()), TypeError, "torch.int64"),
        (lambda: previous_token_scores(torch.zeros(2, 3, 3)), ValueError, "weights"),
        (
            lambda: induction_scores(torch.zeros(1, 1, 3, 3), torch.zeros(1, 4).long()),
            ValueError,
            "tokens",
        ),
    ],
)
def test_bad_arguments_are_named(build, error, match: str) -> None:
    with pytest.raises(error, match=match):
        build()
