"""The book's colours, by role and by head, from the Okabe-Ito palette.

One source for the still figures (``figures``) and the interactive views (``views``); this
module imports nothing, so a view does not pay for matplotlib.
"""

from __future__ import annotations

# One colour per role in every figure of the book, from the Okabe-Ito palette, which readers
# with any common colour-vision deficiency can tell apart.
ROLE_COLOURS: dict[str, str] = {
    "input": "#999999",  # grey: the inputs X
    "query": "#0072B2",  # blue: queries Q
    "key": "#E69F00",  # orange: keys K
    "value": "#009E73",  # bluish green: values V
    "output": "#56B4E9",  # sky blue: context vectors Z
    "mask": "#D55E00",  # vermillion: what a mask or dropout removes
    "cache": "#CC79A7",  # reddish purple: what a KV cache keeps
}
# One colour per head (head i takes HEAD_COLOURS[i % 8]), the same eight colours in an order
# that keeps neighbouring heads far apart.
HEAD_COLOURS: tuple[str, ...] = (
    "#0072B2",
    "#CC79A7",
    "#009E73",
    "#E69F00",
    "#56B4E9",
    "#D55E00",
    "#000000",
    "#F0E442",
)
