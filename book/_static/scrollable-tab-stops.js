// A code block or output that scrolls sideways must take the keyboard focus, or a reader
// without a mouse cannot scroll it (WCAG 2.1.1). The theme gives such blocks tabindex="0", but
// it measures them only when the page loads or the window is resized; a solution or a hidden
// cell opened later was measured while it had no size. Ask the theme to measure again whenever
// one opens (its resize handler is debounced, so this costs one pass).
(() => {
  const remeasure = () => window.dispatchEvent(new Event("resize"));
  // <details> (hidden cells) fire "toggle", which does not bubble: listen while it descends.
  document.addEventListener("toggle", remeasure, true);
  // Solutions open from the button or the title of their admonition (sphinx-togglebutton).
  document.addEventListener("click", (event) => {
    if (event.target.closest(".toggle-button, .dropdown > .admonition-title")) {
      setTimeout(remeasure, 0);
    }
  });
})();
