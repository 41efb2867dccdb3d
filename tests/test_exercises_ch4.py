"""Chapter 4's exercises: a correct answer earns every point, a lazy one does not.

The correct answers are written here as a learner would write them, from the chapter's
text, without the package functions they are checked against.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from torch import nn

import attention_from_scratch
from attention_from_scratch import (
    CausalAttention,
    MultiHeadAttention,
    split_heads,
)
from attention_from_scratch.exercises import load_hidden, run_checks

ROOT = Path(__file__).resolve().parents[1]
load_hidden(ROOT / "grading" / "hidden", chapters=[4])


def reasons(result) -> str:
    return " ".join(f"{c.hint} {c.reason}" for c in result.checks if not c.passed)


def earned(label: str, namespace: dict) -> tuple[float, float, str]:
    result = run_checks(label, namespace, hidden=True)
    return result.earned, result.possible, reasons(result)


# --- ch4-ex-one-head -----------------------------------------------------------------------


def as_causal_and_linear(mha):
    bias = mha.W_query.bias is not None
    p = mha.dropout.p
    causal = CausalAttention(mha.d_in, mha.d_out, mha.context_length, p, qkv_bias=bias)
    with torch.no_grad():
        for name in ("W_query", "W_key", "W_value"):
            getattr(causal, name).weight.copy_(getattr(mha, name).weight)
            if bias:
                getattr(causal, name).bias.copy_(getattr(mha, name).bias)
    linear = nn.Linear(mha.d_out, mha.d_out)
    linear.load_state_dict(mha.out_proj.state_dict())
    return causal, linear


def test_one_head_correct_answer_earns_every_point() -> None:
    got, possible, why = earned("ch4-ex-one-head", {"as_causal_and_linear": as_causal_and_linear})
    assert got == possible == 3, why


def test_one_head_refuses_the_module_itself_as_the_answer() -> None:
    # The old lazy answer: the module as "causal" and an identity as "linear".
    def lazy(mha):
        return mha, nn.Identity()

    got, _, why = earned("ch4-ex-one-head", {"as_causal_and_linear": lazy})
    assert got == 0
    assert "must be a CausalAttention" in why


def test_one_head_refuses_a_causal_module_that_calls_the_original() -> None:
    def delegating(mha):
        causal, linear = as_causal_and_linear(mha)
        causal.register_forward_hook(lambda module, args, out: mha(args[0]))
        linear.weight.data = torch.eye(mha.d_out)
        linear.bias.data.zero_()
        return causal, linear

    got, _, why = earned("ch4-ex-one-head", {"as_causal_and_linear": delegating})
    assert got == 0
    assert "no hooks" in why


def test_one_head_without_biases_fails_the_hidden_check() -> None:
    def no_biases(mha):
        causal = CausalAttention(mha.d_in, mha.d_out, mha.context_length, 0.0)
        with torch.no_grad():
            for name in ("W_query", "W_key", "W_value"):
                getattr(causal, name).weight.copy_(getattr(mha, name).weight)
        linear = nn.Linear(mha.d_out, mha.d_out)
        linear.load_state_dict(mha.out_proj.state_dict())
        return causal, linear

    got, possible, why = earned("ch4-ex-one-head", {"as_causal_and_linear": no_biases})
    assert got == possible - 1
    assert "causal needs them" in why


def test_one_head_refuses_the_modules_own_layers() -> None:
    # out_proj itself as the linear layer, and a CausalAttention holding mha's own layers:
    # the numbers are right, but the modules are not new.
    def own_layers(mha):
        causal = CausalAttention(mha.d_in, mha.d_out, mha.context_length, 0.0)
        causal.W_query, causal.W_key, causal.W_value = mha.W_query, mha.W_key, mha.W_value
        return causal, mha.out_proj

    def own_out_proj(mha):
        causal, _ = as_causal_and_linear(mha)
        return causal, mha.out_proj

    for lazy in (own_layers, own_out_proj):
        got, _, why = earned("ch4-ex-one-head", {"as_causal_and_linear": lazy})
        assert got == 0, lazy.__name__
        assert "share weights with mha" in why


def test_one_head_fresh_modules_without_copied_weights_fail() -> None:
    def fresh(mha):
        return CausalAttention(mha.d_in, mha.d_out, mha.context_length, 0.0), nn.Linear(
            mha.d_out, mha.d_out
        )

    got, _, why = earned("ch4-ex-one-head", {"as_causal_and_linear": fresh})
    assert got == 0
    assert "differs from the module's output" in why


# --- ch4-ex-count-parameters ----------------------------------------------------------------


def parameter_count(d_in, d_out, num_heads, qkv_bias):
    total = 0
    for fan_in, fan_out, has_bias in [
        (d_in, d_out, qkv_bias),  # W_query
        (d_in, d_out, qkv_bias),  # W_key
        (d_in, d_out, qkv_bias),  # W_value
        (d_out, d_out, True),  # out_proj
    ]:
        total += fan_in * fan_out + (fan_out if has_bias else 0)
    return total


def test_count_correct_answer_earns_every_point() -> None:
    got, possible, why = earned("ch4-ex-count-parameters", {"parameter_count": parameter_count})
    assert got == possible == 3, why


def test_count_refuses_building_the_module() -> None:
    def lazy(d_in, d_out, num_heads, qkv_bias):
        module = MultiHeadAttention(d_in, d_out, 4, 0.0, num_heads, qkv_bias)
        return sum(p.numel() for p in module.parameters())

    got, _, why = earned("ch4-ex-count-parameters", {"parameter_count": lazy})
    assert got == 0
    assert "ShortcutTaken" in why


def test_count_refuses_building_its_layers() -> None:
    def lazy(d_in, d_out, num_heads, qkv_bias):
        layers = [nn.Linear(d_in, d_out, bias=qkv_bias) for _ in range(3)]
        layers.append(nn.Linear(d_out, d_out))
        return sum(p.numel() for layer in layers for p in layer.parameters())

    got, _, why = earned("ch4-ex-count-parameters", {"parameter_count": lazy})
    assert got == 0
    assert "ShortcutTaken" in why


def test_count_names_a_missing_out_proj_bias() -> None:
    def no_out_bias(d_in, d_out, num_heads, qkv_bias):
        return parameter_count(d_in, d_out, num_heads, qkv_bias) - d_out

    got, _, why = earned("ch4-ex-count-parameters", {"parameter_count": no_out_bias})
    assert got == 0
    assert "out_proj's bias is missing" in why


def test_count_of_the_page_sizes_only_fails() -> None:
    table = {(3, 2, 2, False): 20, (50, 50, 10, False): 10050}

    def lookup(d_in, d_out, num_heads, qkv_bias):
        return table.get((d_in, d_out, num_heads, qkv_bias), 0)

    got, _, _ = earned("ch4-ex-count-parameters", {"parameter_count": lookup})
    assert got == 0


# --- ch4-ex-divisible ------------------------------------------------------------------------


def split_into_heads(x, num_heads):
    b, t, d_out = x.shape
    if d_out % num_heads != 0:
        raise ValueError(f"num_heads={num_heads} does not divide d_out={d_out}")
    d_h = d_out // num_heads
    return x.view(b, t, num_heads, d_h).transpose(1, 2)  # (b, h, t, d_h)


def test_split_correct_answer_earns_every_point() -> None:
    got, possible, why = earned("ch4-ex-divisible", {"split_into_heads": split_into_heads})
    assert got == possible == 3, why


def test_split_by_the_package_function_earns_nothing() -> None:
    def delegating(x, num_heads):
        return split_heads(x, num_heads)

    def by_attribute(x, num_heads):
        return attention_from_scratch.split_heads(x, num_heads)

    for lazy in (delegating, by_attribute, lambda x, n: split_heads(x, n)):
        got, _, why = earned("ch4-ex-divisible", {"split_into_heads": lazy})
        assert got == 0
        assert "ShortcutTaken" in why and "split_heads" in why


def test_split_by_the_package_function_fails_the_public_checks_alone() -> None:
    # The public checks refuse it on their own, without the hidden one.
    result = run_checks("ch4-ex-divisible", {"split_into_heads": lambda x, n: split_heads(x, n)})
    assert result.earned == 0
    assert "layout.split_heads" in reasons(result)


def test_split_by_a_single_view_is_recognised() -> None:
    def view_only(x, num_heads):
        b, t, d_out = x.shape
        if d_out % num_heads:
            raise ValueError(f"num_heads={num_heads} does not divide d_out={d_out}")
        return x.view(b, num_heads, t, d_out // num_heads)

    got, _, why = earned("ch4-ex-divisible", {"split_into_heads": view_only})
    assert got == 1  # only the public error check
    assert "scrambled numbers" in why


def test_split_without_its_own_check_fails_the_error_checks() -> None:
    def no_check(x, num_heads):
        b, t, d_out = x.shape
        return x.view(b, t, num_heads, d_out // num_heads).transpose(1, 2)

    got, _, why = earned("ch4-ex-divisible", {"split_into_heads": no_check})
    assert got == 1
    assert "the reshape failed" in why


def test_split_with_a_hard_coded_message_fails_the_hidden_sizes() -> None:
    def hard_coded(x, num_heads):
        if x.shape[-1] % num_heads:
            raise ValueError("d_out=10 is not a multiple of num_heads=4")
        return split_into_heads(x, num_heads)

    got, possible, why = earned("ch4-ex-divisible", {"split_into_heads": hard_coded})
    assert got == possible - 1
    assert "must name d_out=9 and num_heads=6" in why


# --- ch4-ex-permute-heads --------------------------------------------------------------------


def permute_heads(module, perm):
    new = copy.deepcopy(module)
    d_h = module.head_dim
    index = torch.cat([torch.arange(p * d_h, (p + 1) * d_h) for p in perm])
    with torch.no_grad():
        for name in ("W_query", "W_key", "W_value"):
            old, layer = getattr(module, name), getattr(new, name)
            layer.weight.copy_(old.weight[index])
            if old.bias is not None:
                layer.bias.copy_(old.bias[index])
        new.out_proj.weight.copy_(module.out_proj.weight[:, index])
    return new


def test_permute_correct_answer_earns_every_point() -> None:
    got, possible, why = earned("ch4-ex-permute-heads", {"permute_heads": permute_heads})
    assert got == possible == 3, why


def test_permute_an_unchanged_copy_earns_nothing() -> None:
    for lazy in (lambda m, p: m, lambda m, p: copy.deepcopy(m)):
        got, _, why = earned("ch4-ex-permute-heads", {"permute_heads": lazy})
        assert got == 0  # the output is unchanged, but no head moved
        assert "still in their old order" in why and "no head moved" in why


def test_permute_forgetting_out_proj_is_named() -> None:
    def rows_only(module, perm):
        new = permute_heads(module, perm)
        new.out_proj.load_state_dict(module.out_proj.state_dict())
        return new

    got, _, why = earned("ch4-ex-permute-heads", {"permute_heads": rows_only})
    assert got == 1  # the heads moved; the output changed
    assert "out_proj still reads" in why


def test_permute_the_inverse_permutation_is_named() -> None:
    def inverse(module, perm):
        return permute_heads(module, [perm.index(i) for i in range(len(perm))])

    got, _, why = earned("ch4-ex-permute-heads", {"permute_heads": inverse})
    assert got == 1  # the output is unchanged: the inverse is a permutation too
    assert "inverse permutation" in why


def test_permute_ignoring_missing_biases_fails_the_hidden_check() -> None:
    def biases_assumed(module, perm):
        d_h = module.head_dim
        index = torch.cat([torch.arange(p * d_h, (p + 1) * d_h) for p in perm])
        new = copy.deepcopy(module)
        with torch.no_grad():
            for name in ("W_query", "W_key", "W_value"):
                getattr(new, name).weight.copy_(getattr(module, name).weight[index])
                getattr(new, name).bias.copy_(getattr(module, name).bias[index])
            new.out_proj.weight.copy_(module.out_proj.weight[:, index])
        return new

    got, possible, why = earned("ch4-ex-permute-heads", {"permute_heads": biases_assumed})
    assert got == possible - 1
    assert "biases are None" in why


@pytest.mark.parametrize(
    "label",
    ["ch4-ex-one-head", "ch4-ex-count-parameters", "ch4-ex-divisible", "ch4-ex-permute-heads"],
)
def test_public_hints_give_no_formula_or_answer(label: str) -> None:
    result = run_checks(label, {}, hidden=True)
    hints = " ".join(c.hint for c in result.checks)
    for leak in ("3 * d_in", "d_out * d_out", "view(b, t", "transpose(1, 2)", "False, the"):
        assert leak not in hints, leak


# --- a lazy student's attack ------------------------------------------------------------------


def test_count_an_int_that_agrees_with_everything_earns_nothing() -> None:
    class Agreeable(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

    got, _, why = earned("ch4-ex-count-parameters", {"parameter_count": lambda *a: Agreeable(0)})
    assert got == 0
    assert "return an int, not Agreeable" in why


def test_split_a_tensor_that_lies_in_comparisons_earns_no_split_points() -> None:
    class Agreeable(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if func is torch.equal:  # False against the scrambled view, True after
                return args[1].data_ptr() != args[0].data_ptr() and func.__name__ == "equal"
            return super().__torch_function__(func, types, args, kwargs)

    def liar(x, num_heads):
        b, t, d_out = x.shape
        if d_out % num_heads:
            raise ValueError(f"num_heads={num_heads} does not divide d_out={d_out}")
        return torch.zeros(b, num_heads, t, d_out // num_heads).as_subclass(Agreeable)

    got, _, why = earned("ch4-ex-divisible", {"split_into_heads": liar})
    assert got == 1  # only the error check
    assert "return a torch.Tensor, not Agreeable" in why


def test_the_expectation_is_not_in_the_checks_frame() -> None:
    import sys

    def expected_from_the_frame(*args):
        frame = sys._getframe(1)
        while frame is not None and "expected" not in frame.f_locals:
            frame = frame.f_back
        return None if frame is None else frame.f_locals["expected"]

    got, _, _ = earned("ch4-ex-count-parameters", {"parameter_count": expected_from_the_frame})
    assert got == 0

    def split(x, num_heads):
        if x.shape[-1] % num_heads:
            raise ValueError(f"num_heads={num_heads} does not divide d_out={x.shape[-1]}")
        return expected_from_the_frame()

    got, _, _ = earned("ch4-ex-divisible", {"split_into_heads": split})
    assert got == 1  # only the error check


def test_split_a_message_of_every_number_fails() -> None:
    def every_number(x, num_heads):
        if x.shape[-1] % num_heads:
            raise ValueError(" ".join(str(n) for n in range(100)))
        return split_into_heads(x, num_heads)

    got, possible, why = earned("ch4-ex-divisible", {"split_into_heads": every_number})
    assert got == possible - 2
    assert "must name d_out=10 and num_heads=4" in why


def test_one_head_settings_must_carry_over() -> None:
    def fixed_context(mha):  # right weights, the context length of the public check
        causal, linear = as_causal_and_linear(mha)
        bias = mha.W_query.bias is not None
        other = CausalAttention(mha.d_in, mha.d_out, 7, mha.dropout.p, qkv_bias=bias)
        other.load_state_dict(causal.state_dict())
        return other, linear

    def no_dropout(mha):  # right weights, dropout left at 0
        causal, linear = as_causal_and_linear(mha)
        bias = mha.W_query.bias is not None
        other = CausalAttention(mha.d_in, mha.d_out, mha.context_length, 0.0, qkv_bias=bias)
        other.load_state_dict(causal.state_dict())
        return other, linear

    for lazy, reason in (
        (fixed_context, "context_length 11, not 7"),
        (no_dropout, "in training mode"),
    ):
        got, possible, why = earned("ch4-ex-one-head", {"as_causal_and_linear": lazy})
        assert got == possible - 1, why
        assert reason in why


def test_permute_a_key_bias_left_behind_is_named() -> None:
    # The key bias adds one number to every score of a row: the weights cannot show it.
    def key_bias_kept(module, perm):
        new = permute_heads(module, perm)
        if module.W_key.bias is not None:
            new.W_key.load_state_dict({**new.W_key.state_dict(), "bias": module.W_key.bias})
        return new

    got, _, why = earned("ch4-ex-permute-heads", {"permute_heads": key_bias_kept})
    assert got == 1  # the output is unchanged
    assert "W_key.bias: block m must be the original's block perm[m]" in why
