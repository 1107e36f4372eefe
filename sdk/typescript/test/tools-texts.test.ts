// The agent tools' descriptions are api/tools.json's: what the tools show
// a model is the generated copy, that copy is what gen-tools.mjs makes of
// the file now, and the check fails on a stale copy. No server needed.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { TOOL_TEXTS } from "../src/generated/tools.js";
import { LIST_CAP, OUTPUT_CAP, TIMEOUT_SECONDS, codeTools, sandboxTools, type SandboxTool } from "../src/tools.js";
import { tempDir } from "./helpers.js";
import { packageRoot } from "./server.js";

const script = join(packageRoot, "scripts", "gen-tools.mjs");
const generated = join(packageRoot, "src", "generated", "tools.ts");

// Never called: the texts are all that is looked at.
const sbx = {} as Parameters<typeof sandboxTools>[0] & Parameters<typeof codeTools>[0];

test("the tools show tools.json's texts", () => {
  const tools: SandboxTool<any, unknown>[] = [...sandboxTools(sbx), ...codeTools(sbx)];
  assert.deepEqual(tools.map((t) => t.name), Object.keys(TOOL_TEXTS));
  for (const t of tools) {
    const want = TOOL_TEXTS[t.name as keyof typeof TOOL_TEXTS];
    assert.equal(t.description, want.description, t.name);
    const params = Object.fromEntries(Object.entries(t.parameters.properties).map(([k, p]) => [k, p.description]));
    assert.deepEqual(params, want.parameters, t.name);
  }
  // The default in force replaces the file's default, and only it.
  const [exec] = sandboxTools(sbx, { timeoutSeconds: 30 });
  assert.equal(
    exec.parameters.properties.timeout_seconds.description,
    TOOL_TEXTS.runtime_exec.parameters.timeout_seconds.replace(`${TIMEOUT_SECONDS} seconds.`, "30 seconds."),
  );
  assert.notEqual(exec.parameters.properties.timeout_seconds.description, TOOL_TEXTS.runtime_exec.parameters.timeout_seconds);
});

test("the descriptions state the caps", () => {
  assert.ok(TOOL_TEXTS.runtime_read_file.description.includes(` ${OUTPUT_CAP} `));
  assert.ok(TOOL_TEXTS.runtime_list_files.description.includes(` ${LIST_CAP} `));
  for (const t of [TOOL_TEXTS.runtime_exec, TOOL_TEXTS.runtime_run_code]) {
    assert.ok(t.parameters.timeout_seconds.endsWith(`null means ${TIMEOUT_SECONDS} seconds.`), t.parameters.timeout_seconds);
  }
});

test("src/generated/tools.ts matches api/tools.json", () => {
  const r = spawnSync(process.execPath, [script, "--check"], { encoding: "utf8" });
  assert.equal(r.status, 0, `gen-tools --check failed: ${r.stdout}${r.stderr}`);
});

test("gen-tools --check fails on a stale copy", () => {
  const stale = join(tempDir(), "tools.ts");
  copyFileSync(generated, stale);
  writeFileSync(stale, readFileSync(stale, "utf8").replace("return its content.", "return its text."));
  const r = spawnSync(process.execPath, [script, "--check", stale], { encoding: "utf8" });
  assert.equal(r.status, 1, `got exit ${r.status}, want 1: ${r.stdout}${r.stderr}`);
  assert.match(r.stderr, /stale/);
});
