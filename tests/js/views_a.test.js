// Runs the attention explorer's and the head view's own JavaScript (the files the pages
// inline) on fixtures that tests/test_views.py writes, and writes what they compute for
// pytest to compare with torch. Usage (from pytest):
//   AFS_VIEWS_DIR=<views/js> AFS_FIXTURE=<in.json> AFS_RESULT=<out.json> node --test <this>
"use strict";
const test = require("node:test");
const assert = require("node:assert");
const fs = require("node:fs");
const path = require("node:path");

const dir = process.env.AFS_VIEWS_DIR;
const fixture = JSON.parse(fs.readFileSync(process.env.AFS_FIXTURE, "utf8"));
const result = {};
const common = require(path.join(dir, "common.js"));
const explorer = require(path.join(dir, "explorer.js"));
const heads = require(path.join(dir, "heads.js"));

test("the files export render in anywidget's shape and their pure functions", () => {
  assert.strictEqual(typeof explorer.render, "function");
  assert.strictEqual(typeof heads.render, "function");
  assert.strictEqual(typeof explorer.state, "function");
  assert.strictEqual(typeof heads.lines, "function");
  assert.strictEqual(typeof common.softmax, "function");
});

test("a file inlined in a page cannot end its own script element", () => {
  for (const name of ["common.js", "explorer.js", "heads.js"]) {
    const text = fs.readFileSync(path.join(dir, name), "utf8").toLowerCase();
    assert.ok(!text.includes("</" + "script") && !text.includes("<!" + "--"), name);
  }
});

test("softmax: every key masked gives zeros, not NaN; -0 prints as 0", () => {
  assert.deepStrictEqual(common.softmax([1, 2], { masked: [true, true] }), [0, 0]);
  assert.strictEqual(common.fmt(-0.001), "0.00");
  assert.strictEqual(common.fmt(-0.5), "-0.50");
});

test("softmax cases", () => {
  result.softmax = fixture.softmax.map((c) =>
    common.softmax(c.scores, { scale: c.scale, temperature: c.temperature, masked: c.masked }),
  );
});

test("explorer: weights and context vector for every case", () => {
  result.explorer = fixture.explorer.map(({ data, cases }) =>
    cases.map((c) => explorer.state(data, c.query, c.temperature, c.causal)),
  );
});

test("head view: lines and strongest keys for every case", () => {
  result.heads = fixture.heads.map(({ data, cases }) =>
    cases.map((c) => ({
      lines: heads.lines(data, c.layer, c.query, c.heads),
      strongest: heads.strongest(data, c.layer, c.query, c.heads),
    })),
  );
});

test.after(() => {
  fs.writeFileSync(process.env.AFS_RESULT, JSON.stringify(result));
});
