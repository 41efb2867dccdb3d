"""The online-softmax stepper (introduced in chapter 7).

:func:`tiles_stepper` exports one query's scaled scores (``-inf`` where a key is masked) and
the values; ``js/tiles.js`` visits the keys a block at a time, as ``tiled_attention`` does
for every query at once, and shows after each block the running maximum ``m``, the running
sum ``l``, the unnormalised output ``o`` and ``o / l``; the last ``o / l`` is compared with
``softmax(scores) @ values``, which the data carries, computed by the package's
:func:`~attention_from_scratch.attention` (chapter 3). A first block of masked keys shows the
safe maximum at work.

Dimension names used here: ``s`` keys, ``d_h`` size of one head.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .._checks import check_positive_int, check_tensor
from ..causal import attention
from ..palette import ROLE_COLOURS
from .live_model import encode_floats
from .widget import View, fallback_table

#: The most keys the stepper shows.
MAX_KEYS = 32
#: The colour roles it draws: keys, and what a mask removes.
COLOURS = {role: ROLE_COLOURS[role] for role in ("key", "mask")}


def tiles_data(scores: torch.Tensor, values: torch.Tensor, block_size: int) -> dict[str, Any]:
    """The JSON-able data of :func:`tiles_stepper` (its arguments, checked)."""
    scores = check_tensor("scores", scores, ranks=(1,), shape_names=("(s,)",), token_axis=False)
    values = check_tensor("values", values, ranks=(2,), shape_names=("(s, d_h)",))
    block_size = check_positive_int("block_size", block_size)
    s = scores.shape[0]
    if not 1 <= s <= MAX_KEYS:
        raise ValueError(f"scores: expected 1 to {MAX_KEYS} keys, got {s}")
    if values.shape[0] != s:
        raise ValueError(
            f"values: expected one row per score, (s={s}, d_h), got {tuple(values.shape)}"
        )
    masked = torch.isneginf(scores)  # (s,)
    if masked.all():
        raise ValueError("scores: expected at least one key that is not masked (-inf)")
    if not torch.isfinite(scores[~masked]).all() or not torch.isfinite(values).all():
        raise ValueError("scores: expected finite numbers, or -inf for a masked key")
    kept = scores.masked_fill(masked, 0.0)  # (s,)
    return {
        "scores": encode_floats(kept),
        "masked": masked.tolist(),
        "values": encode_floats(values),
        "reference": _reference(kept, masked, values).tolist(),
        "block_size": block_size,
        "colours": COLOURS,
    }


def _reference(kept: torch.Tensor, masked: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """``softmax(scores) @ values`` by the package's attention, in float64 from the float32
    numbers the page decodes: the unit vectors as keys make each query-key product one of
    the given scores (``scale=1``), and the mask hides the masked keys. Shape ``(d_h,)``."""
    s = kept.shape[0]
    query = kept.detach().cpu().float().double()[None]  # (1, s)
    unit_keys = torch.eye(s, dtype=torch.float64)  # (s, s): query . key_j = score j
    value_rows = values.detach().cpu().float().double()  # (s, d_h)
    context, _ = attention(query, unit_keys, value_rows, masked.cpu()[None], scale=1.0)  # (1, d_h)
    return context[0]


def tiles_stepper(scores: torch.Tensor, values: torch.Tensor, block_size: int) -> View:
    """One query row of tiled attention, block by block.

    Args:
        scores: the query's scaled scores, ``(s,)``, ``-inf`` where a key is masked; at
            most 32 keys, at least one not masked.
        values: the values, ``(s, d_h)``.
        block_size: keys per block.

    Returns:
        A :class:`View`; its fallback lists ``m`` and ``l`` after every block.

    Introduced in chapter 7.
    """
    data = tiles_data(scores, values, block_size)
    scores = scores.detach().double().cpu()
    rows = []
    for k0 in range(0, len(scores), block_size):
        seen = scores[: k0 + block_size]
        m = seen.max().item()
        ell = torch.exp(seen - m).sum().item() if m > -math.inf else 0.0
        shown = f"{m:.3f}" if m > -math.inf else "-inf"
        rows.append([str(k0 // block_size), shown, f"{ell:.3f}"])
    fallback = (
        "<p>After each block of keys, the running maximum m and the running sum l of "
        "exp(score - m); the last o / l equals softmax(scores) @ values.</p>"
        + fallback_table("Running quantities per block", ["block", "m", "l"], rows)
    )
    return View("tiles", data, label="Online softmax stepper", fallback=fallback)


__all__ = ["tiles_data", "tiles_stepper"]
