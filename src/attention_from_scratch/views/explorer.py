"""The attention explorer: one query's scores, weights and context vector (chapter 1).

``attention_explorer(tokens, inputs)`` shows chapter 1's simplified attention on the reader's
own tensors: choose a query token and the view shows its scores ω, the softmax weights α
that the browser computes from them (``js/explorer.js``, with a temperature slider and a
causal-mask toggle) and the context vector z they mix. Chapters 2 and 3 pass their queries,
keys and values instead, with the scale 1/√d_k and the causal mask.

The weights of the static fallback (temperature 1) come from chapter 3's
:func:`~attention_from_scratch.attention`, so this module sits in chapter 3's layer of the
package, though chapter 1 shows the view first: with ``scale=1`` and no mask, ``attention``
is chapter 1's simplified attention.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from .._checks import check_bool, check_positive_float, check_tensor
from ..causal import attention, causal_mask
from ..palette import ROLE_COLOURS
from .widget import View, check_labels, fallback_table, rounded

#: The most tokens an explorer shows: one button per token must stay usable on a phone.
MAX_EXPLORER_TOKENS = 32


def _matrix(name: str, x: object, t: int, last: str) -> torch.Tensor:
    x = check_tensor(name, x, ranks=(2,), shape_names=(f"(t, {last})",), last_dim_name=last)
    if x.shape[0] != t:
        raise ValueError(f"{name}: expected t={t} rows, one per token, got shape {tuple(x.shape)}")
    if not torch.isfinite(x).all():
        raise ValueError(f"{name}: expected finite values, got NaN or infinity")
    return x.detach().to("cpu", torch.float64)


def explorer_data(
    tokens: Sequence[str],
    inputs: torch.Tensor | None = None,
    *,
    queries: torch.Tensor | None = None,
    keys: torch.Tensor | None = None,
    values: torch.Tensor | None = None,
    scale: float = 1.0,
    causal: bool = False,
    query: int = 0,
    temperature: float = 1.0,
) -> dict[str, Any]:
    """The JSON-able data of an attention explorer (what ``js/explorer.js`` reads).

    Args:
        tokens: one label per token, ``t`` of them.
        inputs: chapter 1's embeddings ``(t, d_in)``: queries, keys and values at once.
        queries, keys, values: instead of ``inputs``, ``(t, d_out)`` each (chapters 2, 3).
        scale: the factor applied to the scores before the softmax (1/√d_k in chapter 2).
        causal: whether the causal mask starts switched on (chapter 3).
        query: the token chosen first, 0-based.
        temperature: the slider's first value; the weights are
            ``softmax(scores * scale / temperature)``.

    Returns:
        A dict with ``tokens``, ``scores`` (``(t, t)`` as lists, ``queries @ keys.T``),
        ``values`` (``(t, d)``), ``scale``, ``scale_text``, ``causal``, ``query``,
        ``temperature``, ``colours`` (the course's role colours) and ``symbols``.

    Shape:
        scores ``(t, t)``; values ``(t, d_in)`` or ``(t, d_out)``.
    """
    data, _ = _explorer(
        tokens,
        inputs,
        queries=queries,
        keys=keys,
        values=values,
        scale=scale,
        causal=causal,
        query=query,
        temperature=temperature,
    )
    return data


def _explorer(
    tokens: Sequence[str],
    inputs: torch.Tensor | None,
    *,
    queries: torch.Tensor | None,
    keys: torch.Tensor | None,
    values: torch.Tensor | None,
    scale: float,
    causal: bool,
    query: int,
    temperature: float,
) -> tuple[dict[str, Any], torch.Tensor]:
    # The data of explorer_data, and the weights (t, t) at temperature 1 for the fallback.
    labels = check_labels(tokens, MAX_EXPLORER_TOKENS)
    t = len(labels)
    if inputs is not None:
        if queries is not None or keys is not None or values is not None:
            raise ValueError("inputs: expected either inputs or queries, keys and values, got both")
        queries = keys = values = _matrix("inputs", inputs, t, "d_in")
        value_symbol = "x"
    elif queries is None or keys is None or values is None:
        raise ValueError("inputs: expected inputs, or all of queries, keys and values, got neither")
    else:
        queries = _matrix("queries", queries, t, "d_out")
        keys = _matrix("keys", keys, t, "d_out")
        values = _matrix("values", values, t, "d_out")
        if queries.shape[1] != keys.shape[1]:
            raise ValueError(
                f"keys: expected d_out={queries.shape[1]} like the queries, got {keys.shape[1]}"
            )
        value_symbol = "v"
    scale = check_positive_float("scale", scale)
    temperature = check_positive_float("temperature", temperature)
    causal = check_bool("causal", causal)
    if isinstance(query, bool) or not isinstance(query, int):
        raise TypeError(f"query: expected an int, got {type(query).__name__} {query!r}")
    if not 0 <= query < t:
        raise ValueError(f"query: expected a token index in [0, {t}), got {query}")
    scores = queries @ keys.T  # (t, t)
    d_k = keys.shape[1]
    if scale == 1.0:
        scale_text = "1"
    elif math.isclose(scale, d_k**-0.5, rel_tol=1e-6):
        scale_text = f"1/\u221a{d_k}"
    else:
        scale_text = f"{scale:.4g}"
    mask = causal_mask(t) if causal else None  # (t, t)
    _, weights = attention(queries, keys, values, mask, scale=scale)  # (t, t)
    data = {
        "tokens": labels,
        "scores": rounded(scores.tolist(), 10),
        "values": rounded(values.tolist(), 10),
        "scale": scale,
        "scale_text": scale_text,
        "causal": causal,
        "query": query,
        "temperature": temperature,
        "colours": dict(ROLE_COLOURS),
        "symbols": {"score": "\u03c9", "weight": "\u03b1", "context": "z", "value": value_symbol},
    }
    return data, weights


def attention_explorer(
    tokens: Sequence[str],
    inputs: torch.Tensor | None = None,
    *,
    queries: torch.Tensor | None = None,
    keys: torch.Tensor | None = None,
    values: torch.Tensor | None = None,
    scale: float = 1.0,
    causal: bool = False,
    query: int = 0,
) -> View:
    """An interactive view of one query's scores, weights and context vector (chapter 1).

    A cell that ends in it shows, for the query token the reader picks (click, tap, or the
    arrow keys), the scores ω, the weights α = softmax(ω · scale / τ) with a temperature
    slider τ and a causal-mask toggle, and the context vector z = Σ α v. Where scripts do not
    run, a table of the weights at τ = 1 is shown instead.

    Args:
        tokens: one label per token (at most 32).
        inputs: chapter 1's embeddings ``(t, d_in)``, used as queries, keys and values.
        queries, keys, values: instead, ``(t, d_out)`` each (chapters 2 and 3).
        scale: the factor on the scores, e.g. ``keys.shape[-1] ** -0.5``.
        causal: whether the mask starts switched on.
        query: the token chosen first.

    Returns:
        A :class:`View`.

    Raises:
        TypeError, ValueError: an argument of the wrong type or value, named in the message.
    """
    data, weights = _explorer(
        tokens,
        inputs,
        queries=queries,
        keys=keys,
        values=values,
        scale=scale,
        causal=causal,
        query=query,
        temperature=1.0,
    )
    labels = data["tokens"]
    table = fallback_table(
        "Attention weights \u03b1 (rows: queries, columns: keys)",
        ["query", *[f"{j} {token}" for j, token in enumerate(labels)]],
        [
            [f"{i} {token}", *[f"{w:.2f}" for w in weights[i].tolist()]]
            for i, token in enumerate(labels)
        ],
    )
    fallback = (
        '<p class="afs-note">The interactive attention explorer needs JavaScript; '
        "here are its weights at temperature 1.</p>" + table
    )
    return View("explorer", data, label="Attention explorer", fallback=fallback)
