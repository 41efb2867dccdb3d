"""Attention from Scratch: the reference implementation behind the course.

Each module mirrors a chapter of the book:

========================  ==========================================================
module                    chapter
========================  ==========================================================
``simplified``            1. Simplified attention (no trainable weights)
``trainable``             2. Trainable queries, keys and values
``causal``                3. Causal attention and dropout (and cross-attention)
``multihead``             4. Multi-head attention
``word_vectors``          4. GloVe word vectors without torchtext
``layout``                5. Tensor layout: view, transpose, contiguous
``positions``             6. Position: learned, sinusoidal and rotary embeddings
``tasks``                 6. Two synthetic tasks that need attention
``training``              6. A tiny causal model and its training loop
``probes``                6. Scores of trained heads: previous-token and induction
``kv_cache``              7. The KV cache: the keys and values kept while decoding
``cached``                7. Attention with a padding mask and a KV cache
``generation``            7. A model that decodes with one cache per layer; ``generate``
``tiled``                 7. Tiled attention: the online softmax, FlashAttention's backward
``memory``                7. The peak memory of a computation, on the CPU as on CUDA
``grouped``               7. Grouped-query attention: query heads sharing key/value heads
``fused``                 8. FlashAttention-2 in Triton (optional; imported on first use)
``figures``               figures for every chapter (imports matplotlib on first use)
``source``                the package's own source, shown in the chapters
========================  ==========================================================

Dimension names, used in every docstring and shape comment: ``b`` batch, ``t`` tokens
(queries), ``s`` key/value tokens, ``h`` heads, ``d_in`` input size, ``d_out`` output size,
``d_h`` size of one head.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .cached import CachedAttention
from .causal import CausalAttention, CrossAttention, attention, causal_mask
from .device import pick_device
from .generation import CachedCausalModel, generate
from .grouped import GroupedQueryAttention, RotaryGroupedQueryAttention
from .kv_cache import KVCache
from .layout import Layout, describe_layout, merge_heads, shares_storage, split_heads
from .memory import measure_peak_memory
from .multihead import (
    AttentionConfig,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    WideMultiHeadAttention,
    grouped_attention,
    head_attention,
)
from .positions import (
    LearnedPositions,
    RotaryEmbedding,
    RotaryMultiHeadAttention,
    SinusoidalPositions,
    sinusoidal_positions,
)
from .probes import induction_scores, previous_token_scores
from .simplified import (
    simplified_attention,
    simplified_attention_loop,
    softmax_naive,
    softmax_stable,
)
from .source import SourceCode, show_source
from .tasks import induction_task, k_back_task
from .tiled import TiledAttention, tiled_attention
from .toy import TOY_TOKENS, toy_sentence
from .trainable import SelfAttentionV1, SelfAttentionV2
from .training import (
    Block,
    ModelConfig,
    TinyCausalModel,
    TrainingHistory,
    evaluate,
    train,
)
from .word_vectors import (
    CorruptDownloadError,
    GloVe,
    WordVectorsUnavailable,
    load_glove,
    read_word_vectors,
)

if TYPE_CHECKING:
    from .figures import plot_attention, plot_attention_heads, plot_layout
    from .fused import FlashAttention, flash_attention, triton_status

__version__ = "0.1.0"

# Plotting needs matplotlib, which is slow to import; load it only when a plot is asked for.
# The fused kernels import Triton (optional), whose triton.jit reads TRITON_INTERPRET as it
# decorates them, when .fused is imported: a chapter sets it first, then asks for a kernel.
_LAZY = {
    "plot_attention": ".figures",
    "plot_attention_heads": ".figures",
    "plot_layout": ".figures",
    "FlashAttention": ".fused",
    "flash_attention": ".fused",
    "triton_status": ".fused",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "TOY_TOKENS",
    "AttentionConfig",
    "Block",
    "CachedAttention",
    "CachedCausalModel",
    "CausalAttention",
    "CorruptDownloadError",
    "CrossAttention",
    "FlashAttention",
    "GloVe",
    "GroupedQueryAttention",
    "KVCache",
    "Layout",
    "LearnedPositions",
    "ModelConfig",
    "MultiHeadAttention",
    "MultiHeadAttentionWrapper",
    "RotaryEmbedding",
    "RotaryGroupedQueryAttention",
    "RotaryMultiHeadAttention",
    "SelfAttentionV1",
    "SelfAttentionV2",
    "SinusoidalPositions",
    "SourceCode",
    "TiledAttention",
    "TinyCausalModel",
    "TrainingHistory",
    "WideMultiHeadAttention",
    "WordVectorsUnavailable",
    "attention",
    "causal_mask",
    "describe_layout",
    "evaluate",
    "flash_attention",
    "generate",
    "grouped_attention",
    "head_attention",
    "induction_scores",
    "induction_task",
    "k_back_task",
    "load_glove",
    "measure_peak_memory",
    "merge_heads",
    "pick_device",
    "plot_attention",
    "plot_attention_heads",
    "plot_layout",
    "previous_token_scores",
    "read_word_vectors",
    "shares_storage",
    "show_source",
    "simplified_attention",
    "simplified_attention_loop",
    "sinusoidal_positions",
    "softmax_naive",
    "softmax_stable",
    "split_heads",
    "tiled_attention",
    "toy_sentence",
    "train",
    "triton_status",
]
