"""Self-checks of the exercises of chapter 5, "Tensor layout" (being rewritten)."""

from __future__ import annotations

from ._core import Exercise

permute_strides = Exercise("ch5-ex-permute-strides", chapter=5)
view_noncontiguous = Exercise("ch5-ex-view-noncontiguous", chapter=5)
slice_stride = Exercise("ch5-ex-slice-stride", chapter=5)
expand_strides = Exercise("ch5-ex-expand-strides", chapter=5)
