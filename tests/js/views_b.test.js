// Runs the views' own JavaScript on fixtures that tests/test_views_b.py writes, and writes
// what it computes for pytest to compare with torch. Usage (from pytest):
//   AFS_VIEWS_DIR=<views/js> AFS_FIXTURE=<in.json> AFS_RESULT=<out.json> node --test <this>
"use strict";
const test = require("node:test");
const assert = require("node:assert");
const fs = require("node:fs");
const path = require("node:path");

const dir = process.env.AFS_VIEWS_DIR;
const fixture = JSON.parse(fs.readFileSync(process.env.AFS_FIXTURE, "utf8"));
const result = {};

test("the views' files load in Node", () => {
  for (const name of fixture.scripts) {
    const api = require(path.join(dir, name + ".js"));
    assert.strictEqual(typeof api.render, "function", name);
  }
});

if (fixture.live_model) {
  test("live model: logits, weights and accuracy for every case", () => {
    const api = require(path.join(dir, "live_model.js"));
    const data = fixture.live_model.data;
    const weights = api.loadWeights(data);
    // The sequences the page draws to measure accuracy, for torch to score too.
    const held = data.held_out && api.inductionSequences(data.held_out, data.config.vocab_size);
    result.live_model_sample = held;
    result.live_model = fixture.live_model.cases.map(({ tokens, off }) => {
      const out = api.forward(data.config, weights, tokens, off);
      return {
        logits: out.logits.map((row) => Array.from(row)),
        weights: out.weights.map((layer) => layer.map((head) => head.map((r) => Array.from(r)))),
        accuracy: held ? api.accuracy(data.config, weights, held.inputs, held.targets, off) : null,
      };
    });
    assert.strictEqual(result.live_model.length, fixture.live_model.cases.length);
  });
}

if (fixture.cache_stepper) {
  test("KV cache: every step", () => {
    const api = require(path.join(dir, "cache_stepper.js"));
    result.cache_stepper = api.steps(fixture.cache_stepper.data);
  });
}

if (fixture.tiles) {
  test("tiles: every block", () => {
    const api = require(path.join(dir, "tiles.js"));
    result.tiles = fixture.tiles.data.map((d) => api.blocks(d));
  });
}

test.after(() => {
  fs.writeFileSync(process.env.AFS_RESULT, JSON.stringify(result, (k, v) =>
    v === -Infinity ? "-inf" : v === Infinity ? "inf" : v));
});
