// withruntime/langchain with the real @langchain/core: each tool called
// with tool.invoke, as arguments and as a model's tool call, against a live
// sandbox.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { ToolMessage } from "@langchain/core/messages";
import { ToolInputParsingException } from "@langchain/core/tools";

import type { Sandbox } from "../src/index.js";
import { langchainTools } from "../src/langchain.js";
import { small } from "./helpers.js";

let sbx: Sandbox;

before(async () => {
  sbx = await small({ metadata: { test: "sdk-ts-tools-langchain" } });
});

after(async () => {
  await sbx?.stop();
});

test("the four tools, each invoked with its arguments", async () => {
  const [exec, read, write, list] = langchainTools(sbx);
  assert.deepEqual(
    [exec, read, write, list].map((t) => t.name),
    ["runtime_exec", "runtime_read_file", "runtime_write_file", "runtime_list_files"],
  );

  assert.equal(
    await write.invoke({ path: "fib.py", content: "a, b = 0, 1\nfor _ in range(90): a, b = b, a + b\nprint(a)\n" }),
    "wrote 57 bytes to /workspace/fib.py",
  );
  assert.equal(await read.invoke({ path: "fib.py" }), "a, b = 0, 1\nfor _ in range(90): a, b = b, a + b\nprint(a)\n");
  assert.deepEqual(JSON.parse(await exec.invoke({ command: "python3 fib.py" })), {
    exit_code: 0,
    stdout: "2880067194370816120\n",
    stderr: "",
    timed_out: false,
  });
  // null is the default, as the model may send it.
  assert.equal(JSON.parse(await exec.invoke({ command: "pwd", cwd: null, timeout_seconds: null })).stdout, "/workspace\n");
  const timedOut = JSON.parse(await exec.invoke({ command: "sleep 30", timeout_seconds: 1 }));
  assert.equal(timedOut.timed_out, true);

  const entries = JSON.parse(await list.invoke({})) as Array<{ name: string; type: string; size: number }>;
  assert.deepEqual(entries.find((e) => e.name === "fib.py"), { name: "fib.py", type: "file", size: 57 });
  assert.deepEqual(JSON.parse(await list.invoke({ path: null })), entries);
});

test("a model's tool call gives a ToolMessage whose content is the JSON text", async () => {
  const [exec, , , list] = langchainTools(sbx);
  const msg = await exec.invoke({
    type: "tool_call",
    id: "call-1",
    name: "runtime_exec",
    args: { command: "echo out; echo err >&2; exit 4" },
  });
  assert.ok(msg instanceof ToolMessage);
  assert.equal(msg.tool_call_id, "call-1");
  assert.deepEqual(JSON.parse(msg.content as string), { exit_code: 4, stdout: "out\n", stderr: "err\n", timed_out: false });

  // A listing's entries have a `type` field: it must stay text, not become content blocks.
  await sbx.files.write("lc/a.txt", "a");
  const ls = await list.invoke({ type: "tool_call", id: "call-2", name: "runtime_list_files", args: { path: "lc" } });
  assert.equal(typeof ls.content, "string");
  assert.deepEqual(JSON.parse(ls.content as string), [{ name: "a.txt", type: "file", size: 1 }]);
});

test("LangChain checks the input against the schema", async () => {
  const [exec, read] = langchainTools(sbx);
  await assert.rejects(exec.invoke({} as never), ToolInputParsingException);
  await assert.rejects(read.invoke({ path: 7 } as never), ToolInputParsingException);
});

test("a path that is not there is the tool's answer, as data", async () => {
  const [, read, , list] = langchainTools(sbx);
  assert.equal(await read.invoke({ path: "missing.txt" }), "not found: /workspace/missing.txt (no such file or directory)");
  assert.deepEqual(JSON.parse(String(await list.invoke({ path: "nodir" }))), [
    { name: "not found: /workspace/nodir (no such file or directory)", type: "note", size: 0 },
  ]);
});

test("a platform error rejects with the SDK's error", async () => {
  // A sandbox that is not there: not_found is the platform's failure.
  const notFound = Object.assign(new Error("no sandbox sbx_gone"), { code: "not_found" });
  const [, read] = langchainTools({
    exec: () => Promise.reject(notFound),
    files: { readHead: () => Promise.reject(notFound), write: () => Promise.reject(notFound), list: () => Promise.reject(notFound) },
    info: () => Promise.reject(notFound),
  });
  await assert.rejects(read.invoke({ path: "missing.txt" }), (e: any) => e?.code === "not_found");
});
