"""Chapter 6's exercises: a correct answer earns every point, lazy ones do not.

The correct answers are written here as a learner would write them, independently of the
package code under test; every expectation comes from the checks themselves.
"""

from __future__ import annotations

import inspect
import math
from pathlib import Path

import torch
import torch.nn.functional as F
from exercise_helpers import full_marks, reasons

from attention_from_scratch import RotaryEmbedding, evaluate
from attention_from_scratch.exercises import get_exercise, load_hidden, run_checks
from attention_from_scratch.exercises.ch6 import rotated_half_by_formula
from attention_from_scratch.training import IGNORE_INDEX

ROOT = Path(__file__).resolve().parents[1]
load_hidden(ROOT / "grading" / "hidden")


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


# The page's interleaved rotation, as the notebook defines it (in its __main__ namespace).
PAGE_ROTATE = """
def rotate(x, offset=0):
    t, d_h = x.shape[-2], x.shape[-1]
    p = torch.arange(offset, offset + t, dtype=torch.float64)
    two_i = torch.arange(0, d_h, 2, dtype=torch.float64)
    angles = torch.outer(p, 10000 ** (-two_i / d_h))
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = a * cos - b * sin
    out[..., 1::2] = a * sin + b * cos
    return out
"""


def test_the_page_rotation_between_two_permutations_is_refused() -> None:
    page = {"__name__": "__main__", "torch": torch}
    exec(PAGE_ROTATE, page)
    rotate = page["rotate"]

    def through_the_page(x, offset=0):  # rotate-half = interleaved, between permutations
        d_h = x.shape[-1]
        evens_then_odds = torch.cat([torch.arange(0, d_h, 2), torch.arange(1, d_h, 2)])
        return rotate(x[..., torch.argsort(evens_then_odds)], offset)[..., evens_then_odds]

    x = torch.randn(2, 5, 8, dtype=torch.float64)
    assert torch.allclose(through_the_page(x, 3), rotated_half_by_formula(x, 3))  # right
    result = run_checks("ch6-ex-rotate-half", {"rotate_half": through_the_page}, hidden=True)
    assert result.earned == 0
    assert "__main__.rotate" in reasons("ch6-ex-rotate-half", {"rotate_half": through_the_page})


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
        for i, attention in enumerate(block.attention for block in model.blocks):
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
        hook = model.blocks[layer].attention.register_forward_hook(lambda m, a, out: out * 0)
        try:
            with torch.no_grad():
                return model(tokens)
        finally:
            hook.remove()

    assert "whole layer" in reasons("ch6-ex-ablate-induction", {"logits_without_head": whole_layer})

    def after_out_proj(model, tokens, layer, head):
        d_h = model.blocks[layer].attention.head_dim

        def zero(m, a, out):
            out = out.clone()
            out[..., head * d_h : (head + 1) * d_h] = 0
            return out

        hook = model.blocks[layer].attention.register_forward_hook(zero)
        with torch.no_grad():
            logits = model(tokens)
        hook.remove()
        return logits

    assert "after out_proj" in reasons(
        "ch6-ex-ablate-induction", {"logits_without_head": after_out_proj}
    )

    def hook_left_behind(model, tokens, layer, head):
        d_h = model.blocks[layer].attention.head_dim

        def zero(m, args):
            context = args[0].clone()
            context[..., head * d_h : (head + 1) * d_h] = 0
            return (context,)

        model.blocks[layer].attention.out_proj.register_forward_pre_hook(zero)
        with torch.no_grad():
            return model(tokens)

    assert "changed afterwards" in reasons(
        "ch6-ex-ablate-induction", {"logits_without_head": hook_left_behind}
    )

    def weights_zeroed_and_kept(model, tokens, layer, head):
        d_h = model.blocks[layer].attention.head_dim
        with torch.no_grad():
            model.blocks[layer].attention.out_proj.weight[:, head * d_h : (head + 1) * d_h] = 0
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


# ---------------------------------------------------------- answers that go around the skill


def test_the_checks_own_references_are_refused() -> None:
    from attention_from_scratch.exercises import ch6

    lazy = {
        "ch6-ex-extrapolate": (
            "accuracy_from",
            lambda model, inputs, targets, start: ch6.accuracy_case(63, 40, 24, 7, 9)[3][0],
        ),
        "ch6-ex-ablate-induction": (
            "logits_without_head",
            lambda model, tokens, layer, head: ch6.logits_by_hand(
                model, tokens, layer, head, "head"
            ),
        ),
        "ch6-ex-causal-bag": ("prediction_changes", ch6.changes_by_hand),
        "ch6-ex-why-order-blind": ("bound_by_position", ch6.order_blind_by_position),
    }
    for label, (name, answer) in lazy.items():
        assert "yourself, but your answer called" in reasons(label, {name: answer}), label


def test_refusing_the_references_leaves_evaluate_allowed() -> None:
    # The references are refused by their own code, not by the torch.no_grad wrapper that
    # every decorated function shares: the chapter's answer, built on evaluate, still passes.
    def with_evaluate(model, inputs, targets, start):
        targets = targets.clone()
        targets[:, :start] = IGNORE_INDEX
        return evaluate(model, inputs, targets)

    assert full_marks("ch6-ex-extrapolate", {"accuracy_from": with_evaluate})


def test_rotate_half_from_the_sinusoidal_table_is_refused() -> None:
    from attention_from_scratch import sinusoidal_positions

    def from_the_table(x, offset=0):  # sin and cos of p * theta_i, ready-made
        t, d_h = x.shape[-2:]
        table = sinusoidal_positions(offset + t, d_h)[offset:].to(x.dtype)
        sin, cos = table[:, 0::2], table[:, 1::2]
        a, b = x[..., : d_h // 2], x[..., d_h // 2 :]
        return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)

    assert "sinusoidal_positions" in reasons("ch6-ex-rotate-half", {"rotate_half": from_the_table})


def _from_the_checks_frame(name: str):
    frame = inspect.currentframe()
    while frame is not None:
        if frame.f_code.co_name.startswith("check_") and name in frame.f_locals:
            return frame.f_locals[name]
        frame = frame.f_back
    raise LookupError(f"no `{name}` in the check's frames")


def test_the_expectation_is_not_in_the_checks_frame_during_the_call() -> None:
    answers = {
        "ch6-ex-extrapolate": "accuracy_from",
        "ch6-ex-ablate-induction": "logits_without_head",
        "ch6-ex-causal-bag": "prediction_changes",
        "ch6-ex-why-order-blind": "bound_by_position",
    }
    for label, name in answers.items():

        def read_it(*args):
            return _from_the_checks_frame("expected")

        result = run_checks(label, {name: read_it}, hidden=True)
        assert result.earned == 0, label


def test_rotate_half_cannot_rewrite_the_checks_copy_of_x() -> None:
    # Zero x and every tensor of the calling frames, then answer zeros: the rotation of
    # zeros is zeros, unless the check draws x again after the call.
    def zero_everything(x, offset=0):
        frame = inspect.currentframe().f_back
        while frame is not None:
            for value in list(frame.f_locals.values()):
                if isinstance(value, torch.Tensor) and value.is_floating_point():
                    value.zero_()
            frame = frame.f_back
        return torch.zeros_like(x)

    result = run_checks("ch6-ex-rotate-half", {"rotate_half": zero_everything}, hidden=True)
    assert result.earned == 0
    assert "in place" in reasons("ch6-ex-rotate-half", {"rotate_half": zero_everything})


def test_prediction_changes_cannot_make_the_swap_a_no_op() -> None:
    # Copy token j over token i and answer "nothing changes"; or silence the model.
    def equal_tokens(model, tokens, i, j):
        tokens[i] = tokens[j]
        return torch.zeros(len(tokens), dtype=torch.bool)

    assert "changed the tokens" in reasons(
        "ch6-ex-causal-bag", {"prediction_changes": equal_tokens}
    )

    def silenced(model, tokens, i, j):
        with torch.no_grad():
            model.head.weight.zero_()
            model.head.bias.zero_()
        return torch.zeros(len(tokens), dtype=torch.bool)

    assert (
        run_checks("ch6-ex-causal-bag", {"prediction_changes": silenced}, hidden=True).earned == 0
    )


class _AlwaysClose(torch.Tensor):
    """A tensor that says it equals whatever it is compared with."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})


class _AlwaysEqualFloat(float):
    def __sub__(self, other):
        return 0.0

    def __float__(self):
        return self


def test_objects_that_fool_the_comparisons_fail() -> None:
    def rotation(x, offset=0):
        return torch.zeros_like(x).as_subclass(_AlwaysClose)

    assert "plain torch.Tensor" in reasons("ch6-ex-rotate-half", {"rotate_half": rotation})

    def changes(model, tokens, i, j):
        return torch.zeros(len(tokens), dtype=torch.bool).as_subclass(_AlwaysClose)

    assert "plain torch.Tensor" in reasons("ch6-ex-causal-bag", {"prediction_changes": changes})

    def accuracy(model, inputs, targets, start):
        return _AlwaysEqualFloat(0.5)

    assert "must return a number" in reasons("ch6-ex-extrapolate", {"accuracy_from": accuracy})


def test_an_answer_that_leaves_a_torch_mode_on_fails() -> None:
    from torch.utils._python_dispatch import TorchDispatchMode

    class Passthrough(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    entered = []

    def leaves_a_mode(inputs, vocab_size, k):
        mode = Passthrough()
        mode.__enter__()  # never left: it would see every comparison of the check
        entered.append(mode)
        return bound_by_position_by_hand(inputs, vocab_size, k)

    try:
        why = reasons("ch6-ex-why-order-blind", {"bound_by_position": leaves_a_mode})
    finally:
        # Left the way it was entered: popping torch's stack by hand crashes torch 2.5 later.
        for mode in reversed(entered):
            mode.__exit__(None, None, None)
    assert "torch mode switched on" in why


def test_prediction_changes_from_the_swapped_positions_alone_fail() -> None:
    # The swapped tokens themselves, or every position between them: the checks' models
    # also change their answers between and after the swapped tokens, and not everywhere.
    def swapped_only(model, tokens, i, j):
        out = torch.zeros(len(tokens), dtype=torch.bool)
        out[[i, j]] = True
        return out

    def from_i_to_j(model, tokens, i, j):
        out = torch.zeros(len(tokens), dtype=torch.bool)
        out[min(i, j) : max(i, j) + 1] = True
        return out

    def from_i_on(model, tokens, i, j):
        out = torch.zeros(len(tokens), dtype=torch.bool)
        out[min(i, j) :] = True
        return out

    for lazy in (swapped_only, from_i_to_j, from_i_on):
        result = run_checks("ch6-ex-causal-bag", {"prediction_changes": lazy}, hidden=True)
        assert result.earned == 0, lazy.__name__


def test_failures_do_not_print_the_expected_answer() -> None:
    # A reason that printed the right accuracy or the right positions could be typed in.
    def constant(model, inputs, targets, start):
        return 0.5

    why = reasons("ch6-ex-extrapolate", {"accuracy_from": constant})
    assert "wrong accuracy" in why and "expected" not in why

    def nothing_changes(model, tokens, i, j):
        return torch.zeros(len(tokens), dtype=torch.bool)

    why = reasons("ch6-ex-causal-bag", {"prediction_changes": nothing_changes})
    assert "wrong positions" in why and "expected" not in why


def test_public_hints_do_not_give_the_recipe() -> None:
    hints = {
        label: " ".join(c.hint for c in get_exercise(label).checks if not c.hidden)
        for label in ("ch6-ex-extrapolate", "ch6-ex-ablate-induction", "ch6-ex-why-order-blind")
    }
    assert "IGNORE_INDEX in a copy" not in hints["ch6-ex-extrapolate"]
    assert "pre-hook" not in hints["ch6-ex-ablate-induction"]
    # The hand-graded part asks why the bound falls: the hint must not give its reason.
    assert "count / i" not in hints["ch6-ex-why-order-blind"]
