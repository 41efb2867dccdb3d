// Attention explorer (chapters 1 to 3): choose a query token and see its scores, the softmax
// weights the browser computes from them (with a temperature and a causal mask) and the
// context vector they mix. Data (model.get): tokens, scores (t x t), values (t x d), scale,
// temperature, causal, query, colours, symbols. Exports render and the pure function state.
(function (global) {
  "use strict";
  var views = (global.AFSViews = global.AFSViews || {});
  var common = views.common;
  if (!common && typeof require === "function") common = require("./common.js");

  // What the view shows for one query: its scores, which keys the causal mask removes, the
  // weights softmax(scores * scale / temperature) and the context vector sum_j w_j v_j.
  function state(data, query, temperature, causal) {
    var scores = data.scores[query];
    var masked = scores.map(function (_, j) { return Boolean(causal) && j > query; });
    var weights = common.softmax(scores, {
      scale: data.scale, temperature: temperature, masked: masked,
    });
    return {
      scores: scores,
      masked: masked,
      weights: weights,
      context: common.mix(weights, data.values),
      top: common.argmax(weights),
      sum: weights.reduce(function (a, b) { return a + b; }, 0),
    };
  }

  function render(ctx) {
    var model = ctx.model;
    var el = common.el;
    var fmt = common.fmt;
    var data = {
      tokens: model.get("tokens"), scores: model.get("scores"), values: model.get("values"),
      scale: model.get("scale"),
    };
    var colours = model.get("colours");
    var sym = model.get("symbols");
    var t = data.tokens.length;
    var query = model.get("query");
    var temperature = model.get("temperature");
    var causal = model.get("causal");
    var id = common.uid("afs-explorer");

    var root = el("div", { class: "afs-explorer" });
    root.appendChild(el("p", { class: "afs-note", id: id + "-help", text:
      "Choose a query token (click, tap, or the arrow keys once one has the focus); " +
      "the temperature slider divides the scores before the softmax." }));

    // One group with one name (its legend) and one description, read once on entering it
    // rather than on every arrow key; only the chosen query wears the query colour.
    var tokenButtons = data.tokens.map(function (token, i) {
      return el("button", { type: "button" }, [i + " " + token]);
    });
    var querySwatch = el("span", { class: "afs-swatch", style: "background:" + colours.query,
      "aria-hidden": "true" });
    root.appendChild(el("fieldset", { role: "radiogroup", "aria-describedby": id + "-help" },
      [el("legend", { text: "Query token" }), el("div", { class: "afs-row" }, tokenButtons)]));

    var slider = el("input", { type: "range", id: id + "-temp", min: "0.1", max: "5",
      step: "0.1", value: String(temperature) });
    // The slider's own value is what a screen reader reads; the <output> (a live region by
    // default) would say it a second time.
    var sliderValue = el("output", { for: id + "-temp", "aria-live": "off",
      text: fmt(temperature, 1) });
    var mask = el("input", { type: "checkbox", id: id + "-mask" });
    mask.checked = Boolean(causal);
    root.appendChild(el("fieldset", {}, [el("legend", { text: "Softmax" }),
      el("div", { class: "afs-row" }, [
        el("label", { for: id + "-temp", class: "afs-slider" },
          [el("span", { text: "Temperature \u03c4" }), slider, sliderValue]),
        el("label", { for: id + "-mask" }, [mask, "Causal mask"]),
      ]),
      el("p", { class: "afs-note", text: sym.weight + " = softmax(" + sym.score +
        (model.get("scale_text") === "1" ? "" : " \u00d7 " + model.get("scale_text")) +
        " / \u03c4)" }),
    ]));

    var say = common.liveRegion(root);
    var weightsBox = el("div", { class: "afs-scroll" });
    var contextBox = el("div", { class: "afs-scroll" });
    var syncWeights = common.scrollStop(weightsBox, "Scores and weights");
    var syncContext = common.scrollStop(contextBox, "Context vector");
    root.appendChild(weightsBox);
    root.appendChild(contextBox);
    ctx.el.appendChild(root);

    // The context bars share one scale for every query, temperature and mask: a context
    // vector is a weighted average of the value rows, so no |z_k| exceeds the largest |v|.
    var largestValue = Math.max.apply(null, data.values.map(function (row) {
      return Math.max.apply(null, row.map(Math.abs));
    })) || 1;

    // A bar in a track as wide as its cell, so that lengths compare down a column. Weights
    // have no role colour (book/notation.md): their bars take the text colour.
    function bar(fraction, colour) {
      var width = Math.max(0, Math.min(1, Math.abs(fraction))) * 100;
      return el("span", { class: "afs-track", "aria-hidden": "true" }, [
        el("span", { class: "afs-fill", style: "width:" + width.toFixed(1) + "%" +
          (colour ? ";background:" + colour : "") })]);
    }

    function draw() {
      var s = state(data, query, temperature, causal);
      var rows = data.tokens.map(function (token, j) {
        var off = s.masked[j];
        return el("tr", { class: off ? "afs-masked-row" : null }, [
          el("th", { scope: "row", class: "afs-left" }, [j + " " + token]),
          el("td", { class: off ? "afs-masked" : null, text: fmt(s.scores[j]) }),
          el("td", { text: off ? "0 (masked)" : fmt(s.weights[j]) }),
          el("td", { class: "afs-track-cell" }, [bar(s.weights[j], null)]),
        ]);
      });
      var q = query + ' "' + data.tokens[query] + '"';
      weightsBox.replaceChildren(el("table", {}, [
        el("caption", { text: "Query " + q + ": score " + sym.score + " and weight " +
          sym.weight + " for each key" }),
        el("thead", {}, [el("tr", {}, [el("th", { scope: "col", class: "afs-left",
          text: "key" }), el("th", { scope: "col", text: sym.score }),
          el("th", { scope: "col", text: sym.weight }),
          el("th", { scope: "col", class: "afs-left", text: "weight bar" })])]),
        el("tbody", {}, rows),
      ]));
      var contextRows = s.context.map(function (value, k) {
        return el("tr", {}, [el("th", { scope: "row", class: "afs-left", text: String(k) }),
          el("td", { text: fmt(value) }),
          el("td", { class: "afs-track-cell" }, [bar(value / largestValue, colours.output)])]);
      });
      contextBox.replaceChildren(el("table", {}, [
        el("caption", { text: "Context vector " + sym.context + " of query " + query +
          " = \u03a3 " + sym.weight + " \u00b7 " + sym.value + "; a full bar is " +
          fmt(largestValue) + ", the largest |" + sym.value + "|, for every query" }),
        el("thead", {}, [el("tr", {}, [el("th", { scope: "col", class: "afs-left",
          text: "component" }), el("th", { scope: "col", text: "value" }),
          el("th", { scope: "col", class: "afs-left", text: "bar" })])]),
        el("tbody", {}, contextRows),
      ]));
      var seen = causal ? query + 1 : t;
      querySwatch.remove();
      tokenButtons[query].insertBefore(querySwatch, tokenButtons[query].firstChild);
      syncWeights();
      syncContext();
      say("Query " + q + ": largest weight " + fmt(s.weights[s.top]) + " on key " + s.top +
        ' "' + data.tokens[s.top] + '"; ' + (seen === 1 ? "its one weight is " :
        "its " + seen + " weights sum to ") + fmt(s.sum) + "; temperature " +
        fmt(temperature, 1) + (causal ? "; causal mask on." : "; no mask."));
    }

    var choose = common.chooser(tokenButtons, function (index) {
      query = index;
      draw();
    });
    slider.addEventListener("input", function () {
      temperature = Number(slider.value);
      sliderValue.textContent = fmt(temperature, 1);
      draw();
    });
    mask.addEventListener("change", function () {
      causal = mask.checked;
      draw();
    });
    choose(query, false);
  }

  views.explorer = { render: render, state: state };
  if (typeof module === "object" && module.exports) module.exports = views.explorer;
})(typeof window !== "undefined" ? window : globalThis);
