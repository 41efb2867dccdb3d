// The online-softmax stepper (chapter 7; attention_from_scratch.views.tiles): one query's
// scaled scores are visited a block of keys at a time. After each block the running maximum
// m, the running sum l of exp(score - m) and the unnormalised output o are updated,
// rescaling what came before by exp(m - m_sub), where m_sub is the new maximum m'; a block
// whose keys are all masked leaves m' at -inf, and the update then subtracts m_sub = 0
// instead (the safe maximum, chapter 7's m_sub). The last o / l is
// compared with softmax(scores) @ values, which the package's attention computed (the data's
// reference).
(function (global, factory) {
  var api = factory();
  var views = (global.AFSViews = global.AFSViews || {});
  views.tiles = api;
  if (typeof module === "object" && module.exports) module.exports = api;
})(typeof window !== "undefined" ? window : globalThis, function () {
  "use strict";

  function decode(entry) {
    const binary = atob(entry.data);
    const view = new DataView(new ArrayBuffer(binary.length));
    for (let i = 0; i < binary.length; i++) view.setUint8(i, binary.charCodeAt(i));
    const flat = [];
    for (let i = 0; i < binary.length / 4; i++) flat.push(view.getFloat32(4 * i, true));
    if (entry.shape.length === 1) return flat;
    const cols = entry.shape[1];
    return entry.shape.length === 2
      ? Array.from({ length: entry.shape[0] }, (_, r) => flat.slice(r * cols, (r + 1) * cols))
      : flat;
  }

  // data: {scores: {shape: [s]}, masked: [s booleans], values: {shape: [s, d_h]},
  // reference: [d_h], block_size}. Returns {blocks: [...], output, direct, max_diff}.
  function blocks(data) {
    const raw = decode(data.scores);
    const scores = raw.map((v, j) => (data.masked[j] ? -Infinity : v));
    const values = decode(data.values);
    const dh = values[0].length;
    let m = -Infinity;
    let ell = 0;
    let o = new Array(dh).fill(0);
    const out = [];
    for (let k0 = 0; k0 < scores.length; k0 += data.block_size) {
      const k1 = Math.min(k0 + data.block_size, scores.length);
      const block = scores.slice(k0, k1);
      const blockMax = Math.max(...block);
      const mNew = Math.max(m, blockMax);
      const mSafe = mNew === -Infinity ? 0 : mNew; // subtract 0 while nothing is seen
      const rescale = Math.exp(m - mSafe); // 0 for the first block seen
      const p = block.map((v) => Math.exp(v - mSafe));
      ell = ell * rescale + p.reduce((a, b) => a + b, 0);
      o = o.map((v, c) => v * rescale + p.reduce((a, w, j) => a + w * values[k0 + j][c], 0));
      out.push({ first: k0, end: k1, block_max: blockMax, m_before: m, m: mNew,
        m_sub: mSafe, rescale: rescale, ell: ell, o: o.slice(),
        current: ell > 0 ? o.map((v) => v / ell) : o.map(() => 0) });
      m = mNew;
    }
    const direct = data.reference;
    const output = o.map((v) => v / ell);
    const diff = Math.max(...output.map((v, c) => Math.abs(v - direct[c])));
    return { blocks: out, output: output, direct: direct, max_diff: diff };
  }

  // ------------------------------------------------------------------ view
  function render({ model, el: root }) {
    const c = globalThis.AFSViews.common;
    const data = { scores: model.get("scores"), masked: model.get("masked"),
      values: model.get("values"), reference: model.get("reference"),
      block_size: model.get("block_size") };
    const colours = model.get("colours");
    const result = blocks(data);
    const scores = decode(data.scores);
    let index = 0;
    const prev = c.el("button", { type: "button", text: "Previous block" });
    const next = c.el("button", { type: "button", text: "Next block" });
    const counter = c.el("span", { class: "afs-note" });
    root.appendChild(c.el("div", { class: "afs-row" }, [prev, next, counter]));
    const say = c.liveRegion(root);
    const keysBox = c.el("div", { class: "afs-scroll", tabindex: "0", role: "region",
      "aria-label": "The query's scores, block by block" });
    const stateBox = c.el("div", { class: "afs-scroll", tabindex: "0", role: "region",
      "aria-label": "The running quantities after this block" });
    root.appendChild(keysBox);
    root.appendChild(stateBox);
    const final = c.el("p", { class: "afs-note" });
    root.appendChild(final);
    const num = (v) => (v === -Infinity ? "-\u221e" : c.fmt(v, 3));
    const vec = (v) => "[" + v.map((x) => c.fmt(x, 3)).join(", ") + "]";

    function show() {
      const b = result.blocks[index];
      const rows = [];
      for (let j = 0; j < b.end; j++) {
        const masked = data.masked[j];
        const cell = c.el("td", { class: masked ? "afs-masked" : "",
          text: masked ? "masked" : c.fmt(scores[j], 3) });
        const here = j >= b.first;
        const row = c.el("tr", {}, [c.el("th", { scope: "row", text: String(j) }), cell,
          c.el("td", { class: "afs-left", text: here ? "this block" : "seen" })]);
        if (here) row.style.boxShadow = "inset 4px 0 0 " + colours.key;
        rows.push(row);
      }
      keysBox.replaceChildren(c.el("table", {}, [
        c.el("caption", { text: "Keys 0 to " + (b.end - 1) + ": scaled scores" }),
        c.el("thead", {}, [c.el("tr", {}, [c.el("th", { scope: "col", text: "key" }),
          c.el("th", { scope: "col", text: "score" }),
          c.el("th", { scope: "col", text: "block" })])]),
        c.el("tbody", {}, rows)]));
      const state = [
        ["block max", num(b.block_max)],
        ["m (before the block)", num(b.m_before)],
        ["m\u2032 (after the block)", num(b.m)],
        ["m_sub, subtracted (0 while m\u2032 = -\u221e)", num(b.m_sub)],
        ["rescale e^(m - m_sub)", c.fmt(b.rescale, 3)],
        ["\u2113 (running sum)", c.fmt(b.ell, 3)],
        ["o (running output)", vec(b.o)],
        ["o / \u2113 so far", vec(b.current)],
      ];
      stateBox.replaceChildren(c.el("table", {}, [
        c.el("caption", { text: "After block " + index + " (keys " + b.first + " to " +
          (b.end - 1) + ")" }),
        c.el("tbody", {}, state.map(([k, v]) => c.el("tr", {}, [
          c.el("th", { scope: "row", text: k }), c.el("td", { text: v })])))]));
      const last = index === result.blocks.length - 1;
      final.textContent = last
        ? "Final row o / \u2113 = " + vec(result.output) + "; softmax(scores) @ values = " +
          vec(result.direct) + "; largest difference " + result.max_diff.toExponential(1) + "."
        : "The final row appears after the last block.";
      counter.textContent = "block " + index + " of " + (result.blocks.length - 1);
      prev.setAttribute("aria-disabled", String(index === 0));
      next.setAttribute("aria-disabled", String(last));
      const allMasked = b.m === -Infinity;
      say("Block " + index + ", keys " + b.first + " to " + (b.end - 1) + ": " +
        (allMasked ? "every key masked, m stays minus infinity and \u2113 stays 0"
          : "m = " + num(b.m) + ", \u2113 = " + c.fmt(b.ell, 3)) + "." +
        (last && result.max_diff < 1e-9 ? " The final row equals the softmax." : ""));
    }
    prev.addEventListener("click", () => { if (index > 0) { index -= 1; show(); } });
    next.addEventListener("click", () => {
      if (index < result.blocks.length - 1) { index += 1; show(); }
    });
    show();
  }

  return { decode, blocks, render };
});
