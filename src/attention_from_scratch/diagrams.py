"""Schematic diagrams of what the code does, one or more per chapter (chapters 1 to 7).

The data plots of ``plotting`` show numbers; these pictures show the steps: a query reaching
for every key, the blocks of a projection, a mask cutting the future off, heads sliced out of
one wide projection, strides over storage, a cache growing by one column, tiles sweeping a
matrix. Each is drawn from the tensors and sizes the chapter passes in, so it cannot drift
from the code. They live in ``figures/ch1.py`` ... ``figures/ch7.py``, one module per
chapter, with their shared visual language in ``figures/style.py``; this module gathers them
under the name the chapters import. Like ``plotting``, it imports matplotlib, so the package
loads it only when a chapter draws.
"""

from __future__ import annotations

from .figures.ch1 import draw_attention_matrices, draw_context_vector
from .figures.ch2 import draw_projections, draw_query_path
from .figures.ch3 import draw_causal_graph, draw_dropout
from .figures.ch4 import draw_head_split, draw_wrapper_vs_batched, plot_attention_lines
from .figures.ch5 import draw_strided_read
from .figures.ch6 import draw_induction_circuit, draw_positions_added
from .figures.ch7 import draw_grouped_heads, draw_kv_cache, draw_tiles

__all__ = [
    "draw_attention_matrices",
    "draw_causal_graph",
    "draw_context_vector",
    "draw_dropout",
    "draw_grouped_heads",
    "draw_head_split",
    "draw_induction_circuit",
    "draw_kv_cache",
    "draw_positions_added",
    "draw_projections",
    "draw_query_path",
    "draw_strided_read",
    "draw_tiles",
    "draw_wrapper_vs_batched",
    "plot_attention_lines",
]
