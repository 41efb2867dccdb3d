"""The interactive views (attention_from_scratch.views): the numbers their JavaScript computes
equal torch's, their HTML fetches nothing and falls back to a table, and bad input is refused.

The JavaScript runs in Node (``tests/js/views_a.test.js``), loading the very files that a page
inlines, on fixtures written here; the expectations are computed here with torch, from the
tensors themselves, not from the views' data.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
import torch

from attention_from_scratch import toy_sentence
from attention_from_scratch.views import View, attention_explorer, head_view
from attention_from_scratch.views.explorer import explorer_data
from attention_from_scratch.views.heads import LINE_THRESHOLD, head_view_data
from attention_from_scratch.views.widget import MAX_VIEW_BYTES

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import browser_checks

VIEWS_JS = Path(str(resources.files("attention_from_scratch.views").joinpath("js")))
NODE_TEST = Path(__file__).parent / "js" / "views_a.test.js"


def run_node(fixture: dict, tmp_path: Path) -> dict:
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed: the views' JavaScript cannot be run")
    (tmp_path / "fixture.json").write_text(json.dumps(fixture), encoding="utf-8")
    env = {
        **os.environ,
        "AFS_VIEWS_DIR": str(VIEWS_JS),
        "AFS_FIXTURE": str(tmp_path / "fixture.json"),
        "AFS_RESULT": str(tmp_path / "result.json"),
    }
    done = subprocess.run(
        [node, "--test", str(NODE_TEST)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads((tmp_path / "result.json").read_text(encoding="utf-8"))


def masked_softmax(scores: torch.Tensor, scale: float, temperature: float, causal: bool):
    """torch's weights for every query: softmax(scores * scale / temperature), causal or not."""
    if causal:
        t = scores.shape[-1]
        future = torch.ones(t, t, dtype=torch.bool).triu(1)  # (t, t)
        scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores * scale / temperature, dim=-1)  # (t, t)


def chapter3_tensors(t: int = 6, d_out: int = 2):
    torch.manual_seed(123)
    _, inputs = toy_sentence()
    w_q, w_k, w_v = (torch.randn(inputs.shape[1], d_out) for _ in range(3))
    return inputs @ w_q, inputs @ w_k, inputs @ w_v  # (t, d_out) each


def test_the_browser_computes_torchs_numbers(tmp_path: Path) -> None:
    tokens, inputs = toy_sentence()  # chapter 1: queries = keys = values = inputs
    queries, keys, values = chapter3_tensors()  # chapter 3: scaled and causal
    scale = keys.shape[-1] ** -0.5
    explorers = [
        (explorer_data(tokens, inputs), inputs, inputs, inputs, 1.0),
        (
            explorer_data(tokens, queries=queries, keys=keys, values=values, scale=scale),
            queries,
            keys,
            values,
            scale,
        ),
    ]
    cases = [
        {"query": q, "temperature": tau, "causal": causal}
        for q in (0, 1, 5)
        for tau in (0.1, 1.0, 3.7)
        for causal in (False, True)
    ]
    torch.manual_seed(0)
    head_weights = torch.randn(2, 3, 7, 7).mul(2).softmax(dim=-1)  # (layers, h, t, t)
    head_tokens = [f"w{i}" for i in range(7)]
    head_cases = [
        {"layer": layer, "query": q, "heads": heads}
        for layer in (0, 1)
        for q in (0, 3, 6)
        for heads in ([0, 1, 2], [1], [])
    ]
    rows = torch.randn(5, 9).mul(4)  # (cases, s): raw scores for the softmax alone
    softmax_cases = [
        {
            "scores": rows[n].tolist(),
            "scale": 0.5 + n,
            "temperature": 0.3 * (n + 1),
            "masked": [j % (n + 2) == 1 for j in range(9)],
        }
        for n in range(5)
    ]
    fixture = {
        "softmax": softmax_cases,
        "explorer": [{"data": data, "cases": cases} for data, *_ in explorers],
        "heads": [{"data": head_view_data(head_tokens, head_weights), "cases": head_cases}],
    }
    result = run_node(fixture, tmp_path)

    for case, got in zip(softmax_cases, result["softmax"], strict=True):
        scores = torch.tensor(case["scores"], dtype=torch.float64)
        scores = scores.masked_fill(torch.tensor(case["masked"]), float("-inf"))
        expected = torch.softmax(scores * case["scale"] / case["temperature"], dim=-1)
        torch.testing.assert_close(
            torch.tensor(got, dtype=torch.float64), expected, atol=1e-12, rtol=0
        )

    for (_, q_all, k_all, v_all, scale), got_cases in zip(
        explorers, result["explorer"], strict=True
    ):
        scores = q_all @ k_all.T  # (t, t), float32 as the chapters compute it
        for case, got in zip(cases, got_cases, strict=True):
            weights = masked_softmax(scores, scale, case["temperature"], case["causal"])
            row = weights[case["query"]]  # (t,)
            torch.testing.assert_close(
                torch.tensor(got["weights"], dtype=torch.float64), row.double(), atol=1e-6, rtol=0
            )
            torch.testing.assert_close(
                torch.tensor(got["context"], dtype=torch.float64),
                (row @ v_all).double(),
                atol=1e-6,
                rtol=0,
            )  # (d,)
            assert got["top"] == int(row.argmax())
            assert abs(got["sum"] - 1) < 1e-9
            if case["causal"]:
                assert got["masked"] == [j > case["query"] for j in range(len(tokens))]

    for case, got in zip(head_cases, result["heads"][0], strict=True):
        layer, q = case["layer"], case["query"]
        expected = [
            (head, key, float(head_weights[layer, head, q, key]))
            for head in case["heads"]
            for key in range(7)
            # a line where the weight, written with 4 decimals, reaches the threshold
            if round(float(head_weights[layer, head, q, key]), 4) >= LINE_THRESHOLD
        ]
        lines = [(line["head"], line["key"], line["weight"]) for line in got["lines"]]
        assert [line[:2] for line in lines] == [line[:2] for line in expected]
        for (*_, w_js), (*_, w_torch) in zip(lines, expected, strict=True):
            assert abs(w_js - w_torch) <= 0.5e-4 + 1e-12  # written with 4 decimals
        assert [s["key"] for s in got["strongest"]] == [
            int(head_weights[layer, head, q].argmax()) for head in case["heads"]
        ]


# --- the HTML each view writes ---


def views() -> list[View]:
    tokens, inputs = toy_sentence()
    torch.manual_seed(0)
    weights = torch.randn(2, 4, 6, 6).softmax(dim=-1)  # (layers, h, t, t)
    return [attention_explorer(tokens, inputs), head_view(tokens, weights)]


@pytest.mark.parametrize("view", views(), ids=["explorer", "heads"])
def test_a_view_is_self_contained_small_and_has_a_fallback(view: View) -> None:
    page = view._repr_html_()
    # Nothing that a browser would fetch: no URL, no src or href, no CSS import or url().
    assert not re.search(r"https?:|\bsrc\s*=|\bhref\s*=|url\(|@import|\bimport\(|fetch\(", page)
    assert len(page.encode()) <= MAX_VIEW_BYTES
    fallback = re.search(r'<div class="afs-fallback">(.*?)</div><div class="afs-mount">', page)
    assert fallback and "<table>" in fallback.group(1) and "<caption>" in fallback.group(1)
    data = re.search(r'<script type="application/json" class="afs-data">(.*?)</script>', page)
    assert json.loads(data.group(1)) == json.loads(json.dumps(view.data))
    # Two displays of one view are two views with their own element ids.
    ids = re.findall(r'<div class="afs-view[^"]*" id="([^"]+)"', page + view._repr_html_())
    assert len(ids) == 2 and ids[0] != ids[1]


@pytest.mark.parametrize("causal", [False, True])
def test_the_explorers_fallback_table_shows_torchs_weights(causal: bool) -> None:
    queries, keys, values = chapter3_tensors()
    tokens, _ = toy_sentence()
    scale = keys.shape[1] ** -0.5
    page = attention_explorer(
        tokens, queries=queries, keys=keys, values=values, scale=scale, causal=causal
    ).html()
    fallback = re.search(r'<div class="afs-fallback">(.*?)</div><div class="afs-mount">', page)
    rows = re.findall(r"<tr><th scope=\"row\">[^<]*</th>(.*?)</tr>", fallback.group(1))
    shown = [[float(cell) for cell in re.findall(r"<td>([^<]*)</td>", row)] for row in rows]
    expected = masked_softmax(queries @ keys.T, scale, 1.0, causal)  # (t, t)
    assert torch.tensor(shown).sub(expected).abs().max() <= 0.005 + 1e-9
    if causal:
        assert shown[0][1:] == [0.0] * (len(tokens) - 1)  # the future is hidden


def test_text_from_the_reader_cannot_end_a_script_or_add_markup() -> None:
    evil = "</script><script>alert(1)</script>"
    _, inputs = toy_sentence()
    page = attention_explorer([evil, "<b>", "&", "x", "y", "z"], inputs).html()
    assert page.lower().count("<script") == 2  # the data and the view's own script
    assert "<b>" not in page and evil not in page


# --- bad input ---

TOKENS, INPUTS = toy_sentence()


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: attention_explorer("Your journey", INPUTS), TypeError, "tokens"),
        (lambda: attention_explorer([1, 2, 3, 4, 5, 6], INPUTS), TypeError, "tokens"),
        (lambda: attention_explorer(TOKENS[:5], INPUTS), ValueError, "t=5 rows"),
        (lambda: attention_explorer(TOKENS, INPUTS.long()), TypeError, "floating"),
        (lambda: attention_explorer(TOKENS, INPUTS[0]), ValueError, "inputs"),
        (lambda: attention_explorer(TOKENS, INPUTS * float("nan")), ValueError, "finite"),
        (lambda: attention_explorer(TOKENS, INPUTS, query=6), ValueError, "query"),
        (lambda: attention_explorer(TOKENS, INPUTS, query=1.0), TypeError, "query"),
        (lambda: attention_explorer(TOKENS, INPUTS, scale=0), ValueError, "scale"),
        (lambda: attention_explorer(TOKENS, INPUTS, causal=1), TypeError, "causal"),
        (lambda: attention_explorer(TOKENS), ValueError, "queries, keys and values"),
        (lambda: attention_explorer(TOKENS, INPUTS, keys=INPUTS), ValueError, "both"),
        (
            lambda: attention_explorer(TOKENS, queries=INPUTS, keys=INPUTS[:, :2], values=INPUTS),
            ValueError,
            "keys",
        ),
        (lambda: head_view(TOKENS, "weights"), TypeError, "weights"),
        (lambda: head_view(TOKENS, []), TypeError, "weights"),
        (lambda: head_view(TOKENS, torch.rand(2, 6, 6)), ValueError, "sum to 1"),
        (lambda: head_view(TOKENS, torch.ones(2, 5, 5) / 5), ValueError, "(h, t, t)"),
        (lambda: head_view(TOKENS, torch.ones(6, 6) / 6), ValueError, "weights"),
        (
            lambda: head_view(TOKENS, [torch.ones(2, 6, 6) / 6, torch.ones(3, 6, 6) / 6]),
            ValueError,
            "layer 1",
        ),
        (lambda: head_view(TOKENS, -torch.ones(1, 6, 6)), ValueError, "at least 0"),
        (
            lambda: head_view(TOKENS, torch.ones(1, 6, 6) / 6, layer_names=["a", "b"]),
            ValueError,
            "layer_names",
        ),
        (lambda: head_view(TOKENS, torch.ones(1, 6, 6) / 6, query=-1), ValueError, "query"),
        (
            lambda: head_view([str(i) for i in range(32)], torch.ones(8, 8, 32, 32) / 32),
            ValueError,
            "fewer tokens",
        ),
        (lambda: View("no_such_view", {}, label="x", fallback=""), ValueError, "js/"),
        (lambda: View("explorer", [], label="x", fallback=""), TypeError, "dict"),
    ],
)
def test_bad_input_is_refused_with_a_clear_error(call, error, words) -> None:
    with pytest.raises(error, match=re.escape(words)):
        call()


# --- in the browser: keyboard, 390 px light and 1280 px dark, offline, axe-core ---

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "tools" / "browser"
BROWSER_TEST = Path(__file__).parent / "js" / "views_a_browser.mjs"


def drive(root: Path, pages: list[str], shots: Path) -> list[dict]:
    """Run tests/js/views_a_browser.mjs on ``pages`` (relative to ``root``)."""
    chromium = shutil.which(os.environ.get("CHROMIUM", "")) or shutil.which("chromium")
    if shutil.which("node") is None or chromium is None:
        pytest.skip("needs Node and Chromium (browser_checks.py)")
    node = browser_checks.ensure_packages()  # axe-core and playwright-core, once
    shots.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [node, str(BROWSER_TEST), chromium, str(root), str(TOOLS), str(shots), *pages],
        capture_output=True,
        text=True,
        timeout=120 * len(pages) + 60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def check_reports(reports: list[dict], kinds: set[str]) -> None:
    """What each view must have shown after the keys; no request out, no error, no overflow,
    no axe-core violation in the views after the interaction."""
    without = [r for r in reports if r.get("scripts") is False]
    assert without
    for report in without:  # the fallback table where scripts do not run
        assert report["fallbacks"], report["page"]
        for fallback in report["fallbacks"]:
            assert fallback["visible"] and fallback["caption"] and not fallback["drawn"]
            assert fallback["oneLine"], report["page"]
    reports = [r for r in reports if r.get("scripts") is not False]
    assert {(r["width"], r["mode"]) for r in reports} >= {(390, "light"), (1280, "dark")}
    assert {v["kind"] for r in reports for v in r["views"]} == kinds
    for report in reports:
        where = f"{report['page']} at {report['width']} px ({report['mode']})"
        assert not report["external"], where
        assert not report["errors"], where
        assert not report["violations"], (where, report["violations"])
        for seen in report["views"]:
            assert seen["ready"] and not seen["overflow"], where
            for box in seen["scrollStops"]:  # a tab stop exactly where it scrolls
                assert box["stop"] == box["scrolls"], (where, seen["scrollStops"])
            first = seen["first"]
            assert first["inside"] and first["visible"] and first["checked"] == "true", where
            if seen["kind"] == "explorer":
                assert first["role"] == "radio"
                assert seen["right"]["status"].startswith(seen["rightExpected"]), where
                assert seen["right"]["focus"]["visible"]
                assert seen["home"].startswith('Query 0 "')
                assert seen["slider"]["type"] == "range" and seen["slider"]["visible"]
                assert "temperature 1.2" in seen["sliderStatus"], where
                assert seen["mask"]["type"] == "checkbox" and seen["mask"]["visible"]
                assert seen["maskOn"] != seen["wasOn"]
                on = seen["maskOn"]
                assert ("causal mask on" in seen["maskStatus"]) == on, where
                assert seen["end"]["masked"] == 0  # the last query sees every key
                assert seen["homeMasked"] == (seen["t"] - 1 if on else 0)
                assert abs(seen["weightSum"] - 1) < 0.03  # the shown weights, rounded
                assert seen["swatches"] == ["true"], where  # on the chosen query only
                assert seen["outputLive"] == "off", where
            else:
                if seen["layers"] > 1:
                    assert seen["layerStatus"].startswith(seen["layerExpected"]), where
                # a single head has no toggle, which could only hide everything
                assert seen["headButtons"] == (seen["h"] if seen["h"] > 1 else 0), where
                if seen["h"] > 1:
                    assert seen["head"]["text"] == "head 0" and seen["head"]["visible"]
                    assert seen["headOff"]["focus"]["checked"] == "false"
                    assert seen["headOff"]["lines"] == seen["headOff"]["expected"], where
                    assert seen["headOn"]["lines"] == seen["headOn"]["expected"] > 0, where
                assert "afs-token" in seen["token"]["cls"] and seen["token"]["visible"]
                assert seen["up"]["expectedText"] in seen["up"]["status"], where
                assert seen["up"]["lines"] == seen["up"]["expected"], where
                assert seen["hover"]["expectedText"] in seen["hover"]["status"], where


@pytest.mark.book
def test_the_views_work_by_keyboard_offline_and_accessibly(tmp_path: Path) -> None:
    """The explorer and head view in a page of their own, as the package writes them."""
    tokens, inputs = toy_sentence()
    torch.manual_seed(0)
    t = 20
    scores = torch.randn(2, 2, t, t).mul(3)  # (layers, h, t, t)
    scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
    body = (
        attention_explorer(tokens, inputs, query=1).html()
        + head_view(tokens, torch.randn(4, 6, 6).softmax(dim=-1)).html()
        + head_view(tokens, torch.randn(1, 6, 6).softmax(dim=-1)).html()
        + head_view([f"{i} {chr(65 + i % 5)}" for i in range(t)], scores.softmax(dim=-1)).html()
    )
    (tmp_path / "views.html").write_text(
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>views</title></head><body><main><h1>Views</h1>{body}</main></body></html>",
        encoding="utf-8",
    )
    reports = drive(tmp_path, ["views.html"], tmp_path / "shots")
    check_reports(reports, {"explorer", "heads"})
    assert all(len(r.get("views", r.get("fallbacks"))) == 4 for r in reports)


@pytest.mark.book
def test_the_books_views_work_by_keyboard_offline_and_accessibly(tmp_path: Path) -> None:
    """Every explorer and head view of the built book (chapters 1, 3, 4 and 6)."""
    from book_info import BUILD_HTML

    assert BUILD_HTML.is_dir(), f"{BUILD_HTML} is missing: build the book with `make book` first"
    pages = sorted(
        path.relative_to(BUILD_HTML).as_posix()
        for path in (BUILD_HTML / "book").glob("*.html")
        if re.search(r'class="afs-view afs-view-(explorer|heads)"', path.read_text("utf-8"))
    )
    assert len(pages) >= 4, pages
    check_reports(drive(BUILD_HTML, pages, tmp_path / "shots"), {"explorer", "heads"})
