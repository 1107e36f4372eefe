// The package as users import it: its own name and subpaths, resolved
// through package.json "exports" to the built files (`npm test` builds them
// first), by import and by tools that ask for the "default" condition.

import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { sandboxTools as neutral, type ToolSandbox } from "withruntime";
import { aiTools, sandboxTools as aiSandboxTools } from "withruntime/ai";
import { langchainTools, sandboxTools as langchainSandboxTools } from "withruntime/langchain";
import { openaiAgentsTools, sandboxTools as openaiSandboxTools } from "withruntime/openai-agents";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
// Building the tools asks nothing of the sandbox; running them is tested in tools-*.test.ts.
const sbx = {} as ToolSandbox;
const names = neutral(sbx).map((t) => t.name);

test("every adapter subpath exports sandboxTools, the same as its own name", () => {
  assert.deepEqual(names, ["runtime_exec", "runtime_read_file", "runtime_write_file", "runtime_list_files"]);
  assert.equal(aiSandboxTools, aiTools);
  assert.equal(openaiSandboxTools, openaiAgentsTools);
  assert.equal(langchainSandboxTools, langchainTools);
  assert.deepEqual(Object.keys(aiSandboxTools(sbx)), names);
  assert.deepEqual(openaiSandboxTools(sbx).map((t) => t.name), names);
  assert.deepEqual(langchainSandboxTools(sbx).map((t) => t.name), names);
});

test("each entry resolves with the default condition too (a resolver that does not ask for import)", () => {
  const require = createRequire(import.meta.url);
  for (const [spec, file] of [
    ["withruntime", "index.js"],
    ["withruntime/ai", "ai.js"],
    ["withruntime/openai-agents", "openai-agents.js"],
    ["withruntime/langchain", "langchain.js"],
  ]) {
    let got: string;
    try {
      got = require.resolve(spec!);
    } catch (e) {
      assert.fail(`${spec}: ${(e as Error).message}`);
    }
    assert.equal(got, join(root, "dist", file!), spec);
  }
});
