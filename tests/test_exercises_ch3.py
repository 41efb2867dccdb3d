"""The exercises of chapter 3: a student's correct answers earn every point, lazy ones don't.

The correct answers are written here as a student would write them, without the package;
the expectations are the grader's own points and the reasons its checks give.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from attention_from_scratch import attention, causal_mask
from attention_from_scratch.exercises import load_hidden, run_checks

ROOT = Path(__file__).resolve().parent.parent
load_hidden(ROOT / "grading" / "hidden", chapters=[3])


# ------------------------------------------------------------------ correct answers


def window_mask(t, window):
    i = torch.arange(t).view(-1, 1)  # (t, 1) queries
    j = torch.arange(t).view(1, -1)  # (1, t) keys
    return (j > i) | (i - j > window)  # (t, t)


def window_attention(scores, window):
    hide = window_mask(scores.shape[-1], window).to(scores.device)
    return torch.softmax(scores.masked_fill(hide, float("-inf")), dim=-1)


def renormalise_then_drop(masked, keep):
    return masked / masked.sum(dim=-1, keepdim=True) * keep


def drop_then_renormalise(masked, keep):
    dropped = masked * keep
    return dropped / dropped.sum(dim=-1, keepdim=True)


def masked_softmax(scores, hide):
    filled = scores.masked_fill(hide, float("-inf"))
    top = filled.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    exp = torch.exp(filled - top)  # hidden keys: exp(-inf) = 0
    total = exp.sum(dim=-1, keepdim=True)
    return exp / torch.where(total == 0, torch.ones_like(total), total)


def my_dropout(x, p, generator):
    keep = torch.rand(x.shape, generator=generator) >= p
    return torch.where(keep.to(x.device), x / (1 - p), torch.zeros_like(x))


def changed_rows(module, x, position):
    edited = x.clone()
    edited[:, position] = edited[:, position] + 1.0
    with torch.no_grad():
        change = (module(edited) - module(x)).abs().amax(dim=(0, 2))  # (t,)
    return [i for i in range(x.shape[1]) if change[i] > 1e-7]


def is_causal(module, x):
    t = x.shape[1]
    return all(min(changed_rows(module, x, p)) >= p for p in range(t))


CORRECT = {
    "ch3-ex-sliding-window": {"window_mask": window_mask, "window_attention": window_attention},
    "ch3-ex-dropout-order": {
        "renormalise_then_drop": renormalise_then_drop,
        "drop_then_renormalise": drop_then_renormalise,
    },
    "ch3-ex-all-masked": {"masked_softmax": masked_softmax},
    "ch3-ex-dropout-rate": {"my_dropout": my_dropout},
    "ch3-ex-causality-test": {"changed_rows": changed_rows, "is_causal": is_causal},
}


def grade(label: str, namespace: dict):
    return run_checks(label, namespace, hidden=True)


def reasons(result) -> str:
    return " | ".join(f"{c.name}: {c.reason} {c.hint}" for c in result.checks if not c.passed)


def test_correct_answers_earn_full_marks() -> None:
    for label, namespace in CORRECT.items():
        result = grade(label, namespace)
        assert result.earned == result.possible > 0, (label, reasons(result))
        assert len(result.checks) >= 2, label


def test_every_auto_graded_exercise_has_hidden_checks() -> None:
    for label, namespace in CORRECT.items():
        result = grade(label, namespace)
        public = run_checks(label, namespace, hidden=False)
        assert result.possible > public.possible, label


# ------------------------------------------------------------------ lazy answers


def failing(label: str, namespace: dict) -> str:
    result = grade(label, {**CORRECT[label], **namespace})
    assert result.earned < result.possible, label
    return reasons(result)


def test_the_window_mask_is_not_the_page_value_nor_the_package() -> None:
    page = window_mask(6, 2)  # the (6, 6) mask the page could print
    assert "shape" in failing("ch3-ex-sliding-window", {"window_mask": lambda t, w: page})
    delegated = failing(
        "ch3-ex-sliding-window",
        {"window_mask": lambda t, w: causal_mask(t) | window_mask(t, w)},
    )
    assert "causal_mask" in delegated and "yourself" in delegated
    causal_only = failing(
        "ch3-ex-sliding-window",
        {"window_mask": lambda t, w: torch.triu(torch.ones(t, t, dtype=torch.bool), 1)},
    )
    assert "far past is not hidden" in causal_only
    inverted = failing("ch3-ex-sliding-window", {"window_mask": lambda t, w: ~window_mask(t, w)})
    assert "inverted" in inverted


def test_window_attention_must_mask_before_the_softmax() -> None:
    def after(scores, window):
        return torch.softmax(scores, dim=-1) * ~window_mask(scores.shape[-1], window)

    assert "after the softmax" in failing("ch3-ex-sliding-window", {"window_attention": after})
    fixed = failing(
        "ch3-ex-sliding-window",
        {"window_attention": lambda s, w: window_attention(s, 2)},  # the page's window
    )
    assert "wrong weights" in fixed


def test_window_mask_edges_are_hidden_checks() -> None:
    def no_edges(t, window):  # right for 1 <= window < t - 1 only
        if window == 0 or window >= t - 1:
            return torch.zeros(t, t, dtype=torch.bool)
        return window_mask(t, window)

    public = run_checks(
        "ch3-ex-sliding-window", {**CORRECT["ch3-ex-sliding-window"], "window_mask": no_edges}
    )
    assert public.passed
    assert "window_edges" in failing("ch3-ex-sliding-window", {"window_mask": no_edges})


def test_dropout_order_swapped_or_without_keepdim() -> None:
    swapped = failing(
        "ch3-ex-dropout-order",
        {
            "renormalise_then_drop": drop_then_renormalise,
            "drop_then_renormalise": renormalise_then_drop,
        },
    )
    assert swapped.count("the other order") == 2
    flat = failing(
        "ch3-ex-dropout-order",
        {"renormalise_then_drop": lambda m, k: m / m.sum(dim=-1) * k},
    )
    assert "mind the shape of that sum" in flat


def test_dropout_order_page_values_do_not_pass() -> None:
    torch.manual_seed(123)
    page_keep = nn.Dropout(0.5)(torch.ones(6, 6))
    constant = failing(
        "ch3-ex-dropout-order",
        {"renormalise_then_drop": lambda m, k: torch.tril(torch.ones(6, 6)) * page_keep},
    )
    assert "renormalise_first" in constant


def test_a_hand_made_nan_free_row_does_not_pass() -> None:
    def torch_softmax(scores, hide):  # nan in the fully hidden rows
        return torch.softmax(scores.masked_fill(hide, float("-inf")), dim=-1)

    assert "not nan" in failing("ch3-ex-all-masked", {"masked_softmax": torch_softmax})

    def zero_filled(scores, hide):  # 0 instead of -inf: hidden keys keep weight
        return torch.softmax(scores.masked_fill(hide, 0.0), dim=-1)

    assert "filled with 0" in failing("ch3-ex-all-masked", {"masked_softmax": zero_filled})
    page_row = torch.full((2, 5, 6), float("nan"))
    page_row[..., 1:, :] = 1 / 6
    assert failing("ch3-ex-all-masked", {"masked_softmax": lambda s, h: page_row})


def test_masked_softmax_must_be_stable() -> None:
    def naive(scores, hide):
        exp = torch.exp(scores) * ~hide
        total = exp.sum(dim=-1, keepdim=True)
        return exp / torch.where(total == 0, torch.ones_like(total), total)

    public = run_checks("ch3-ex-all-masked", {"masked_softmax": naive})
    assert public.passed
    assert "huge_scores" in failing("ch3-ex-all-masked", {"masked_softmax": naive})


def test_dropout_cannot_be_delegated_nor_faked() -> None:
    def delegated(x, p, generator):
        return nn.Dropout(p)(x)

    assert "yourself" in failing("ch3-ex-dropout-rate", {"my_dropout": delegated})

    def unscaled(x, p, generator):
        return x * (torch.rand(x.shape, generator=generator) >= p)

    assert "not scaled" in failing("ch3-ex-dropout-rate", {"my_dropout": unscaled})

    def inverted(x, p, generator):
        return x * (torch.rand(x.shape, generator=generator) < p) / (1 - p)

    assert "1 - p" in failing("ch3-ex-dropout-rate", {"my_dropout": inverted})

    def global_rng(x, p, generator):
        return x * (torch.rand(x.shape) >= p) / (1 - p)

    assert "generator" in failing("ch3-ex-dropout-rate", {"my_dropout": global_rng})
    assert failing("ch3-ex-dropout-rate", {"my_dropout": lambda x, p, g: 0.3})


def test_the_causality_test_must_catch_a_leak() -> None:
    page = {5: [5], 0: [0, 1, 2, 3, 4, 5]}
    assert failing("ch3-ex-causality-test", {"changed_rows": lambda m, x, p: page[p]})

    def from_the_mask(module, x, position):  # trusts the module instead of testing it
        return list(range(position, x.shape[1]))

    assert "with no mask" in failing("ch3-ex-causality-test", {"changed_rows": from_the_mask})
    by_type = failing("ch3-ex-causality-test", {"is_causal": lambda m, x: hasattr(m, "mask")})
    assert "expected" in by_type
    ends_only = failing(
        "ch3-ex-causality-test",
        {"is_causal": lambda m, x: min(changed_rows(m, x, x.shape[1] - 1)) >= x.shape[1] - 1},
    )
    assert "catches_a_leak" in ends_only


def test_a_loose_tolerance_misses_the_small_leak() -> None:
    def loose(module, x, position):
        edited = x.clone()
        edited[:, position] += 1.0
        change = (module(edited) - module(x)).abs().amax(dim=(0, 2))
        return [i for i in range(x.shape[1]) if change[i] > 0.05]

    assert run_checks(
        "ch3-ex-causality-test", {**CORRECT["ch3-ex-causality-test"], "changed_rows": loose}
    ).passed
    assert "small_leak" in failing("ch3-ex-causality-test", {"changed_rows": loose})


def test_a_guarded_division_in_the_dropped_row_earns_full_marks() -> None:
    def guarded(masked, keep):  # 0, not nan, in a row that lost every visible weight
        dropped = masked * keep
        return dropped / (dropped.sum(dim=-1, keepdim=True) + 1e-12)

    def nan_to_zero(masked, keep):
        return drop_then_renormalise(masked, keep).nan_to_num(0.0)

    for answer in (guarded, nan_to_zero):
        namespace = {**CORRECT["ch3-ex-dropout-order"], "drop_then_renormalise": answer}
        result = grade("ch3-ex-dropout-order", namespace)
        assert result.earned == result.possible, reasons(result)

    def ones_in_empty_rows(masked, keep):  # neither nan nor 0 where the row lost everything
        return drop_then_renormalise(masked, keep).nan_to_num(1.0)

    empty = failing("ch3-ex-dropout-order", {"drop_then_renormalise": ones_in_empty_rows})
    assert "0 / 0" in empty


def test_torch_masked_softmax_is_refused() -> None:
    def library(scores, hide):
        return torch.masked.softmax(scores, -1, mask=~hide).nan_to_num(0.0)

    def library_log(scores, hide):
        return torch.masked.log_softmax(scores, -1, mask=~hide).exp().nan_to_num(0.0)

    for answer in (library, library_log):
        result = grade("ch3-ex-all-masked", {"masked_softmax": answer})
        assert result.earned == 0, reasons(result)
        assert "yourself" in reasons(result)


def test_the_packages_attention_and_sdpa_are_refused() -> None:
    # Both compute masked weights: the identity as values hands them back.
    def package(scores, hide):
        eye = torch.eye(scores.shape[-1])
        return attention(scores, eye, eye, hide, scale=1.0)[1]

    def sdpa(scores, hide):
        s = scores.shape[-1]
        eye = torch.eye(s).expand(*scores.shape[:-2], s, s)
        return F.scaled_dot_product_attention(scores, eye, eye, attn_mask=~hide, scale=1.0)

    def window_package(scores, window):
        return package(scores, window_mask(scores.shape[-1], window))

    for answer in (package, sdpa):
        result = grade("ch3-ex-all-masked", {"masked_softmax": answer})
        assert result.earned == 0, reasons(result)
        assert "yourself" in reasons(result)
    refused = failing("ch3-ex-sliding-window", {"window_attention": window_package})
    assert "attention" in refused and "yourself" in refused


def test_aten_dropout_operators_are_refused() -> None:
    aten = torch.ops.aten

    def seeded(op):
        def answer(x, p, generator):
            seed = int(torch.randint(2**31, (1,), generator=generator))
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                out = op(x, p)
            return out[0] if isinstance(out, tuple) else out

        return answer

    for op in (
        lambda x, p: aten.dropout(x, p, True),
        lambda x, p: aten.dropout.default(x, p, True),
        lambda x, p: aten.native_dropout(x, p, True),
        lambda x, p: aten.native_dropout.default(x, p, True),
        lambda x, p: torch.dropout_(x.clone(), p, True),
        lambda x, p: torch.nn.functional.dropout1d(x.unsqueeze(0), p)[0],
    ):
        result = grade("ch3-ex-dropout-rate", {"my_dropout": seeded(op)})
        assert result.earned == 0, reasons(result)
        assert "yourself" in reasons(result)
    lazy = seeded(lambda x, p: aten.dropout(x, p, True))
    named = reasons(grade("ch3-ex-dropout-rate", {"my_dropout": lazy}))
    assert "torch.ops.aten.dropout" in named and "pybind" not in named


def test_a_window_mask_from_triangles_earns_full_marks() -> None:
    def triangles(t, window):  # torch.triu and torch.tril are allowed; causal_mask is not
        ones = torch.ones(t, t, dtype=torch.bool)
        return torch.triu(ones, 1) | torch.tril(ones, -window - 1)

    namespace = {**CORRECT["ch3-ex-sliding-window"], "window_mask": triangles}
    result = grade("ch3-ex-sliding-window", namespace)
    assert result.earned == result.possible, reasons(result)


# ------------------------------------------------------------------ a lazy student's attack


def test_the_checks_own_references_are_refused() -> None:
    from attention_from_scratch.exercises import ch3 as checks

    window = failing(
        "ch3-ex-sliding-window",
        {
            "window_mask": checks._window_reference,
            "window_attention": lambda s, w: checks._masked_weights(
                s, checks._window_reference(s.shape[-1], w)
            ),
        },
    )
    assert "yourself" in window and "_window_reference" in window
    order = failing(
        "ch3-ex-dropout-order",
        {
            "renormalise_then_drop": lambda m, k: checks._renormalise(m) * k,
            "drop_then_renormalise": lambda m, k: checks._renormalise(m * k),
        },
    )
    assert "_renormalise" in order
    result = grade("ch3-ex-all-masked", {"masked_softmax": checks._masked_weights})
    assert result.earned == 0 and "_masked_weights" in reasons(result)


def test_a_tensor_that_lies_in_comparisons_earns_nothing() -> None:
    class Agreeable(torch.Tensor):  # every comparison the check makes says "equal"
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if func in (torch.equal, torch.allclose):
                return True
            return super().__torch_function__(func, types, args, kwargs)

    def liar(t, window):
        return torch.zeros(t, t, dtype=torch.bool).as_subclass(Agreeable)

    result = grade(
        "ch3-ex-sliding-window", {**CORRECT["ch3-ex-sliding-window"], "window_mask": liar}
    )
    assert result.earned == 3, reasons(result)  # window_attention's points only
    assert "expected a torch.Tensor, got Agreeable" in reasons(result)


def test_a_table_of_masks_made_in_advance_fails() -> None:
    ones = {t: torch.ones(t, t, dtype=torch.bool) for t in range(1, 13)}
    table = {(t, w): causal_mask(t) | torch.tril(ones[t], -w - 1) for t in ones for w in range(13)}
    assert "KeyError" in failing(
        "ch3-ex-sliding-window", {"window_mask": lambda t, w: table[(t, w)]}
    )


def test_the_expectation_is_not_in_the_checks_frame() -> None:
    import sys

    def from_the_frame(name):
        def answer(*args):
            frame = sys._getframe(1)
            while frame is not None and name not in frame.f_locals:
                frame = frame.f_back
            return None if frame is None else frame.f_locals[name]

        return answer

    for label, answers in (
        ("ch3-ex-sliding-window", {"window_attention": from_the_frame("expected")}),
        ("ch3-ex-all-masked", {"masked_softmax": from_the_frame("expected")}),
        ("ch3-ex-causality-test", {"changed_rows": from_the_frame("expected")}),
        ("ch3-ex-causality-test", {"is_causal": from_the_frame("truth")}),
    ):
        failing(label, answers)


def test_library_masked_softmaxes_are_refused() -> None:
    def sparse(scores, hide):  # hidden keys left out of a sparse tensor
        where = (~hide).nonzero().T
        visible = torch.sparse_coo_tensor(
            where, scores[~hide], scores.shape, check_invariants=False
        )
        return torch.sparse.softmax(visible, -1).to_dense()

    def safe(scores, hide):  # torch's internal softmax with zeros for empty rows
        return torch._safe_softmax(scores.masked_fill(hide, float("-inf")), -1)

    def aten_masked(scores, hide):
        return torch.ops.aten._masked_softmax(scores, hide, None, None).nan_to_num(0.0)

    for answer in (sparse, safe, aten_masked):
        result = grade("ch3-ex-all-masked", {"masked_softmax": answer})
        assert result.earned == 0, reasons(result)
        assert "yourself" in reasons(result)


def test_reading_the_mask_buffer_is_not_a_test_of_causality() -> None:
    def trusts_the_mask(module, x, position):
        if not hasattr(module, "mask"):
            return changed_rows(module, x, position)
        t = x.shape[1]
        rows = ~module.mask[:t, position]
        rows[position] = True
        return rows.nonzero().flatten().tolist()

    reason = failing("ch3-ex-causality-test", {"changed_rows": trusts_the_mask})
    assert "causal mask buffer whose input mixes in the next token" in reason


def test_is_causal_must_look_at_every_earlier_row() -> None:
    def row_before_only(module, x):  # misses a leak that skips the next token
        return all(p - 1 not in changed_rows(module, x, p) for p in range(1, x.shape[1]))

    reason = failing("ch3-ex-causality-test", {"is_causal": row_before_only})
    assert "token i sees token i + 2" in reason
    assert run_checks(
        "ch3-ex-causality-test", {**CORRECT["ch3-ex-causality-test"], "is_causal": row_before_only}
    ).passed


def test_torch_attention_below_the_python_layer_is_refused() -> None:
    # torch.ops.aten's scaled_dot_product_attention skips F's Python layer; with the identity
    # as keys and values it hands back the masked weights.
    aten = torch.ops.aten

    def with_kernel(kernel):
        def answer(scores, hide):
            s = scores.shape[-1]
            eye = torch.eye(s).expand(*scores.shape[:-2], s, s)
            out = kernel(scores, eye, eye, attn_mask=~hide, scale=1.0)
            return (out[0] if isinstance(out, tuple) else out).nan_to_num(0.0)

        return answer

    for kernel in (aten.scaled_dot_product_attention, aten.scaled_dot_product_attention.default):
        answer = with_kernel(kernel)
        result = grade("ch3-ex-all-masked", {"masked_softmax": answer})
        assert result.earned == 0, (kernel, reasons(result))
        assert "yourself" in reasons(result)

        def window(scores, width, answer=answer):
            return answer(scores, window_mask(scores.shape[-1], width))

        refused = failing("ch3-ex-sliding-window", {"window_attention": window})
        assert "yourself" in refused


def test_is_causal_must_try_the_late_positions() -> None:
    def early_only(module, x):  # positions 1 and 2 catch every leak that starts early
        return all(min(changed_rows(module, x, p)) >= p for p in (1, 2))

    reason = failing("ch3-ex-causality-test", {"is_causal": early_only})
    assert "second-to-last token sees the last: expected False, got True" in reason
