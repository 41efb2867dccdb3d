"""show_source: the chapters display the package's own code, read from the installed files."""

from __future__ import annotations

import inspect

import pytest

from attention_from_scratch import CausalAttention, SelfAttentionV1, generate, show_source
from attention_from_scratch.simplified import softmax_naive


def test_class_source_is_the_file_text() -> None:
    shown = show_source(SelfAttentionV1)
    assert str(shown).startswith("class SelfAttentionV1(nn.Module):")
    assert str(shown) == inspect.getsource(SelfAttentionV1).rstrip("\n")
    assert shown.where.startswith("attention_from_scratch/trainable.py, lines ")


def test_markdown_is_a_python_block_with_its_location() -> None:
    markdown = show_source(softmax_naive)._repr_markdown_()
    lines = markdown.split("\n")
    assert lines[0] == "```python"
    assert lines[1].startswith("# attention_from_scratch/simplified.py, lines ")
    assert lines[2].startswith("def softmax_naive(")
    assert lines[-2] == "```"


def test_line_range_matches_the_file() -> None:
    shown = show_source(CausalAttention)
    first, last = (int(n) for n in shown.where.rsplit(" ", 1)[1].split("-"))
    _, start = inspect.getsourcelines(CausalAttention)
    assert first == start
    assert last - first + 1 == len(str(shown).split("\n"))


def test_docstrings_can_be_left_out() -> None:
    with_docs = str(show_source(CausalAttention))
    without = str(show_source(CausalAttention, docstrings=False))
    assert CausalAttention.__doc__ is not None
    first_doc_line = CausalAttention.__doc__.strip().split("\n")[0]
    assert first_doc_line in with_docs
    assert first_doc_line not in without
    assert '"""' not in without
    assert "def forward(" in without
    assert without.split("\n")[1].strip() != "", "a blank line where the docstring was"
    assert len(without.split("\n")) < len(with_docs.split("\n"))
    # The header's range is the file's: a shorter block says why it is shorter.
    assert show_source(CausalAttention, docstrings=False).where.endswith(", docstrings left out")
    assert not show_source(CausalAttention).where.endswith("left out")


def test_a_bound_method_shows_its_function() -> None:
    module = SelfAttentionV1(3, 2)
    assert str(show_source(module.forward)).startswith("def forward(")


def test_a_decorated_function_shows_its_own_file() -> None:
    # generate is wrapped by @torch.no_grad(), whose wrapper lives in torch's files.
    shown = show_source(generate)
    assert str(shown).startswith("@torch.no_grad()\ndef generate(")
    assert shown.where.startswith("attention_from_scratch/generation.py, lines ")


def test_fence_outlasts_backticks_in_the_code() -> None:
    from attention_from_scratch.source import SourceCode

    markdown = SourceCode('x = "````"', "somewhere, lines 1-1")._repr_markdown_()
    assert markdown.startswith("`````python\n")
    assert markdown.rstrip("\n").endswith("\n`````")


@pytest.mark.parametrize("bad", [3, "CausalAttention", None, SelfAttentionV1(3, 2)])
def test_refuses_what_has_no_source(bad: object) -> None:
    with pytest.raises(TypeError, match="obj: expected a class, function or method, got"):
        show_source(bad)


def test_refuses_builtins_with_a_clear_error() -> None:
    with pytest.raises(ValueError, match="obj: expected a class or function defined in a"):
        show_source(len.__class__)


def test_docstrings_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="docstrings: expected a bool, got str"):
        show_source(softmax_naive, docstrings="no")  # type: ignore[arg-type]


def test_a_triton_kernel_shows_the_function_it_compiles() -> None:
    pytest.importorskip("triton", reason="Triton is optional: it has no wheel for this platform")
    from attention_from_scratch import fused

    shown = show_source(fused._forward_kernel, docstrings=False)
    assert str(shown).startswith("@_jit\ndef _forward_kernel(")
    assert shown.where.startswith("attention_from_scratch/fused.py, lines ")
    # An object of Triton's that is not a kernel is refused as any other object is.
    import triton.language as tl

    with pytest.raises(TypeError, match="obj: expected a class, function or method, got"):
        show_source(tl.constexpr(3))
