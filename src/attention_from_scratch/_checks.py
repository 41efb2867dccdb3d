"""Argument checks shared by every module.

Each check raises ``TypeError`` when a value has the wrong type and ``ValueError`` when it has the
right type but an unusable value. Messages name the argument and read "expected X, got Y", so a
learner sees what to change without reading a traceback from deep inside torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn


def check_positive_int(name: str, value: object) -> int:
    """Return ``value`` if it is an ``int`` greater than zero."""
    # bool is a subclass of int, but `num_heads=True` is never what a learner meant.
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: expected a positive int, got {type(value).__name__} {value!r}")
    if value <= 0:
        raise ValueError(f"{name}: expected a positive int, got {value}")
    return value


def check_module(name: str, value: object) -> nn.Module:
    """Return ``value`` if it is a ``torch.nn.Module`` (a layer or a model)."""
    if not isinstance(value, nn.Module):
        raise TypeError(f"{name}: expected a torch.nn.Module, got {type(value).__name__}")
    return value


def check_seed(seed: object) -> int:
    """Return ``seed`` if it is an ``int`` (any sign, as ``torch.Generator.manual_seed``
    accepts)."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed: expected an int, got {type(seed).__name__} {seed!r}")
    return seed


def check_dropout(value: object, name: str = "dropout") -> float:
    """Return ``value`` as a float if it is a probability in [0, 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name}: expected a float in [0, 1), got {type(value).__name__} {value!r}")
    # p = 1 would drop everything and scale by 1 / (1 - p) = infinity.
    if not 0.0 <= float(value) < 1.0:
        raise ValueError(f"{name}: expected a float in [0, 1), got {value}")
    return float(value)


def check_bool(name: str, value: object) -> bool:
    """Return ``value`` as a ``bool`` if it is one (NumPy's ``numpy.bool_`` included)."""
    kind = type(value)
    if isinstance(value, bool):
        return value
    if kind.__module__ == "numpy" and kind.__name__ in {"bool", "bool_"}:
        return bool(value)
    # Qualified, so that a foreign bool type never reads "expected a bool, got bool".
    got = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"
    raise TypeError(f"{name}: expected a bool, got {got} {value!r}")


def check_divisible(d_out: int, num_heads: int) -> int:
    """Return the head size ``d_out // num_heads``, which must leave no remainder."""
    if d_out % num_heads:
        raise ValueError(
            f"d_out: expected a multiple of num_heads={num_heads} so that every head gets "
            f"the same size, got d_out={d_out} (remainder {d_out % num_heads})"
        )
    return d_out // num_heads


def check_num_kv_heads(num_kv_heads: object, num_heads: object) -> int:
    """Return ``num_kv_heads`` if it is a positive int that divides ``num_heads``, itself a
    positive int, so that every key/value head serves the same number of query heads
    (chapter 7's grouped-query attention)."""
    num_heads = check_positive_int("num_heads", num_heads)
    num_kv_heads = check_positive_int("num_kv_heads", num_kv_heads)
    if num_heads % num_kv_heads:
        raise ValueError(
            f"num_kv_heads: expected a divisor of num_heads={num_heads}, so that every "
            f"key/value head serves the same number of query heads, got {num_kv_heads}"
        )
    return num_kv_heads


def check_tensor(
    name: str,
    x: object,
    *,
    ranks: Sequence[int],
    shape_names: Sequence[str],
    last_dim: int | None = None,
    last_dim_name: str = "d_in",
    max_tokens: int | None = None,
    like: nn.Module | torch.Tensor | None = None,
    token_axis: bool = True,
) -> torch.Tensor:
    """Check an input tensor and return it unchanged.

    Args:
        name: the argument's name, used in messages.
        x: the value to check.
        ranks: the accepted numbers of dimensions, e.g. ``(2, 3)``.
        shape_names: a readable shape for each accepted rank, e.g. ``("(t, d_in)", ...)``.
        last_dim: the required size of the last dimension, or ``None`` for any size.
        last_dim_name: what the last dimension is called in messages.
        max_tokens: the largest allowed size of the token dimension (second to last).
        like: a module whose parameters (or a tensor that) fix the expected device and dtype.
        token_axis: the second-to-last dimension counts tokens and may not be empty; ``False``
            for functions of any shape, such as a softmax.
    """
    expected_shapes = " or ".join(shape_names)
    if not isinstance(x, torch.Tensor):
        raise TypeError(
            f"{name}: expected a torch.Tensor of shape {expected_shapes}, got {type(x).__name__}"
        )
    if not x.is_floating_point():
        raise TypeError(
            f"{name}: expected a floating-point tensor (e.g. torch.float32), got {x.dtype}; "
            f"convert it with {name}.float()"
        )
    if x.dim() not in ranks:
        raise ValueError(
            f"{name}: expected a tensor of shape {expected_shapes}, "
            f"got {x.dim()} dimension(s) with shape {tuple(x.shape)}"
        )
    if last_dim is not None and x.shape[-1] != last_dim:
        raise ValueError(
            f"{name}: expected the last dimension to be {last_dim_name}={last_dim}, "
            f"got shape {tuple(x.shape)}"
        )
    if token_axis and x.dim() >= 2 and x.shape[-2] == 0:
        raise ValueError(f"{name}: expected at least one token, got shape {tuple(x.shape)}")
    if max_tokens is not None and x.shape[-2] > max_tokens:
        raise ValueError(
            f"{name}: expected at most context_length={max_tokens} tokens, "
            f"got {x.shape[-2]} (shape {tuple(x.shape)}); build the module with a larger "
            f"context_length"
        )
    if like is not None:
        # A list, not next(..., None): torch.export in torch 2.5 cannot trace next's default.
        params = [like] if isinstance(like, torch.Tensor) else list(like.parameters())[:1]
        param = params[0] if params else None
        if param is not None:
            if x.device != param.device:
                raise ValueError(
                    f"{name}: expected a tensor on the module's device {param.device}, "
                    f"got {x.device}; move one with .to(device)"
                )
            if x.dtype != param.dtype:
                raise TypeError(
                    f"{name}: expected dtype {param.dtype} like the module's weights, "
                    f"got {x.dtype}; convert with .to({param.dtype})"
                )
    return x


def check_float_tensor(name: str, x: object) -> torch.Tensor:
    """Return ``x`` if it is a floating-point tensor of any shape, empty ones included (the
    input of a softmax, say)."""
    return check_tensor(name, x, ranks=range(64), shape_names=("any shape",), token_axis=False)


def check_input(
    x: object, d_in: int, max_tokens: int | None = None, *, like: nn.Module | torch.Tensor
) -> torch.Tensor:
    """Return the input ``x`` of an attention layer if it is a ``(b, t, d_in)`` tensor with
    ``1 <= t <= max_tokens`` (any ``t >= 1`` for ``None``), on the device and of the dtype of
    ``like`` (the layer, or one of its weights)."""
    return check_tensor(
        "x",
        x,
        ranks=(3,),
        shape_names=("(b, t, d_in)",),
        last_dim=d_in,
        max_tokens=max_tokens,
        like=like,
    )


def check_tokens(name: str, tokens: object) -> torch.Tensor:
    """Return ``tokens`` if it is a ``(b, t)`` integer tensor of token ids with ``t >= 1``."""
    if not isinstance(tokens, torch.Tensor):
        raise TypeError(
            f"{name}: expected a torch.Tensor of token ids, shape (b, t), "
            f"got {type(tokens).__name__}"
        )
    if tokens.is_floating_point() or tokens.is_complex() or tokens.dtype == torch.bool:
        raise TypeError(f"{name}: expected an integer tensor (torch.long), got {tokens.dtype}")
    if tokens.dim() != 2 or tokens.shape[1] == 0:
        raise ValueError(
            f"{name}: expected a tensor of shape (b, t) with t >= 1, got {tuple(tokens.shape)}"
        )
    return tokens


def _broadcast(*shapes: Sequence[int]) -> tuple[int, ...] | None:
    """The shape that ``shapes`` broadcast to (aligned from the right, a size 1 stretching to
    any other), or ``None`` where two sizes differ and neither is 1."""
    rank = max(len(shape) for shape in shapes)
    padded = [(1,) * (rank - len(shape)) + tuple(shape) for shape in shapes]
    result = []
    for sizes in zip(*padded, strict=True):
        common = 1
        for size in sizes:  # compared, not hashed: a traced size is a tensor
            if size != 1:
                if common != 1 and size != common:
                    return None
                common = size
        result.append(common)
    return tuple(result)


def check_attention_inputs(
    queries: object,
    keys: object,
    values: object,
    mask: object = None,
    dropout_p: object = 0.0,
    scale: object = None,
) -> tuple[float, float | None]:
    """Check the arguments of an attention function and return ``(dropout_p, scale)``.

    Queries ``(..., t, d_k)``, keys ``(..., s, d_k)`` and values ``(..., s, d_v)``: floating-point
    tensors of one dtype, on one device, whose leading dimensions broadcast together; ``mask``
    ``None`` or a bool tensor that broadcasts to ``(..., t, s)`` without enlarging it;
    ``dropout_p`` in [0, 1); ``scale`` ``None`` or a positive number.
    """
    names = ("queries", "keys", "values")
    shapes = ("(..., t, d_k)", "(..., s, d_k)", "(..., s, d_v)")
    tensors = [
        check_tensor(name, x, ranks=range(2, 64), shape_names=(shape,))
        for name, x, shape in zip(names, (queries, keys, values), shapes, strict=True)
    ]
    q, k, v = tensors
    for name, x in zip(names[1:], tensors[1:], strict=True):
        if x.dtype != q.dtype:
            raise TypeError(f"{name}: expected dtype {q.dtype} like the queries, got {x.dtype}")
        if x.device != q.device:
            raise ValueError(
                f"{name}: expected a tensor on the queries' device {q.device}, got {x.device}"
            )
    if k.shape[-1] != q.shape[-1]:
        raise ValueError(
            f"keys: expected the last dimension to be d={q.shape[-1]} like the queries "
            f"{tuple(q.shape)}, got shape {tuple(k.shape)}"
        )
    if v.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"values: expected s={k.shape[-2]} tokens like the keys {tuple(k.shape)}, "
            f"got shape {tuple(v.shape)}"
        )
    leading = _broadcast(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    if leading is None:
        raise ValueError(
            f"keys: expected leading dimensions that broadcast with the queries' and the "
            f"values', got queries {tuple(q.shape)}, keys {tuple(k.shape)}, values "
            f"{tuple(v.shape)}"
        )
    if mask is not None:
        target = (*leading, q.shape[-2], k.shape[-2])  # (..., t, s)
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
            got = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
            raise TypeError(
                f"mask: expected a bool tensor (True = hidden) that broadcasts to "
                f"(..., t, s) = {target}, got {got}"
            )
        if mask.device != q.device:
            raise ValueError(
                f"mask: expected a tensor on the queries' device {q.device}, got {mask.device}"
            )
        if _broadcast(mask.shape, target) != target:
            raise ValueError(
                f"mask: expected a shape that broadcasts to (..., t, s) = {target}, "
                f"got {tuple(mask.shape)}"
            )
    dropout_p = check_dropout(dropout_p, "dropout_p")
    if scale is not None:
        scale = check_positive_float("scale", scale)
    return dropout_p, scale


def check_return_weights(value: object, fused: object) -> bool:
    """Return ``value`` if it is a bool, and refuse ``True`` on a fused path, which does
    not return the weight matrix. ``fused``, an attribute that may be reassigned after
    construction, is checked here too, so a wrong value is named at the next call."""
    fused = check_bool("fused", fused)
    value = check_bool("return_weights", value)
    if fused and value:
        raise ValueError(
            "return_weights: expected False on the fused path, which does not return "
            "the weight matrix, got True; set module.fused = False to get the weights"
        )
    return value


def check_positive_float(name: str, value: object) -> float:
    """Return ``value`` as a float if it is a finite number greater than zero (seconds, say)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name}: expected a positive number, got {type(value).__name__} {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name}: expected a positive, finite number, got {value!r}")
    return float(value)


def check_device(name: str, value: object) -> torch.device | None:
    """Return ``value`` as a ``torch.device`` (or ``None``), refusing what torch cannot parse.

    Accepts a ``torch.device``, a string such as ``"cpu"``, ``"cuda:0"`` or ``"mps"``, or
    ``None`` (the default device). A bare int is refused: it means a CUDA index to torch, which
    a reader of ``device=0`` cannot tell; write ``"cuda:0"``. Whether the device exists here is
    left to torch, whose error already names it.
    """
    if value is None or isinstance(value, torch.device):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        raise TypeError(
            f"{name}: expected a torch.device or a str, got int {value}; "
            f"write 'cuda:{max(value, 0)}' for a GPU"
        )
    if not isinstance(value, str):
        raise TypeError(
            f"{name}: expected a torch.device, a str such as 'cpu' or 'cuda', or None, "
            f"got {type(value).__name__} {value!r}"
        )
    try:
        return torch.device(value)
    except (RuntimeError, ValueError) as error:
        raise ValueError(
            f"{name}: expected a device such as 'cpu', 'cuda', 'cuda:0' or 'mps', got {value!r}; "
            f"pick_device() returns the best one available"
        ) from error


def check_padding_mask(mask: object, b: int, s: int, device: torch.device) -> torch.Tensor:
    """Return ``mask`` if it is a ``(b, s)`` bool tensor on ``device``: a key padding mask,
    ``True`` at padded keys (chapter 7)."""
    if not isinstance(mask, torch.Tensor):
        raise TypeError(
            f"key_padding_mask: expected a bool tensor of shape (b, s) = "
            f"({b}, {s}), got {type(mask).__name__}"
        )
    if mask.dtype != torch.bool:
        raise TypeError(
            f"key_padding_mask: expected a bool tensor (True = padding), got "
            f"{mask.dtype}; build it with a comparison, e.g. token_ids == pad_id"
        )
    if tuple(mask.shape) != (b, s):
        raise ValueError(
            f"key_padding_mask: expected shape (b, s) = ({b}, {s}), one flag "
            f"per key (cached and new), got {tuple(mask.shape)}"
        )
    if mask.device != device:
        raise ValueError(
            f"key_padding_mask: expected a tensor on the input's device "
            f"{device}, got {mask.device}; move it with .to(device)"
        )
    return mask


def _check_head_tensor(name: str, x: object, shape: str) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor of shape {shape}, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name}: expected a floating-point tensor, got {x.dtype}")
    if x.dim() != 4:
        raise ValueError(f"{name}: expected a tensor of shape {shape}, got shape {tuple(x.shape)}")
    return x


def check_head_inputs(
    queries: object, keys: object, values: object
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return the queries, keys and values of a function that takes them head by head:
    floating-point tensors ``(b, h, t, d_h)`` and ``(b, h, s, d_h)`` of one dtype, on one
    device, with ``t, s >= 1`` (chapter 7's tiled attention, chapter 8's kernels)."""
    queries = _check_head_tensor("queries", queries, "(b, h, t, d_h)")
    keys = _check_head_tensor("keys", keys, "(b, h, s, d_h)")
    values = _check_head_tensor("values", values, "(b, h, s, d_h)")
    if keys.shape != values.shape:
        raise ValueError(
            f"values: expected the shape of the keys {tuple(keys.shape)}, got {tuple(values.shape)}"
        )
    if queries.shape[:2] != keys.shape[:2] or queries.shape[3] != keys.shape[3]:
        b, h, _, d_h = queries.shape
        raise ValueError(
            f"keys: expected (b, h, s, d_h) with b, h, d_h = {b}, {h}, {d_h} like the "
            f"queries, got shape {tuple(keys.shape)}"
        )
    for name, x in (("keys", keys), ("values", values)):
        if x.device != queries.device or x.dtype != queries.dtype:
            raise ValueError(
                f"{name}: expected {queries.dtype} on {queries.device} like the queries, "
                f"got {x.dtype} on {x.device}"
            )
    if queries.shape[2] == 0 or keys.shape[2] == 0:
        raise ValueError(
            f"queries, keys: expected at least one token each, got t={queries.shape[2]}, "
            f"s={keys.shape[2]}"
        )
    return queries, keys, values
