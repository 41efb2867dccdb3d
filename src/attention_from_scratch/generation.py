"""Chapter 7: decoding with a KV cache per layer: the cached model and ``generate``.

Dimension names used here: ``b`` batch, ``t`` tokens given, ``s`` cached tokens, ``h``
heads, ``n`` generated tokens, ``vocab`` vocabulary size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ._checks import check_bool, check_positive_int, check_tokens
from .grouped import GroupedQueryAttention, RotaryGroupedQueryAttention
from .kv_cache import KVCache
from .multihead import MultiHeadAttention
from .training import TinyCausalModel


class CachedCausalModel(TinyCausalModel):
    """Chapter 6's :class:`~attention_from_scratch.TinyCausalModel` with
    chapter 7's layers: a KV cache per layer, and key/value heads that groups
    of query heads may share.

    Every block's attention is a
    :class:`~attention_from_scratch.GroupedQueryAttention` with
    ``num_kv_heads`` key/value heads, or with rotary positions a
    :class:`~attention_from_scratch.RotaryGroupedQueryAttention`: learned,
    sinusoidal or rotary positions, grouped heads and a cache combine as in
    Llama-style models. With ``num_kv_heads`` left out (one key/value head
    per query head) the layers, their state-dict names and the random
    numbers they draw are those of ``TinyCausalModel``, so a trained
    ``TinyCausalModel``'s state dict loads as is, and ``forward(tokens)``
    without caches gives the same logits. It is a subclass, not an argument
    of chapter 6's model, because chapter 6 cannot name chapter 7's layers:
    :meth:`attention_layer` is the whole change to the constructor.

    Args:
        vocab_size: the number of token ids, ``vocab``.
        d_model: the model size ``d``.
        context_length: the longest sequence accepted, cached tokens included.
        num_kv_heads: key/value heads per attention layer, a divisor of
            ``num_heads`` (default: ``num_heads``, no sharing).
        options: :class:`~attention_from_scratch.TinyCausalModel`'s keyword
            arguments: ``num_layers``, ``num_heads``, ``positions`` (rotary
            included), ``mlp``, ``layer_norm``, ``dropout``.

    Shape:
        - Input: ``(b, t)`` token ids; with ``kv_caches``, the tokens after
          the ``s`` cached ones, ``s + t <= context_length``.
        - Output: ``(b, t, vocab)`` logits; with ``return_weights=True`` also
          every layer's weights, ``(b, h, t, s + t)``.

    Introduced in chapter 7.
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        context_length: int,
        *,
        num_kv_heads: int | None = None,
        **options: Any,
    ) -> None:
        # Read by attention_layer, which chapter 6's constructor calls: set
        # first (a plain value may precede Module.__init__).
        if num_kv_heads is not None:
            num_kv_heads = check_positive_int("num_kv_heads", num_kv_heads)
        self.num_kv_heads = num_kv_heads
        super().__init__(vocab_size, d_model, context_length, **options)

    def attention_layer(self) -> MultiHeadAttention:
        """Chapter 7's layer of one block: grouped heads and a KV cache, and
        rotary positions where the model has them."""
        c = self.config  # chapter 6's ModelConfig, checked
        h_kv = c.num_heads if self.num_kv_heads is None else self.num_kv_heads
        if c.positions == "rotary":
            layer: type[GroupedQueryAttention] = RotaryGroupedQueryAttention
        else:
            layer = GroupedQueryAttention
        d = c.d_model
        return layer(d, d, c.context_length, c.dropout, c.num_heads, h_kv)

    def forward(
        self,
        tokens: torch.Tensor,
        return_weights: bool = False,
        *,
        kv_caches: Sequence[KVCache] | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, list[torch.Tensor]]:
        """Next-token logits for every position of ``tokens``.

        Args:
            tokens: ``(b, t)`` token ids.
            return_weights: also return every layer's attention weights
                (explicit path).
            kv_caches: one :class:`KVCache` per layer. ``tokens`` are then
                the tokens after the ``s`` cached ones: their positions start
                at ``s``, each layer appends their keys and values to its
                cache, and the weights are ``(b, h, t, s + t)``.

        Returns:
            ``(b, t, vocab)`` logits, and with ``return_weights=True`` the
            list of weights.
        """
        if kv_caches is None:
            return super().forward(tokens, return_weights)
        tokens = check_tokens("tokens", tokens)
        return_weights = check_bool("return_weights", return_weights)
        past = self._cached_tokens(kv_caches, tokens.shape[1])
        x = self.embed(tokens, offset=past)  # (b, t, d), positions past on
        all_weights = []
        for block, cache in zip(self.blocks, kv_caches, strict=True):
            x, weights = block(x, return_weights, kv_cache=cache)  # (b, t, d)
            all_weights.append(weights)  # (b, h, t, past + t) or None
        logits = self.head(self.final_norm(x))  # (b, t, vocab)
        return (logits, all_weights) if return_weights else logits

    def _cached_tokens(self, kv_caches: object, t: int) -> int:
        """The number of cached tokens, after checking there is one cache per
        layer, all of the same length, with room for ``t`` more tokens."""
        layers = len(self.blocks)
        if not isinstance(kv_caches, Sequence) or not all(
            isinstance(cache, KVCache) for cache in kv_caches
        ):
            raise TypeError(
                f"kv_caches: expected a list of {layers} KVCache objects, one "
                f"per layer, got {type(kv_caches).__name__}"
            )
        if len(kv_caches) != layers:
            count = len(kv_caches)
            message = f"expected one KVCache per layer ({layers}), got {count}"
            raise ValueError(f"kv_caches: {message}")
        lengths: list[int] = [cache.length for cache in kv_caches]
        if len(set(lengths)) != 1:
            raise ValueError(
                f"kv_caches: expected caches holding the same tokens, got "
                f"lengths {sorted(lengths)}; reset them all"
            )
        if lengths[0] + t > self.context_length:
            raise ValueError(
                "tokens: expected at most context_length="
                f"{self.context_length} tokens, got {lengths[0]} cached + {t}"
            )
        return lengths[0]


@torch.no_grad()
def generate(
    model: TinyCausalModel,
    prompt: torch.Tensor,
    new_tokens: int,
    *,
    use_cache: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy decoding: append the most likely next token ``new_tokens`` times.

    Without a cache every step runs the model on the whole sequence so far,
    and the cost of a step grows with its length. With ``use_cache=True`` the
    first step runs on the prompt and fills one :class:`KVCache` per layer;
    every later step runs on the one token just generated, whose query
    attends to the cached keys and values. Both give the same tokens.

    Args:
        model: a :class:`CachedCausalModel`, or for ``use_cache=False`` any
            :class:`~attention_from_scratch.TinyCausalModel` (chapter 6); used
            in ``eval`` mode for the call and restored afterwards.
        prompt: ``(b, t)`` token ids on the model's device.
        new_tokens: how many tokens to generate, ``n >= 1``; ``t + n - 1``
            must not exceed the model's ``context_length`` (the last token is
            never fed back).
        use_cache: decode with a KV cache.

    Returns:
        ``(tokens, logits)``: the ``(b, t + n)`` prompt followed by the
        generated tokens, and the ``(b, n, vocab)`` logits each generated
        token was chosen from.

    Introduced in chapter 7.
    """
    if not isinstance(model, TinyCausalModel):
        kind = type(model).__name__
        raise TypeError(f"model: expected a TinyCausalModel, got {kind}")
    prompt = check_tokens("prompt", prompt)
    new_tokens = check_positive_int("new_tokens", new_tokens)
    use_cache = check_bool("use_cache", use_cache)
    if use_cache and not isinstance(model, CachedCausalModel):
        raise TypeError(
            f"model: expected a CachedCausalModel for use_cache=True, got "
            f"{type(model).__name__}; build a CachedCausalModel with the same "
            "arguments and load this model's state_dict into it"
        )
    longest = prompt.shape[1] + new_tokens - 1
    if longest > model.context_length:
        raise ValueError(
            f"new_tokens: expected prompt length + new_tokens - 1 <= "
            f"context_length={model.context_length}, got {prompt.shape[1]} + "
            f"{new_tokens} - 1 = {longest}; generate fewer tokens or use a "
            "shorter prompt"
        )
    was_training = model.training
    model.eval()
    try:
        caches = [KVCache() for _ in model.blocks] if use_cache else None
        tokens, step_input, all_logits = prompt, prompt, []
        for _ in range(new_tokens):
            if caches is None:
                logits = model(step_input)[:, -1]  # (b, vocab)
            else:
                logits = model(step_input, kv_caches=caches)[:, -1]
            next_token = logits.argmax(dim=-1, keepdim=True)  # (b, 1)
            tokens = torch.cat([tokens, next_token], dim=1)  # (b, t + 1)
            all_logits.append(logits)
            # With a cache only the new token goes in; without, all of them.
            step_input = next_token if use_cache else tokens
    finally:
        model.train(was_training)
    return tokens, torch.stack(all_logits, dim=1)  # (b, t + n), (b, n, vocab)
