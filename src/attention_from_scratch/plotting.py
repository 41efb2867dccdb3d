"""Pictures of attention weights and tensor layouts, and the colours every figure uses.

The heatmaps live in ``figures/heatmaps.py``, the layout picture in ``figures/ch5.py`` and
the colours in ``figures/style.py``; this module gathers them under the names the chapters
and the package import. It imports matplotlib, so the package loads it only when one of these
functions is first used: ``import attention_from_scratch`` stays light.
"""

from __future__ import annotations

from .figures.ch5 import plot_layout
from .figures.heatmaps import plot_attention, plot_attention_heads
from .figures.style import HEAD_COLOURS, LAYOUT_ROW_GREYS, ROLE_COLOURS

__all__ = [
    "HEAD_COLOURS",
    "LAYOUT_ROW_GREYS",
    "ROLE_COLOURS",
    "plot_attention",
    "plot_attention_heads",
    "plot_layout",
]
