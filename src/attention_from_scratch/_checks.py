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
        param = like if isinstance(like, torch.Tensor) else next(like.parameters(), None)
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


def check_input(x: object, d_in: int, max_tokens: int, like: torch.Tensor) -> torch.Tensor:
    """Return the input ``x`` of an attention layer if it is a ``(b, t, d_in)`` tensor with
    ``1 <= t <= max_tokens``, on the device and of the dtype of ``like`` (a weight).

    The common case is recognised with a few comparisons, so that the check costs little on
    small inputs; anything else goes through :func:`check_tensor`, which names the problem.
    """
    if isinstance(x, torch.Tensor):
        shape = x.shape  # read once: every read builds a new torch.Size
        if (
            len(shape) == 3
            and shape[2] == d_in
            and 0 < shape[1] <= max_tokens
            and x.dtype == like.dtype
            and x.device == like.device
        ):
            return x
    return check_tensor(
        "x",
        x,
        ranks=(3,),
        shape_names=("(b, t, d_in)",),
        last_dim=d_in,
        max_tokens=max_tokens,
        like=like,
    )


def check_return_weights(value: object, fused: object) -> bool:
    """Return ``value`` if it is a bool, and refuse ``True`` on a fused path, which does
    not return the weight matrix. ``fused``, an attribute that may be reassigned after
    construction, is checked here too, so a wrong value is named at the next call."""
    if value is False and (fused is True or fused is False):
        return False
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
