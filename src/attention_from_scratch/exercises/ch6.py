"""Self-checks of the exercises of chapter 6, "Attention that learns" (being rewritten)."""

from __future__ import annotations

from ._core import Exercise

rotate_half = Exercise("ch6-ex-rotate-half", chapter=6)
extrapolate = Exercise("ch6-ex-extrapolate", chapter=6)
ablate_induction = Exercise("ch6-ex-ablate-induction", chapter=6)
causal_bag = Exercise("ch6-ex-causal-bag", chapter=6)
why_order_blind = Exercise("ch6-ex-why-order-blind", chapter=6)
