"""The public API: every exported object is documented and says which chapter introduces it."""

from __future__ import annotations

import inspect

import pytest

import attention_from_scratch as afs

# Plain data has no docstring of its own; it is documented where it is defined.
DATA = {"TOY_TOKENS"}
PUBLIC = sorted(set(afs.__all__) - DATA)


def test_all_names_exist() -> None:
    for name in afs.__all__:
        assert getattr(afs, name) is not None


@pytest.mark.parametrize("name", PUBLIC)
def test_documented_with_its_chapter(name: str) -> None:
    doc = inspect.getdoc(getattr(afs, name)) or ""
    assert len(doc) > 40, f"{name} needs a docstring"
    assert "chapter" in doc.lower(), f"{name}'s docstring should name its chapter"


@pytest.mark.parametrize(
    "name",
    [n for n in PUBLIC if inspect.isfunction(getattr(afs, n)) or inspect.isclass(getattr(afs, n))],
)
def test_every_argument_is_described(name: str) -> None:
    obj = getattr(afs, name)
    if inspect.isclass(obj) and issubclass(obj, Exception):
        return
    doc = inspect.getdoc(obj) or ""
    target = obj.__init__ if inspect.isclass(obj) else obj
    parameters = [p for p in inspect.signature(target).parameters if p not in {"self"}]
    for parameter in parameters:
        assert f"{parameter}:" in doc, f"{name}: argument {parameter!r} is not described"


def test_toy_tokens_match_the_toy_sentence() -> None:
    tokens, _ = afs.toy_sentence()
    assert (
        tuple(tokens)
        == afs.TOY_TOKENS
        == (
            "Your",
            "journey",
            "starts",
            "with",
            "one",
            "step",
        )
    )
