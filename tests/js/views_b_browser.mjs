// Drives the live model, the KV-cache stepper and the tiles stepper in the system's Chromium
// with the keyboard only, at 390 and 1280 px, with the network switched off; checks what each
// view shows, that the focus is visible, and runs axe-core's WCAG 2.1 A/AA rules after the
// interaction. Uses tools/browser's playwright-core and axe-core (installed by
// tools/browser_checks.py). Usage: node views_b_browser.mjs CHROMIUM DIR  (pages DIR/<view>.html;
// screenshots written to DIR; prints JSON on stdout)
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const [executablePath, dir, toolDir] = process.argv.slice(2);
const require = createRequire(resolve(toolDir, "package.json"));
const { chromium } = require("playwright-core");
const AXE = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");

const browser = await chromium.launch({
  executablePath,
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>"],
});

// Tab until the focused element matches; fails after 40 presses.
async function tabTo(page, test) {
  for (let i = 0; i < 40; i++) {
    await page.keyboard.press("Tab");
    if (await page.evaluate(test)) return;
  }
  throw new Error("never reached by Tab: " + test);
}

async function focusVisible(page) {
  return page.evaluate(() => {
    const s = getComputedStyle(document.activeElement);
    return s.outlineStyle !== "none" && parseFloat(s.outlineWidth) >= 2;
  });
}

const status = (page) => page.evaluate(() => document.querySelector('[role="status"]').textContent);

const drive = {
  async live_model(page) {
    const seen = {};
    await tabTo(page, () => document.activeElement.type === "text");
    seen.inputFocusVisible = await focusVisible(page);
    await page.keyboard.press("Control+A");
    await page.keyboard.type("A B C D A B C");
    await page.keyboard.press("Enter");
    seen.rows = await page.evaluate(() => document.querySelectorAll(".afs-mount tbody tr").length);
    seen.status = await status(page);
    await page.keyboard.press("Control+A");
    await page.keyboard.type("A B Z");
    await page.keyboard.press("Enter");
    seen.error = await page.evaluate(() => document.querySelector('[role="alert"]').textContent);
    await tabTo(page, () => document.activeElement.type === "checkbox");
    seen.boxFocusVisible = await focusVisible(page);
    await page.keyboard.press("Space");
    seen.statusOff = await status(page);
    seen.header = await page.evaluate(() => document.querySelector(".afs-mount thead").textContent);
    seen.captions = await page.evaluate(() => [...document.querySelectorAll(".afs-mount figcaption")].map((f) => f.textContent));
    return seen;
  },
  async cache_stepper(page) {
    const seen = { status0: await status(page) };
    await tabTo(page, () => document.activeElement.textContent === "Next step");
    seen.focusVisible = await focusVisible(page);
    for (let i = 0; i < 3; i++) await page.keyboard.press("Enter");
    seen.status = await status(page);
    seen.rows = await page.evaluate(() => document.querySelectorAll(".afs-mount tbody tr").length);
    for (let i = 0; i < 10; i++) await page.keyboard.press("Enter");
    seen.atEnd = await page.evaluate(() => document.activeElement.getAttribute("aria-disabled"));
    seen.statusEnd = await status(page);
    return seen;
  },
  async tiles(page) {
    const seen = {};
    seen.status0 = await status(page);
    seen.state0 = await page.evaluate(() => [...document.querySelectorAll(".afs-mount tbody")].pop().textContent);
    await tabTo(page, () => document.activeElement.textContent === "Next block");
    seen.focusVisible = await focusVisible(page);
    for (let i = 0; i < 5; i++) await page.keyboard.press("Enter");
    seen.status = await status(page);
    seen.final = await page.evaluate(() => document.querySelector(".afs-mount p.afs-note:last-child").textContent);
    return seen;
  },
};

const results = [];
try {
  for (const name of Object.keys(drive)) {
    for (const width of [390, 1280]) {
      const context = await browser.newContext({ viewport: { width, height: 900 } });
      const page = await context.newPage();
      const external = [];
      const errors = [];
      page.on("request", (r) => { if (!/^(file|data|blob|about):/.test(r.url())) external.push(r.url()); });
      page.on("pageerror", (e) => errors.push(String(e.message || e)));
      await page.goto(pathToFileURL(join(dir, name + ".html")).href, { waitUntil: "load" });
      let seen = {};
      try {
        seen = await drive[name](page);
      } catch (error) {
        errors.push(String(error.message || error));
      }
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
      await page.screenshot({ path: join(dir, `${name}-${width}.png`), fullPage: true });
      await page.addScriptTag({ content: AXE });
      const axe = await page.evaluate(async () => {
        const r = await window.axe.run(document, { runOnly: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] });
        return r.violations.map((v) => ({ id: v.id, nodes: v.nodes.map((n) => n.target.join(" ")) }));
      });
      results.push({ name, width, seen, external, errors, overflow, axe });
      await context.close();
    }
  }
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(results, null, 1));
