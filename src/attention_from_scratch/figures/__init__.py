"""The book's figures, every one of them under this one name (chapters 1 to 8).

The data plots show numbers: attention heatmaps (``plot_attention``, ``plot_attention_heads``),
the line view of the heads (``plot_attention_lines``) and a tensor's layout (``plot_layout``).
The schematic diagrams (``draw_*``) show the steps: a query reaching for every key, the blocks
of a projection, a mask cutting the future off, heads sliced out of one wide projection,
strides over storage, a cache growing by one column, tiles sweeping a matrix, a kernel's grid
of programs. Each is drawn from the tensors and sizes the chapter passes in, so it cannot
drift from the code; chapter 8's two plots (``plot_key_blocks``, ``plot_sentinels``) draw
what its kernels wrote.

``style`` holds the visual language (colours by role and head, sizes, drawing helpers);
``heatmaps`` the attention heatmaps; ``ch1`` ... ``ch8`` each chapter's diagrams. Every module
imports matplotlib, which is slow to import: the package imports this one only when a chapter
draws, so ``import attention_from_scratch`` stays light. Chapters import what they draw from
here, ``from attention_from_scratch.figures import draw_dropout``.
"""

from __future__ import annotations

from .ch1 import draw_attention_matrices, draw_context_vector
from .ch2 import draw_projections, draw_query_path
from .ch3 import draw_causal_graph, draw_dropout
from .ch4 import (
    draw_head_split,
    draw_split_numbers,
    draw_wrapper_vs_batched,
    plot_attention_lines,
)
from .ch5 import draw_strided_read, plot_layout
from .ch6 import draw_induction_circuit, draw_positions_added
from .ch7 import draw_grouped_heads, draw_kv_cache, draw_tiles
from .ch8 import draw_program_grid, draw_program_memory, plot_key_blocks, plot_sentinels
from .heatmaps import plot_attention, plot_attention_heads
from .style import HEAD_COLOURS, LAYOUT_ROW_GREYS, ROLE_COLOURS

__all__ = [
    "HEAD_COLOURS",
    "LAYOUT_ROW_GREYS",
    "ROLE_COLOURS",
    "draw_attention_matrices",
    "draw_causal_graph",
    "draw_context_vector",
    "draw_dropout",
    "draw_grouped_heads",
    "draw_head_split",
    "draw_induction_circuit",
    "draw_kv_cache",
    "draw_positions_added",
    "draw_program_grid",
    "draw_program_memory",
    "draw_projections",
    "draw_query_path",
    "draw_split_numbers",
    "draw_strided_read",
    "draw_tiles",
    "draw_wrapper_vs_batched",
    "plot_attention",
    "plot_attention_heads",
    "plot_attention_lines",
    "plot_key_blocks",
    "plot_layout",
    "plot_sentinels",
]
