// Head view (chapters 4 and 6), after bertviz's: the tokens in two columns, queries on the
// left and keys on the right; from the chosen query one line per key and head, in the head's
// colour, as opaque as the weight. Data (model.get): tokens, weights [layer][head][query][key],
// layer_names, head_colours, query, threshold. Exports render and the pure functions lines and
// strongest.
(function (global) {
  "use strict";
  var views = (global.AFSViews = global.AFSViews || {});
  var common = views.common;
  if (!common && typeof require === "function") common = require("./common.js");
  var SVG = "http" + "://www.w3.org/2000/svg"; // a name, never fetched
  var ROW = 34; // px per token row

  // The lines drawn for one query: every key whose weight reaches the threshold, for each
  // head switched on, as {head, key, weight}.
  function lines(data, layer, query, heads) {
    var out = [];
    heads.forEach(function (head) {
      data.weights[layer][head][query].forEach(function (weight, key) {
        if (weight >= data.threshold) out.push({ head: head, key: key, weight: weight });
      });
    });
    return out;
  }

  // For each head switched on, the key it weights most for this query: {head, key, weight}.
  function strongest(data, layer, query, heads) {
    return heads.map(function (head) {
      var row = data.weights[layer][head][query];
      var key = common.argmax(row);
      return { head: head, key: key, weight: row[key] };
    });
  }

  // Black (a head's colour from the eighth) follows the page's text colour, so that its lines
  // stay visible in a dark theme.
  function paint(colour) {
    return colour.toLowerCase() === "#000000" ? "currentColor" : colour;
  }

  function render(ctx) {
    var model = ctx.model;
    var el = common.el;
    var fmt = common.fmt;
    var data = {
      tokens: model.get("tokens"), weights: model.get("weights"),
      threshold: model.get("threshold"),
    };
    var names = model.get("layer_names");
    var colours = model.get("head_colours");
    var t = data.tokens.length;
    var layer = 0;
    var query = model.get("query");
    var on = colours.map(function () { return true; });
    var id = common.uid("afs-heads");

    var root = el("div", { class: "afs-heads" });
    root.appendChild(el("p", { class: "afs-note", id: id + "-help", text:
      "Choose a query token on the left (hover, click, tap, or the arrow keys once one has " +
      "the focus): its lines go to the keys on the right, one colour per head, darker for " +
      "larger weights." }));

    var layerButtons = names.map(function (name) {
      return el("button", { type: "button", text: name });
    });
    if (names.length > 1) {
      root.appendChild(el("fieldset", {}, [el("legend", { text: "Layer" }),
        el("div", { class: "afs-row", role: "radiogroup", "aria-label": "Layer" },
          layerButtons)]));
    }
    var headButtons = colours.map(function (colour, head) {
      var button = el("button", { type: "button", "aria-pressed": "true" }, [
        el("span", { class: "afs-swatch", "aria-hidden": "true",
          style: "background:" + paint(colour) }), "head " + head]);
      button.addEventListener("click", function () {
        on[head] = !on[head];
        button.setAttribute("aria-pressed", on[head] ? "true" : "false");
        draw();
      });
      return button;
    });
    // With a single head a toggle could only hide everything: there is none then.
    if (colours.length > 1) {
      root.appendChild(el("fieldset", {}, [el("legend", {
        text: "Heads (press to show or hide)" }), el("div", { class: "afs-row" },
        headButtons)]));
    }

    var tokenButtons = data.tokens.map(function (token, i) {
      return el("button", { type: "button", class: "afs-token",
        style: "height:" + ROW + "px" }, [i + " " + token]);
    });
    var height = ROW * t;
    var svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("viewBox", "0 0 100 " + height);
    svg.setAttribute("preserveAspectRatio", "none");
    svg.setAttribute("height", String(height));
    svg.setAttribute("width", "100%");
    svg.setAttribute("aria-hidden", "true");
    svg.setAttribute("focusable", "false");
    var keyLabels = data.tokens.map(function (token, j) {
      return el("div", { class: "afs-key", style: "height:" + ROW + "px;line-height:" + ROW +
        "px" }, [j + " " + token]);
    });
    root.appendChild(el("div", { class: "afs-heads-grid" }, [
      el("div", { class: "afs-col", role: "radiogroup", "aria-label": "Query token",
        "aria-describedby": id + "-help" }, tokenButtons),
      el("div", { class: "afs-lines" }, [svg]),
      el("div", { class: "afs-col", "aria-hidden": "true" }, keyLabels),
    ]));

    var say = common.liveRegion(root);
    var tableBox = el("div", { class: "afs-scroll" });
    var syncTable = common.scrollStop(tableBox, "Weights of the chosen query");
    root.appendChild(tableBox);
    ctx.el.appendChild(root);

    function active() {
      return on.map(function (v, head) { return v ? head : -1; })
        .filter(function (head) { return head >= 0; });
    }

    function draw() {
      var heads = active();
      var drawn = lines(data, layer, query, heads);
      while (svg.firstChild) svg.removeChild(svg.firstChild);
      var spread = heads.length > 1 ? 4 / (heads.length - 1) : 0;
      drawn.forEach(function (line) {
        var offset = (heads.indexOf(line.head) - (heads.length - 1) / 2) * spread;
        var path = document.createElementNS(SVG, "line");
        path.setAttribute("x1", "1");
        path.setAttribute("x2", "99");
        path.setAttribute("y1", String(ROW * query + ROW / 2 + offset));
        path.setAttribute("y2", String(ROW * line.key + ROW / 2 + offset));
        path.setAttribute("stroke", paint(colours[line.head]));
        path.setAttribute("stroke-opacity", String(Math.min(1, 0.1 + 0.9 * line.weight)));
        path.setAttribute("stroke-width", String(1 + 4 * line.weight));
        path.setAttribute("vector-effect", "non-scaling-stroke");
        path.setAttribute("class", "afs-line");
        svg.appendChild(path);
      });
      keyLabels.forEach(function (label, j) {
        label.style.fontWeight = drawn.some(function (l) {
          return l.key === j && l.weight >= 0.5;
        }) ? "700" : "400";
      });
      var q = query + ' "' + data.tokens[query] + '"';
      var rows = data.tokens.map(function (token, j) {
        return el("tr", {}, [el("th", { scope: "row", class: "afs-left", text: j + " " + token })]
          .concat(heads.map(function (head) {
            return el("td", { text: fmt(data.weights[layer][head][query][j]) });
          })));
      });
      tableBox.replaceChildren(el("table", {}, [
        el("caption", { text: names[layer] + ", query " + q + ": weight of each key" }),
        el("thead", {}, [el("tr", {}, [el("th", { scope: "col", class: "afs-left",
          text: "key" })].concat(heads.map(function (head) {
          return el("th", { scope: "col", text: "head " + head });
        })))]),
        el("tbody", {}, rows),
      ]));
      syncTable();
      var parts = strongest(data, layer, query, heads).map(function (s) {
        return "head " + s.head + " attends most to key " + s.key + ' "' + data.tokens[s.key] +
          '" (' + fmt(s.weight) + ")";
      });
      say(names[layer] + ", query " + q + ": " + (parts.length ? parts.join("; ") :
        "no head shown") + ". " + drawn.length + (drawn.length === 1 ? " line" : " lines") +
        " drawn.");
    }

    if (names.length > 1) {
      var chooseLayer = common.chooser(layerButtons, function (index) {
        layer = index;
        draw();
      });
      chooseLayer(0, false);
    }
    var chooseQuery = common.chooser(tokenButtons, function (index) {
      query = index;
      draw();
    });
    // Hovering chooses too, but only when the pointer itself moves: when the keys scroll the
    // page under a resting pointer, the browser reports a move at the same place, ignored.
    var last = null;
    tokenButtons.forEach(function (button, i) {
      button.addEventListener("pointermove", function (event) {
        var here = event.clientX + "," + event.clientY;
        if (here === last) return;
        last = here;
        if (query !== i) chooseQuery(i, false);
      });
    });
    chooseQuery(query, false);
  }

  views.heads = { render: render, lines: lines, strongest: strongest };
  if (typeof module === "object" && module.exports) module.exports = views.heads;
})(typeof window !== "undefined" ? window : globalThis);
