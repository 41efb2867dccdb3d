"""Self-checks of the exercises of chapter 4, "Multi-head attention" (being rewritten)."""

from __future__ import annotations

from ._core import Exercise

one_head = Exercise("ch4-ex-one-head", chapter=4)
count_parameters = Exercise("ch4-ex-count-parameters", chapter=4)
divisible = Exercise("ch4-ex-divisible", chapter=4)
permute_heads = Exercise("ch4-ex-permute-heads", chapter=4)
