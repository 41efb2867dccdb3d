"""Self-checks of the exercises of chapter 3, "Causal attention and dropout" (being rewritten)."""

from __future__ import annotations

from ._core import Exercise

sliding_window = Exercise("ch3-ex-sliding-window", chapter=3)
dropout_order = Exercise("ch3-ex-dropout-order", chapter=3)
all_masked = Exercise("ch3-ex-all-masked", chapter=3)
dropout_rate = Exercise("ch3-ex-dropout-rate", chapter=3)
causality_test = Exercise("ch3-ex-causality-test", chapter=3)
