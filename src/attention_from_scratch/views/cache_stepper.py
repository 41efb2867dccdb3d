"""The KV-cache stepper (introduced in chapter 7).

:func:`kv_cache_stepper` exports one attention layer's weights and a sequence of input
vectors; ``js/cache_stepper.js`` prefills the prompt, then decodes one token per step: it projects
only the new token, appends its key and value to the cache, and shows which keys and values
were computed this step and which were reused, the newest query's weights, and its output
beside a full recomputation over every token so far.

The module reads the layer through its projections (``W_query``, ``W_key``, ``W_value``,
``out_proj``) and ``num_heads``, so it imports no chapter module.

Dimension names used here: ``t`` tokens, ``d_in`` input size, ``d_out`` output size, ``h``
heads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn

from .._checks import check_positive_int, check_tensor
from ..palette import ROLE_COLOURS
from .live_model import encode_floats
from .widget import View, fallback_table

#: The most tokens the stepper shows (prompt and decoded).
MAX_TOKENS = 16
#: The colour roles it draws: keys and values computed, what a cache keeps.
COLOURS = {role: ROLE_COLOURS[role] for role in ("key", "value", "cache")}

if TYPE_CHECKING:  # for mypy only: the module imports no chapter module

    class _AttentionLayer(nn.Module):
        """What the stepper reads of a layer (chapter 7's ``CachedAttention``)."""

        W_query: nn.Linear
        W_key: nn.Linear
        W_value: nn.Linear
        out_proj: nn.Linear
        num_heads: int


def _check_layer(layer: object) -> _AttentionLayer:
    needed = ("W_query", "W_key", "W_value", "out_proj", "num_heads")
    if not isinstance(layer, nn.Module) or not all(hasattr(layer, n) for n in needed):
        raise TypeError(
            "layer: expected a multi-head attention layer such as CachedAttention "
            f"(chapter 7), got {type(layer).__name__}"
        )
    layer = cast("_AttentionLayer", layer)  # a module with the attributes it needs
    if layer.W_query.bias is not None or layer.W_key.weight.shape != layer.W_query.weight.shape:
        raise ValueError(
            "layer: expected projections without bias and as many key heads as query heads"
        )
    return layer


def cache_stepper_data(layer: nn.Module, x: torch.Tensor, prompt_length: int) -> dict[str, Any]:
    """The JSON-able data of :func:`kv_cache_stepper` (its arguments, checked)."""
    layer = _check_layer(layer)
    x = check_tensor(
        "x",
        x,
        ranks=(2, 3),
        shape_names=("(t, d_in)", "(1, t, d_in)"),
        last_dim=layer.W_query.in_features,
    )
    if x.dim() == 3:
        if x.shape[0] != 1:
            raise ValueError(f"x: expected one sequence, (1, t, d_in), got {tuple(x.shape)}")
        x = x[0]
    t = x.shape[0]
    if t > MAX_TOKENS:
        raise ValueError(f"x: expected at most {MAX_TOKENS} tokens, got {t}")
    prompt_length = check_positive_int("prompt_length", prompt_length)
    if prompt_length >= t:
        raise ValueError(
            f"prompt_length: expected fewer than the t={t} tokens, so that at least one "
            f"is decoded, got {prompt_length}"
        )
    weights = {
        "W_query": encode_floats(layer.W_query.weight),
        "W_key": encode_floats(layer.W_key.weight),
        "W_value": encode_floats(layer.W_value.weight),
        "out_proj_weight": encode_floats(layer.out_proj.weight),
        "out_proj_bias": encode_floats(layer.out_proj.bias),
    }
    return {
        "x": encode_floats(x),
        "weights": weights,
        "num_heads": layer.num_heads,
        "prompt_length": prompt_length,
        "colours": COLOURS,
    }


def kv_cache_stepper(layer: nn.Module, x: torch.Tensor, prompt_length: int) -> View:
    """Prefill, then decode one token at a time, with the cache in view.

    Args:
        layer: a ``CachedAttention`` (or chapter 4's ``MultiHeadAttention``) without
            ``qkv_bias``; its weights are exported as float32.
        x: the layer's input vectors, ``(t, d_in)`` or ``(1, t, d_in)``, at most 16 tokens.
        prompt_length: how many tokens the first step (the prefill) projects at once.

    Returns:
        A :class:`View`; its fallback lists, for every step, what was computed and reused.

    Introduced in chapter 7.
    """
    data = cache_stepper_data(layer, x, prompt_length)
    t = (x[0] if x.dim() == 3 else x).shape[0]
    rows = [["0 (prefill)", f"0 to {prompt_length - 1}", "none"]]
    for step, position in enumerate(range(prompt_length, t), start=1):
        rows.append([str(step), str(position), f"0 to {position - 1}"])
    fallback = (
        "<p>Each decoding step computes the key and value of its new token only and "
        "reuses the cached ones; its output equals a full recomputation.</p>"
        + fallback_table(
            "Keys and values per step", ["step", "computed", "reused from the cache"], rows
        )
    )
    return View("cache_stepper", data, label="KV-cache stepper", fallback=fallback)


__all__ = ["cache_stepper_data", "kv_cache_stepper"]
