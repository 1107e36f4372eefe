import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { tempDir } from "./helpers.js";
import { packageRoot } from "./server.js";

const script = join(packageRoot, "scripts", "check-gen.mjs");
const generated = join(packageRoot, "src", "generated", "openapi.ts");

test("the generated wire types match api/openapi.yaml", () => {
  const r = spawnSync(process.execPath, [script], { encoding: "utf8" });
  assert.equal(r.status, 0, `check-gen failed: ${r.stdout}${r.stderr}`);
});

test("check-gen fails on a stale copy", () => {
  const stale = join(tempDir(), "openapi.ts");
  copyFileSync(generated, stale);
  writeFileSync(stale, readFileSync(stale, "utf8").replace('"not_found" | ', ""));
  const r = spawnSync(process.execPath, [script, stale], { encoding: "utf8" });
  assert.equal(r.status, 1, `got exit ${r.status}, want 1: ${r.stdout}${r.stderr}`);
  assert.match(r.stderr, /stale/);
});
