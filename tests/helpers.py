"""Plain helpers shared by the unit tests (fixtures live in conftest.py).

Import them by name: ``from helpers import FAST, randn`` (pytest puts ``tests/`` on the path).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from hypothesis import settings

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from matplotlib.text import Text

# Property tests: enough examples to find a wrong shape or stride, few enough to stay fast.
FAST = settings(max_examples=25, deadline=None)

# The toy sentence of chapters 1 to 3 (afs.toy_sentence() returns the same six tokens).
TOKENS = ["Your", "journey", "starts", "with", "one", "step"]


def randn(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Standard normal numbers from a generator of their own: the global seed is untouched."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def forward_backward(
    fn: Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    seed: int = 0,
    probe_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run ``fn`` on a fresh copy of ``x`` and backpropagate a random probe of the output.

    A random probe (rather than ``out.sum()``) makes every output element matter with a
    different weight, so a gradient that is wrong for one element cannot hide; ``probe_mask``
    zeroes the probe where the output is not compared (padding, say).

    Returns:
        The output and the gradient with respect to ``x``; parameter gradients stay in the
        modules' ``.grad`` fields.
    """
    x = x.detach().clone().requires_grad_(True)
    out = fn(x)
    probe = randn(*out.shape, seed=seed + 1, dtype=out.dtype)
    if probe_mask is not None:
        probe = probe * probe_mask
    (out * probe).sum().backward()
    assert x.grad is not None
    return out.detach(), x.grad


def text_objects(fig: Figure) -> list[Text]:
    """Every visible, non-empty text of a figure: titles, labels, ticks, annotations."""
    from matplotlib.text import Text

    return [text for text in fig.findobj(Text) if text.get_text() and text.get_visible()]


def all_texts(fig: Figure) -> list[str]:
    """The strings of :func:`text_objects`."""
    return [text.get_text() for text in text_objects(fig)]
