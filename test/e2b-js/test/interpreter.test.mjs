// E2B's code interpreter (@e2b/code-interpreter, pinned, unmodified) over
// withruntime's E2B API: runCode with callbacks, results, errors, env
// vars and contexts, served by withruntime's run_code.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { NotFoundError, Sandbox, TimeoutError } from "@e2b/code-interpreter";

import { installedVersion, withruntimeSandbox } from "./helpers.mjs";

let sbx;

before(async () => {
  sbx = await Sandbox.create({ timeoutMs: 900_000 });
});

after(async () => {
  if (sbx) await sbx.kill();
});

test("the pinned packages", () => {
  assert.equal(installedVersion("@e2b/code-interpreter"), "2.8.0");
  assert.equal(installedVersion("e2b"), "2.51.0");
});

test("Sandbox.create with the interpreter's default template is a withruntime sandbox", async () => {
  const info = await withruntimeSandbox(sbx.sandboxId);
  assert.equal(info.state, "running");
});

test("runCode streams stdout and stderr and keeps state", async () => {
  const out = [];
  const err = [];
  const ex = await sbx.runCode("import sys\nn = 40\nprint('hello')\nprint('warn', file=sys.stderr)\nn + 2", {
    onStdout: (m) => out.push(m),
    onStderr: (m) => err.push(m),
  });
  assert.equal(ex.error, undefined);
  assert.equal(ex.text, "42");
  assert.deepEqual(ex.logs.stdout, ["hello\n"]);
  assert.deepEqual(ex.logs.stderr, ["warn\n"]);
  assert.deepEqual(out.map((m) => [m.line, m.error]), [["hello\n", false]]);
  assert.deepEqual(err.map((m) => [m.line, m.error]), [["warn\n", true]]);
  const again = await sbx.runCode("n * 2");
  assert.equal(again.text, "80");
  assert.equal(again.executionCount, ex.executionCount + 1);
  assert.equal((await sbx.runCode("import os\nos.getcwd()")).text, "'/home/user'");
});

test("results: text, PNG, HTML, JSON", async () => {
  const ex = await sbx.runCode(
    "import matplotlib.pyplot as plt\n" +
      "from IPython.display import JSON, display\n" +
      "plt.plot([1, 2, 3], [1, 4, 9]); plt.show()\n" +
      "display(JSON({'a': [1, 2]}))\n" +
      "import pandas as pd\npd.DataFrame({'col': [1, 2]})",
  );
  assert.equal(ex.error, undefined, JSON.stringify(ex.error));
  const pngs = ex.results.filter((r) => r.png);
  assert.equal(pngs.length, 1);
  assert.equal(pngs[0].isMainResult, false);
  assert.deepEqual([...Buffer.from(pngs[0].png, "base64").subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47]);
  const json = ex.results.filter((r) => r.json);
  assert.equal(json.length, 1);
  assert.deepEqual(json[0].json, { a: [1, 2] });
  const main = ex.results.filter((r) => r.isMainResult);
  assert.equal(main.length, 1);
  assert.match(main[0].html, /<table/);
  assert.match(main[0].text, /col/);
  assert.ok(main[0].formats().includes("html"));
});

test("an exception is an error with name, value and traceback", async () => {
  const ex = await sbx.runCode("print('before')\nraise ValueError('bad value')");
  assert.equal(ex.error.name, "ValueError");
  assert.equal(ex.error.value, "bad value");
  assert.match(ex.error.traceback, /ValueError/);
  assert.deepEqual(ex.logs.stdout, ["before\n"]);
});

test("envs apply to one cell", async () => {
  const ex = await sbx.runCode("import os\nos.environ['ONLY_HERE']", { envs: { ONLY_HERE: "yes" } });
  assert.equal(ex.text, "'yes'");
  assert.equal((await sbx.runCode("'ONLY_HERE' in os.environ")).text, "False");
});

test("another language is refused with the reason", async () => {
  await assert.rejects(sbx.runCode("console.log(1)", { language: "javascript" }), (e) => {
    assert.ok(e instanceof NotFoundError, String(e));
    assert.match(e.message, /Python only/);
    return true;
  });
});

test("contexts: create, list, restart, remove", async () => {
  const ctx = await sbx.createCodeContext({ cwd: "/tmp" });
  assert.equal(ctx.cwd, "/tmp");
  assert.equal(ctx.language, "python");
  try {
    await sbx.runCode("x = 5", { context: ctx });
    assert.equal((await sbx.runCode("x", { context: ctx })).text, "5");
    assert.equal((await sbx.runCode("'x' in globals()")).text, "False");
    assert.equal((await sbx.runCode("import os\nos.getcwd()", { context: ctx })).text, "'/tmp'");
    const ids = (await sbx.listCodeContexts()).map((c) => c.id);
    assert.ok(ids.includes(ctx.id) && ids.includes("default"), ids.join());
    await sbx.restartCodeContext(ctx);
    assert.equal((await sbx.runCode("'x' in globals()", { context: ctx })).text, "False");
  } finally {
    await sbx.removeCodeContext(ctx);
  }
  assert.ok(!(await sbx.listCodeContexts()).some((c) => c.id === ctx.id));
  await assert.rejects(sbx.runCode("1", { context: ctx }), NotFoundError);
});

test("kill: the sandbox ends and its interpreter answers as for a gone sandbox", async () => {
  const s = await Sandbox.create({ timeoutMs: 300_000 });
  assert.equal((await s.runCode("1 + 1")).text, "2");
  await s.kill();
  assert.equal((await withruntimeSandbox(s.sandboxId)).state, "ended");
  await assert.rejects(s.runCode("1 + 1"), (e) => {
    assert.ok(e instanceof TimeoutError, String(e));
    assert.match(e.message, /was not found/);
    return true;
  });
});

test("a cell over the client's timeoutMs is a TimeoutError; the context goes on", async () => {
  await assert.rejects(sbx.runCode("import time\ntime.sleep(4)\n'late'", { timeoutMs: 1_000 }), (e) => {
    assert.ok(e instanceof TimeoutError, String(e));
    assert.match(e.message, /Execution timed out/);
    return true;
  });
  assert.equal((await sbx.runCode("21 * 2")).text, "42");
});

test("a sandbox killed under a running cell: the client says so", async () => {
  const s = await Sandbox.create({ timeoutMs: 300_000 });
  assert.equal((await s.runCode("1 + 1")).text, "2");
  let started;
  const out = new Promise((r) => (started = r));
  const cell = s.runCode("import time\nprint('started', flush=True)\ntime.sleep(60)", {
    timeoutMs: 120_000,
    onStdout: () => started(),
  });
  await out;
  await s.kill();
  await assert.rejects(cell, (e) => {
    assert.ok(e instanceof TimeoutError, String(e));
    assert.match(e.message, /killed while the request was in progress/);
    return true;
  });
});
