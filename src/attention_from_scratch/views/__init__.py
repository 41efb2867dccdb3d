"""Interactive views of attention, made from the chapters' own tensors (chapters 1 to 7).

Each view is a function that returns a :class:`~attention_from_scratch.views.widget.View`; a
notebook cell that ends in one displays it in Jupyter, Colab and the built book, offline:

>>> from attention_from_scratch.views import attention_explorer
>>> attention_explorer(tokens, inputs)  # doctest: +SKIP

========================  ==============================================================
function                  what it shows
========================  ==============================================================
``attention_explorer``    one query's scores, softmax weights and context vector (1-3)
``head_view``             lines from a token to the tokens each head attends to (4)
``live_model``            the trained tiny model running in the page, heads on/off (6)
``kv_cache_stepper``      prefill, then decode a token at a time with a KV cache (7)
``tiles_stepper``         the online softmax of one query, block by block (7)
========================  ==============================================================

How to add a view (the contract every view keeps):

1. ``views/js/<name>.js``: plain ES2019 wrapped like ``js/explorer.js``; it registers
   ``AFSViews.<name> = {render, ...}`` on the page's ``window`` and, when ``module`` exists
   (Node, the tests), exports the same object. ``render({model, el})`` has anywidget's shape:
   ``model.get(key)`` reads a key of the view's JSON data, ``el`` is the element to draw in.
   Put every number the view computes in pure functions exported beside ``render`` (no DOM),
   so that ``tests/js/`` can check them against torch on fixtures written by the tests.
   Shared helpers (softmax, ``fmt``, ``el``, ``liveRegion``, ``chooser``) are in
   ``js/common.js`` as ``AFSViews.common``; shared style in ``js/views.css``. Never write the
   four characters ``</sc`` + ``ript`` or ``<!--`` in a view file (the file is inlined).
2. ``views/<name>.py``: a pure ``<name>_data(...) -> dict`` that checks its arguments
   (``TypeError``/``ValueError`` through ``_checks``) and builds the JSON-able data from
   tensors, and a public function returning ``View("<name>", data, label=..., fallback=...)``
   whose fallback (``widget.fallback_table``) says in a table what the view shows.
3. Accessibility: every control is a ``<button>`` or ``<input>`` with a visible label, the
   keyboard reaches and works all of it, and what changes is announced through
   ``common.liveRegion``. No request leaves the page: no CDN, no font, no image URL.
4. Size: one view inlines at most ``widget.MAX_VIEW_BYTES``; a page keeps under about 100 KB
   of script and data.
"""

from __future__ import annotations

from .cache_stepper import kv_cache_stepper
from .explorer import attention_explorer
from .heads import head_view
from .live_model import live_model
from .tiles import tiles_stepper
from .widget import View

__all__ = [
    "View",
    "attention_explorer",
    "head_view",
    "kv_cache_stepper",
    "live_model",
    "tiles_stepper",
]
