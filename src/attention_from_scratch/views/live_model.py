"""The trained tiny model, live in the page (introduced in chapter 6).

:func:`live_model` exports a trained ``TinyCausalModel``'s weights as float32 numbers, and
``js/live_model.js`` runs its forward pass in the browser: the reader edits the token sequence
and sees the predicted next tokens and where each layer's head looks, and switches heads off to
repeat the chapter's ablation. Each head's weights are exported folded, ``W_QK = W_Q_h^T W_K_h
/ sqrt(d_h)`` and ``W_OV = W_O[:, h] W_V_h`` (Elhage et al.'s QK and OV circuits): the same
scores and outputs, and for a model with one head per layer half the numbers of the four
projections.

The module reads the model through its state-dict names and its ``embed`` step, so it imports
no chapter module.

Dimension names used here: ``t`` tokens, ``d`` model size, ``h`` heads, ``d_h`` head size,
``vocab`` vocabulary size.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn

from .widget import View, fallback_table

#: How many sequences the page draws, like the held-out set, to measure accuracy: a sample
#: of this size lands within a few points of the full set's accuracy, where carrying the
#: sequences themselves would not fit the view's size.
HELD_OUT_SAMPLE = 400
#: Seeds the page's generator (``random`` in ``js/live_model.js``): the same sample on every
#: load.
HELD_OUT_SEED = 2

IGNORED = -100  # the chapter's IGNORE_INDEX: a target no model could predict

if TYPE_CHECKING:  # for mypy only: the module imports no chapter module

    class _CausalModel(nn.Module):
        """What the view reads of chapter 6's ``TinyCausalModel``."""

        vocab_size: int
        d_model: int
        context_length: int

        def embed(self, tokens: torch.Tensor, offset: int = 0) -> torch.Tensor: ...

    class _AttentionLayer(nn.Module):
        """What it reads of each attention layer (chapter 4's ``MultiHeadAttention``)."""

        num_heads: int
        head_dim: int


def encode_floats(x: torch.Tensor) -> dict[str, Any]:
    """A tensor as ``{"shape": [...], "data": base64}`` of little-endian float32 numbers,
    what ``decodeFloats`` in ``js/live_model.js`` reads back."""
    array = x.detach().to("cpu", torch.float32).contiguous().numpy().astype("<f4")
    return {"shape": list(x.shape), "data": base64.b64encode(array.tobytes()).decode("ascii")}


def _check_model(model: object) -> _CausalModel:
    names = {"embedding.weight", "head.weight"}
    if not isinstance(model, nn.Module) or not hasattr(model, "embed"):
        raise TypeError(
            f"model: expected a TinyCausalModel (chapter 6), got {type(model).__name__}"
        )
    model = cast("_CausalModel", model)  # a module with embed: taken to be one
    state = model.state_dict()
    if not names <= state.keys():
        raise TypeError(
            f"model: expected a TinyCausalModel (chapter 6) with embedding and head, "
            f"got {type(model).__name__} without {sorted(names - state.keys())}"
        )
    if any("mlp" in name for name in state):  # a perceptron's weights, in any block
        raise ValueError(
            "model: expected an attention-only model (mlp=False), got one with "
            "perceptrons; the view runs attention, positions and LayerNorm only"
        )
    if getattr(model, "positions_kind", None) == "rotary":
        raise ValueError(
            "model: expected positions 'none', 'learned' or 'sinusoidal', got 'rotary'"
        )
    if any(name.endswith(("W_query.bias", "W_key.bias")) for name in state):
        raise ValueError("model: expected attention without qkv_bias, got qkv_bias=True")
    return model


def _induction_spec(inputs: torch.Tensor, targets: torch.Tensor, vocab: int) -> dict[str, int]:
    # The parameters of induction_task that made (inputs, targets): the page draws its own
    # sequences with them. n of a sequence is its first scored position; the sequence must
    # repeat its first n tokens, all distinct, and each scored target be the next token.
    t = inputs.shape[1]
    scored = targets != IGNORED  # (b, t)
    if not scored.any(dim=1).all():
        raise ValueError("held_out: expected induction_task sequences, got one with no target")
    periods = scored.int().argmax(dim=1)  # (b,): first scored position
    for row, n in zip(inputs.tolist(), periods.tolist(), strict=True):
        if n < 2 or len(set(row[:n])) != n or any(row[i] != row[i % n] for i in range(t)):
            raise ValueError(
                "held_out: expected induction_task sequences (a segment of distinct tokens, "
                "repeated, scored from its first repeat on)"
            )
    return {
        "num_sequences": HELD_OUT_SAMPLE,
        "num_tokens": t,
        "min_period": int(periods.min()),
        "max_period": int(periods.max()),
        "seed": HELD_OUT_SEED,
    }


def _check_token_list(name: str, tokens: object, vocab: int, longest: int) -> list[int]:
    if isinstance(tokens, torch.Tensor):
        if tokens.is_floating_point() or tokens.dtype == torch.bool:
            raise TypeError(f"{name}: expected integer token ids, got {tokens.dtype}")
        if tokens.dim() == 2 and tokens.shape[0] == 1:
            tokens = tokens[0]
        if tokens.dim() != 1:
            raise ValueError(
                f"{name}: expected one sequence, shape (t,) or (1, t), got {tuple(tokens.shape)}"
            )
        tokens = tokens.tolist()
    if not isinstance(tokens, Sequence) or isinstance(tokens, str):
        raise TypeError(f"{name}: expected token ids, got {type(tokens).__name__}")
    if not 1 <= len(tokens) <= longest:
        raise ValueError(f"{name}: expected 1 to {longest} tokens, got {len(tokens)}")
    for token in tokens:
        if isinstance(token, bool) or not isinstance(token, int):
            raise TypeError(f"{name}: expected int token ids, got {type(token).__name__}")
        if not 0 <= token < vocab:
            raise ValueError(f"{name}: expected ids in 0..{vocab - 1}, got {token}")
    return list(tokens)


def attention_layers(model: nn.Module) -> list[tuple[str, _AttentionLayer]]:
    """The model's attention layers in order, with their names in its state dict."""
    return [
        (name, cast("_AttentionLayer", module))  # it has W_query and num_heads
        for name, module in model.named_modules()
        if hasattr(module, "W_query") and hasattr(module, "num_heads")
    ]


@torch.no_grad()
def folded_weights(model: nn.Module) -> dict[str, torch.Tensor]:
    """The tensors the page needs, by name, in float64 before they are written as float32.

    Args:
        model: a ``TinyCausalModel`` without perceptrons, rotary positions or ``qkv_bias``.

    Returns:
        ``embedding.weight`` ``(vocab, d)``; ``positions`` ``(context_length, d)``, what
        ``embed`` adds at each position (absent without positions);
        ``attention.<layer>.<head>.W_QK`` and ``.W_OV``, ``(d, d)`` each;
        ``attention.<layer>.out_proj.bias`` ``(d,)``; the LayerNorms' weights and biases if
        the model has them; ``head.weight`` ``(vocab, d)`` and ``head.bias``.
    """
    model = _check_model(model)
    state = {k: v.detach().to("cpu", torch.float64) for k, v in model.state_dict().items()}
    out = {"embedding.weight": state["embedding.weight"]}
    param = next(model.parameters())
    length = model.context_length
    zeros = torch.zeros(1, length, dtype=torch.long, device=param.device)
    # What embed adds to token 0's embedding at each position: the learned table, the
    # sinusoidal one, or nothing.
    table = model.embed(zeros)[0].to("cpu", torch.float64) - state["embedding.weight"][0]
    if table.abs().max() > 0:
        out["positions"] = table  # (context_length, d)
    for layer, (name, attention) in enumerate(attention_layers(model)):
        prefix, read = f"attention.{layer}.", f"{name}."  # written, read
        h, d_h = attention.num_heads, attention.head_dim
        w_q = state[read + "W_query.weight"]  # (d, d)
        w_k = state[read + "W_key.weight"]
        w_v = state[read + "W_value.weight"]
        w_o = state[read + "out_proj.weight"]
        for head in range(h):
            rows = slice(head * d_h, (head + 1) * d_h)
            out[f"{prefix}{head}.W_QK"] = w_q[rows].T @ w_k[rows] * d_h**-0.5  # (d, d)
            out[f"{prefix}{head}.W_OV"] = w_o[:, rows] @ w_v[rows]  # (d, d)
        out[prefix + "out_proj.bias"] = state[read + "out_proj.bias"]
    # The LayerNorms in the model's order: one before each attention layer (perceptrons are
    # refused, so there are no others), then the final one.
    norms = [
        name
        for name, module in model.named_modules()
        if isinstance(module, nn.LayerNorm) and name != "final_norm"
    ]
    for layer, name in enumerate(norms):
        for part in ("weight", "bias"):
            out[f"attention_norms.{layer}.{part}"] = state[f"{name}.{part}"]
    for name in state:
        if name.startswith(("final_norm.", "head.")):
            out[name] = state[name]
    return out


@torch.no_grad()
def live_model_data(
    model: nn.Module,
    tokens: Sequence[int] | torch.Tensor,
    *,
    held_out: tuple[torch.Tensor, torch.Tensor] | None = None,
    labels: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The JSON-able data of :func:`live_model` (its arguments, checked)."""
    model = _check_model(model)
    vocab, length = model.vocab_size, model.context_length
    tokens = _check_token_list("tokens", tokens, vocab, length)
    if labels is None:
        labels = [chr(ord("A") + i) for i in range(vocab)] if vocab <= 26 else None
    elif (
        not isinstance(labels, Sequence)
        or len(labels) != vocab
        or not all(isinstance(x, str) and x.strip() for x in labels)
    ):
        raise ValueError(f"labels: expected {vocab} non-empty strings, one per token id")
    layers = [attention for _, attention in attention_layers(model)]
    data: dict[str, Any] = {
        "config": {
            "vocab_size": vocab,
            "d_model": model.d_model,
            "context_length": length,
            "num_layers": len(layers),
            "num_heads": layers[0].num_heads,
            "labels": list(labels) if labels is not None else None,
        },
        "weights": {name: encode_floats(x) for name, x in folded_weights(model).items()},
        "tokens": tokens,
        "held_out": None,
    }
    if held_out is not None:
        if not (isinstance(held_out, tuple) and len(held_out) == 2):
            raise TypeError("held_out: expected a tuple (inputs, targets) of (b, t) tensors")
        inputs, targets = held_out
        for name, x in (("held_out inputs", inputs), ("held_out targets", targets)):
            if not isinstance(x, torch.Tensor) or x.is_floating_point() or x.dim() != 2:
                raise TypeError(f"{name}: expected an integer tensor of shape (b, t)")
        if inputs.shape != targets.shape or inputs.shape[1] > length:
            raise ValueError(
                f"held_out: expected inputs and targets of one shape (b, t <= {length}), "
                f"got {tuple(inputs.shape)} and {tuple(targets.shape)}"
            )
        if inputs.min() < 0 or inputs.max() >= vocab:
            raise ValueError(f"held_out inputs: expected ids in 0..{vocab - 1}")
        data["held_out"] = _induction_spec(inputs.cpu(), targets.cpu(), vocab)
    return data


def _predictions(model: nn.Module, tokens: list[int]) -> list[tuple[int, float]]:
    device = next(model.parameters()).device
    with torch.no_grad():
        logits = model(torch.tensor([tokens], device=device))[0]  # (t, vocab)
    probs = torch.softmax(logits.double(), dim=-1)  # (t, vocab)
    best = probs.argmax(dim=-1)  # (t,)
    return [(int(b), float(probs[i, b])) for i, b in enumerate(best)]


def live_model(
    model: nn.Module,
    tokens: Sequence[int] | torch.Tensor,
    *,
    held_out: tuple[torch.Tensor, torch.Tensor] | None = None,
    labels: Sequence[str] | None = None,
) -> View:
    """The trained model running in the page: edit the tokens, switch heads off.

    The view shows, for the sequence the reader types, the most likely next token at every
    position with its probability, and, for each layer, the key its head attends to most. A
    checkbox per head switches it off (its output is left out; with every head of a layer off
    the layer adds nothing, as the chapter's forward hook), and the accuracy on sequences
    drawn like the held-out set is measured again in the page.

    Args:
        model: a trained ``TinyCausalModel`` without perceptrons, rotary positions or
            ``qkv_bias`` (chapter 6's induction model).
        tokens: the sequence shown first, ``(t,)`` or ``(1, t)`` ids, or a list of ints.
        held_out: ``(inputs, targets)`` made by ``induction_task``, ``(b, t)`` each, with
            ``-100`` where a target is not scored. The page does not carry them: it draws
            :data:`HELD_OUT_SAMPLE` sequences of the same shape and periods with its own seeded
            generator and measures the accuracy on those.
        labels: a name for each token id; by default the letters A, B, ... when the
            vocabulary has at most 26 tokens.

    Returns:
        A :class:`View`; its fallback lists the predictions for ``tokens``.

    Raises:
        TypeError, ValueError: ``model`` is not a model the view can run, or ``tokens``,
            ``held_out`` or ``labels`` do not fit it.

    Introduced in chapter 6.
    """
    data = live_model_data(model, tokens, held_out=held_out, labels=labels)
    model = cast("_CausalModel", model)  # live_model_data has checked it
    names = data["config"]["labels"] or [str(i) for i in range(model.vocab_size)]
    rows = [
        [str(i), names[token], f"{names[best]} ({prob:.0%})"]
        for i, (token, (best, prob)) in enumerate(
            zip(data["tokens"], _predictions(model, data["tokens"]), strict=True)
        )
    ]
    fallback = (
        "<p>The trained model's next-token predictions for this sequence "
        "(with scripts on, the sequence can be edited and heads switched off).</p>"
        + fallback_table(
            "Next token predicted at each position", ["pos", "token", "next (p)"], rows
        )
    )
    view = View("live_model", data, label="The trained tiny model, live", fallback=fallback)
    return view


__all__ = ["HELD_OUT_SAMPLE", "folded_weights", "live_model", "live_model_data"]
