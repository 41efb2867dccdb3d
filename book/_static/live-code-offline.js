// "Live code" (Thebe) loads its script from a CDN when the reader presses the button. Without a
// network that never arrives, and the button would say "Loading thebe from CDN..." for ever:
// say instead that live code needs the internet. The rest of the page works offline.
window.addEventListener(
  "error",
  (event) => {
    const script = event.target;
    if (!(script instanceof HTMLScriptElement) || typeof THEBE_JS_URL === "undefined") return;
    if (script.src !== THEBE_JS_URL) return;
    for (const button of document.querySelectorAll(".thebe-launch-button")) {
      button.textContent =
        "Live code needs an internet connection (it runs on mybinder.org); " +
        "everything else on this page works offline.";
      button.setAttribute("role", "status");
    }
  },
  true, // load errors do not bubble: catch them on their way down
);
