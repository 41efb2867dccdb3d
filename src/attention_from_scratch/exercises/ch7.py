"""Self-checks of the exercises of chapter 7, "Attention at scale" (being rewritten)."""

from __future__ import annotations

from ._core import Exercise

kv_cache = Exercise("ch7-ex-kv-cache", chapter=7)
position_ids = Exercise("ch7-ex-position-ids", chapter=7)
online_softmax = Exercise("ch7-ex-online-softmax", chapter=7)
group_heads = Exercise("ch7-ex-group-heads", chapter=7)
which_path = Exercise("ch7-ex-which-path", chapter=7)
