"""Chapter 7: attention at scale, the KV cache, tiled attention and shared key/value heads.

Dimension names used here: ``b`` batch, ``t`` new tokens (queries), ``s`` key/value tokens
(cached ones included), ``h`` query heads, ``h_kv`` key/value heads, ``d_in`` input size,
``d_out`` output size, ``d_h = d_out // h`` size of one head, ``n`` generated tokens,
``vocab`` vocabulary size.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from ._checks import check_bool, check_positive_int
from .multihead import _HeadedAttention

if TYPE_CHECKING:
    from .training import TinyCausalModel


class KVCache:
    """The keys and values of every token one attention layer has seen so far.

    During generation each new token needs the keys and values of all earlier tokens. They do
    not change once computed (causal attention never lets an early token see a later one), so
    a layer stores them here instead of projecting the whole prefix again at every step. Pass
    one cache per layer to ``forward(x, kv_cache=cache)``; the layer appends the new keys and
    values and attends to all of them.

    The cache holds keys and values as ``(b, h_kv, s, d_h)`` tensors. It grows by
    concatenation, which keeps it usable under autograd; serving systems preallocate (or page)
    the memory instead. Its size is ``2 * b * h_kv * s * d_h`` numbers per layer, so
    :class:`GroupedQueryAttention` with fewer key/value heads shrinks it by ``h / h_kv``.

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

    def __repr__(self) -> str:
        if self.keys is None:
            return "KVCache(empty)"
        b, h_kv, s, d_h = self.keys.shape
        return f"KVCache(b={b}, h_kv={h_kv}, s={s}, d_h={d_h}, dtype={self.keys.dtype})"

    def _check_compatible(
        self,
        *,
        batch: int,
        num_kv_heads: int,
        head_dim: int,
        device: torch.device,
    ) -> None:
        """Raise if new keys of this kind cannot be appended to what is cached."""
        if self.keys is None:
            return
        b, h_kv, _, d_h = self.keys.shape
        if b != batch:
            raise ValueError(
                f"kv_cache: expected a batch of b={b} sequences, the size already cached, "
                f"got b={batch}; use one KVCache per batch (or reset it)"
            )
        if (h_kv, d_h) != (num_kv_heads, head_dim):
            raise ValueError(
                f"kv_cache: expected keys with (h_kv, d_h) = ({h_kv}, {d_h}) like those "
                f"cached, got ({num_kv_heads}, {head_dim}); use one KVCache per layer"
            )
        if self.keys.device != device:
            raise ValueError(
                f"kv_cache: expected tokens on the cache's device {self.keys.device}, "
                f"got {device}; reset the cache or move the input"
            )

    def _check_dtype(self, dtype: torch.dtype) -> None:
        """Raise if new keys of ``dtype`` cannot join the cached ones.

        Checked on the projected keys, not on the layer's input: under ``torch.autocast``
        the two differ.
        """
        if self.keys is not None and self.keys.dtype != dtype:
            raise TypeError(
                f"kv_cache: expected dtype {self.keys.dtype} like the cached keys, got "
                f"{dtype}; reset the cache or convert the input"
            )

    def _append_unchecked(
        self, keys: torch.Tensor, values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Append new keys and values (already checked) and return all of them."""
        if self.keys is None or self.values is None:
            self.keys, self.values = keys, values
        else:
            self.keys = torch.cat((self.keys, keys), dim=2)  # (b, h_kv, s, d_h)
            self.values = torch.cat((self.values, values), dim=2)  # (b, h_kv, s, d_h)
        return self.keys, self.values


def _check_4d(name: str, x: object, shape: str) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor of shape {shape}, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name}: expected a floating-point tensor, got {x.dtype}")
    if x.dim() != 4:
        raise ValueError(f"{name}: expected a tensor of shape {shape}, got shape {tuple(x.shape)}")
    return x


def _check_qkv(q: object, k: object, v: object) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    q = _check_4d("q", q, "(b, h, t, d_h)")
    k = _check_4d("k", k, "(b, h, s, d_h)")
    v = _check_4d("v", v, "(b, h, s, d_h)")
    if k.shape != v.shape:
        raise ValueError(f"v: expected the shape of k {tuple(k.shape)}, got {tuple(v.shape)}")
    if q.shape[:2] != k.shape[:2] or q.shape[3] != k.shape[3]:
        raise ValueError(
            f"k: expected (b, h, s, d_h) with b, h, d_h = {q.shape[0]}, {q.shape[1]}, "
            f"{q.shape[3]} like q, got shape {tuple(k.shape)}"
        )
    for name, x in (("k", k), ("v", v)):
        if x.device != q.device or x.dtype != q.dtype:
            raise ValueError(
                f"{name}: expected {q.dtype} on {q.device} like q, got {x.dtype} on {x.device}"
            )
    if q.shape[2] == 0 or k.shape[2] == 0:
        raise ValueError(
            f"q, k: expected at least one token each, got t={q.shape[2]}, s={k.shape[2]}"
        )
    return q, k, v


def tiled_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    block_size: int = 64,
    causal: bool = True,
) -> torch.Tensor:
    """Scaled dot-product attention one block at a time, with an online softmax.

    The FlashAttention idea in plain PyTorch: queries are taken ``block_size`` at a time, and
    for each block the keys and values are visited ``block_size`` at a time. A running maximum
    ``m`` and a running sum ``l`` of ``exp(score - m)`` per query let each new block of scores
    be folded into the result, rescaling what came before by ``exp(m_old - m_new)``, so the
    ``(t, s)`` score matrix is never formed: the largest intermediate is
    ``(b, h, block_size, block_size)`` and the extra memory grows linearly with ``t``. Blocks
    entirely in the future of a query block are skipped. The result equals
    ``torch.nn.functional.scaled_dot_product_attention`` to float tolerance; it is slower
    here (a Python loop), the fused kernels do the same loop on chip.

    Args:
        q: queries, shape ``(b, h, t, d_h)``.
        k: keys, shape ``(b, h, s, d_h)``.
        v: values, shape ``(b, h, s, d_h)``.
        block_size: tokens per block, for queries and for keys.
        causal: mask the future. Query ``i`` sits at position ``s - t + i`` (the last ``t``
            of the ``s`` tokens, as when decoding with a cache), so ``s >= t`` is required.

    Returns:
        The context vectors, shape ``(b, h, t, d_h)``.

    Introduced in chapter 7.
    """
    q, k, v = _check_qkv(q, k, v)
    block_size = check_positive_int("block_size", block_size)
    causal = check_bool("causal", causal)
    t, s, d_h = q.shape[2], k.shape[2], q.shape[3]
    if causal and s < t:
        raise ValueError(
            f"k: expected at least as many keys as queries (s >= t = {t}) when causal=True, "
            f"got s={s}"
        )
    offset = s - t  # absolute position of query 0
    q = q * d_h**-0.5  # scaled first, as in MultiHeadAttention
    out = torch.empty_like(q)  # (b, h, t, d_h)
    for q0 in range(0, t, block_size):
        q_blk = q[:, :, q0 : q0 + block_size]  # (b, h, bq, d_h)
        bq = q_blk.shape[2]
        # The running maximum and sum start from the first key block: every query sees key 0.
        m = torch.full((*q_blk.shape[:3], 1), float("-inf"), dtype=q.dtype, device=q.device)
        row_sum = torch.zeros_like(m)  # (b, h, bq, 1)
        acc = torch.zeros_like(q_blk)  # (b, h, bq, d_h)
        last_key = offset + q0 + bq if causal else s  # keys from here on are all in the future
        for k0 in range(0, last_key, block_size):
            k_blk = k[:, :, k0 : min(k0 + block_size, last_key)]  # (b, h, bk, d_h)
            v_blk = v[:, :, k0 : min(k0 + block_size, last_key)]  # (b, h, bk, d_h)
            scores = q_blk @ k_blk.transpose(2, 3)  # (b, h, bq, bk)
            if causal and k0 + k_blk.shape[2] - 1 > offset + q0:  # the block crosses the diagonal
                rows = torch.arange(offset + q0, offset + q0 + bq, device=q.device)
                cols = torch.arange(k0, k0 + k_blk.shape[2], device=q.device)
                scores = scores.masked_fill(cols > rows[:, None], float("-inf"))  # (b, h, bq, bk)
            m_new = torch.maximum(m, scores.amax(dim=-1, keepdim=True))  # (b, h, bq, 1)
            rescale = torch.exp(m - m_new)  # (b, h, bq, 1); 0 on the first block
            p = torch.exp(scores - m_new)  # (b, h, bq, bk)
            row_sum = row_sum * rescale + p.sum(dim=-1, keepdim=True)  # (b, h, bq, 1)
            acc = acc * rescale + p @ v_blk  # (b, h, bq, d_h)
            m = m_new
        out[:, :, q0 : q0 + bq] = acc / row_sum  # (b, h, bq, d_h)
    return out


class GroupedQueryAttention(_HeadedAttention):
    """Causal attention where groups of query heads share one key/value head.

    ``num_heads`` query heads, as in :class:`MultiHeadAttention`, but only ``num_kv_heads``
    key and value heads: key/value head ``j`` serves query heads ``j * g`` to
    ``(j + 1) * g - 1`` with ``g = num_heads // num_kv_heads`` (the order of
    ``repeat_interleave``). ``W_key`` and ``W_value`` project to ``num_kv_heads * d_h``
    numbers, so they and the KV cache shrink by ``num_heads / num_kv_heads``.
    ``num_kv_heads == 1`` is multi-query attention; ``num_kv_heads == num_heads`` is
    multi-head attention, and then the state dict of a :class:`MultiHeadAttention` loads
    as is (same layer names: ``W_query``, ``W_key``, ``W_value``, ``out_proj``).

    ``forward`` takes the same arguments as :class:`MultiHeadAttention`'s
    (``return_weights``, ``key_padding_mask``, ``kv_cache``), on both paths.

    Args:
        d_in: size of each input embedding.
        d_out: size of each output vector; must be a multiple of ``num_heads``.
        context_length: the largest number of tokens accepted (cached ones included).
        dropout: dropout probability on the attention weights during training, in [0, 1).
        num_heads: the number of query heads ``h``.
        num_kv_heads: the number of key/value heads ``h_kv``; must divide ``num_heads``.
        qkv_bias: add a learnable bias to the query, key and value projections.
        fused: use ``scaled_dot_product_attention``.

    Shape:
        - Input: ``(b, t, d_in)``; ``key_padding_mask`` ``(b, s)``.
        - Output: ``(b, t, d_out)``; with ``return_weights=True`` also the weights,
          ``(b, h, t, s)``. The cache holds ``(b, h_kv, s, d_h)`` keys and values.

    Introduced in chapter 7.
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        num_heads: int,
        num_kv_heads: int,
        qkv_bias: bool = False,
        *,
        fused: bool = False,
    ) -> None:
        super().__init__(
            d_in, d_out, context_length, dropout, num_heads, num_kv_heads, qkv_bias, fused
        )


class _LiveTensors(TorchDispatchMode):
    """Counts the bytes of the storages that operations create and that are still alive."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: dict[int, int] = {}  # storage address -> live tensors using it
        self.sizes: dict[int, int] = {}
        self.current = 0
        self.peak = 0

    def _release(self, key: int) -> None:
        self.refs[key] -= 1
        if self.refs[key] == 0:
            del self.refs[key]
            self.current -= self.sizes.pop(key)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for x in tree_flatten(out)[0]:
            if isinstance(x, torch.Tensor) and x.device.type != "meta":
                storage = x.untyped_storage()
                key = storage.data_ptr()
                if key not in self.refs:
                    # A view shares its base's storage, so it adds nothing.
                    self.refs[key] = 0
                    self.sizes[key] = storage.nbytes()
                    self.current += storage.nbytes()
                    self.peak = max(self.peak, self.current)
                self.refs[key] += 1
                weakref.finalize(x, self._release, key)
        return out


def measure_peak_memory(fn: Callable[[], object], device: torch.device | str = "cpu") -> int:
    """The most bytes of tensor memory that ``fn()`` holds at once, beyond what existed before.

    On CUDA this is ``torch.cuda.max_memory_allocated`` minus the memory allocated before the
    call. Elsewhere every tensor that an operation creates during the call is counted while a
    Python object still refers to its storage (a ``TorchDispatchMode``), which is exact and
    repeatable for code written with tensor operations; scratch buffers that a single fused
    kernel uses internally are not visible this way (they are small for the CPU kernels of
    ``scaled_dot_product_attention``). Run ``fn`` under ``torch.no_grad()`` to leave autograd's
    saved tensors out.

    Args:
        fn: the computation to measure, called once with no arguments.
        device: where ``fn`` computes; ``"cuda"`` switches to the CUDA allocator's counters.

    Returns:
        The peak number of extra bytes.

    Introduced in chapter 7.
    """
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    with _LiveTensors() as live:
        fn()
    return live.peak


@torch.no_grad()
def generate(
    model: TinyCausalModel, prompt: torch.Tensor, new_tokens: int, *, use_cache: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy decoding: append the most likely next token ``new_tokens`` times.

    Without a cache every step runs the model on the whole sequence so far, and the cost of a
    step grows with its length. With ``use_cache=True`` the first step runs on the prompt and
    fills one :class:`KVCache` per layer; every later step runs on the one token just
    generated, whose query attends to the cached keys and values. Both give the same tokens.

    Args:
        model: a :class:`~attention_from_scratch.TinyCausalModel` (chapter 6), used in
            ``eval`` mode for the call and restored afterwards.
        prompt: ``(b, t)`` token ids on the model's device.
        new_tokens: how many tokens to generate, ``n >= 1``; ``t + n - 1`` must not exceed
            the model's ``context_length`` (the last token is never fed back).
        use_cache: decode with a KV cache.

    Returns:
        ``(tokens, logits)``: the ``(b, t + n)`` prompt followed by the generated tokens, and
        the ``(b, n, vocab)`` logits each generated token was chosen from.

    Introduced in chapter 7.
    """
    from .training import TinyCausalModel, _check_tokens  # training imports this module

    if not isinstance(model, TinyCausalModel):
        raise TypeError(f"model: expected a TinyCausalModel, got {type(model).__name__}")
    prompt = _check_tokens("prompt", prompt)
    new_tokens = check_positive_int("new_tokens", new_tokens)
    use_cache = check_bool("use_cache", use_cache)
    longest = prompt.shape[1] + new_tokens - 1
    if longest > model.context_length:
        raise ValueError(
            f"new_tokens: expected prompt length + new_tokens - 1 <= context_length="
            f"{model.context_length}, got {prompt.shape[1]} + {new_tokens} - 1 = {longest}; "
            "generate fewer tokens or use a shorter prompt"
        )
    was_training = model.training
    model.eval()
    try:
        caches = [KVCache() for _ in model.attention] if use_cache else None
        tokens, step_input, all_logits = prompt, prompt, []
        for _ in range(new_tokens):
            logits = model(step_input, kv_caches=caches)[:, -1]  # (b, vocab)
            next_token = logits.argmax(dim=-1, keepdim=True)  # (b, 1)
            tokens = torch.cat([tokens, next_token], dim=1)  # (b, t + 1)
            all_logits.append(logits)
            # With a cache only the new token goes in; without, the whole sequence again.
            step_input = next_token if use_cache else tokens
    finally:
        model.train(was_training)
    return tokens, torch.stack(all_logits, dim=1)  # (b, t + n), (b, n, vocab)
