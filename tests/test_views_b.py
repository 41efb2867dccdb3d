"""The live model, the KV-cache stepper and the online-softmax stepper: their JavaScript,
run by Node on fixtures written here, gives torch's numbers, and their Python side checks
its input, stays offline and under its size.

Expectations are computed here with torch and the package (forward hooks for switched-off
heads, ``KVCache`` for the cache, ``torch.softmax`` for the tiles), never with the JavaScript
under test; Node runs the very files the views inline (``views/js``).
"""

from __future__ import annotations

import copy
import json
import math
import re
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
import torch

from attention_from_scratch import CachedAttention, KVCache, TinyCausalModel, induction_task
from attention_from_scratch.views.cache_stepper import cache_stepper_data, kv_cache_stepper
from attention_from_scratch.views.live_model import HELD_OUT_SAMPLE, live_model, live_model_data
from attention_from_scratch.views.tiles import tiles_data, tiles_stepper
from attention_from_scratch.views.widget import MAX_VIEW_BYTES

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import browser_checks

NODE = shutil.which("node")
JS_TEST = Path(__file__).parent / "js" / "views_b.test.js"
VIEWS_DIR = Path(str(resources.files("attention_from_scratch.views").joinpath("js")))
SCRIPTS = ["live_model", "cache_stepper", "tiles"]


def run_node(tmp_path: Path, fixture: dict) -> dict:
    """Run tests/js/views_b.test.js on ``fixture``; return what the JavaScript computed."""
    if NODE is None:
        pytest.skip("Node.js is not installed")
    source, result = tmp_path / "fixture.json", tmp_path / "result.json"
    source.write_text(json.dumps({"scripts": SCRIPTS, **fixture}))
    env = {"AFS_VIEWS_DIR": str(VIEWS_DIR), "AFS_FIXTURE": str(source), "AFS_RESULT": str(result)}
    done = subprocess.run(
        [NODE, "--test", str(JS_TEST)], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(result.read_text())


def as_tensor(values: object) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


# ------------------------------------------------------------------------- the live model
def tiny_model(seed: int, **options: object) -> TinyCausalModel:
    torch.manual_seed(seed)
    return TinyCausalModel(16, 32, 20, num_layers=2, **options).eval()


@torch.no_grad()
def torch_logits(model: TinyCausalModel, tokens: torch.Tensor, off: list[list[int]]):
    """Logits with the heads in ``off`` switched off: a layer whose every head is off has its
    output set to zero (the chapter's forward hook), a single head of several its context
    vectors (the exercise's pre-hook on out_proj)."""
    hooks = []
    for layer in {pair[0] for pair in off}:
        heads = sorted({pair[1] for pair in off if pair[0] == layer})
        attention = model.blocks[layer].attention
        if len(heads) == attention.num_heads:

            def zero_output(module, args, out):  # out, or (out, weights)
                if isinstance(out, tuple):
                    return (torch.zeros_like(out[0]), out[1])
                return torch.zeros_like(out)

            hook = attention.register_forward_hook(zero_output)
        else:
            d_h = attention.head_dim

            def zero_heads(module, args, heads=heads, d_h=d_h):
                context = args[0].clone()  # (b, t, h * d_h)
                for head in heads:
                    context[..., head * d_h : (head + 1) * d_h] = 0.0
                return (context,)

            hook = attention.out_proj.register_forward_pre_hook(zero_heads)
        hooks.append(hook)
    try:
        logits, weights = model(tokens, return_weights=True)
        return logits, weights
    finally:
        for hook in hooks:
            hook.remove()


def held_out_accuracy(model, inputs, targets, off) -> float:
    logits, _ = torch_logits(model, inputs, off)
    scored = targets != -100  # (b, t)
    right = (logits.argmax(dim=-1) == targets) & scored
    return right.sum().item() / scored.sum().item()


@pytest.fixture(scope="module")
def induction_model() -> TinyCausalModel:
    """Chapter 6's two-layer induction model, trained as the chapter trains it."""
    from attention_from_scratch import train

    x, y = induction_task(4000, 20, 16, min_period=3, max_period=10, seed=1)
    model = tiny_model(123)
    train(model, x, y, steps=200, batch_size=128, lr=1e-2, progress=False)
    return model.eval()


CASES = [[], [[0, 0]], [[1, 0]], [[0, 0], [1, 0]]]


@pytest.mark.parametrize(
    "options",
    [
        {"positions": "learned"},
        {"positions": "sinusoidal", "layer_norm": True, "num_heads": 2},
        {"positions": "none", "num_heads": 4},
    ],
)
def test_live_model_logits_weights_and_accuracy_equal_torch(tmp_path, options) -> None:
    model = tiny_model(7, **options)
    inputs, targets = induction_task(24, 20, 16, min_period=3, max_period=10, seed=2)
    data = live_model_data(model, inputs[0], held_out=(inputs, targets))
    h = model.blocks[0].attention.num_heads
    cases = [*CASES, [[0, h - 1]], [[1, 0], [1, h - 1]]]
    fixture = [
        {"tokens": inputs[i % 3, : 20 - i].tolist(), "off": off} for i, off in enumerate(cases)
    ]
    node = run_node(tmp_path, {"live_model": {"data": data, "cases": fixture}})
    result, carried = node["live_model"], page_sample(node)
    for case, got in zip(fixture, result, strict=True):
        tokens = torch.tensor([case["tokens"]])
        logits, weights = torch_logits(model, tokens, case["off"])
        assert (as_tensor(got["logits"]) - logits[0].double()).abs().max() < 1e-5
        for layer, w in enumerate(weights):
            assert (as_tensor(got["weights"][layer]) - w[0].double()).abs().max() < 1e-5
        expected = held_out_accuracy(model, *carried, case["off"])
        assert got["accuracy"] == pytest.approx(expected, abs=1e-12)


def page_sample(node: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """The sequences the page drew to measure accuracy, checked to be induction sequences
    as ``induction_task`` makes them (periods 3 to 10, as the fixtures' held-out sets)."""
    sample = node["live_model_sample"]
    inputs, targets = torch.tensor(sample["inputs"]), torch.tensor(sample["targets"])
    assert inputs.shape == targets.shape == (HELD_OUT_SAMPLE, 20)
    targets[targets < 0] = -100
    periods = set()
    for row, target in zip(inputs.tolist(), targets.tolist(), strict=True):
        n = next(i for i, y in enumerate(target) if y != -100)
        periods.add(n)
        assert 3 <= n <= 10 and len(set(row[:n])) == n
        assert all(row[i] == row[i % n] for i in range(20))
        assert target[n:] == [*row[n + 1 :], row[20 % n]] and set(target[:n]) == {-100}
    assert periods == set(range(3, 11))  # every period drawn
    return inputs, targets


@pytest.mark.slow  # trains the chapter's model: about 20 s alone, minutes on a busy CPU
def test_live_model_reproduces_the_chapters_ablation(tmp_path, induction_model) -> None:
    """The trained induction model: the page's logits equal torch's, and switching layer 0's
    head off takes its held-out accuracy down as in the chapter (to the same number that
    torch's forward hook gives on the same sequences)."""
    inputs, targets = induction_task(1000, 20, 16, min_period=3, max_period=10, seed=2)
    data = live_model_data(induction_model, inputs[0], held_out=(inputs, targets))
    fixture = [{"tokens": inputs[0].tolist(), "off": off} for off in CASES]
    node = run_node(tmp_path, {"live_model": {"data": data, "cases": fixture}})
    result, carried = node["live_model"], page_sample(node)
    accuracy = {}
    # The page computes in float64 from the exported float32 weights: so does this copy.
    in_float64 = copy.deepcopy(induction_model).double()
    for case, got in zip(fixture, result, strict=True):
        logits, _ = torch_logits(in_float64, inputs[:1], case["off"])
        assert (as_tensor(got["logits"]) - logits[0]).abs().max() < 1e-5
        key = tuple(map(tuple, case["off"]))
        accuracy[key] = got["accuracy"]
        assert got["accuracy"] == held_out_accuracy(induction_model, *carried, case["off"])
        # the page's sample lands within a few points of the full held-out set
        full = held_out_accuracy(induction_model, inputs, targets, case["off"])
        assert abs(got["accuracy"] - full) < 0.03, (case["off"], got["accuracy"], full)
    assert accuracy[()] > 0.95  # the chapter's "almost perfectly"
    assert accuracy[((0, 0),)] < 0.5  # layer 0's head off: far lower, as in the chapter


def test_live_model_data_is_small_offline_and_has_a_fallback() -> None:
    model = tiny_model(0, positions="learned")
    inputs, targets = induction_task(50, 20, 16, min_period=3, max_period=10, seed=2)
    page = live_model(model, inputs[0], held_out=(inputs, targets)).html()
    assert len(page) <= MAX_VIEW_BYTES + 1_000  # View refuses more script, style and data
    assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", page, re.I)
    assert 'class="afs-fallback"' in page and "<table>" in page
    weights = live_model_data(model, inputs[0])["weights"]
    assert sum(len(w["data"]) for w in weights.values()) < 35_000  # base64 of float32


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"model": torch.nn.Linear(2, 2)}, TypeError),
        ({"model": "model"}, TypeError),
        ({"tokens": [0, 16]}, ValueError),
        ({"tokens": [0.5]}, TypeError),
        ({"tokens": []}, ValueError),
        ({"tokens": list(range(16)) * 2}, ValueError),
        ({"tokens": torch.zeros(2, 3, dtype=torch.long)}, ValueError),
        ({"labels": ["A"]}, ValueError),
        ({"held_out": torch.zeros(2, 3)}, TypeError),
    ],
)
def test_live_model_refuses_bad_input(kwargs, error) -> None:
    arguments = {"model": tiny_model(0), "tokens": [1, 2, 3], **kwargs}
    with pytest.raises(error):
        live_model(arguments.pop("model"), arguments.pop("tokens"), **arguments)


@pytest.mark.parametrize("options", [{"mlp": True}, {"positions": "rotary"}])
def test_live_model_refuses_models_it_cannot_run(options) -> None:
    with pytest.raises(ValueError, match="model: expected"):
        live_model(tiny_model(0, **options), [1, 2, 3])


# --------------------------------------------------------------------------- the KV cache
def test_kv_cache_steps_equal_torchs_cached_layer(tmp_path) -> None:
    torch.manual_seed(123)
    layer = CachedAttention(16, 16, 10, dropout=0.0, num_heads=4).eval()
    x = torch.randn(1, 10, 16)
    prompt = 4
    data = cache_stepper_data(layer, x, prompt)
    steps = run_node(tmp_path, {"cache_stepper": {"data": data}})["cache_stepper"]
    cache = KVCache()
    with torch.no_grad():
        full, _ = layer(x, True)  # (1, t, d), one causal pass
        bounds = [(0, prompt)] + [(p, p + 1) for p in range(prompt, 10)]
        assert [(s["first"], s["end"]) for s in steps] == bounds
        for step, (first, end) in zip(steps, bounds, strict=True):
            out, weights = layer(x[:, first:end], True, kv_cache=cache)
            assert cache.length == end
            assert step["reused"] == first and step["computed"] == end - first
            assert (as_tensor(step["outputs"]) - out[0].double()).abs().max() < 1e-5
            assert (as_tensor(step["full"]) - full[0, first:end].double()).abs().max() < 1e-5
            for head, rows in enumerate(step["weights"]):  # causal rows: visible keys only
                for row, got in enumerate(rows):
                    expected = weights[0, head, row].double()  # (s,), zeros in the future
                    assert (as_tensor(got) - expected[: len(got)]).abs().max() < 1e-5
                    assert expected[len(got) :].eq(0).all()
            assert step["max_diff"] < 1e-12


def test_kv_cache_view_refuses_bad_input_and_stays_small() -> None:
    layer = CachedAttention(16, 16, 10, dropout=0.0, num_heads=4)
    x = torch.randn(10, 16)
    page = kv_cache_stepper(layer, x, 4).html()
    assert len(page) <= MAX_VIEW_BYTES and 'class="afs-fallback"' in page
    assert "http" not in page.replace("http-equiv", "")
    with pytest.raises(TypeError):
        kv_cache_stepper(torch.nn.Linear(2, 2), x, 4)
    with pytest.raises(ValueError):
        kv_cache_stepper(layer, x, 10)  # nothing left to decode
    with pytest.raises(ValueError):
        kv_cache_stepper(layer, torch.randn(10, 8), 4)
    with pytest.raises(TypeError):
        kv_cache_stepper(layer, x.long(), 4)
    with pytest.raises(TypeError):
        kv_cache_stepper(layer, x, 1.5)


# ------------------------------------------------------------------------------ the tiles
def tile_cases() -> list[tuple[torch.Tensor, torch.Tensor, int]]:
    generator = torch.Generator().manual_seed(123)
    scores = torch.randn(10, generator=generator) * 3
    values = torch.randn(10, 2, generator=generator)
    masked_first = scores.clone()
    masked_first[:4] = -math.inf  # the whole first block
    large = torch.tensor([1000.0, 999.0, 2.0, -5.0, 1001.0, 3.0])
    return [
        (scores, values, 4),
        (masked_first, values, 4),
        (masked_first, values, 3),  # blocks 0 masked, block 1 half masked
        (large, torch.eye(6), 2),
    ]


def test_tiles_each_block_and_the_final_row_equal_torch(tmp_path) -> None:
    cases = tile_cases()
    data = [tiles_data(*case) for case in cases]
    results = run_node(tmp_path, {"tiles": {"data": data}})["tiles"]
    for (scores, values, size), got in zip(cases, results, strict=True):
        scores, values = scores.double(), values.double()
        for index, block in enumerate(got["blocks"]):
            seen = scores[: (index + 1) * size]  # every key up to this block's end
            m = seen.max()
            assert block["first"] == index * size
            if m == -math.inf:
                assert block["m"] == "-inf" and block["ell"] == 0
                assert block["o"] == [0] * values.shape[1]
                continue
            weights = torch.exp(seen - m)  # (keys seen,)
            assert block["m"] == pytest.approx(m.item(), abs=1e-5)
            assert block["ell"] == pytest.approx(weights.sum().item(), rel=1e-5)
            o = weights @ values[: len(seen)]  # (d_h,)
            assert (as_tensor(block["o"]) - o).abs().max() < 1e-5
        expected = torch.softmax(scores, dim=0) @ values  # (d_h,)
        assert (as_tensor(got["output"]) - expected).abs().max() < 1e-5
        # The reference the page compares with (the package's attention) is torch's too.
        assert (as_tensor(got["direct"]) - expected).abs().max() < 1e-5
        assert got["max_diff"] < 1e-9


def test_tiles_view_refuses_bad_input() -> None:
    page = tiles_stepper(*tile_cases()[1]).html()
    assert len(page) <= MAX_VIEW_BYTES and 'class="afs-fallback"' in page
    with pytest.raises(ValueError):
        tiles_stepper(torch.full((4,), -math.inf), torch.zeros(4, 2), 2)
    with pytest.raises(ValueError):
        tiles_stepper(torch.zeros(4), torch.zeros(3, 2), 2)
    with pytest.raises(TypeError):
        tiles_stepper(torch.zeros(4, dtype=torch.long), torch.zeros(4, 2), 2)
    with pytest.raises(ValueError):
        tiles_stepper(torch.tensor([0.0, math.nan]), torch.zeros(2, 2), 2)
    with pytest.raises(ValueError):
        tiles_stepper(torch.zeros(4), torch.zeros(4, 2), 0)


# ------------------------------------------------------------------------ in the browser
ROOT = Path(__file__).resolve().parents[1]
BROWSER_TEST = Path(__file__).parent / "js" / "views_b_browser.mjs"


@pytest.mark.book
def test_views_work_with_the_keyboard_offline_and_accessibly(tmp_path) -> None:
    """Each view in Chromium at 390 and 1280 px, network off, driven with the keyboard only:
    what it shows after the keys, a visible focus, no request to another site, no script
    error, nothing wider than the window, and no axe-core violation after the interaction.
    Screenshots are left in the test's folder."""
    tools = ROOT / "tools" / "browser"
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if NODE is None or chromium is None:
        pytest.skip("needs Node and Chromium (browser_checks.py)")
    browser_checks.ensure_packages()  # axe-core and playwright-core, once
    inputs, targets = induction_task(24, 20, 16, min_period=3, max_period=10, seed=2)
    torch.manual_seed(123)
    layer = CachedAttention(16, 16, 10, dropout=0.0, num_heads=4).eval()
    scores, values, size = tile_cases()[1]
    views = {
        "live_model": live_model(tiny_model(0), inputs[0], held_out=(inputs, targets)),
        "cache_stepper": kv_cache_stepper(layer, torch.randn(10, 16), 4),
        "tiles": tiles_stepper(scores, values, size),
    }
    for name, view in views.items():
        (tmp_path / f"{name}.html").write_text(
            "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width'>"
            f"<title>{name}</title></head><body><main>{view.html()}</main></body></html>"
        )
    done = subprocess.run(
        [NODE, str(BROWSER_TEST), chromium, str(tmp_path), str(tools)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    assert len(results) == 6
    for result in results:
        where = f"{result['name']} at {result['width']} px"
        assert not result["external"], where
        assert not result["errors"], where
        assert not result["overflow"], where
        assert not result["axe"], where
        seen = result["seen"]
        if result["name"] == "live_model":
            assert seen["inputFocusVisible"] and seen["boxFocusVisible"], where
            assert seen["rows"] == 7  # the 7 tokens typed
            assert "After 7 tokens" in seen["status"]
            assert '"Z" is not a token' in seen["error"]
            assert seen["statusOff"].startswith("Switched off: layer 0 head 0.")
            assert f"of {HELD_OUT_SAMPLE} sequences drawn in the page" in seen["statusOff"]
            assert "layer 0 (off)" in seen["header"] and "layer 1 (off)" not in seen["header"]
            assert "off" in seen["captions"][0] and "off" not in seen["captions"][1]
        elif result["name"] == "cache_stepper":
            assert seen["focusVisible"], where
            assert seen["status0"] == ""  # nothing announced on page load
            assert seen["status"].startswith("Decode step 3: token 6 projected, 6 keys")
            assert seen["rows"] == 7  # the cache holds positions 0 to 6
            assert seen["atEnd"] == "true" and "Decode step 6" in seen["statusEnd"]
            assert "equals the full recomputation" in seen["statusEnd"]
        else:
            assert seen["focusVisible"], where
            assert "every key masked" in seen["status0"]
            # block 0 is all masked: m_sub is 0 and the factor e^(-inf - 0) is 0, not NaN
            assert "m_sub, subtracted (0 while m\u2032 = -\u221e)0" in seen["state0"]
            assert "rescale e^(m - m_sub)0" in seen["state0"]
            assert "The final row equals the softmax" in seen["status"]
