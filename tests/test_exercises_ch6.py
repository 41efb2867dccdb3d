"""Chapter 6's exercises: a correct answer earns every point, lazy ones do not.

The correct answers are written here as a learner would write them, independently of the
package code under test; every expectation comes from the checks themselves.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn.functional as F

from attention_from_scratch import RotaryEmbedding, evaluate
from attention_from_scratch.exercises import get_exercise, load_hidden, run_checks
from attention_from_scratch.exercises.ch6 import rotated_half_by_formula
from attention_from_scratch.training import IGNORE_INDEX

ROOT = Path(__file__).resolve().parents[1]
load_hidden(ROOT / "grading" / "hidden")


def full_marks(label: str, namespace: dict) -> bool:
    result = run_checks(label, namespace, hidden=True)
    return result.earned == result.possible and result.possible > 0


def reasons(label: str, namespace: dict) -> str:
    result = run_checks(label, namespace, hidden=True)
    assert result.earned < result.possible
    return " | ".join(c.reason for c in result.checks if not c.passed)


# ------------------------------------------------------------------------------ rotate half


def rotate_half_by_hand(x, offset=0):
    t, d_h = x.shape[-2], x.shape[-1]
    out = torch.empty_like(x)
    half = d_h // 2
    for row in range(t):
        for i in range(half):
            angle = (offset + row) * 10000 ** (-2 * i / d_h)
            a, b = x[..., row, i], x[..., row, i + half]
            out[..., row, i] = a * math.cos(angle) - b * math.sin(angle)
            out[..., row, i + half] = a * math.sin(angle) + b * math.cos(angle)
    return out


def test_rotate_half_by_hand_earns_every_point() -> None:
    assert full_marks("ch6-ex-rotate-half", {"rotate_half": rotate_half_by_hand})


def test_the_package_rotation_is_refused() -> None:
    def delegating(x, offset=0):
        return RotaryEmbedding(x.shape[-1], interleaved=False).to(x.dtype)(x, offset)

    assert "write the rotate-half rotation yourself" in reasons(
        "ch6-ex-rotate-half", {"rotate_half": delegating}
    )

    def from_the_checks(x, offset=0):
        return rotated_half_by_formula(x, offset).to(x.dtype)

    assert "RotaryEmbedding" not in reasons("ch6-ex-rotate-half", {"rotate_half": from_the_checks})
    assert not full_marks("ch6-ex-rotate-half", {"rotate_half": from_the_checks})


def test_a_fixed_size_rotary_module_does_not_pass_as_rotate_half() -> None:
    # The chapter's demonstration module has the head size 8 built in.
    module = RotaryEmbedding(head_dim=8, interleaved=False)
    result = get_exercise("ch6-ex-rotate-half").run({"rotate_half": module}, hidden=False)
    assert result.earned == 0


def test_rotate_half_names_the_interleaved_pairs_and_a_missing_offset() -> None:
    def interleaved(x, offset=0):
        d_h = x.shape[-1]
        order = torch.cat([torch.arange(0, d_h, 2), torch.arange(1, d_h, 2)])
        return rotate_half_by_hand(x[..., order], offset)[..., torch.argsort(order)]

    assert "interleaved convention" in reasons("ch6-ex-rotate-half", {"rotate_half": interleaved})

    def no_offset(x, offset=0):
        return rotate_half_by_hand(x, 0)

    assert "start at `offset`" in reasons("ch6-ex-rotate-half", {"rotate_half": no_offset})


def test_rotate_half_with_wrong_frequencies_earns_nothing() -> None:
    # theta_i = 10000**(-i / d_h): right for the one pair of d_h = 2, wrong beyond it.
    def wrong_theta(x, offset=0):
        t, d_h = x.shape[-2], x.shape[-1]
        half = d_h // 2
        out = torch.empty_like(x)
        for row in range(t):
            for i in range(half):
                angle = (offset + row) * 10000 ** (-i / d_h)
                a, b = x[..., row, i], x[..., row, i + half]
                out[..., row, i] = a * math.cos(angle) - b * math.sin(angle)
                out[..., row, i + half] = a * math.sin(angle) + b * math.cos(angle)
        return out

    result = run_checks("ch6-ex-rotate-half", {"rotate_half": wrong_theta}, hidden=True)
    assert result.earned == 0
    assert "wrong frequencies" in reasons("ch6-ex-rotate-half", {"rotate_half": wrong_theta})


# ------------------------------------------------------------------------------ extrapolate


def accuracy_from_by_hand(model, inputs, targets, start):
    with torch.no_grad():
        predictions = model(inputs).argmax(dim=-1)
    scored = targets != IGNORE_INDEX
    scored[:, :start] = False
    return ((predictions == targets) & scored).sum().item() / scored.sum().item()


def test_accuracy_from_earns_every_automatic_point() -> None:
    assert full_marks("ch6-ex-extrapolate", {"accuracy_from": accuracy_from_by_hand})


def test_accuracy_from_lazy_answers_fail() -> None:
    def printed(model, inputs, targets, start):
        return 0.915  # a value printed in the chapter

    assert not full_marks("ch6-ex-extrapolate", {"accuracy_from": printed})

    def every_position(model, inputs, targets, start):
        return evaluate(model, inputs, targets)

    assert "positions before start" in reasons(
        "ch6-ex-extrapolate", {"accuracy_from": every_position}
    )

    def in_place(model, inputs, targets, start):
        targets[:, :start] = IGNORE_INDEX
        return evaluate(model, inputs, targets)

    assert "changed the targets" in reasons("ch6-ex-extrapolate", {"accuracy_from": in_place})

    def fixed_start(model, inputs, targets, start):
        return accuracy_from_by_hand(model, inputs, targets, 9)

    assert not full_marks("ch6-ex-extrapolate", {"accuracy_from": fixed_start})


def test_accuracy_from_on_sliced_inputs_fails() -> None:
    # Slicing moves every token to another position: on the chapter's models it gives the
    # same wrong figure for every encoding.
    def sliced(model, inputs, targets, start):
        return evaluate(model, inputs[:, start:], targets[:, start:])

    result = run_checks("ch6-ex-extrapolate", {"accuracy_from": sliced}, hidden=True)
    assert result.earned < 2  # the public check and the hidden start=10 case fail
    assert "sliced from `start`" in reasons("ch6-ex-extrapolate", {"accuracy_from": sliced})


# ------------------------------------------------------------------------- ablate induction


def logits_without_head_by_hand(model, tokens, layer, head):
    with torch.no_grad():
        x = model.embed(tokens)
        for i, attention in enumerate(model.attention):
            q, k, v = attention.project(x)
            context, _ = attention.attend(q, k, v)
            if i == layer:
                context = context.clone()
                context[:, head] = 0
            b, t, _ = x.shape
            x = x + attention.out_proj(context.transpose(1, 2).reshape(b, t, -1))
        return model.head(model.final_norm(x))


def test_logits_without_head_earns_every_automatic_point() -> None:
    assert full_marks(
        "ch6-ex-ablate-induction", {"logits_without_head": logits_without_head_by_hand}
    )


def test_switching_off_the_whole_layer_or_leaving_a_hook_fails() -> None:
    def whole_layer(model, tokens, layer, head):  # the chapter's zero ablation
        hook = model.attention[layer].register_forward_hook(lambda m, a, out: out * 0)
        try:
            with torch.no_grad():
                return model(tokens)
        finally:
            hook.remove()

    assert "whole layer" in reasons("ch6-ex-ablate-induction", {"logits_without_head": whole_layer})

    def after_out_proj(model, tokens, layer, head):
        d_h = model.attention[layer].head_dim

        def zero(m, a, out):
            out = out.clone()
            out[..., head * d_h : (head + 1) * d_h] = 0
            return out

        hook = model.attention[layer].register_forward_hook(zero)
        with torch.no_grad():
            logits = model(tokens)
        hook.remove()
        return logits

    assert "after out_proj" in reasons(
        "ch6-ex-ablate-induction", {"logits_without_head": after_out_proj}
    )

    def hook_left_behind(model, tokens, layer, head):
        d_h = model.attention[layer].head_dim

        def zero(m, args):
            context = args[0].clone()
            context[..., head * d_h : (head + 1) * d_h] = 0
            return (context,)

        model.attention[layer].out_proj.register_forward_pre_hook(zero)
        with torch.no_grad():
            return model(tokens)

    assert "changed afterwards" in reasons(
        "ch6-ex-ablate-induction", {"logits_without_head": hook_left_behind}
    )

    def weights_zeroed_and_kept(model, tokens, layer, head):
        d_h = model.attention[layer].head_dim
        with torch.no_grad():
            model.attention[layer].out_proj.weight[:, head * d_h : (head + 1) * d_h] = 0
            return model(tokens)

    assert "weights are changed" in reasons(
        "ch6-ex-ablate-induction", {"logits_without_head": weights_zeroed_and_kept}
    )

    def intact(model, tokens, layer, head):
        with torch.no_grad():
            return model(tokens)

    assert not full_marks("ch6-ex-ablate-induction", {"logits_without_head": intact})


# ------------------------------------------------------------------------------ causal bag


def prediction_changes_by_hand(model, tokens, i, j):
    swapped = tokens.clone()
    swapped[i], swapped[j] = tokens[j], tokens[i]
    with torch.no_grad():
        before = model(tokens[None]).argmax(dim=-1)[0]
        after = model(swapped[None]).argmax(dim=-1)[0]
    return before != after


def test_prediction_changes_earns_every_automatic_point() -> None:
    assert full_marks("ch6-ex-causal-bag", {"prediction_changes": prediction_changes_by_hand})


def test_prediction_changes_lazy_answers_fail() -> None:
    def the_page(model, tokens, i, j):  # the chapter's answer for the learned model
        out = torch.zeros(len(tokens), dtype=torch.bool)
        out[[6, 7]] = True
        return out

    assert not full_marks("ch6-ex-causal-bag", {"prediction_changes": the_page})

    def logits_not_argmax(model, tokens, i, j):
        swapped = tokens.clone()
        swapped[i], swapped[j] = tokens[j], tokens[i]
        with torch.no_grad():
            diff = model(tokens[None])[0] - model(swapped[None])[0]
        return diff.abs().amax(dim=-1) > 1e-6

    assert not full_marks("ch6-ex-causal-bag", {"prediction_changes": logits_not_argmax})

    def in_place(model, tokens, i, j):
        original = tokens.clone()
        tokens[i], tokens[j] = original[j], original[i]
        return prediction_changes_by_hand(model, original, i, j)

    assert "changed the tokens" in reasons("ch6-ex-causal-bag", {"prediction_changes": in_place})


# ------------------------------------------------------------------------ why order-blind


def bound_by_position_by_hand(inputs, vocab_size, k):
    t = inputs.shape[1]
    out = torch.zeros(t - k, dtype=torch.float64)
    for i in range(k, t):
        counts = F.one_hot(inputs[:, :i], vocab_size).sum(dim=1)  # (b, vocab)
        out[i - k] = (counts.max(dim=-1).values / i).double().mean()
    return out


def test_bound_by_position_earns_every_automatic_point() -> None:
    assert full_marks("ch6-ex-why-order-blind", {"bound_by_position": bound_by_position_by_hand})


def test_order_blind_bounds_must_be_measured_on_the_checks_sequences() -> None:
    def printed(inputs, vocab_size, k):  # the chapter's numbers, whatever the input
        return torch.full((inputs.shape[1] - k,), 0.21)

    assert not full_marks("ch6-ex-why-order-blind", {"bound_by_position": printed})

    def with_own_token(inputs, vocab_size, k):
        counts = F.one_hot(inputs, vocab_size).cumsum(dim=1)[:, k:]
        return (counts.max(dim=-1).values / torch.arange(k + 1, inputs.shape[1] + 1)).mean(0)

    assert "not its own" in reasons("ch6-ex-why-order-blind", {"bound_by_position": with_own_token})

    def counts_up_to_i_minus_k(inputs, vocab_size, k):  # right for k = 1 only
        counts = F.one_hot(inputs, vocab_size).cumsum(dim=1)[:, :-k]  # tokens 0..i-k
        seen = torch.arange(k, inputs.shape[1], dtype=torch.float64)
        return (counts.max(dim=-1).values / seen).mean(dim=0)

    result = run_checks(
        "ch6-ex-why-order-blind", {"bound_by_position": counts_up_to_i_minus_k}, hidden=True
    )
    assert result.earned == 0

    def built_in_sizes(inputs, vocab_size, k):
        return bound_by_position_by_hand(inputs, 5, 2)[: inputs.shape[1] - k]

    assert not full_marks("ch6-ex-why-order-blind", {"bound_by_position": built_in_sizes})


def test_rotate_half_in_place_loses_the_hidden_point() -> None:
    def in_place(x, offset=0):
        x.copy_(rotate_half_by_hand(x.clone(), offset))
        return x

    assert "in place" in reasons("ch6-ex-rotate-half", {"rotate_half": in_place})
