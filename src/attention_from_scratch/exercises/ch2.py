"""Self-checks of the exercises of chapter 2, "Trainable queries, keys and values" (being rewritten)."""

from __future__ import annotations

from ._core import Exercise

v2_into_v1 = Exercise("ch2-ex-v2-into-v1", chapter=2)
step = Exercise("ch2-ex-step", chapter=2)
qkv_bias = Exercise("ch2-ex-qkv-bias", chapter=2)
symmetric = Exercise("ch2-ex-symmetric", chapter=2)
sigma = Exercise("ch2-ex-sigma", chapter=2)
