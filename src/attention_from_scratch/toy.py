"""The six-token toy sentence that runs through chapters 1 to 3."""

from __future__ import annotations

import torch

from ._checks import check_device

#: The tokens of the toy sentence, in order.
TOY_TOKENS: tuple[str, ...] = ("Your", "journey", "starts", "with", "one", "step")

# Hand-picked 3-dimensional embeddings, one row per token. They are small enough to follow by
# hand, and every number the course prints about them comes from these 18 values.
_TOY_EMBEDDINGS = (
    (0.43, 0.15, 0.89),  # Your
    (0.55, 0.87, 0.66),  # journey
    (0.57, 0.85, 0.64),  # starts
    (0.22, 0.58, 0.33),  # with
    (0.77, 0.25, 0.10),  # one
    (0.05, 0.80, 0.55),  # step
)


def toy_sentence(
    device: torch.device | str | None = None, dtype: torch.dtype = torch.float32
) -> tuple[list[str], torch.Tensor]:
    """Return the toy sentence "Your journey starts with one step" and its embeddings.

    Args:
        device: where to create the tensor: a ``torch.device``, a str such as ``"cuda"``, or
            ``None`` for the CPU.
        dtype: a floating dtype for the tensor (default: ``torch.float32``).

    Returns:
        ``(tokens, inputs)``: the six tokens as a list of strings, and their embeddings as a
        tensor of shape ``(t, d_in) = (6, 3)``.

    Introduced in chapter 1.
    """
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype: expected a floating torch.dtype, got {dtype!r}")
    device = check_device("device", device)
    inputs = torch.tensor(_TOY_EMBEDDINGS, device=device, dtype=dtype)  # (t, d_in)
    return list(TOY_TOKENS), inputs
