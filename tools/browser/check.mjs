// Open pages of the built book in the system's Chromium with the network switched off, wait for
// MathJax, and report for each page and colour mode: the theme the page shows, what is left of
// the LaTeX delimiters in the visible text, the requests that tried to leave the machine, the
// script errors, axe-core's WCAG 2.1 A/AA violations, and text wider than a 390 px screen.
//
// Usage: node check.mjs CHROMIUM ROOT PAGE.html [PAGE.html ...]   (prints JSON on stdout)

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { chromium } from "playwright-core";

const require = createRequire(import.meta.url);
const AXE = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
const WCAG = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"];
const MODES = ["light", "dark"];

const [executablePath, root, ...pages] = process.argv.slice(2);
if (!executablePath || !root || pages.length === 0) {
  console.error("usage: node check.mjs CHROMIUM ROOT PAGE.html [PAGE.html ...]");
  process.exit(2);
}

const browser = await chromium.launch({
  executablePath,
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage", // containers often have a small /dev/shm
    // No network: every request that is not a local file goes to a closed port.
    "--proxy-server=127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
  ],
});

// Several pages at once: much of each check is waiting (for the theme, MathJax, the live-code
// button), so a few contexts side by side finish sooner. The results keep the pages' order.
const jobs = pages.flatMap((name) => MODES.map((mode) => [name, mode]));
const results = new Array(jobs.length);
const concurrency = Math.max(1, Number(process.env.AFS_BROWSER_JOBS) || 4);
let next = 0;
try {
  await Promise.all(
    Array.from({ length: Math.min(concurrency, jobs.length) }, async () => {
      while (next < jobs.length) {
        const index = next++;
        results[index] = await check(...jobs[index]);
      }
    }),
  );
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(results, null, 1));

async function check(name, mode) {
  const context = await browser.newContext({
    colorScheme: mode,
    viewport: { width: 1280, height: 900 },
  });
  const page = await context.newPage();
  const external = [];
  const errors = [];
  page.on("request", (request) => {
    const url = request.url();
    if (!/^(file|data|blob|about):/.test(url)) external.push(url);
  });
  page.on("pageerror", (error) => errors.push(String(error.message || error)));
  // The theme's own switch: "dark" or "light" instead of following the system.
  await page.addInitScript((chosen) => localStorage.setItem("mode", chosen), mode);
  await page.goto(pathToFileURL(resolve(join(root, name))).href, { waitUntil: "load" });
  const typeset = await page.evaluate(async () => {
    const startup = window.MathJax && window.MathJax.startup;
    if (!startup || !startup.promise) return false;
    await startup.promise;
    return true;
  });
  await settle(page);
  const seen = await page.evaluate(() => ({
    theme: document.documentElement.dataset.theme || "",
    text: document.body.innerText,
    math: document.querySelectorAll("mjx-container").length,
  }));
  await page.addScriptTag({ content: AXE });
  // The page as it opens, then with every solution and hidden cell opened.
  const closed = await audit(page);
  await page.evaluate(() => {
    for (const button of document.querySelectorAll("button.toggle-button")) {
      if (button.getAttribute("aria-expanded") !== "true") button.click();
    }
    for (const details of document.querySelectorAll("details")) details.open = true;
  });
  await settle(page);
  // The theme re-measures which code blocks scroll 300 ms after it is asked to.
  await page.waitForTimeout(600);
  const opened = await audit(page);
  const openedText = await page.evaluate(() => document.body.innerText);
  // Live code (Thebe) needs the network: pressing its button must leave the page working and
  // say so, not fail silently.
  const reached = [...external];
  let liveCode = null;
  if (mode === "light" && (await page.locator("button.btn-launch-thebe").count()) > 0) {
    await page.evaluate(() => document.querySelector("button.btn-launch-thebe").click());
    await page.waitForTimeout(2000);
    liveCode = await page.evaluate(() =>
      [...document.querySelectorAll(".thebe-launch-button")].map((b) => b.innerText).join(" "),
    );
  }
  // A phone's width (light mode only: the layout does not change with the colours): text that
  // runs past the right edge of the screen, outside any block that scrolls sideways on purpose
  // (code, tables, wide figures), makes the reader scroll the whole page.
  let overflow = [];
  if (mode === "light") {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.waitForTimeout(300);
    overflow = await page.evaluate(() => {
      const scrolls = (element) => {
        for (let e = element.parentElement; e; e = e.parentElement) {
          if (["auto", "scroll", "hidden"].includes(getComputedStyle(e).overflowX)) return true;
        }
        return false;
      };
      const width = document.documentElement.clientWidth;
      const found = [];
      for (const element of document.querySelectorAll("article p, article li, article code")) {
        const box = element.getBoundingClientRect();
        if (box.width > 0 && box.right > width + 1 && !scrolls(element)) {
          found.push(`${element.tagName.toLowerCase()}: ${element.innerText.slice(0, 60)}`);
        }
      }
      return found;
    });
  }
  await context.close();
  return {
    page: name,
    overflow,
    mode,
    theme: seen.theme,
    typeset,
    math: seen.math,
    // Solutions and hidden cells included: the text once everything is open.
    raw_math: ["\\(", "\\)", "\\[", "\\]", "$$"].filter(
      (mark) => seen.text.includes(mark) || openedText.includes(mark),
    ),
    external: reached,
    errors,
    live_code: liveCode,
    violations: [...closed, ...opened.filter((v) => !closed.some((c) => same(c, v)))],
  };
}

// Colours change with a transition when the theme switches to the chosen mode, or a section
// opens: let every transition end (and the fonts load) before measuring contrast.
async function settle(page) {
  await page.evaluate(async () => {
    await document.fonts.ready;
    const finite = document.getAnimations().filter(
      (animation) => animation.effect.getComputedTiming().endTime !== Infinity,
    );
    await Promise.all(finite.map((animation) => animation.finished));
  });
}

// Only the violations leave the page: axe also reports every node that passed (thousands on a
// chapter), and copying those out of the page and giving each a selector took about a third of
// each audit. resultTypes trims the passes, not the violations.
async function audit(page) {
  return page.evaluate(async (tags) => {
    const result = await window.axe.run(document, {
      runOnly: { type: "tag", values: tags },
      resultTypes: ["violations"],
    });
    return result.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.map((n) => ({ target: n.target.join(" "), summary: n.failureSummary })),
    }));
  }, WCAG);
}

function same(a, b) {
  return a.id === b.id && JSON.stringify(a.nodes) === JSON.stringify(b.nodes);
}
