// The KV-cache stepper (chapter 7; attention_from_scratch.views.cache_stepper): a prompt is
// prefilled, then one token is decoded per step. Each step projects only its new tokens,
// appends their keys and values to the cache, and lets the new queries attend to every
// cached key; a full causal pass over all the tokens so far, computed separately, gives the
// same output rows. Computed in float64 from the layer's float32 weights.
(function (global, factory) {
  var api = factory();
  var views = (global.AFSViews = global.AFSViews || {});
  views.cache_stepper = api;
  if (typeof module === "object" && module.exports) module.exports = api;
})(typeof window !== "undefined" ? window : globalThis, function () {
  "use strict";
  // The shared helpers (js/common.js): inlined before this file in a page, required in Node.
  const common = (globalThis.AFSViews && globalThis.AFSViews.common) || require("./common.js");

  // {shape: [rows, cols], data: base64 of little-endian float32} -> array of row arrays.
  function decode(entry) {
    const binary = atob(entry.data);
    const view = new DataView(new ArrayBuffer(binary.length));
    for (let i = 0; i < binary.length; i++) view.setUint8(i, binary.charCodeAt(i));
    const cols = entry.shape.length > 1 ? entry.shape[1] : entry.shape[0];
    const rows = entry.shape.length > 1 ? entry.shape[0] : 1;
    const out = [];
    for (let r = 0; r < rows; r++) {
      const row = [];
      for (let c = 0; c < cols; c++) row.push(view.getFloat32(4 * (r * cols + c), true));
      out.push(row);
    }
    return entry.shape.length > 1 ? out : out[0];
  }

  // rows x (n) times W^T (W: m rows of n) plus bias, as torch's nn.Linear.
  function linear(x, weight, bias) {
    return x.map((row) =>
      weight.map((w, i) => {
        let sum = bias ? bias[i] : 0;
        for (let j = 0; j < row.length; j++) sum += row[j] * w[j];
        return sum;
      }),
    );
  }

  function layer(data) {
    const w = data.weights;
    return {
      h: data.num_heads,
      q: decode(w.W_query),
      k: decode(w.W_key),
      v: decode(w.W_value),
      o: decode(w.out_proj_weight),
      ob: decode(w.out_proj_bias),
      x: decode(data.x),
    };
  }

  // Queries at positions first, first + 1, ... attend causally to keys/values 0..s-1.
  // Returns {out: rows of d_out, weights: [head][row][key]}.
  function attend(L, queries, keys, values, first) {
    const d = queries[0].length;
    const dh = d / L.h;
    const scale = 1 / Math.sqrt(dh);
    const context = queries.map(() => new Array(d).fill(0));
    const weights = [];
    for (let head = 0; head < L.h; head++) {
      const rows = queries.map((q, r) => {
        const visible = first + r + 1; // causal: keys 0..position
        const scores = [];
        for (let j = 0; j < visible; j++) {
          let sum = 0;
          for (let c = head * dh; c < (head + 1) * dh; c++) sum += q[c] * scale * keys[j][c];
          scores.push(sum);
        }
        const a = common.softmax(scores);
        for (let j = 0; j < visible; j++) {
          for (let c = head * dh; c < (head + 1) * dh; c++) context[r][c] += a[j] * values[j][c];
        }
        return a;
      });
      weights.push(rows);
    }
    return { out: linear(context, L.o, L.ob), weights };
  }

  // Every step: prefill of prompt_length tokens, then one token at a time.
  function steps(data) {
    const L = layer(data);
    const t = L.x.length;
    const cacheK = [];
    const cacheV = [];
    const result = [];
    let start = 0;
    while (start < t) {
      const end = start === 0 ? data.prompt_length : start + 1;
      const fresh = L.x.slice(start, end);
      cacheK.push(...linear(fresh, L.k, null)); // only the new tokens are projected
      cacheV.push(...linear(fresh, L.v, null));
      const step = attend(L, linear(fresh, L.q, null), cacheK, cacheV, start);
      // The full recomputation: every token so far projected again, every row computed.
      const all = L.x.slice(0, end);
      const full = attend(L, linear(all, L.q, null), linear(all, L.k, null),
        linear(all, L.v, null), 0);
      const fullRows = full.out.slice(start, end);
      let diff = 0;
      step.out.forEach((row, r) => row.forEach((v, c) => {
        diff = Math.max(diff, Math.abs(v - fullRows[r][c]));
      }));
      result.push({ first: start, end: end, reused: start, computed: end - start,
        outputs: step.out, full: fullRows, max_diff: diff, weights: step.weights });
      start = end;
    }
    return result;
  }

  // ------------------------------------------------------------------ view
  function render({ model, el: root }) {
    const c = globalThis.AFSViews.common;
    const data = { x: model.get("x"), weights: model.get("weights"),
      num_heads: model.get("num_heads"), prompt_length: model.get("prompt_length") };
    const all = steps(data);
    const colours = model.get("colours");
    let index = 0;
    const prev = c.el("button", { type: "button", text: "Previous step" });
    const next = c.el("button", { type: "button", text: "Next step" });
    const counter = c.el("span", { class: "afs-note" });
    root.appendChild(c.el("div", { class: "afs-row" }, [prev, next, counter]));
    const say = c.liveRegion(root);
    const box = c.el("div", { class: "afs-scroll", tabindex: "0", role: "region",
      "aria-label": "The cache at this step" });
    root.appendChild(box);
    const check = c.el("p", { class: "afs-note" });
    root.appendChild(check);

    function swatch(colour) {
      const s = c.el("span", { class: "afs-swatch", "aria-hidden": "true" });
      s.style.background = colour;
      return s;
    }

    function show(announce) {
      const step = all[index];
      const h = data.num_heads;
      const last = step.weights.map((head) => head[head.length - 1]); // newest query
      const head = c.el("tr", {}, [
        c.el("th", { scope: "col", text: "pos", style: "white-space:nowrap" }),
        c.el("th", { scope: "col", text: "keys, values" }),
      ]);
      for (let i = 0; i < h; i++) {
        head.appendChild(c.el("th", { scope: "col", text: "head " + i }));
      }
      const body = c.el("tbody");
      for (let j = 0; j < step.end; j++) {
        const fresh = j >= step.first;
        const cell = c.el("td", { class: "afs-left" }, [
          swatch(fresh ? colours.key : colours.cache),
          fresh ? "computed" : "reused",
        ]);
        if (fresh) cell.style.fontWeight = "700";
        const row = c.el("tr", {}, [c.el("th", { scope: "row", text: String(j) }), cell]);
        last.forEach((w) => row.appendChild(c.el("td", { text: c.fmt(w[j], 2) })));
        body.appendChild(row);
      }
      const caption = "Step " + index + ": keys and values in the cache, and the weights " +
        "of the newest query (position " + (step.end - 1) + ") in every head";
      box.replaceChildren(c.el("table", {}, [
        c.el("caption", { text: caption }), c.el("thead", {}, [head]), body]));
      const out = step.outputs[step.outputs.length - 1];
      const full = step.full[step.full.length - 1];
      check.textContent = "Output of position " + (step.end - 1) + ": [" +
        out.slice(0, 4).map((v) => c.fmt(v, 3)).join(", ") + ", ...]; the full " +
        "recomputation gives [" + full.slice(0, 4).map((v) => c.fmt(v, 3)).join(", ") +
        ", ...]; largest difference over the step's rows " + step.max_diff.toExponential(1) +
        " (the same float64 arithmetic in the same order, so equal by construction; PyTorch " +
        "differs by rounding, as the page shows).";
      counter.textContent = "step " + index + " of " + (all.length - 1);
      // aria-disabled, not disabled: a disabled button would drop the keyboard focus.
      prev.setAttribute("aria-disabled", String(index === 0));
      next.setAttribute("aria-disabled", String(index === all.length - 1));
      const what = index === 0
        ? "Prefill: " + step.computed + " prompt tokens projected, nothing reused."
        : "Decode step " + index + ": token " + step.first + " projected, " + step.reused +
          " keys and values reused from the cache.";
      const same = step.max_diff < 1e-9 ? " Its output equals the full recomputation." : "";
      if (announce) say(what + same); // not on page load: only after a button press
    }
    prev.addEventListener("click", () => { if (index > 0) { index -= 1; show(true); } });
    next.addEventListener("click", () => {
      if (index < all.length - 1) { index += 1; show(true); }
    });
    show(false);
  }

  return { decode, steps, attend, render };
});
