"""Choosing where the tensors live (used by every chapter)."""

from __future__ import annotations

import torch


def pick_device() -> torch.device:
    """Return the best device available here: CUDA, then Apple MPS, then the CPU.

    Every chapter calls this once at the top, so a notebook runs unchanged on a laptop, on a
    Mac with Apple silicon and on a GPU machine.

    Returns:
        ``torch.device("cuda")``, ``torch.device("mps")`` or ``torch.device("cpu")``.

    Introduced in chapter 1.
    """
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")
