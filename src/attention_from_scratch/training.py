"""Chapter 6: a tiny causal model and the loop that trains it.

The model is built from the course's own :class:`~attention_from_scratch.MultiHeadAttention`;
it learns the tasks of :mod:`~attention_from_scratch.tasks`, whose unscored targets are
:data:`~attention_from_scratch.tasks.IGNORE_INDEX`, which ``torch.nn.functional.cross_entropy``
skips and which the accuracy leaves out. What the trained heads do is measured by
:mod:`~attention_from_scratch.probes`.

Dimension names used here: ``b`` batch, ``t`` tokens, ``h`` heads, ``d`` model size,
``vocab`` vocabulary size (written out, since ``V`` is the value matrix).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, TensorDataset
from tqdm import tqdm

from ._checks import (
    check_bool,
    check_dropout,
    check_module,
    check_positive_float,
    check_positive_int,
    check_seed,
    check_tokens,
)
from .multihead import MultiHeadAttention
from .positions import LearnedPositions, RotaryMultiHeadAttention, SinusoidalPositions
from .tasks import IGNORE_INDEX

POSITION_KINDS = ("none", "learned", "sinusoidal", "rotary")


def _check_inputs_and_targets(inputs: object, targets: object) -> tuple[torch.Tensor, torch.Tensor]:
    inputs = check_tokens("inputs", inputs)
    targets = check_tokens("targets", targets)
    if inputs.shape != targets.shape:
        raise ValueError(
            f"targets: expected the shape of inputs {tuple(inputs.shape)}, "
            f"got {tuple(targets.shape)}"
        )
    return inputs, targets


@dataclass(frozen=True)
class ModelConfig:
    """The arguments of :class:`TinyCausalModel`, checked once, when the model is built.

    A frozen dataclass, as nanoGPT's ``GPTConfig`` carries a model's settings: the model's
    constructor builds one from its arguments, and :meth:`__post_init__` checks them all, so
    that the model's own code builds layers and holds no checks. Each error names the
    argument and reads "expected X, got Y"; the values kept are the checked ones (a dropout
    of ``0`` becomes ``0.0``, NumPy's ``bool_`` a ``bool``). That ``d_model`` is a multiple
    of ``num_heads`` is left to each attention layer's
    :class:`~attention_from_scratch.AttentionConfig`, whose error names ``d_out``.

    Args:
        vocab_size: the number of token ids, a positive int.
        d_model: the model size ``d``, a positive int.
        context_length: the longest sequence accepted, a positive int.
        num_layers: the number of blocks, a positive int.
        num_heads: heads per attention layer, a positive int.
        positions: one of :data:`POSITION_KINDS`: ``"none"``, ``"learned"``,
            ``"sinusoidal"`` or ``"rotary"``.
        mlp: add a two-layer perceptron to every block.
        layer_norm: use pre-norm LayerNorms.
        dropout: dropout on the attention weights during training, in [0, 1).

    Introduced in chapter 6.
    """

    vocab_size: int
    d_model: int
    context_length: int
    num_layers: int = 1
    num_heads: int = 1
    positions: str = "learned"
    mlp: bool = False
    layer_norm: bool = False
    dropout: float = 0.0

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "context_length", "num_layers", "num_heads"):
            check_positive_int(name, getattr(self, name))
        # Frozen: the checked values are stored through object.__setattr__.
        checked = {
            "mlp": check_bool("mlp", self.mlp),
            "layer_norm": check_bool("layer_norm", self.layer_norm),
            "dropout": check_dropout(self.dropout),
        }
        for name, value in checked.items():
            object.__setattr__(self, name, value)
        if self.positions not in POSITION_KINDS:
            expected = f"expected one of {POSITION_KINDS}"
            raise ValueError(f"positions: {expected}, got {self.positions!r}")


class Block(nn.Module):
    """One block of a causal model: attention, then optionally a perceptron, each added to
    its input (a residual connection).

    ``x + attention(norm(x))``, then, with ``mlp=True``, ``x + mlp(x)``, where the
    perceptron starts with its own norm; with ``layer_norm=True`` the norms are
    ``LayerNorm``s (pre-norm, as in GPT-2), otherwise they do nothing.

    Args:
        attention: the block's attention layer, e.g. a
            :class:`~attention_from_scratch.MultiHeadAttention` with ``d_in = d_out = d``.
        mlp: add a two-layer perceptron with ``4 d`` hidden units.
        layer_norm: normalise the input of each sub-block.

    Shape:
        - Input: ``(b, t, d)``.
        - Output: ``(x, weights)``: ``(b, t, d)`` and, with ``return_weights=True``, the
          attention weights ``(b, h, t, t)``, else ``None``. Other keyword arguments of
          ``forward`` go to the attention layer.

    Introduced in chapter 6.
    """

    def __init__(
        self,
        attention: MultiHeadAttention,
        *,
        mlp: bool = False,
        layer_norm: bool = False,
    ) -> None:
        super().__init__()
        check_module("attention", attention)
        mlp = check_bool("mlp", mlp)
        layer_norm = check_bool("layer_norm", layer_norm)
        d = attention.d_out
        self.attention_norm = nn.LayerNorm(d) if layer_norm else nn.Identity()
        self.attention = attention
        self.mlp: nn.Sequential | None = None
        if mlp:
            self.mlp = nn.Sequential(
                nn.LayerNorm(d) if layer_norm else nn.Identity(),
                nn.Linear(d, 4 * d),
                nn.GELU(),
                nn.Linear(4 * d, d),
            )

    def forward(
        self,
        x: torch.Tensor,
        return_weights: bool = False,
        **attention_options: object,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        weights = None
        if return_weights:
            out, weights = self.attention(
                self.attention_norm(x), True, **attention_options
            )  # (b, t, d), (b, h, t, t)
        else:
            out = self.attention(self.attention_norm(x), **attention_options)
        x = x + out  # (b, t, d)
        if self.mlp is not None:
            x = x + self.mlp(x)  # (b, t, d)
        return x, weights


class TinyCausalModel(nn.Module):
    """A small causal language model built from the course's :class:`MultiHeadAttention`.

    Token embedding, optional positions, ``num_layers`` blocks (:class:`Block`) and a linear
    output head. Each block adds ``attention(x)`` to ``x`` and, with ``mlp=True``, then adds
    a small two-layer perceptron; with ``layer_norm=True`` each sub-block sees
    ``LayerNorm(x)`` (pre-norm, as in GPT-2) and a final LayerNorm precedes the head.

    Args:
        vocab_size: the number of token ids, ``vocab``.
        d_model: the model size ``d``.
        context_length: the longest sequence accepted.
        num_layers: the number of blocks.
        num_heads: heads per attention layer; ``d_model`` must be a multiple of it.
        positions: ``"none"``, ``"learned"`` (a trained table), ``"sinusoidal"`` (fixed) or
            ``"rotary"`` (every attention layer a :class:`RotaryMultiHeadAttention`, which
            rotates queries and keys; nothing is added to the inputs).
        mlp: add a two-layer perceptron (hidden size ``4 d``) to every block.
        layer_norm: use pre-norm LayerNorms.
        dropout: dropout on the attention weights during training.

    Shape:
        - Input: ``(b, t)`` token ids (``torch.long``) with ``t <= context_length``.
        - Output: ``(b, t, vocab)`` logits for the next token at every position; with
          ``return_weights=True`` also a list with the ``(b, h, t, t)`` attention weights of
          every layer.

    The constructor's arguments are checked once, by the :class:`ModelConfig` it builds from
    them (kept as ``config``). A later chapter extends the model by subclassing:
    :meth:`attention_layer` builds the attention layer of each block, and :meth:`embed` is
    the first step of ``forward`` (chapter 7's ``CachedCausalModel`` replaces the one with
    cached layers and passes a KV cache to each block's attention after the other).

    Introduced in chapter 6.
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        context_length: int,
        *,
        num_layers: int = 1,
        num_heads: int = 1,
        positions: str = "learned",
        mlp: bool = False,
        layer_norm: bool = False,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        sizes = (vocab_size, d_model, context_length, num_layers, num_heads)
        config = ModelConfig(*sizes, positions, mlp, layer_norm, dropout)
        self.config = config
        self.vocab_size, self.d_model = vocab_size, d_model
        self.context_length = context_length
        self.positions_kind = positions
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.positions: nn.Module | None = None
        if positions == "learned":
            self.positions = LearnedPositions(context_length, d_model)
        elif positions == "sinusoidal":
            self.positions = SinusoidalPositions(context_length, d_model)
        # Every attention layer first, then the blocks and their perceptrons:
        # the random initial weights are drawn in this order.
        attentions = [self.attention_layer() for _ in range(num_layers)]
        self.blocks = nn.ModuleList(
            Block(attention, mlp=config.mlp, layer_norm=config.layer_norm)
            for attention in attentions  # in order
        )
        self.final_norm: nn.Module = nn.Identity()
        if config.layer_norm:
            self.final_norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def attention_layer(self) -> MultiHeadAttention:
        """The attention layer of one block, of size ``d_model`` in and out:
        chapter 4's, or with rotary positions chapter 6's rotary layer."""
        c = self.config
        if c.positions == "rotary":
            layer: type[MultiHeadAttention] = RotaryMultiHeadAttention
        else:
            layer = MultiHeadAttention
        d = c.d_model
        return layer(d, d, c.context_length, c.dropout, c.num_heads)

    def forward(
        self, tokens: torch.Tensor, return_weights: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, list[torch.Tensor]]:
        """Next-token logits for every position of ``tokens``.

        Args:
            tokens: ``(b, t)`` token ids.
            return_weights: also return every layer's attention weights (explicit path).

        Returns:
            ``(b, t, vocab)`` logits, and with ``return_weights=True`` the list of weights.
        """
        tokens = check_tokens("tokens", tokens)
        return_weights = check_bool("return_weights", return_weights)
        x = self.embed(tokens)  # (b, t, d)
        all_weights = []
        for block in self.blocks:
            x, weights = block(x, return_weights)  # (b, t, d)
            all_weights.append(weights)  # (b, h, t, t) or None
        logits = self.head(self.final_norm(x))  # (b, t, vocab)
        return (logits, all_weights) if return_weights else logits

    def embed(self, tokens: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """Token embeddings plus positions, for tokens at positions ``offset``,
        ``offset + 1``, ...

        Args:
            tokens: ``(b, t)`` token ids, already checked to be integers.
            offset: the position of the first token (tokens seen before it are not given).

        Returns:
            ``(b, t, d)`` vectors, the input of the first block.
        """
        t = tokens.shape[1]
        if offset + t > self.context_length:
            before = f"{offset} earlier + " if offset else ""
            raise ValueError(
                "tokens: expected at most context_length="
                f"{self.context_length} tokens, got {before}{t}"
            )
        if tokens.numel():
            # One pass over the ids and one synchronisation, for both ends.
            low, high = (int(v) for v in torch.aminmax(tokens))
            if low < 0 or high >= self.vocab_size:
                raise ValueError(
                    f"tokens: expected ids in 0..{self.vocab_size - 1}, "
                    f"got values from {low} to {high}"
                )
        x: torch.Tensor = self.embedding(tokens)  # (b, t, d)
        if self.positions is not None:
            x = self.positions(x, offset=offset)  # (b, t, d)
        return x


@dataclass
class TrainingHistory:
    """What :func:`train` records: one loss and one accuracy per optimisation step.

    Args:
        losses: the mean cross-entropy of each training batch.
        accuracies: the fraction of scored positions of each training batch whose most likely
            token is the target.

    Introduced in chapter 6.
    """

    losses: list[float] = field(default_factory=list)
    accuracies: list[float] = field(default_factory=list)


def _model_device(model: nn.Module) -> torch.device:
    param = next(model.parameters(), None)
    return param.device if param is not None else torch.device("cpu")


def _batches(
    inputs: torch.Tensor, targets: torch.Tensor, batch_size: int, seed: int
) -> DataLoader[tuple[torch.Tensor, ...]]:
    dataset = TensorDataset(inputs, targets)
    sampler = RandomSampler(dataset, generator=torch.Generator().manual_seed(seed))
    # A batch sampler indexes the tensors once per batch instead of once per sequence.
    return DataLoader(
        dataset, sampler=BatchSampler(sampler, batch_size, drop_last=False), batch_size=None
    )


def train(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    *,
    steps: int,
    batch_size: int = 256,
    lr: float = 1e-2,
    weight_decay: float = 0.0,
    seed: int = 0,
    progress: bool = True,
    desc: str = "training",
) -> TrainingHistory:
    """Train ``model`` to predict ``targets`` from ``inputs`` with AdamW and cross-entropy.

    Batches are drawn by a ``torch.utils.data.DataLoader`` in a seeded random order and moved
    to the model's device (CPU, CUDA or MPS). Positions whose target is
    :data:`IGNORE_INDEX` count neither in the loss nor in the accuracy. A ``tqdm`` progress bar
    shows the step and the loss; it disappears when training ends.

    Args:
        model: a module mapping ``(b, t)`` token ids to ``(b, t, vocab)`` logits.
        inputs: training inputs, ``(b, t)`` token ids.
        targets: training targets, ``(b, t)`` token ids or :data:`IGNORE_INDEX`.
        steps: the number of optimisation steps (batches).
        batch_size: sequences per batch.
        lr: the learning rate of ``torch.optim.AdamW``.
        weight_decay: AdamW's weight decay.
        seed: seeds the order of the batches.
        progress: show the progress bar.
        desc: the progress bar's label.

    Returns:
        A :class:`TrainingHistory` with one loss and one accuracy per step.

    Introduced in chapter 6.
    """
    check_module("model", model)
    inputs, targets = _check_inputs_and_targets(inputs, targets)
    steps = check_positive_int("steps", steps)
    batch_size = check_positive_int("batch_size", batch_size)
    seed = check_seed(seed)
    progress = check_bool("progress", progress)
    lr = check_positive_float("lr", lr)
    device = _model_device(model)
    optimizer = torch.optim.AdamW(
        model.parameters(),
        lr=lr,
        weight_decay=weight_decay,
    )
    loader = _batches(inputs, targets, batch_size, seed)
    history = TrainingHistory()
    model.train()
    bar = tqdm(
        total=steps,
        desc=desc,
        disable=not progress,
        leave=False,
        mininterval=0.5,
    )
    with bar:
        while len(history.losses) < steps:
            for batch_inputs, batch_targets in loader:
                batch_inputs = batch_inputs.to(device)
                batch_targets = batch_targets.to(device)
                logits = model(batch_inputs)  # (b, t, vocab)
                loss = F.cross_entropy(
                    logits.flatten(0, 1),  # (b * t, vocab)
                    batch_targets.flatten(),  # (b * t,)
                    ignore_index=IGNORE_INDEX,
                )
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                history.losses.append(loss.item())
                accuracy = _accuracy(logits.detach(), batch_targets)
                history.accuracies.append(accuracy)
                bar.update(1)
                shown = f"{history.losses[-1]:.3f}"
                bar.set_postfix(loss=shown, refresh=False)
                if len(history.losses) == steps:
                    break
    model.eval()
    return history


def _accuracy(logits: torch.Tensor, targets: torch.Tensor) -> float:
    scored = targets != IGNORE_INDEX  # (b, t)
    if not scored.any():
        return float("nan")
    correct = (logits.argmax(dim=-1) == targets) & scored  # (b, t)
    return correct.sum().item() / scored.sum().item()


@torch.no_grad()
def evaluate(
    model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, batch_size: int = 1024
) -> float:
    """Return the accuracy of ``model`` on the scored positions of ``(inputs, targets)``.

    The model is put in evaluation mode (no dropout) and run without gradients on its own
    device. Only positions whose target is not :data:`IGNORE_INDEX` count.

    Args:
        model: a module mapping ``(b, t)`` token ids to ``(b, t, vocab)`` logits.
        inputs: ``(b, t)`` token ids, e.g. held-out sequences.
        targets: ``(b, t)`` targets or :data:`IGNORE_INDEX`.
        batch_size: sequences per forward pass.

    Returns:
        The fraction of scored positions predicted correctly, in [0, 1].

    Introduced in chapter 6.
    """
    inputs, targets = _check_inputs_and_targets(inputs, targets)
    batch_size = check_positive_int("batch_size", batch_size)
    device = _model_device(model)
    model.eval()
    correct = 0
    scored: float = 0  # a count, but Tensor.item() is typed int | float
    for start in range(0, inputs.shape[0], batch_size):
        batch_inputs = inputs[start : start + batch_size].to(device)
        batch_targets = targets[start : start + batch_size].to(device)
        predictions = model(batch_inputs).argmax(dim=-1)  # (b, t)
        mask = batch_targets != IGNORE_INDEX  # (b, t)
        correct += ((predictions == batch_targets) & mask).sum().item()
        scored += mask.sum().item()
    if scored == 0:
        raise ValueError("targets: expected at least one scored position, got none")
    return correct / scored
