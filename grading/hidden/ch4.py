"""Hidden checks of chapter 4: loaded by the grader, never shipped to students.

They call the learners' functions on other sizes and edge cases than the public checks, and
refuse the package's split_heads and merge_heads, which the public checks cannot import.
"""

from __future__ import annotations

from attention_from_scratch import merge_heads, split_heads
from attention_from_scratch.exercises import get_exercise
from attention_from_scratch.exercises.ch4 import (
    count_matches,
    one_head_agrees,
    permutation_holds,
    refuses_with_a_clear_error,
    splits_like_the_definition,
)

one_head = get_exercise("ch4-ex-one-head")
count_parameters = get_exercise("ch4-ex-count-parameters")
divisible = get_exercise("ch4-ex-divisible")
permute_heads = get_exercise("ch4-ex-permute-heads")


@one_head.check(
    points=1,
    hint="Modules with query, key and value biases, other sizes and a dropout rate: every "
    "weight, every bias and every setting must carry over, in training mode too.",
    hidden=True,
)
def one_head_with_biases(as_causal_and_linear):
    one_head_agrees(as_causal_and_linear, d_in=4, d_out=10, qkv_bias=True, seed=51)
    one_head_agrees(
        as_causal_and_linear, d_in=9, d_out=3, qkv_bias=True, seed=52, context_length=11
    )
    one_head_agrees(as_causal_and_linear, d_in=5, d_out=6, qkv_bias=False, seed=53, dropout=0.3)


@count_parameters.check(
    points=1,
    hint="The count must hold for any sizes: d_in != d_out, one head, as many heads as "
    "outputs, with and without biases.",
    hidden=True,
)
def count_on_other_sizes(parameter_count):
    count_matches(
        parameter_count,
        [(64, 96, 8, True), (13, 26, 13, False), (768, 768, 12, True), (2, 1, 1, False)],
    )


@divisible.check(
    points=1,
    hint="Split any (b, t, d_out) by any head count that divides it (one head, one number "
    "per head), on your own: the package's split_heads does not count.",
    hidden=True,
)
def split_other_sizes_by_hand(split_into_heads):
    refused = (split_heads, merge_heads)
    for b, t, d_out, h in [(1, 9, 6, 2), (3, 4, 8, 8), (2, 1, 5, 1), (2, 6, 12, 4)]:
        splits_like_the_definition(split_into_heads, b, t, d_out, h, seed=61, refused=refused)
    refuses_with_a_clear_error(split_into_heads, d_out=9, h=6, refused=refused)
    refuses_with_a_clear_error(split_into_heads, d_out=7, h=2, refused=refused)


@permute_heads.check(
    points=1,
    hint="Other sizes and permutations, and a module without query, key and value biases "
    "(its biases are None).",
    hidden=True,
)
def permute_other_modules(permute_heads):
    for part in ("heads", "output"):
        permutation_holds(permute_heads, 4, 9, 3, False, [2, 1, 0], seed=71, part=part)
        permutation_holds(permute_heads, 6, 12, 6, True, [5, 2, 4, 0, 3, 1], seed=72, part=part)
