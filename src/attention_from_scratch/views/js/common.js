// Shared helpers of the interactive views (attention_from_scratch.views): softmax, number
// formatting, a small DOM builder, a live region for screen readers, keyboard groups, and the
// boot step that hands a view its data. Plain ES2019: inlined in a page it registers
// window.AFSViews.common; required by Node (the tests) it exports the same object.
(function (global) {
  "use strict";
  var views = (global.AFSViews = global.AFSViews || {});
  if (views.common) {
    if (typeof module === "object" && module.exports) module.exports = views.common;
    return; // a second view in the same page reuses the first copy
  }

  // softmax_j(scores[j] * scale / temperature), with the keys where masked[j] is true removed
  // (weight 0), computed stably: the largest kept score is subtracted first.
  function softmax(scores, options) {
    var o = options || {};
    var scale = o.scale === undefined ? 1 : o.scale;
    var temperature = o.temperature === undefined ? 1 : o.temperature;
    var masked = o.masked || [];
    var logits = scores.map(function (s, j) {
      return masked[j] ? -Infinity : (s * scale) / temperature;
    });
    var top = Math.max.apply(null, logits);
    if (top === -Infinity) return logits.map(function () { return 0; });
    var exps = logits.map(function (l) { return l === -Infinity ? 0 : Math.exp(l - top); });
    var total = exps.reduce(function (a, b) { return a + b; }, 0);
    return exps.map(function (e) { return e / total; });
  }

  // The weighted mix sum_j weights[j] * vectors[j]: a context vector.
  function mix(weights, vectors) {
    var size = vectors.length ? vectors[0].length : 0;
    var out = [];
    for (var k = 0; k < size; k++) {
      var sum = 0;
      for (var j = 0; j < weights.length; j++) sum += weights[j] * vectors[j][k];
      out.push(sum);
    }
    return out;
  }

  function argmax(values) {
    var best = 0;
    for (var j = 1; j < values.length; j++) if (values[j] > values[best]) best = j;
    return best;
  }

  // Numbers as the book prints them: fixed decimals, "-0.00" written "0.00".
  function fmt(x, digits) {
    var text = x.toFixed(digits === undefined ? 2 : digits);
    return /^-0\.?0*$/.test(text) ? text.slice(1) : text;
  }

  // el("button", {class: "x", "aria-pressed": "true", onclick: f}, ["text", child])
  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) {
      var value = attrs[key];
      if (value === null || value === undefined || value === false) return;
      if (key.slice(0, 2) === "on") node.addEventListener(key.slice(2), value);
      else if (key === "text") node.textContent = value;
      else node.setAttribute(key, value === true ? "" : String(value));
    });
    (children || []).forEach(function (child) {
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    });
    return node;
  }

  // A polite live region; say(text) announces text to screen readers (and shows it).
  function liveRegion(parent) {
    var region = el("p", { class: "afs-status", role: "status", "aria-live": "polite" });
    parent.appendChild(region);
    return function say(text) {
      region.textContent = text;
    };
  }

  // A box whose table may be wider than the page: a keyboard user scrolls it once it has
  // the focus, so it is a named tab stop (role region) exactly while it overflows, not
  // before. Returns sync(), to call after the box's content changes; a resize calls it too.
  function scrollStop(box, label) {
    function sync() {
      var scrolls = box.scrollWidth > box.clientWidth + 1;
      if (scrolls === (box.getAttribute("tabindex") === "0")) return;
      if (scrolls) {
        box.setAttribute("tabindex", "0");
        box.setAttribute("role", "region");
        box.setAttribute("aria-label", label);
      } else {
        ["tabindex", "role", "aria-label"].forEach(function (name) {
          box.removeAttribute(name);
        });
      }
    }
    if (typeof ResizeObserver === "function") new ResizeObserver(sync).observe(box);
    else if (typeof window !== "undefined") window.addEventListener("resize", sync);
    return sync;
  }

  // A group of buttons of which one is chosen (role radiogroup): one tab stop, the arrow keys
  // move and choose, Home and End jump, a click or tap chooses. onChoose(index) is called
  // with the new index; the returned function chooses from code.
  function chooser(buttons, onChoose) {
    function choose(index, focus) {
      buttons.forEach(function (button, j) {
        button.setAttribute("aria-checked", j === index ? "true" : "false");
        button.tabIndex = j === index ? 0 : -1;
      });
      if (focus) buttons[index].focus();
      onChoose(index);
    }
    buttons.forEach(function (button, j) {
      button.setAttribute("role", "radio");
      button.addEventListener("click", function () { choose(j, false); });
      button.addEventListener("keydown", function (event) {
        var n = buttons.length;
        var next = { ArrowRight: j + 1, ArrowDown: j + 1, ArrowLeft: j - 1, ArrowUp: j - 1,
          Home: 0, End: n - 1 }[event.key];
        if (next === undefined) return;
        event.preventDefault();
        choose((next + n) % n, true);
      });
    });
    return choose;
  }

  // Hand a view its data: read the JSON beside the mount point, render, hide the fallback.
  function boot(id, name) {
    var root = document.getElementById(id);
    if (!root || root.getAttribute("data-afs-ready")) return;
    var data = JSON.parse(root.querySelector("script.afs-data").textContent);
    var model = {
      get: function (key) { return data[key]; },
      set: function () {},
      on: function () {},
      save_changes: function () {},
    };
    views[name].render({ model: model, el: root.querySelector(".afs-mount") });
    root.querySelector(".afs-fallback").hidden = true;
    root.setAttribute("data-afs-ready", "true");
  }

  var counter = 0;
  function uid(prefix) {
    counter += 1;
    return (prefix || "afs") + "-" + counter + "-" + Math.random().toString(36).slice(2, 8);
  }

  views.common = {
    softmax: softmax,
    mix: mix,
    argmax: argmax,
    fmt: fmt,
    el: el,
    liveRegion: liveRegion,
    chooser: chooser,
    scrollStop: scrollStop,
    boot: boot,
    uid: uid,
  };
  views.boot = boot;
  if (typeof module === "object" && module.exports) module.exports = views.common;
})(typeof window !== "undefined" ? window : globalThis);
