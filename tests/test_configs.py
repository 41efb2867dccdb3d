"""A layer's and a model's arguments are checked in one place: the frozen config each builds
(AttentionConfig, chapter 4; ModelConfig, chapter 6), whose errors name the argument."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

import attention_from_scratch as afs


def test_attention_config_keeps_the_checked_values() -> None:
    config = afs.AttentionConfig(6, 8, 5, 0, 2, np.bool_(True), fused=np.bool_(False))
    assert (config.d_in, config.d_out, config.context_length, config.num_heads) == (6, 8, 5, 2)
    assert config.head_dim == 4
    assert type(config.dropout) is float and config.dropout == 0.0
    assert config.qkv_bias is True and config.fused is False


def test_attention_config_is_frozen() -> None:
    config = afs.AttentionConfig(6, 8, 5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.num_heads = 4  # type: ignore[misc]


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"d_in": 0}, ValueError, r"^d_in: expected a positive int, got 0$"),
        ({"d_out": "8"}, TypeError, r"^d_out: expected a positive int, got str '8'$"),
        ({"context_length": 2.5}, TypeError, r"^context_length: expected a positive int"),
        ({"dropout": 1.0}, ValueError, r"^dropout: expected a float in \[0, 1\), got 1\.0$"),
        ({"num_heads": 3}, ValueError, r"^d_out: expected a multiple of num_heads=3"),
        ({"qkv_bias": 1}, TypeError, r"^qkv_bias: expected a bool, got int 1$"),
        ({"fused": "yes"}, TypeError, r"^fused: expected a bool, got str 'yes'$"),
    ],
)
def test_attention_config_names_the_wrong_argument(
    arguments: dict[str, object], error: type[Exception], message: str
) -> None:
    valid: dict[str, object] = {"d_in": 6, "d_out": 8, "context_length": 5, "num_heads": 2}
    with pytest.raises(error, match=message):
        afs.AttentionConfig(**{**valid, **arguments})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "layer",
    [
        afs.MultiHeadAttention,
        afs.CachedAttention,
        afs.RotaryMultiHeadAttention,
    ],
)
def test_every_attention_layer_builds_its_config_from_its_arguments(layer: type) -> None:
    module = layer(6, 8, 5, 0.1, 2, True, fused=True)
    assert module.config == afs.AttentionConfig(6, 8, 5, 0.1, 2, True, True)
    assert module.W_query.bias is not None and module.dropout.p == 0.1
    assert (module.head_dim, module.context_length, module.fused) == (4, 5, True)


def test_grouped_layers_check_their_key_value_heads_and_reuse_the_config() -> None:
    for layer in (afs.GroupedQueryAttention, afs.RotaryGroupedQueryAttention):
        module = layer(6, 8, 5, 0.0, 4, 2)
        assert module.config == afs.AttentionConfig(6, 8, 5, 0.0, 4)
        assert module.num_kv_heads == 2 and module.W_key.out_features == 4
        with pytest.raises(ValueError, match=r"^num_kv_heads: expected a divisor of num_heads=4"):
            layer(6, 8, 5, 0.0, 4, 3)
        with pytest.raises(TypeError, match=r"^num_heads: expected a positive int, got str"):
            layer(6, 8, 5, 0.0, "4", 2)


def test_model_config_keeps_the_checked_values_and_is_frozen() -> None:
    config = afs.ModelConfig(11, 8, 16, 2, 2, "rotary", np.bool_(True), False, 0)
    assert (config.vocab_size, config.d_model, config.context_length) == (11, 8, 16)
    assert (config.num_layers, config.num_heads, config.positions) == (2, 2, "rotary")
    assert config.mlp is True and type(config.dropout) is float
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.positions = "none"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"vocab_size": 0}, ValueError, r"^vocab_size: expected a positive int, got 0$"),
        ({"num_layers": True}, TypeError, r"^num_layers: expected a positive int, got bool"),
        ({"positions": "alibi"}, ValueError, r"^positions: expected one of \('none', "),
        ({"mlp": "no"}, TypeError, r"^mlp: expected a bool, got str 'no'$"),
        ({"dropout": -0.5}, ValueError, r"^dropout: expected a float in \[0, 1\)"),
    ],
)
def test_model_config_names_the_wrong_argument(
    arguments: dict[str, object], error: type[Exception], message: str
) -> None:
    valid: dict[str, object] = {"vocab_size": 11, "d_model": 8, "context_length": 16}
    with pytest.raises(error, match=message):
        afs.ModelConfig(**{**valid, **arguments})  # type: ignore[arg-type]
    model_arguments = {**valid, **arguments}
    with pytest.raises(error, match=message):
        afs.TinyCausalModel(**model_arguments)  # type: ignore[arg-type]


@pytest.mark.parametrize("model", [afs.TinyCausalModel, afs.CachedCausalModel])
def test_models_build_their_layers_from_the_config(model: type) -> None:
    built = model(11, 8, 16, num_layers=3, num_heads=2, positions="rotary", dropout=0.25)
    assert built.config == afs.ModelConfig(11, 8, 16, 3, 2, "rotary", False, False, 0.25)
    layers = [block.attention for block in built.blocks]
    assert len(layers) == 3
    assert all(isinstance(layer, afs.RotaryMultiHeadAttention) for layer in layers)
    assert {layer.config for layer in layers} == {afs.AttentionConfig(8, 8, 16, 0.25, 2)}


@pytest.mark.parametrize(
    "constructor",
    [
        afs.MultiHeadAttention.__init__,
        afs.CachedAttention.__init__,
        afs.RotaryMultiHeadAttention.__init__,
        afs.TinyCausalModel.__init__,
    ],
)
def test_teaching_constructors_hold_no_checks_of_their_own(constructor: object) -> None:
    # The pages show these constructors: their arguments are checked by the config alone.
    source = inspect.getsource(constructor)  # type: ignore[arg-type]
    assert "check_" not in source
    assert "raise " not in source
