"""`refusing`: an answer that calls what its exercise asks the learner to write is refused."""

from __future__ import annotations

import contextlib
import sys

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attention_from_scratch import MultiHeadAttention, merge_heads
from attention_from_scratch.exercises import (
    Exercise,
    ShortcutTaken,
    call_refusing,
    refusing,
    run_checks,
)

SOFTMAXES = (torch.softmax, torch.Tensor.softmax, F.softmax)


def by_hand(x: torch.Tensor) -> torch.Tensor:
    e = (x - x.amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)


@pytest.mark.parametrize(
    ("answer", "called"),
    [
        (lambda x: torch.softmax(x, -1), "torch.softmax"),
        (lambda x: x.softmax(-1), "Tensor.softmax"),
        (lambda x: F.softmax(x, -1), "torch.nn.functional.softmax"),
        (lambda x: nn.Softmax(-1)(x), "torch.nn.functional.softmax"),
    ],
)
def test_every_alias_of_a_refused_torch_function_is_caught(answer, called: str) -> None:
    x = torch.randn(2, 5)
    with (
        pytest.raises(ShortcutTaken, match=f"write softmax yourself.*called {called}$"),
        refusing(*SOFTMAXES, write="softmax"),
    ):
        answer(x)


def test_an_answer_written_by_hand_runs_and_the_hooks_are_removed() -> None:
    before = sys.getprofile()
    x = torch.randn(2, 5)
    with refusing(*SOFTMAXES, merge_heads, write="softmax"):
        y = by_hand(x)
    assert torch.allclose(y, torch.softmax(x, -1))
    assert sys.getprofile() is before
    torch.softmax(x, -1)  # no longer refused


class Renamed(MultiHeadAttention):
    """A subclass: its forward is the course's, under another name."""


@pytest.mark.parametrize(
    "answer",
    [
        lambda: merge_heads(torch.randn(1, 2, 3, 4)),
        lambda: MultiHeadAttention(4, 4, 3, 0.0, 2)(torch.randn(1, 3, 4)),
        lambda: Renamed(4, 4, 3, 0.0, 2)(torch.randn(1, 3, 4)),
    ],
)
def test_package_functions_and_classes_are_refused_however_reached(answer) -> None:
    with (
        pytest.raises(ShortcutTaken, match="attention_from_scratch"),
        refusing(merge_heads, MultiHeadAttention, write="multi-head attention"),
    ):
        answer()


def test_a_shortcut_fails_the_check_with_a_reason_that_names_it() -> None:
    exercise = Exercise("ch0-ex-refused", chapter=0)

    @exercise.check(points=1, hint="Exponentiate, then divide by the row's sum.")
    def rows_sum_to_one(softmax):
        x = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
        expected = torch.softmax(x, -1)
        with refusing(*SOFTMAXES, write="softmax"):
            answer = softmax(x)
        assert torch.allclose(answer, expected)

    lazy = run_checks("ch0-ex-refused", {"softmax": lambda s: s.softmax(-1)})
    assert not lazy.passed
    assert "ShortcutTaken" in lazy.checks[0].reason
    assert "Tensor.softmax" in lazy.checks[0].reason
    assert run_checks("ch0-ex-refused", {"softmax": by_hand}).passed


@pytest.mark.parametrize(("shortcuts", "write"), [((1,), "x"), ((torch.softmax,), " ")])
def test_bad_arguments_are_refused_by_name(shortcuts, write) -> None:
    with pytest.raises(TypeError, match=r"shortcuts|write"), refusing(*shortcuts, write=write):
        pass


@pytest.mark.parametrize(
    "escape",
    [
        "catch",  # call, catch the refusal, call again
        "setprofile",  # remove the hook, then call
        "disable",  # leave torch's function modes, then call
        "thread",  # call from another thread
        "heap",  # find the refusals' state through the garbage collector, disarm it
    ],
)
def test_an_answer_that_dodges_the_refusal_still_fails(escape: str) -> None:
    import threading

    x = torch.randn(2, 5)

    def answer() -> torch.Tensor:
        if escape == "catch":
            try:
                return torch.softmax(x, -1)
            except ShortcutTaken:
                return torch.softmax(x, -1)
        if escape == "setprofile":
            before = sys.getprofile()
            sys.setprofile(None)
            try:
                return torch.softmax(x, -1)
            finally:
                sys.setprofile(before)
        if escape == "disable":
            with torch._C.DisableTorchFunction():
                return torch.softmax(x, -1)
        if escape == "heap":
            import gc

            for found in gc.get_objects():
                if type(found).__name__ == "_Refusals":
                    found.armed = False
            return torch.softmax(x, -1)
        out = []
        thread = threading.Thread(target=lambda: out.append(torch.softmax(x, -1)))
        thread.start()
        thread.join()
        return out[0]

    before = sys.getprofile()
    enabled = torch._C._is_torch_function_enabled()
    # An answer may swallow the exception: leaving the block still fails.
    with (
        pytest.raises(ShortcutTaken),
        refusing(*SOFTMAXES, write="softmax"),
        contextlib.suppress(ShortcutTaken),
    ):
        answer()
    assert sys.getprofile() is before
    assert torch._C._is_torch_function_enabled() == enabled  # torch is left as it was


def test_a_function_can_be_refused_by_its_full_name_without_importing_it() -> None:
    name = "attention_from_scratch.layout.merge_heads"
    with pytest.raises(ShortcutTaken, match=f"called {name}$"), refusing(write="it", named=[name]):
        merge_heads(torch.randn(1, 2, 3, 4))
    with refusing(write="it", named=["attention_from_scratch.layout.split_heads"]):
        merge_heads(torch.randn(1, 2, 3, 4))  # another name: allowed


def test_refusing_a_decorated_function_refuses_it_alone() -> None:
    # Both are wrapped by @torch.no_grad(), whose wrapper code they share.
    @torch.no_grad()
    def refused(x: torch.Tensor) -> torch.Tensor:
        return x + 1

    @torch.no_grad()
    def allowed(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    x = torch.ones(2)
    with refusing(refused, write="it"):
        assert torch.equal(allowed(x), 2 * x)
    with pytest.raises(ShortcutTaken, match="refused"), refusing(refused, write="it"):
        refused(x)


def test_torch_functions_switched_off_before_the_check_fail_it() -> None:
    switch = torch._C.DisableTorchFunction()
    switch.__enter__()  # as an earlier cell of a notebook could
    try:
        with (
            pytest.raises(ShortcutTaken, match="still in force"),
            refusing(*SOFTMAXES, write="softmax"),
        ):
            torch.softmax(torch.ones(2), -1)
    finally:
        switch.__exit__(None, None, None)


# ------------------------------------------------- call_refusing: how every check calls an answer


class Later(torch.Tensor):
    """A tensor subclass: it could compute its values when the check reads them."""


class AnyInt(int):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = int.__hash__


def test_call_refusing_returns_a_plain_answer_and_refuses_a_shortcut() -> None:
    x = torch.randn(2, 3)
    assert torch.equal(call_refusing(by_hand, x, shortcuts=SOFTMAXES, write="softmax"), by_hand(x))
    assert call_refusing(lambda: (1, [2]), write="x") == (1, [2])
    with pytest.raises(ShortcutTaken, match=r"torch\.softmax"):
        call_refusing(lambda s: torch.softmax(s, -1), x, shortcuts=SOFTMAXES, write="softmax")


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (lambda: torch.zeros(2).as_subclass(Later), "subclass Later"),
        (lambda: (torch.zeros(2), torch.zeros(2).as_subclass(Later)), "subclass Later"),
        (lambda: AnyInt(0), "subclass AnyInt"),
        (lambda: [AnyInt(0)], "subclass AnyInt"),
        (lambda: type("Anything", (list,), {})(), "subclass Anything"),
        (3, "must be a function"),
    ],
)
def test_call_refusing_fails_an_answer_that_is_not_plain(answer, reason: str) -> None:
    with pytest.raises(AssertionError, match=reason):
        call_refusing(answer, write="x")


def test_call_refusing_fails_when_a_torch_mode_is_on_before_or_after() -> None:
    class Mode(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with Mode(), pytest.raises(AssertionError, match="switched on in the notebook"):
        call_refusing(lambda: 1, write="x")
    left = Mode()

    def leaves_a_mode_on() -> int:
        left.__enter__()
        return 1

    try:
        with pytest.raises(AssertionError, match="left a torch mode switched on"):
            call_refusing(leaves_a_mode_on, write="x")
    finally:
        left.__exit__(None, None, None)
