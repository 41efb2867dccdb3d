// Chapter 6's trained TinyCausalModel run in the page (views.live_model): embedding,
// positions, causal multi-head attention per layer (pre-norm LayerNorms if any), head.
// float32 weights, float64 arithmetic. Each head comes folded: the score of query i on key j
// is x_i . (W_QK x_j), and the head adds sum_j a_ij W_OV x_j to the layer's output.
(function (global, factory) {
  var api = factory();
  var views = (global.AFSViews = global.AFSViews || {});
  views.live_model = api;
  if (typeof module === "object" && module.exports) module.exports = api;
})(typeof window !== "undefined" ? window : globalThis, function () {
  "use strict";
  // The shared helpers (js/common.js): inlined before this file in a page, required in Node.
  const common = (globalThis.AFSViews && globalThis.AFSViews.common) || require("./common.js");

  // A base64 string of little-endian float32 numbers -> Float64Array.
  function decodeFloats(text) {
    const binary = atob(text);
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    const view = new DataView(bytes.buffer);
    const out = new Float64Array(bytes.length / 4);
    for (let i = 0; i < out.length; i++) out[i] = view.getFloat32(4 * i, true);
    return out;
  }

  // The exported {shape, data} of every tensor, decoded once.
  function loadWeights(data) {
    const weights = {};
    for (const [name, entry] of Object.entries(data.weights)) {
      weights[name] = { shape: entry.shape, values: decodeFloats(entry.data) };
    }
    return weights;
  }

  // x (t rows of n) times W^T (W: (m, n) row-major) plus bias -> t rows of m,
  // as torch's nn.Linear.
  function linear(x, weight, bias) {
    const [m, n] = weight.shape;
    const w = weight.values;
    return x.map((row) => {
      const out = new Float64Array(m);
      for (let i = 0; i < m; i++) {
        let sum = 0;
        for (let j = 0; j < n; j++) sum += row[j] * w[i * n + j];
        out[i] = bias ? sum + bias.values[i] : sum;
      }
      return out;
    });
  }

  function layerNorm(x, weight, bias) {
    return x.map((row) => {
      const n = row.length;
      let mean = 0;
      for (const v of row) mean += v;
      mean /= n;
      let variance = 0;
      for (const v of row) variance += (v - mean) * (v - mean);
      variance /= n; // biased, as torch's LayerNorm
      const scale = 1 / Math.sqrt(variance + 1e-5);
      return row.map((v, i) => (v - mean) * scale * weight.values[i] + bias.values[i]);
    });
  }

  // One attention layer. off: a Set of head indices switched off (they add
  // nothing); with every head off the layer adds nothing at all, not even
  // its output bias, as the chapter's forward hook that zeroes its output.
  function attention(x, weights, layer, numHeads, off) {
    const t = x.length;
    const d = x[0].length;
    const out = x.map(() => new Float64Array(d));
    const headWeights = [];
    for (let head = 0; head < numHeads; head++) {
      const qk = weights[`attention.${layer}.${head}.W_QK`];
      const keysSeen = linear(x, qk, null); // (t, d): W_QK x_j
      const rows = [];
      for (let i = 0; i < t; i++) {
        const scores = new Float64Array(t).fill(-Infinity);
        for (let j = 0; j <= i; j++) {
          // causal: keys 0..i only
          let sum = 0;
          for (let c = 0; c < d; c++) sum += x[i][c] * keysSeen[j][c];
          scores[j] = sum;
        }
        rows.push(common.softmax(scores)); // -Infinity entries get 0
      }
      headWeights.push(rows); // (t, t)
      if (off.has(head)) continue;
      const moved = linear(x, weights[`attention.${layer}.${head}.W_OV`], null); // (t, d)
      for (let i = 0; i < t; i++) {
        for (let j = 0; j <= i; j++) {
          const a = rows[i][j];
          for (let c = 0; c < d; c++) out[i][c] += a * moved[j][c];
        }
      }
    }
    if (off.size < numHeads) {
      const bias = weights[`attention.${layer}.out_proj.bias`].values;
      for (const row of out) for (let c = 0; c < d; c++) row[c] += bias[c];
    }
    return { out, weights: headWeights };
  }

  // The forward pass: tokens (t ids) -> {logits (t, vocab), weights
  // [layer][head] (t, t)}. off: a list of [layer, head] pairs switched off.
  function forward(config, weights, tokens, off) {
    const t = tokens.length;
    if (t < 1 || t > config.context_length) {
      throw new RangeError(`tokens: expected 1 to ${config.context_length} ids, got ${t}`);
    }
    const emb = weights["embedding.weight"];
    const d = config.d_model;
    let x = tokens.map((token, i) => {
      if (!Number.isInteger(token) || token < 0 || token >= config.vocab_size) {
        throw new RangeError(`tokens: expected ids in 0..${config.vocab_size - 1}, got ${token}`);
      }
      const row = emb.values.slice(token * d, (token + 1) * d);
      if (weights.positions) {
        for (let c = 0; c < d; c++) row[c] += weights.positions.values[i * d + c];
      }
      return row;
    });
    const allWeights = [];
    for (let layer = 0; layer < config.num_layers; layer++) {
      const offHeads = new Set((off || []).filter((p) => p[0] === layer).map((p) => p[1]));
      const norm = weights[`attention_norms.${layer}.weight`];
      const input = norm
        ? layerNorm(x, norm, weights[`attention_norms.${layer}.bias`])
        : x;
      const result = attention(input, weights, layer, config.num_heads, offHeads);
      x = x.map((row, i) => row.map((v, c) => v + result.out[i][c]));
      allWeights.push(result.weights);
    }
    if (weights["final_norm.weight"]) {
      x = layerNorm(x, weights["final_norm.weight"], weights["final_norm.bias"]);
    }
    const logits = linear(x, weights["head.weight"], weights["head.bias"]);
    return { logits, weights: allWeights };
  }

  function argmax(row) {
    let best = 0;
    for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
    return best;
  }

  // A seeded generator of numbers in [0, 1) (mulberry32): the page's own sample,
  // the same on every load, though not torch's random numbers.
  function random(seed) {
    let a = seed >>> 0;
    return function () {
      a = (a + 0x6d2b79f5) >>> 0;
      let r = Math.imul(a ^ (a >>> 15), 1 | a);
      r = (r + Math.imul(r ^ (r >>> 7), 61 | r)) ^ r;
      return ((r ^ (r >>> 14)) >>> 0) / 4294967296;
    };
  }

  // Sequences built as the package's induction_task builds them: a segment of n
  // distinct tokens (n drawn from min_period..max_period) repeated to fill
  // num_tokens + 1 tokens; the target of position i is token i + 1, scored
  // (>= 0) from i = n on, -1 before. spec: {num_sequences, num_tokens,
  // min_period, max_period, seed}; vocab: the vocabulary size.
  function inductionSequences(spec, vocab) {
    const next = random(spec.seed);
    const inputs = [];
    const targets = [];
    for (let b = 0; b < spec.num_sequences; b++) {
      const order = Array.from({ length: vocab }, (_, i) => i);
      for (let i = vocab - 1; i > 0; i--) {
        const j = Math.floor(next() * (i + 1)); // Fisher-Yates shuffle
        [order[i], order[j]] = [order[j], order[i]];
      }
      const span = spec.max_period - spec.min_period + 1;
      const n = spec.min_period + Math.floor(next() * span);
      const sequence = Array.from({ length: spec.num_tokens + 1 }, (_, p) => order[p % n]);
      inputs.push(sequence.slice(0, -1));
      targets.push(sequence.slice(1).map((token, i) => (i < n ? -1 : token)));
    }
    return { inputs, targets };
  }

  // Accuracy on the scored positions (target >= 0) of several sequences.
  function accuracy(config, weights, inputs, targets, off) {
    let right = 0;
    let scored = 0;
    inputs.forEach((sequence, b) => {
      const { logits } = forward(config, weights, sequence, off);
      targets[b].forEach((target, i) => {
        if (target < 0) return;
        scored += 1;
        if (argmax(logits[i]) === target) right += 1;
      });
    });
    return scored ? right / scored : NaN;
  }

  // ---------------------------------------------------------------- view
  function letter(config, token) {
    return config.labels ? config.labels[token] : String(token);
  }

  function parseTokens(text, config) {
    const parts = text.trim().split(/[\s,]+/).filter((p) => p.length);
    if (!parts.length) return { error: "type at least one token" };
    if (parts.length > config.context_length) {
      return { error: `at most ${config.context_length} tokens, got ${parts.length}` };
    }
    const tokens = [];
    for (const part of parts) {
      let id = Number.NaN;
      if (config.labels) {
        const index = config.labels.indexOf(part.toUpperCase());
        if (index >= 0) id = index;
      }
      if (Number.isNaN(id) && /^\d+$/.test(part)) id = Number(part);
      if (!(id >= 0 && id < config.vocab_size)) {
        const range = config.labels
          ? `${config.labels[0]} to ${config.labels[config.vocab_size - 1]}`
          : `0 to ${config.vocab_size - 1}`;
        return { error: `"${part}" is not a token (use ${range})` };
      }
      tokens.push(id);
    }
    return { tokens };
  }

  function render({ model, el: root }) {
    const el = globalThis.AFSViews.common.el;
    const config = model.get("config");
    const weights = loadWeights({ weights: model.get("weights") });
    const spec = model.get("held_out");
    const heldOut = spec ? inductionSequences(spec, config.vocab_size) : null;
    let tokens = model.get("tokens").slice();
    const off = new Set(); // "layer,head"
    let shownHead = 0;
    const uid = `afs-tm-${Math.random().toString(36).slice(2, 8)}`;

    root.classList.add("afs-view", "afs-tiny-model");
    const inputId = `${uid}-tokens`;
    const input = el("input", {
      id: inputId,
      type: "text",
      value: tokens.map((v) => letter(config, v)).join(" "),
      spellcheck: "false",
      style: "width:min(100%,24em);min-height:44px;font:inherit",
      autocomplete: "off",
      "aria-describedby": `${uid}-help`,
    });
    const help = el("p", {
      id: `${uid}-help`,
      class: "afs-help",
      text:
        `Tokens ${letter(config, 0)} to ${letter(config, config.vocab_size - 1)}, ` +
        `separated by spaces, at most ${config.context_length}. ` +
        "Press Enter to run the model.",
    });
    const error = el("p", { class: "afs-error", role: "alert" });
    const runButton = el("button", { type: "button", text: "Run" });
    const form = el("div", { class: "afs-row" }, [
      el("label", { for: inputId, text: "Sequence" }),
      input,
      runButton,
    ]);
    const toggles = el("fieldset", { class: "afs-toggles" }, [
      el("legend", { text: "Heads switched on" }),
    ]);
    for (let layer = 0; layer < config.num_layers; layer++) {
      for (let head = 0; head < config.num_heads; head++) {
        const id = `${uid}-on-${layer}-${head}`;
        const box = el("input", { type: "checkbox", id, checked: "" });
        box.addEventListener("change", () => {
          const key = `${layer},${head}`;
          if (box.checked) off.delete(key);
          else off.add(key);
          update();
        });
        toggles.append(
          el("span", { class: "afs-toggle", style: "display:inline-block;margin-right:1.5em" }, [
            box,
            el("label", { for: id, text: ` layer ${layer}, head ${head}` }),
          ]),
        );
      }
    }
    let headSelect = null;
    const controls = el("div", { class: "afs-controls" }, [toggles]);
    if (config.num_heads > 1) {
      headSelect = el("select", { id: `${uid}-head` });
      for (let head = 0; head < config.num_heads; head++) {
        headSelect.append(el("option", { value: String(head), text: `head ${head}` }));
      }
      headSelect.addEventListener("change", () => {
        shownHead = Number(headSelect.value);
        update();
      });
      controls.append(
        el("div", { class: "afs-row" }, [
          el("label", { for: `${uid}-head`, text: "Attention of " }),
          headSelect,
        ]),
      );
    }
    const status = el("p", { class: "afs-status", role: "status", "aria-live": "polite" });
    const table = el("div", { class: "afs-scroll", tabindex: "0", role: "region" });
    table.setAttribute("aria-label", "Predictions and attention, one row per position");
    const maps = el("div");
    root.replaceChildren(help, form, error, controls, status, table, maps);

    function offPairs() {
      return [...off].map((key) => key.split(",").map(Number));
    }

    // Viridis from 0 to 1, as the book's figures draw weights (notation.md): ten
    // stops, linear in between.
    const VIRIDIS = ["440154", "482878", "3e4989", "31688e", "26828e", "1f9e89",
      "35b779", "6ece58", "b5de2b", "fde725"].map((h) => [0, 2, 4].map((k) => parseInt(h.slice(k, k + 2), 16)));
    function cellShade(weight) {
      const x = Math.min(1, Math.max(0, weight)) * 9;
      const i = Math.min(8, Math.floor(x));
      const rgb = VIRIDIS[i].map((v, k) => Math.round(v + (x - i) * (VIRIDIS[i + 1][k] - v)));
      return `rgb(${rgb.join(",")})`;
    }
    const swatch = (weight) => {
      const s = el("span", { "aria-hidden": "true", class: "afs-swatch" });
      s.style.cssText = `display:inline-block;width:0.8em;height:0.8em;margin-right:0.3em;background:${cellShade(weight)}`;
      return s;
    };
    const isOff = (layer) => off.has(`${layer},${shownHead}`);
    // A legend of the colour scale, 0 to 1.
    const legend = el("p", { class: "afs-note", "aria-hidden": "true" }, ["weight 0 "]);
    const bar = el("span");
    bar.style.cssText = "display:inline-block;width:8em;height:0.8em;vertical-align:middle;" +
      `background:linear-gradient(to right,${VIRIDIS.map((c) => `rgb(${c.join(",")})`).join(",")})`;
    legend.append(bar, " 1 (viridis)");

    // Both layers' weights of the shown head as small heatmaps (rows: queries, columns:
    // keys); hidden from screen readers, which read the same in the table.
    function heatmaps(result, t) {
      const size = Math.max(6, Math.min(12, Math.floor(220 / t)));
      const maps = [];
      for (let layer = 0; layer < config.num_layers; layer++) {
        const grid = el("div", { "aria-hidden": "true" });
        grid.style.cssText =
          `display:grid;grid-template-columns:repeat(${t},${size}px);` +
          "gap:1px;border:1px solid rgba(128,128,128,0.5);padding:1px;width:max-content";
        const rows = result.weights[layer][shownHead];
        for (let i = 0; i < t; i++) {
          for (let j = 0; j < t; j++) {
            const cell = el("span");
            cell.style.cssText = `width:${size}px;height:${size}px;background:${
              j > i ? "transparent" : cellShade(rows[i][j])
            }`;
            grid.append(cell);
          }
        }
        if (isOff(layer)) grid.style.opacity = "0.3";
        const name = `layer ${layer}, head ${shownHead}`;
        maps.push(
          el("figure", { style: "margin:0.25em 0.75em 0.25em 0" }, [
            el("figcaption", {
              class: "afs-note",
              text: isOff(layer) ? `${name}: off (weights computed, not used)` : name,
            }),
            grid,
          ]),
        );
      }
      return el("div", {}, [
        el("div", { class: "afs-row", style: "align-items:flex-start" }, maps),
        legend,
      ]);
    }

    function update() {
      const result = forward(config, weights, tokens, offPairs());
      const t = tokens.length;
      const rows = [];
      const header = el("tr", {}, [
        el("th", { scope: "col", text: "pos" }),
        el("th", { scope: "col", text: "token" }),
        el("th", { scope: "col", text: "next (p)" }),
      ]);
      for (let layer = 0; layer < config.num_layers; layer++) {
        header.append(
          el("th", { scope: "col", text: `layer ${layer}${isOff(layer) ? " (off)" : ""}` }),
        );
      }
      rows.push(el("thead", {}, [header]));
      const body = el("tbody");
      const predictions = [];
      for (let i = 0; i < t; i++) {
        const probs = common.softmax(result.logits[i]);
        const best = argmax(probs);
        predictions.push(best);
        const row = el("tr", {}, [
          el("th", { scope: "row", text: String(i) }),
          el("td", { text: letter(config, tokens[i]) }),
          el("td", { text: `${letter(config, best)} (${(100 * probs[best]).toFixed(0)}%)` }),
        ]);
        for (let layer = 0; layer < config.num_layers; layer++) {
          const w = result.weights[layer][shownHead][i];
          const top = argmax(w);
          const cell = el("td", {}, [
            swatch(w[top]),
            `${top} ${letter(config, tokens[top])} ${(100 * w[top]).toFixed(0)}%`,
          ]);
          if (isOff(layer)) cell.style.opacity = "0.6"; // computed, not used
          row.append(cell);
        }
        body.append(row);
      }
      rows.push(body);
      const caption = el("caption", {
        style: "white-space:normal",
        text:
          `Next token predicted at each position, and where head ${shownHead} ` +
          "of each layer looks most (key position, token, weight); a head switched off " +
          "still computes its weights, but its output is not used.",
      });
      const grid = el("table", { style: "white-space:nowrap;overflow-wrap:normal" }, [
        caption,
        ...rows,
      ]);
      table.replaceChildren(grid);
      maps.replaceChildren(heatmaps(result, t));
      const offText = off.size
        ? `Switched off: ${[...off].map((k) => `layer ${k.split(",")[0]} head ${k.split(",")[1]}`).join(", ")}.`
        : "Every head on.";
      const last = predictions[t - 1];
      let text = `${offText} After ${t} tokens the model predicts ${letter(config, last)}.`;
      if (heldOut) {
        const acc = accuracy(config, weights, heldOut.inputs, heldOut.targets, offPairs());
        text +=
          ` Accuracy on the predictable positions of ${heldOut.inputs.length} sequences ` +
          `drawn in the page like the held-out set (segments of ${spec.min_period} to ` +
          `${spec.max_period} tokens; the page's own random sample): ${(100 * acc).toFixed(1)}%.`;
      }
      status.textContent = text; // the live region announces each change
    }

    function run() {
      const parsed = parseTokens(input.value, config);
      if (parsed.error) {
        error.textContent = `Not run: ${parsed.error}.`;
        input.setAttribute("aria-invalid", "true");
        return;
      }
      error.textContent = "";
      input.removeAttribute("aria-invalid");
      tokens = parsed.tokens;
      update();
    }
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter") run();
    });
    runButton.addEventListener("click", run);
    update();
  }

  return { decodeFloats, loadWeights, forward, accuracy, inductionSequences, argmax, parseTokens, render };
});
