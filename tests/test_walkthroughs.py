"""What the chapters say about the package code they show: every span a walkthrough quotes is
in the code it walks through, or is explained by the page or by a module the reader knows
(the rules are in walkthroughs.py). The spans are read from the pages, so a change of the
package that removes a line a page walks through fails here."""

from __future__ import annotations

import pytest
from walkthroughs import (
    SHOW,
    cells_of,
    chapters_that_show_source,
    defined_by,
    shown_runs,
    source_of,
    unexplained,
    walkthroughs,
)

import attention_from_scratch as afs

# The runs of show_source cells that no text walks through, and what follows them instead.
# Any other run must be followed by its walkthrough: a code cell or a heading slipped in
# between would leave its text unchecked.
NOT_WALKED_THROUGH = {
    "02:SelfAttentionV2.__init__": "a code cell checks what the text says of it",
    "04:split_heads+merge_heads": "a code cell runs them against the page's steps",
    "05:Layout+describe_layout+shares_storage": "the sections that follow use them",
}

WALKTHROUGHS = walkthroughs()


def test_every_show_source_cell_is_one_the_checker_reads() -> None:
    # A cell of another form (two calls, an expression around the call) would show code whose
    # walkthrough nobody checks.
    for chapter in chapters_that_show_source():
        calls = [
            source_of(cell)
            for cell in cells_of(chapter)
            if cell["cell_type"] == "code" and "show_source(" in source_of(cell)
        ]
        assert calls, chapter
        assert [call for call in calls if not SHOW.fullmatch(call)] == [], chapter


def test_every_run_of_shown_code_is_walked_through_or_listed() -> None:
    runs = [run for chapter in chapters_that_show_source() for run in shown_runs(chapter)]
    assert {run.id for run in runs if not run.text.strip()} == set(NOT_WALKED_THROUGH)
    assert {run.id for run in WALKTHROUGHS} == {run.id for run in runs} - set(NOT_WALKED_THROUGH)
    assert set(chapters_that_show_source()) == {
        "01_simplified_attention",
        "02_trainable_qkv",
        "03_causal_attention",
        "04_multi_head_attention",
        "05_tensor_layout",
        "06_attention_that_learns",
        "07_attention_at_scale",
        "08_fused_attention",
    }


@pytest.mark.parametrize("run", WALKTHROUGHS, ids=[run.id for run in WALKTHROUGHS])
def test_every_span_a_walkthrough_quotes_is_in_the_code_it_walks_through(run) -> None:
    assert unexplained(run.objects, run.text, run.defined) == []


def spans(objects: tuple[object, ...], text: str, defined: frozenset[str] = frozenset()):
    return [span for span, _ in unexplained(objects, text, defined)]


def test_a_walkthrough_quoting_code_the_shown_code_lacks_fails() -> None:
    text = "`forward` calls `_check_padding_mask(mask)`; `hidden = None`; `self.mask[:t]`."
    assert spans((afs.CachedAttention,), text) == [
        "_check_padding_mask(mask)",
        "hidden = None",
        "self.mask[:t]",
    ]
    # Statements, annotations and starred parameters are code too.
    text = "`del weights`, `mask: torch.BoolTensor`, `*args`; but `del scores` is there."
    assert spans((afs.attention,), text) == ["del weights", "mask: torch.BoolTensor", "*args"]
    # A keyword or a call that holds code is checked as code too.
    text = "`max_tokens=self.max_length`, `check_tensor(..., max_tokens=self.context_length, ...)`"
    assert spans((afs.CausalAttention,), text) == ["max_tokens=self.max_length"]
    # "..." stands for what the page leaves out, and nothing else does.
    text = "`s = past + t`, `self.mask[past:s, :s]`, `hidden & ~empty`, `self.mask[...]`"
    assert spans((afs.CachedAttention,), text) == []


def test_a_walkthrough_naming_what_the_code_lacks_fails() -> None:
    text = "`forward` runs `block(x, return_weights)`, then `pack_linear` and `rotate_half(x)`."
    assert spans((afs.TinyCausalModel,), text) == ["pack_linear", "rotate_half(x)"]
    # A call of the shown code is quoted as written: block is called with (x, return_weights).
    assert spans((afs.TinyCausalModel,), "`block(i, x)`") == ["block(i, x)"]
    # A call of a name known elsewhere counts as its name; so does a call of no arguments.
    text = "`print(model)`, `causal_mask(t)`, `key_value_size()`, `super().project(x, offset)`"
    assert spans((afs.RotaryMultiHeadAttention,), text) == []


def test_names_of_the_page_count_only_where_it_defines_them_at_the_top() -> None:
    cells = [
        {
            "cell_type": "code",
            "source": ["def helper(x):\n", "    local_total = x\n", "outer = 2\n"],
        },
        {"cell_type": "markdown", "source": ["`nowhere = 3`\n"]},
    ]
    assert defined_by(cells) == {"helper", "outer"}
    text = "`helper`, `outer`, `local_total`, `nowhere`"
    assert spans((afs.KVCache,), text, defined_by(cells)) == ["local_total", "nowhere"]


def test_a_keyword_must_belong_to_the_code_or_a_function_the_text_names() -> None:
    assert spans((afs.attention,), "`dropout_p=0.0` and `p_drop=0.1`") == ["p_drop=0.1"]
    # enable_gqa is a parameter of head_attention, which the text names; not of KVCache.
    assert spans((afs.KVCache,), "`enable_gqa=True`") == ["enable_gqa=True"]
    assert spans((afs.KVCache,), "`head_attention` with `enable_gqa=True`") == []
    assert spans((afs.KVCache,), "`head_attention` with `use_gqa=True`") == ["use_gqa=True"]


def test_a_name_reached_through_torch_must_exist() -> None:
    text = "`torch.triu(ones, 1)`, `nn.Dropout`, `F.dropout`, `@torch.no_grad()`, `torch.bool`"
    assert spans((afs.KVCache,), text) == []
    assert spans((afs.KVCache,), "`torch.trilu(ones)`, `nn.Droput`") == [
        "torch.trilu(ones)",
        "nn.Droput",
    ]


def test_roles_are_not_code_and_a_span_may_break_across_lines() -> None:
    assert spans((afs.KVCache,), "{cite}`vaswani2017attention`, {doc}`notation`") == []
    assert spans((afs.KVCache,), "`vaswani2017attention`") == ["vaswani2017attention"]
    # The backticks pair in order: a span broken over two lines does not shift the others.
    text = "`self.cached is\nNone` and `no_such_name`, then `length`"
    assert spans((afs.KVCache,), text) == ["self.cached is None", "no_such_name"]


def test_a_walkthrough_ends_at_a_heading_and_a_run_is_read_whole() -> None:
    code = [
        {"cell_type": "code", "source": ["show_source(KVCache, docstrings=False)"]},
        {"cell_type": "code", "source": ["show_source(CachedAttention, docstrings=False)"]},
    ]
    cells = [*code, {"cell_type": "markdown", "source": ["`append`\n", "\n", "## Next\n", "`x`"]}]
    (run,) = shown_runs("synthetic", cells)
    assert run.objects == (afs.KVCache, afs.CachedAttention) and run.text == "`append`\n\n"
    opening = [*code, {"cell_type": "markdown", "source": ["## `view`\n", "`view` ..."]}]
    assert [run.text for run in shown_runs("synthetic", opening)] == [""]
    assert [run.text for run in shown_runs("synthetic", [*code, code[0]])] == [""]
