"""Chapter 2's exercises: a correct answer earns full marks, lazy answers do not.

The correct answers are written here as a student would write them, independently of the
package code the checks compare against; no expectation is computed with the code under test.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from exercise_helpers import full_marks
from exercise_helpers import reasons as _reasons
from torch import nn

from attention_from_scratch import SelfAttentionV1, SelfAttentionV2
from attention_from_scratch.exercises import load_hidden, run_checks

ROOT = Path(__file__).resolve().parents[1]
load_hidden(ROOT / "grading" / "hidden", chapters=[2])


# --- ch2-ex-v2-into-v1 ----------------------------------------------------------------------


def v2_into_v1(v2):
    v1 = SelfAttentionV1(v2.W_query.in_features, v2.W_query.out_features)
    with torch.no_grad():
        v1.W_query.copy_(v2.W_query.weight.T)
        v1.W_key.copy_(v2.W_key.weight.T)
        v1.W_value.copy_(v2.W_value.weight.T)
    return v1


def test_v2_into_v1_correct() -> None:
    assert full_marks("ch2-ex-v2-into-v1", {"v2_into_v1": v2_into_v1})


def test_v2_into_v1_returning_v2_itself_fails() -> None:
    # The old laziness, ex_v1 = ex_v2, as a function.
    why = reasons("ch2-ex-v2-into-v1", {"v2_into_v1": lambda v2: v2})
    assert "expected a new SelfAttentionV1" in why


def test_v2_into_v1_without_transposing_fails_on_square_weights() -> None:
    def untransposed(v2):
        v1 = SelfAttentionV1(v2.d_in, v2.d_out)
        with torch.no_grad():
            for name in ("W_query", "W_key", "W_value"):
                getattr(v1, name).copy_(getattr(v2, name).weight.reshape(v2.d_in, v2.d_out))
        return v1

    assert "without transposing" in reasons("ch2-ex-v2-into-v1", {"v2_into_v1": untransposed})


def test_v2_into_v1_subclass_delegating_to_v2_fails() -> None:
    class Wrapper(SelfAttentionV1):
        def __init__(self, v2):
            super().__init__(v2.d_in, v2.d_out)
            self.inner = v2

        def forward(self, x, return_weights=False):
            return self.inner(x)

    assert "expected a new SelfAttentionV1" in reasons("ch2-ex-v2-into-v1", {"v2_into_v1": Wrapper})


def test_v2_into_v1_that_edits_v2_fails() -> None:
    def overwrite_v2(v2):
        v1 = SelfAttentionV1(v2.d_in, v2.d_out)
        with torch.no_grad():
            for name in ("W_query", "W_key", "W_value"):
                getattr(v2, name).weight.copy_(getattr(v1, name).T)
        return v1

    assert "leave v2 as it was" in reasons("ch2-ex-v2-into-v1", {"v2_into_v1": overwrite_v2})


NAMES = ("W_query", "W_key", "W_value")


def test_v2_into_v1_sharing_v2s_memory_fails() -> None:
    # Both compute the right function, but a training step on v1 would change v2.
    def as_parameter(v2):
        v1 = SelfAttentionV1(v2.d_in, v2.d_out)
        for name in NAMES:
            setattr(v1, name, nn.Parameter(getattr(v2, name).weight.T))
        return v1

    def through_data(v2):
        v1 = SelfAttentionV1(v2.d_in, v2.d_out)
        for name in NAMES:
            getattr(v1, name).data = getattr(v2, name).weight.data.T
        return v1

    for answer in (as_parameter, through_data):
        assert "shares memory with v2" in reasons("ch2-ex-v2-into-v1", {"v2_into_v1": answer})


def test_v2_into_v1_switching_off_gradients_fails() -> None:
    # requires_grad_(False) in place of torch.no_grad() freezes v2 (and maybe v1).
    def frozen_v2(v2):
        v2.requires_grad_(False)
        v1 = SelfAttentionV1(v2.d_in, v2.d_out)
        for name in NAMES:
            setattr(v1, name, nn.Parameter(getattr(v2, name).weight.T.clone()))
        return v1

    def frozen_v1(v2):
        v1 = SelfAttentionV1(v2.d_in, v2.d_out).requires_grad_(False)
        for name in NAMES:
            getattr(v1, name).copy_(getattr(v2, name).weight.detach().T)
        return v1

    why = reasons("ch2-ex-v2-into-v1", {"v2_into_v1": frozen_v2})
    assert "switched off gradients of the module it was given" in why
    why = reasons("ch2-ex-v2-into-v1", {"v2_into_v1": frozen_v1})
    assert "must be trainable" in why


def test_v2_into_v1_hard_coded_to_the_page_sizes_fails() -> None:
    def page_sizes(v2):
        v1 = SelfAttentionV1(3, 2)
        with torch.no_grad():
            for name in ("W_query", "W_key", "W_value"):
                getattr(v1, name).copy_(getattr(v2, name).weight.T)
        return v1

    assert not full_marks("ch2-ex-v2-into-v1", {"v2_into_v1": page_sizes})


# --- ch2-ex-qkv-bias ------------------------------------------------------------------------


def qkv_parameter_count(d_in, d_out, qkv_bias):
    per_projection = d_in * d_out + (d_out if qkv_bias else 0)
    return 3 * per_projection


def test_qkv_parameter_count_correct() -> None:
    assert full_marks("ch2-ex-qkv-bias", {"qkv_parameter_count": qkv_parameter_count})


def test_qkv_parameter_count_copied_from_the_page_fails() -> None:
    why = reasons("ch2-ex-qkv-bias", {"qkv_parameter_count": lambda d_in, d_out, bias: 24})
    assert "wrong count" in why


def test_qkv_parameter_count_by_building_the_module_is_refused() -> None:
    def delegated(d_in, d_out, qkv_bias):
        module = SelfAttentionV2(d_in, d_out, qkv_bias=qkv_bias)
        return sum(p.numel() for p in module.parameters())

    def by_linear(d_in, d_out, qkv_bias):
        return 3 * sum(p.numel() for p in nn.Linear(d_in, d_out, bias=qkv_bias).parameters())

    for answer in (delegated, by_linear):
        why = reasons("ch2-ex-qkv-bias", {"qkv_parameter_count": answer})
        assert "asks you to write the count from the sizes yourself" in why


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda d_in, d_out, bias: 3 * d_in * d_out, "the biases are not counted"),
        (lambda d_in, d_out, bias: d_in * d_out + d_out * bias, "only one projection"),
        (lambda d_in, d_out, bias: 3 * (d_in * d_out + d_in * bias), "one number per output"),
        (lambda d_in, d_out, bias: float(3 * (d_in * d_out + d_out * bias)), "expected an int"),
    ],
)
def test_qkv_parameter_count_common_mistakes_are_named(answer, message) -> None:
    assert message in reasons("ch2-ex-qkv-bias", {"qkv_parameter_count": answer})


# --- ch2-ex-step ----------------------------------------------------------------------------


def context_vector(x, W_query, W_key, W_value, i):
    q = x[i] @ W_query
    k = x @ W_key
    v = x @ W_value
    s = torch.stack([q @ k[j] for j in range(x.shape[0])]) / k.shape[1] ** 0.5
    e = torch.exp(s - s.max())
    return (e / e.sum()) @ v


def test_context_vector_correct() -> None:
    assert full_marks("ch2-ex-step", {"context_vector": context_vector})


def test_context_vector_copied_from_the_page_fails() -> None:
    why = reasons("ch2-ex-step", {"context_vector": lambda *args: torch.tensor([0.2990, 0.8040])})
    assert "shape" in why or "wrong context vector" in why


def test_context_vector_by_the_package_module_is_refused() -> None:
    def delegated(x, W_query, W_key, W_value, i):
        module = SelfAttentionV1(*W_query.shape)
        with torch.no_grad():
            module.W_query.copy_(W_query)
            module.W_key.copy_(W_key)
            module.W_value.copy_(W_value)
        return module(x)[i]

    def by_sdpa(x, W_query, W_key, W_value, i):
        q, k, v = x @ W_query, x @ W_key, x @ W_value
        return torch.nn.functional.scaled_dot_product_attention(q[None], k[None], v[None])[0, i]

    for answer in (delegated, by_sdpa):
        assert "yourself" in reasons("ch2-ex-step", {"context_vector": answer})


@pytest.mark.parametrize(
    ("scale", "dim", "message"),
    [
        (lambda d_in, d_k: 1.0, -1, "not divided by sqrt(d_k)"),
        (lambda d_in, d_k: d_k, -1, "divided by d_k instead"),
        (lambda d_in, d_k: d_in**0.5, -1, "not d_in"),
        (lambda d_in, d_k: d_k**0.5, 0, "wrong axis"),
    ],
)
def test_context_vector_common_mistakes_are_named(scale, dim, message) -> None:
    def mistaken(x, W_query, W_key, W_value, i):
        scores = (x @ W_query) @ (x @ W_key).T / scale(x.shape[1], W_key.shape[1])
        return torch.softmax(scores, dim=dim)[i] @ (x @ W_value)

    assert message in reasons("ch2-ex-step", {"context_vector": mistaken})


def test_context_vector_with_a_hard_coded_scale_fails_the_hidden_check() -> None:
    def hard_coded(x, W_query, W_key, W_value, i):
        scores = (x[i] @ W_query) @ (x @ W_key).T / 2  # sqrt(4), the public d_k
        return torch.softmax(scores, dim=-1) @ (x @ W_value)

    result = run_checks("ch2-ex-step", {"context_vector": hard_coded}, hidden=True)
    public = [c for c in result.checks if not c.hidden]
    assert all(c.passed for c in public) and result.earned < result.possible


# --- ch2-ex-symmetric -----------------------------------------------------------------------


def tied_attention(x, layer):
    q = layer(x)
    scores = q @ q.transpose(0, 1)
    scaled = scores / q.shape[-1] ** 0.5
    weights = torch.exp(scaled) / torch.exp(scaled).sum(dim=1, keepdim=True)
    return scores, weights


def test_tied_attention_correct() -> None:
    assert full_marks("ch2-ex-symmetric", {"tied_attention": tied_attention})


def test_tied_attention_with_an_identity_matrix_fails() -> None:
    # The old laziness: s = torch.eye(10) is symmetric.
    def eye(x, layer):
        t = x.shape[0]
        return torch.eye(t), torch.full((t, t), 1 / t)

    why = reasons("ch2-ex-symmetric", {"tied_attention": eye})
    assert "wrong scores" in why and "wrong weights" in why


def test_tied_attention_ignoring_the_bias_fails_the_hidden_check() -> None:
    def weight_only(x, layer):
        q = x @ layer.weight.T
        scores = q @ q.T
        return scores, torch.softmax(scores / q.shape[-1] ** 0.5, dim=-1)

    result = run_checks("ch2-ex-symmetric", {"tied_attention": weight_only}, hidden=True)
    assert all(c.passed for c in result.checks if not c.hidden)
    assert result.earned < result.possible


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (
            lambda x, layer: (layer(x) @ layer(x).T, torch.softmax(layer(x) @ layer(x).T, -1)),
            "not divided by sqrt(d_k)",
        ),
        (
            lambda x, layer: (
                layer(x) @ layer(x).T,
                torch.softmax(layer(x) @ layer(x).T / layer.out_features**0.5, 0),
            ),
            "wrong axis",
        ),
    ],
)
def test_tied_attention_common_mistakes_are_named(answer, message) -> None:
    assert message in reasons("ch2-ex-symmetric", {"tied_attention": answer})


def test_tied_attention_without_scaling_is_named_by_every_failing_check() -> None:
    def unscaled(x, layer):
        scores = layer(x) @ layer(x).T
        return scores, torch.softmax(scores, dim=-1)

    result = run_checks("ch2-ex-symmetric", {"tied_attention": unscaled}, hidden=True)
    failed = [c for c in result.checks if not c.passed]
    assert [c.hidden for c in failed] == [False, True]
    assert all("not divided by sqrt(d_k)" in c.reason for c in failed)


# --- ch2-ex-sigma ---------------------------------------------------------------------------


def dot_products(n, d_k, sigma, generator):
    queries = torch.randn(n, d_k, generator=generator) * sigma
    keys = torch.randn(n, d_k, generator=generator) * sigma
    return torch.einsum("nd,nd->n", queries, keys)


def test_dot_products_correct() -> None:
    assert full_marks("ch2-ex-sigma", {"dot_products": dot_products})


def test_dot_products_faked_with_the_right_variance_fails() -> None:
    # The old laziness: dots = 32 * torch.randn(20000) had the variance the check wanted.
    def faked(n, d_k, sigma, generator):
        return sigma**2 * d_k**0.5 * torch.randn(n, generator=generator)

    assert "not the dot products" in reasons("ch2-ex-sigma", {"dot_products": faked})


def test_dot_products_with_the_variance_as_scale_is_named() -> None:
    def variance_scaled(n, d_k, sigma, generator):
        return dot_products(n, d_k, sigma**2, generator)

    assert "variance" in reasons("ch2-ex-sigma", {"dot_products": variance_scaled})


def test_dot_products_hard_coded_to_the_page_fails_the_hidden_check() -> None:
    def public_sizes_only(n, d_k, sigma, generator):
        return dot_products(n, 48, 3.0, generator)

    result = run_checks("ch2-ex-sigma", {"dot_products": public_sizes_only}, hidden=True)
    assert all(c.passed for c in result.checks if not c.hidden)
    assert result.earned < result.possible


# --- lazy answers of the second attack ------------------------------------------------------


def from_the_checks_frame(*names):
    """An answer that returns what the check computed before calling it, if anything."""
    import sys

    def answer(*args):
        frame = sys._getframe(1)
        while frame is not None:
            if all(name in frame.f_locals for name in names):
                found = tuple(frame.f_locals[name].clone() for name in names)
                return found if len(found) > 1 else found[0]
            frame = frame.f_back
        raise LookupError("no reference in the check's frames")

    return answer


def copied_into(module, W_query, W_key, W_value):
    with torch.no_grad():
        module.W_query.weight.copy_(W_query.T)
        module.W_key.weight.copy_(W_key.T)
        module.W_value.weight.copy_(W_value.T)
    return module


def test_qkv_parameter_count_refuses_any_module_and_odd_ints() -> None:
    class AnyInt(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

    def by_convolution(d_in, d_out, qkv_bias):
        return 3 * sum(p.numel() for p in nn.Conv1d(d_in, d_out, 1, bias=qkv_bias).parameters())

    def by_bilinear(d_in, d_out, qkv_bias):
        return 3 * sum(p.numel() for p in nn.Bilinear(d_in, 1, d_out, bias=qkv_bias).parameters())

    for answer in (by_convolution, by_bilinear):
        why = reasons("ch2-ex-qkv-bias", {"qkv_parameter_count": answer})
        assert "the count from the sizes yourself" in why
    why = reasons("ch2-ex-qkv-bias", {"qkv_parameter_count": lambda *sizes: AnyInt(0)})
    assert "subclass AnyInt" in why


def test_context_vector_refuses_later_attention_and_the_checks_frame() -> None:
    from attention_from_scratch.causal import CausalAttention, CrossAttention
    from attention_from_scratch.tiled import tiled_attention

    def by_cross_attention(x, W_query, W_key, W_value, i):
        d_in, d_out = W_query.shape
        module = copied_into(CrossAttention(d_in, d_in, d_out), W_query, W_key, W_value)
        return module(x[None], x[None])[0, i].detach()

    def by_causal_attention(x, W_query, W_key, W_value, i):
        # token i moved to the end sees every token: the causal mask hides nothing from it
        module = CausalAttention(*W_query.shape, len(x), 0.0)
        copied_into(module, W_query, W_key, W_value)
        order = [j for j in range(len(x)) if j != i] + [i]
        return module(x[order][None])[0, -1].detach()

    def by_tiled_attention(x, W_query, W_key, W_value, i):
        q, k, v = (x @ w for w in (W_query, W_key, W_value))
        return tiled_attention(q[None, None], k[None, None], v[None, None], causal=False)[0, 0, i]

    def by_torch_functional(x, W_query, W_key, W_value, i):
        q, k, v = (x @ w for w in (W_query, W_key, W_value))
        d = q.shape[1]
        eye = torch.eye(d)
        out, _ = torch.nn.functional.multi_head_attention_forward(
            *(m[:, None] for m in (q, k, v)), d, 1, None, None, None, None, False, 0.0,
            eye, torch.zeros(d), use_separate_proj_weight=True,
            q_proj_weight=eye, k_proj_weight=eye, v_proj_weight=eye,
        )  # fmt: skip
        return out[i, 0]

    for answer in (
        by_cross_attention,
        by_causal_attention,
        by_tiled_attention,
        by_torch_functional,
    ):
        assert "yourself" in reasons("ch2-ex-step", {"context_vector": answer})
    frame = {"context_vector": from_the_checks_frame("expected")}
    assert "no reference" in reasons("ch2-ex-step", frame)


def test_context_vector_refuses_a_tensor_that_computes_later() -> None:
    class Later(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if func is torch.Tensor.detach:  # read by the check, outside the refusal
                x, W_query, W_key, W_value, i = args[0].inputs
                module = SelfAttentionV1(*W_query.shape)
                with torch.no_grad():
                    module.W_query.copy_(W_query)
                    module.W_key.copy_(W_key)
                    module.W_value.copy_(W_value)
                    return module(x)[i]
            with torch._C.DisableTorchFunctionSubclass():
                return func(*args, **(kwargs or {}))

    def lazy(*inputs):
        out = torch.zeros(inputs[1].shape[1]).as_subclass(Later)
        out.inputs = inputs
        return out

    assert "plain torch.Tensor" in reasons("ch2-ex-step", {"context_vector": lazy})


def test_tied_attention_refuses_later_attention_and_the_checks_frame() -> None:
    from attention_from_scratch.causal import CrossAttention

    def by_cross_attention(x, layer):
        module = CrossAttention(layer.in_features, layer.in_features, layer.out_features)
        module.W_query = module.W_key = layer
        q = layer(x)
        return q @ q.T, module(x[None], x[None], return_weights=True)[1][0]

    why = reasons("ch2-ex-symmetric", {"tied_attention": by_cross_attention})
    assert "tied scores and weights yourself" in why
    frame = {"tied_attention": from_the_checks_frame("scores", "weights")}
    assert "no reference" in reasons("ch2-ex-symmetric", frame)

    def zero_the_checks_layer(x, layer):  # then the check would expect zeros and 1 / t
        import sys

        frame = sys._getframe(1)
        while frame is not None:
            for value in list(frame.f_locals.values()):
                if isinstance(value, nn.Linear):
                    with torch.no_grad():
                        value.weight.zero_()
                        if value.bias is not None:
                            value.bias.zero_()
            frame = frame.f_back
        t = len(x)
        return torch.zeros(t, t), torch.full((t, t), 1 / t)

    assert "wrong scores" in reasons("ch2-ex-symmetric", {"tied_attention": zero_the_checks_layer})


def test_dot_products_cannot_read_the_checks_draws() -> None:
    assert "no reference" in reasons(
        "ch2-ex-sigma", {"dot_products": from_the_checks_frame("expected")}
    )
    assert "no reference" in reasons(
        "ch2-ex-sigma", {"dot_products": from_the_checks_frame("q", "k")}
    )


def reasons(label: str, namespace: dict) -> str:
    """Every failed check's reason and hint, in one string."""
    return _reasons(label, namespace, hints=True)
