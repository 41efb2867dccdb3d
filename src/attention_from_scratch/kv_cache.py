"""Chapter 7: the KV cache, the keys and values a layer keeps while decoding.

Dimension names used here: ``b`` batch, ``t`` new tokens, ``s`` cached tokens, ``h_kv``
key/value heads, ``d_h`` size of one head.
"""

from __future__ import annotations

import torch


class KVCache:
    """The keys and values of every token one attention layer has seen so far.

    During generation each new token needs the keys and values of all earlier
    tokens. They do not change once computed (causal attention never lets an
    early token see a later one), so a layer stores them here instead of
    projecting the whole prefix again at every step. Pass one cache per layer
    to ``forward(x, kv_cache=cache)`` of a :class:`CachedAttention`; the layer
    appends the new keys and values and attends to all of them.

    The cache grows by concatenation, which keeps it usable under autograd;
    serving systems preallocate (or page) the memory instead. Its size is
    ``2 * b * h_kv * s * d_h`` numbers per layer, so
    :class:`GroupedQueryAttention` with fewer key/value heads shrinks it by
    ``h / h_kv``.

    Shape:
        - ``keys``, ``values``: ``(b, h_kv, s, d_h)``, or ``None`` while empty.

    Introduced in chapter 7.
    """

    def __init__(self) -> None:
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None

    @property
    def length(self) -> int:
        """The number of cached tokens ``s`` (0 while empty)."""
        return 0 if self.keys is None else self.keys.shape[2]

    def __len__(self) -> int:
        return self.length

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached keys and values."""
        if self.keys is None or self.values is None:
            return 0
        return self.keys.nbytes + self.values.nbytes

    def reset(self) -> None:
        """Forget every cached token, e.g. before generating a new sequence."""
        self.keys = None
        self.values = None

    def append(
        self,
        keys: torch.Tensor,
        values: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Append new keys and values and return all of them.

        Args:
            keys: the new tokens' keys, ``(b, h_kv, t, d_h)``.
            values: their values, same shape.

        Returns:
            ``(keys, values)`` of every cached token, ``(b, h_kv, s, d_h)``.
        """
        if self.keys is None or self.values is None:
            self.keys, self.values = keys, values
        else:
            self._check_like_cached(keys)
            keys = torch.cat((self.keys, keys), dim=2)  # (b, h_kv, s, d_h)
            values = torch.cat((self.values, values), dim=2)  # same shape
            self.keys, self.values = keys, values
        return self.keys, self.values

    def _check_like_cached(self, keys: torch.Tensor) -> None:
        """Raise, naming the difference, if ``keys`` cannot join the cache."""
        cached = self.keys
        if cached is None:
            return
        b, h_kv, _, d_h = cached.shape
        if keys.shape[0] != b:
            raise ValueError(
                f"kv_cache: expected a batch of b={b} sequences, the size "
                f"already cached, got b={keys.shape[0]}; use one KVCache per "
                f"batch (or reset it)"
            )
        if (keys.shape[1], keys.shape[3]) != (h_kv, d_h):
            raise ValueError(
                f"kv_cache: expected keys with (h_kv, d_h) = ({h_kv}, {d_h}) "
                f"like those cached, got ({keys.shape[1]}, {keys.shape[3]}); "
                f"use one KVCache per layer"
            )
        if keys.device != cached.device:
            raise ValueError(
                f"kv_cache: expected tokens on the cache's device "
                f"{cached.device}, got {keys.device}; reset the cache or move "
                f"the input"
            )
        # Compared on the projected keys, not on the layer's input: under
        # torch.autocast the two differ.
        if keys.dtype != cached.dtype:
            raise TypeError(
                f"kv_cache: expected dtype {cached.dtype} like the cached "
                f"keys, got {keys.dtype}; reset the cache or convert the input"
            )

    def __repr__(self) -> str:
        if self.keys is None:
            return "KVCache(empty)"
        b, h_kv, s, d_h = self.keys.shape
        sizes = f"b={b}, h_kv={h_kv}, s={s}, d_h={d_h}"
        return f"KVCache({sizes}, dtype={self.keys.dtype})"
