// Drives the attention explorer and the head view in Chromium with the keyboard, at 390 px in
// light mode and 1280 px in dark mode, with the network switched off, and prints one JSON
// report per page, width and mode: what each view showed after each key, whether the focus
// was visible, requests that tried to leave the machine, script errors, views wider than the
// window, and axe-core's WCAG 2.1 A/AA violations inside these views after the interaction.
//
// Usage: node views_a_browser.mjs CHROMIUM ROOT TOOLS SHOTS PAGE.html [PAGE.html ...]
//   TOOLS: tools/browser (its node_modules hold playwright-core and axe-core);
//   SHOTS: a folder for one screenshot per view, width and mode.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const [executablePath, root, tools, shots, ...pages] = process.argv.slice(2);
const require = createRequire(join(resolve(tools), "package.json"));
const { chromium } = require("playwright-core");
const AXE = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
const WCAG = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"];
// Each width once and each mode once: the phone in the theme's light mode, the laptop in its
// dark mode (the book-wide axe-core check covers every page in both modes as it opens).
const RUNS = [[390, "light"], [1280, "dark"]];

const browser = await chromium.launch({
  executablePath,
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-dev-shm-usage",
    "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>"],
});
const reports = [];
try {
  for (const name of pages) {
    for (const [width, mode] of RUNS) reports.push(await check(name, width, mode));
    reports.push(await withoutScripts(name));
  }
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(reports, null, 1));

async function check(name, width, mode) {
  const context = await browser.newContext({ viewport: { width, height: 900 },
    colorScheme: mode });
  const page = await context.newPage();
  const external = [];
  const errors = [];
  page.on("request", (r) => { if (!/^(file|data|blob|about):/.test(r.url())) external.push(r.url()); });
  page.on("pageerror", (e) => errors.push(String(e.message || e)));
  await page.addInitScript((chosen) => localStorage.setItem("mode", chosen), mode);
  await page.goto(pathToFileURL(resolve(join(root, name))).href, { waitUntil: "load" });
  const ids = await page.evaluate(() =>
    [...document.querySelectorAll(".afs-view-explorer, .afs-view-heads")].map((v) => ({
      id: v.id, kind: v.classList.contains("afs-view-explorer") ? "explorer" : "heads",
    })));
  const views = [];
  for (const { id, kind } of ids) {
    const seen = { id, kind, ready: await page.evaluate((i) =>
      document.getElementById(i).getAttribute("data-afs-ready") === "true", id) };
    if (seen.ready) {
      await tabInto(page, id);
      if (kind === "explorer") await driveExplorer(page, id, seen);
      else await driveHeads(page, id, seen);
    }
    seen.overflow = await page.evaluate((i) => {
      const v = document.getElementById(i);
      return v.getBoundingClientRect().right > window.innerWidth + 1 ||
        v.scrollWidth > v.clientWidth + 1;
    }, id);
    const shot = join(shots, `${name.replace(/[^\w]+/g, "_")}-${id}-${width}-${mode}.png`);
    await page.locator(`#${id}`).screenshot({ path: shot });
    seen.screenshot = shot;
    views.push(seen);
  }
  await page.addScriptTag({ content: AXE });
  const axe = await page.evaluate((tags) => window.axe.run(
    { include: [[".afs-view-explorer"], [".afs-view-heads"]] }, { runOnly: { type: "tag", values: tags } }), WCAG);
  await context.close();
  return { page: name, width, mode, external, errors, views,
    violations: axe.violations.map((v) => ({ id: v.id, help: v.help,
      nodes: v.nodes.map((n) => n.target.join(" ")) })) };
}

// Focus what comes before the view in the tab order, then press Tab: the keyboard's way in.
async function tabInto(page, id) {
  await page.evaluate((i) => {
    const view = document.getElementById(i);
    const focusable = [...document.querySelectorAll(
      "a[href], button, input, select, textarea, [tabindex]")].filter((e) =>
      e.tabIndex >= 0 && !e.disabled && e.getClientRects().length > 0);
    let before = null;
    for (const e of focusable) {
      if (view.contains(e)) break;
      if (e.compareDocumentPosition(view) & Node.DOCUMENT_POSITION_FOLLOWING) before = e;
    }
    if (before) before.focus();
    else document.activeElement.blur();
  }, id);
  await page.keyboard.press("Tab");
}

function focused(page, id) {
  return page.evaluate((i) => {
    const a = document.activeElement;
    const style = getComputedStyle(a);
    return { inside: document.getElementById(i).contains(a), text: a.textContent.trim(),
      tag: a.tagName.toLowerCase(), type: a.type || "", role: a.getAttribute("role") || "",
      checked: a.getAttribute("aria-checked") || a.getAttribute("aria-pressed") || "",
      cls: a.className || "",
      visible: style.outlineStyle !== "none" && parseFloat(style.outlineWidth) >= 2 };
  }, id);
}

function status(page, id) {
  return page.evaluate((i) => document.querySelector(`#${i} .afs-status`).textContent, id);
}

async function driveExplorer(page, id, seen) {
  const data = await page.evaluate((i) =>
    JSON.parse(document.querySelector(`#${i} script.afs-data`).textContent), id);
  const t = data.tokens.length;
  seen.first = await focused(page, id);
  await page.keyboard.press("ArrowRight");
  seen.right = { focus: await focused(page, id), status: await status(page, id) };
  seen.rightExpected = `Query ${(data.query + 1) % t} "${data.tokens[(data.query + 1) % t]}"`;
  await page.keyboard.press("Home");
  seen.home = await status(page, id);
  await page.keyboard.press("Tab");
  seen.slider = await focused(page, id);
  await page.keyboard.press("ArrowRight");
  await page.keyboard.press("ArrowRight");
  seen.sliderStatus = await status(page, id);
  await page.keyboard.press("Tab");
  seen.mask = await focused(page, id);
  const wasOn = await page.evaluate((i) => document.querySelector(`#${i} input[type=checkbox]`).checked, id);
  await page.keyboard.press("Space");
  seen.maskOn = await page.evaluate((i) => document.querySelector(`#${i} input[type=checkbox]`).checked, id);
  seen.maskStatus = await status(page, id);
  // Back to the query tokens, to the last one: with the mask on, nothing of its row is masked.
  await page.keyboard.press("Shift+Tab");
  await page.keyboard.press("Shift+Tab");
  await page.keyboard.press("End");
  seen.end = { status: await status(page, id), masked: await page.evaluate((i) =>
    document.querySelectorAll(`#${i} td.afs-masked`).length, id) };
  await page.keyboard.press("Home");
  seen.homeMasked = await page.evaluate((i) => document.querySelectorAll(`#${i} td.afs-masked`).length, id);
  seen.weightSum = await page.evaluate((i) => {
    const table = document.querySelector(`#${i} .afs-mount table`);
    return [...table.querySelectorAll("tbody tr")].reduce((sum, row) => {
      const v = parseFloat(row.children[2].textContent);
      return sum + (Number.isNaN(v) ? 0 : v);
    }, 0);
  }, id);
  seen.t = t;
  seen.wasOn = wasOn;
  // Only the chosen query wears the query colour; the <output> beside the slider is not a
  // live region (the slider itself is read); a table box is a tab stop exactly when it
  // scrolls.
  seen.swatches = await page.evaluate((i) => [...document.querySelectorAll(
    `#${i} .afs-mount .afs-swatch`)].map((s) => s.closest("button")?.getAttribute("aria-checked")), id);
  seen.outputLive = await page.evaluate((i) =>
    document.querySelector(`#${i} output`).getAttribute("aria-live"), id);
  seen.scrollStops = await scrollStops(page, id);
}

function scrollStops(page, id) {
  return page.evaluate((i) => [...document.querySelectorAll(`#${i} .afs-mount .afs-scroll`)]
    .map((box) => ({ stop: box.getAttribute("tabindex") === "0",
      scrolls: box.scrollWidth > box.clientWidth + 1 })), id);
}

async function driveHeads(page, id, seen) {
  const data = await page.evaluate((i) =>
    JSON.parse(document.querySelector(`#${i} script.afs-data`).textContent), id);
  const layers = data.layer_names.length;
  const h = data.head_colours.length;
  const expectLines = (layer, query, heads) => heads.reduce((n, head) =>
    n + data.weights[layer][head][query].filter((w) => w >= data.threshold).length, 0);
  const lineCount = () => page.evaluate((i) =>
    document.querySelectorAll(`#${i} line.afs-line`).length, id);
  let layer = 0;
  seen.first = await focused(page, id);
  if (layers > 1) {
    await page.keyboard.press("ArrowRight");
    layer = 1;
    seen.layerStatus = await status(page, id);
    seen.layerExpected = data.layer_names[1];
    await page.keyboard.press("Tab");
  }
  seen.headButtons = await page.evaluate((i) =>
    document.querySelectorAll(`#${i} button[aria-pressed]`).length, id);
  seen.h = h;
  seen.layers = layers;
  seen.scrollStops = await scrollStops(page, id);
  if (h === 1) { // no head toggles: the first Tab from the layers reaches the tokens
    seen.token = await focused(page, id);
    return driveTokens(page, id, seen, data, layer, h, expectLines, lineCount);
  }
  seen.head = await focused(page, id);
  await page.keyboard.press("Enter"); // head 0 off
  seen.headOff = { focus: await focused(page, id), lines: await lineCount(),
    expected: expectLines(layer, data.query, [...Array(h).keys()].slice(1)),
    status: await status(page, id) };
  await page.keyboard.press("Space"); // head 0 on again
  seen.headOn = { lines: await lineCount(),
    expected: expectLines(layer, data.query, [...Array(h).keys()]) };
  for (let n = 0; n < h + 1; n++) {
    const f = await focused(page, id);
    if (String(f.cls).includes("afs-token")) break;
    await page.keyboard.press("Tab");
  }
  seen.token = await focused(page, id);
  return driveTokens(page, id, seen, data, layer, h, expectLines, lineCount);
}

async function driveTokens(page, id, seen, data, layer, h, expectLines, lineCount) {
  const q = (data.query - 1 + data.tokens.length) % data.tokens.length;
  await page.keyboard.press("ArrowUp");
  seen.up = { focus: await focused(page, id), status: await status(page, id),
    lines: await lineCount(), expected: expectLines(layer, q, [...Array(h).keys()]),
    expectedText: `query ${q} "${data.tokens[q]}"` };
  // A pointer works too: hovering token 0 chooses it.
  await page.hover(`#${id} button.afs-token >> nth=0`);
  seen.hover = { status: await status(page, id), expectedText: `query 0 "${data.tokens[0]}"` };
}

// Where scripts do not run, every view shows its fallback: a table with a caption.
async function withoutScripts(name) {
  const context = await browser.newContext({ viewport: { width: 390, height: 900 },
    javaScriptEnabled: false });
  const page = await context.newPage();
  await page.goto(pathToFileURL(resolve(join(root, name))).href, { waitUntil: "load" });
  const found = await page.evaluate(() =>
    [...document.querySelectorAll(".afs-view-explorer, .afs-view-heads")].map((v) => {
      const fallback = v.querySelector(".afs-fallback");
      return { visible: fallback.getClientRects().length > 0 && !fallback.hidden,
        caption: (fallback.querySelector("table caption") || {}).textContent || "",
        drawn: v.querySelector(".afs-mount").childElementCount,
        // every column header on one line: none breaks inside a word
        oneLine: [...fallback.querySelectorAll("th")].every((th) =>
          th.getClientRects().length === 0 ||
          th.clientHeight < 2 * parseFloat(getComputedStyle(th).lineHeight)) };
    }));
  await context.close();
  return { page: name, scripts: false, fallbacks: found };
}
