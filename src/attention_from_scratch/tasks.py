"""Chapter 6: two synthetic tasks that need attention.

The tasks are generated from a seed, so every run sees the same sequences, and a held-out set
is simply the same generator with another seed. Targets that no model could predict are set
to :data:`IGNORE_INDEX`, which ``torch.nn.functional.cross_entropy`` skips and which the
accuracy of :func:`~attention_from_scratch.evaluate` leaves out.

Dimension names used here: ``b`` batch, ``t`` tokens, ``vocab`` vocabulary size (written
out, since ``V`` is the value matrix), ``n`` the period of a repeated segment.
"""

from __future__ import annotations

import torch

from ._checks import check_positive_int, check_seed

#: The target value of positions that are not scored (the default ``ignore_index`` of
#: ``torch.nn.functional.cross_entropy``).
IGNORE_INDEX = -100


def k_back_task(
    num_sequences: int, num_tokens: int, vocab_size: int, k: int, *, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random sequences whose target at position ``i`` is the input token at ``i - k``.

    The task needs order: the set of tokens seen so far is the same whatever their order, so a
    model that cannot tell positions apart can only guess. The first ``k`` positions have no
    token ``k`` places back and are set to :data:`IGNORE_INDEX`.

    Args:
        num_sequences: the number of sequences ``b``.
        num_tokens: the length ``t`` of each sequence; must be greater than ``k``.
        vocab_size: the number of token ids, ``vocab``; tokens are drawn uniformly from
            ``0, ..., vocab - 1``.
        k: how many places back the answer is (at least 1).
        seed: seeds a ``torch.Generator``: the same seed gives the same sequences; use another
            seed for held-out data.

    Returns:
        ``(inputs, targets)``, two ``torch.long`` tensors of shape ``(b, t)``.

    Introduced in chapter 6.
    """
    num_sequences = check_positive_int("num_sequences", num_sequences)
    num_tokens = check_positive_int("num_tokens", num_tokens)
    vocab_size = check_positive_int("vocab_size", vocab_size)
    k = check_positive_int("k", k)
    seed = check_seed(seed)
    if k >= num_tokens:
        raise ValueError(f"k: expected fewer places back than num_tokens={num_tokens}, got k={k}")
    generator = torch.Generator().manual_seed(seed)
    inputs = torch.randint(vocab_size, (num_sequences, num_tokens), generator=generator)
    targets = torch.full_like(inputs, IGNORE_INDEX)  # (b, t)
    targets[:, k:] = inputs[:, :-k]
    return inputs, targets


def induction_task(
    num_sequences: int,
    num_tokens: int,
    vocab_size: int,
    *,
    min_period: int,
    max_period: int,
    seed: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random segments followed by their repeat, for next-token prediction.

    Each sequence is a segment of ``n`` distinct random tokens, repeated until the sequence is
    full; ``n`` is drawn for each sequence between ``min_period`` and ``max_period``. The model
    predicts the next token at every position. Within the first copy the next token is random
    (the target is :data:`IGNORE_INDEX`); from position ``n`` on it is predictable by looking
    back: find the earlier copy of the current token and read the token that followed it. The
    tokens of a segment are distinct, so every earlier copy points to the same answer. As
    ``n`` varies, no fixed offset ("the token n - 1 places back") solves the task.

    Args:
        num_sequences: the number of sequences ``b``.
        num_tokens: the number of input tokens ``t``; must be greater than ``max_period``.
        vocab_size: the number of token ids, ``vocab``.
        min_period: the shortest segment, at least 2.
        max_period: the longest segment, at most ``vocab_size``.
        seed: seeds a ``torch.Generator``; use another seed for held-out data.

    Returns:
        ``(inputs, targets)``, two ``torch.long`` tensors of shape ``(b, t)``;
        ``targets[:, i]`` is the token after ``inputs[:, i]``, or :data:`IGNORE_INDEX` where
        ``i < n``.

    Introduced in chapter 6.
    """
    num_sequences = check_positive_int("num_sequences", num_sequences)
    num_tokens = check_positive_int("num_tokens", num_tokens)
    vocab_size = check_positive_int("vocab_size", vocab_size)
    min_period = check_positive_int("min_period", min_period)
    max_period = check_positive_int("max_period", max_period)
    seed = check_seed(seed)
    if min_period < 2:
        raise ValueError(f"min_period: expected at least 2, got {min_period}")
    if max_period < min_period:
        raise ValueError(f"max_period: expected at least min_period={min_period}, got {max_period}")
    if max_period > vocab_size:
        raise ValueError(
            f"max_period: expected at most vocab_size={vocab_size} (a segment has distinct "
            f"tokens), got {max_period}"
        )
    if max_period >= num_tokens:
        raise ValueError(
            f"max_period: expected fewer than num_tokens={num_tokens}, so that every "
            f"sequence has a predictable part, got {max_period}"
        )
    generator = torch.Generator().manual_seed(seed)
    # A random permutation of the vocabulary per sequence; its first n entries are distinct.
    order = torch.rand(num_sequences, vocab_size, generator=generator).argsort(dim=1)  # (b, vocab)
    periods = torch.randint(
        min_period, max_period + 1, (num_sequences, 1), generator=generator
    )  # (b, 1)
    positions = torch.arange(num_tokens + 1)  # t + 1 tokens: inputs and the last target
    sequence = order.gather(1, positions % periods)  # (b, t + 1)
    inputs = sequence[:, :-1].clone()  # (b, t)
    targets = sequence[:, 1:].clone()  # (b, t)
    targets[positions[:-1] < periods] = IGNORE_INDEX
    return inputs, targets
