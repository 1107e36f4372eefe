// runCode and contexts against real kernels in a live sandbox, as the
// Python SDK's test_code_live.py; then how a code stream's platform error
// and a broken stream reject, from a loopback server that sends them.

import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, before, describe, test } from "node:test";

import { APIError, Execution, type Result, Sandbox, TransportError, resultFormats } from "../src/index.js";
import { small } from "./helpers.js";

describe("runCode", () => {
  let sbx: Sandbox;
  before(async () => {
    sbx = await small({ metadata: { test: "sdk-ts-code" } });
  });
  after(async () => {
    await sbx?.stop().catch(() => undefined);
  });

  test("state across calls, the last expression's value, stdout and stderr as they come", async () => {
    const out: string[] = [];
    const err: string[] = [];
    let resolved = false;
    const ex = await sbx
      .runCode("import sys\nn = 40\nprint('hello'); print('warn', file=sys.stderr)\nn + 2", {
        onStdout: (s) => {
          assert.equal(resolved, false, "onStdout called after runCode resolved");
          out.push(s);
        },
        onStderr: (s) => void err.push(s),
      })
      .finally(() => (resolved = true));
    assert.ok(ex instanceof Execution);
    assert.equal(ex.error, null);
    assert.equal(ex.text, "42");
    assert.equal(ex.results.length, 1);
    assert.equal(ex.results[0]!.isMainResult, true);
    assert.equal(ex.logs.stdout.join(""), "hello\n");
    assert.equal(out.join(""), "hello\n");
    assert.equal(ex.logs.stderr.join(""), "warn\n");
    assert.equal(err.join(""), "warn\n");
    const first = ex.executionCount;
    assert.ok(first > 0, `executionCount ${first}`);
    const again = await sbx.runCode("n * 2");
    assert.equal(again.text, "80");
    assert.equal(again.executionCount, first + 1);
    const none = await sbx.runCode("n = 1");
    assert.equal(none.text, null);
    assert.deepEqual(none.results, []);
  });

  test("an exception in the code is data, with a plain traceback", async () => {
    const ex = await sbx.runCode("print('before')\nraise ValueError('bad value')");
    assert.ok(ex.error);
    assert.equal(ex.error.name, "ValueError");
    assert.equal(ex.error.value, "bad value");
    assert.match(ex.error.traceback, /ValueError/);
    assert.doesNotMatch(ex.error.traceback, /\x1b\[/);
    assert.deepEqual(ex.logs.stdout, ["before\n"]);
    assert.ok(String(ex).startsWith("stdout:\nbefore\nerror: ValueError: bad value"), String(ex));
  });

  test("displays: HTML, a matplotlib PNG, a DataFrame's HTML, each given to onResult", async () => {
    const seen: Result[] = [];
    const ex = await sbx.runCode(
      "import matplotlib.pyplot as plt\n" +
        "from IPython.display import display, HTML\n" +
        "display(HTML('<b>bold</b>'))\n" +
        "plt.plot([1, 2, 3]); plt.show()\n" +
        "import pandas as pd\npd.DataFrame({'a': [1, 2]})",
      { onResult: (r) => void seen.push(r) },
    );
    assert.equal(ex.error, null, String(ex));
    assert.deepEqual(seen, ex.results);
    const html = ex.results.find((r) => r.html?.includes("<b>bold</b>"));
    assert.ok(html && !html.isMainResult);
    const png = ex.results.find((r) => r.png);
    assert.ok(png, `no PNG among ${JSON.stringify(ex.results.map(resultFormats))}`);
    const bytes = Buffer.from(png.png!, "base64");
    assert.deepEqual([...bytes.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    assert.deepEqual(resultFormats(png), ["text", "png"]);
    const main = ex.results.filter((r) => r.isMainResult);
    assert.equal(main.length, 1);
    assert.match(main[0]!.html ?? "", /<table/);
    assert.match(ex.text ?? "", /a/);
    assert.ok(!String(ex).includes(png.png!), "String(execution) prints the image's base64");
    assert.match(String(ex), /display \[png\]:/);
  });

  test("a timeout resolves with TimeoutError and the kernel keeps its state", async () => {
    await sbx.runCode("kept = 'yes'");
    const ex = await sbx.runCode("while True: pass", { timeoutMs: 1000 });
    assert.ok(ex.error, "no error for a cell stopped by its timeout");
    assert.equal(ex.error.name, "TimeoutError");
    assert.match(ex.error.value, /timeout_ms=1000/);
    assert.equal((await sbx.runCode("kept")).text, "'yes'");
  });

  test("contexts: isolated, own cwd and env, restarted, removed, then not_found", async () => {
    await sbx.files.mkdir("ctx-a"); // a context's cwd must exist
    const a = await sbx.contexts.create({ cwd: "ctx-a", env: { CTX: "a" } });
    const b = await sbx.contexts.create();
    try {
      assert.match(a.id, /^ctx_[0-9a-f]{16}$/);
      assert.equal(a.language, "python");
      assert.equal(a.cwd, "/workspace/ctx-a");
      await sbx.runCode("v = 'in a'", { context: a });
      assert.equal((await sbx.runCode("'v' in dir()", { context: b })).text, "False");
      assert.equal((await sbx.runCode("v", { context: a.id })).text, "'in a'");
      const where = await sbx.runCode("import os; (os.getcwd(), os.environ['CTX'])", { context: a.id });
      assert.equal(where.text, "('/workspace/ctx-a', 'a')");
      const ids = (await sbx.contexts.list()).map((c) => c.id);
      assert.ok(ids.includes(a.id) && ids.includes(b.id), JSON.stringify(ids));
      assert.deepEqual(await sbx.contexts.restart(a), a);
      const lost = await sbx.runCode("v", { context: a });
      assert.equal(lost.error?.name, "NameError");
    } finally {
      await sbx.contexts.remove(a);
      await sbx.contexts.remove(b.id);
    }
    assert.ok(!(await sbx.contexts.list()).some((c) => c.id === a.id));
    await assert.rejects(sbx.runCode("1", { context: a }), (e: unknown) => {
      assert.ok(e instanceof APIError, String(e));
      assert.equal(e.code, "not_found");
      assert.equal(e.status, 404);
      return true;
    });
    await assert.rejects(sbx.contexts.restart("ctx_0000000000000000"), (e: unknown) => e instanceof APIError && e.code === "not_found");
    await assert.rejects(sbx.contexts.remove(a), (e: unknown) => e instanceof APIError && e.code === "not_found");
  });

  test("bad input is refused before anything is sent", async () => {
    await assert.rejects(sbx.runCode(42 as unknown as string), TypeError);
    await assert.rejects(sbx.runCode("1", { timeoutMs: -1 }), RangeError);
    await assert.rejects(sbx.runCode("1", { context: "" }), TypeError);
  });
});

test("the README's Code snippet, as written there (console.log kept as a record)", async () => {
  const said: unknown[] = [];
  const console = { log: (v: unknown) => void said.push(v) };
  let id = "";
  {
    await using sbx = await small();
    id = sbx.id;
    const run = await sbx.runCode("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2]})\ndf");
    console.log(run.text); // the DataFrame as text; run.results[0].html has it as HTML
    await sbx.runCode("total = int(df['a'].sum())");
    console.log((await sbx.runCode("total")).text); // 3: variables survive between calls
    const slow = await sbx.runCode("while True: pass", { timeoutMs: 2000 });
    console.log(slow.error?.name); // TimeoutError; the kernel keeps df and total
    const ctx = await sbx.contexts.create(); // a second kernel with a state of its own
    console.log((await sbx.runCode("'df' in dir()", { context: ctx })).text); // False
    assert.match(run.results[0]?.html ?? "", /<table/);
  }
  assert.match(String(said[0]), /a/);
  assert.deepEqual(said.slice(1), ["3", "TimeoutError", "False"]);
  assert.equal((await Sandbox.connect(id)).lastInfo?.state, "ended");
});

describe("runCode's stream from a loopback server", () => {
  // Lines the fake answer sends, then it either ends or cuts the connection.
  let lines: string[] = [];
  let cut = false;
  const srv = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "Content-Type": "application/x-ndjson" });
      res.write(lines.map((l) => l + "\n").join(""));
      if (cut) res.socket?.destroy();
      else res.end();
    });
  });
  let fake: Sandbox;
  before(async () => {
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
    const port = (srv.address() as { port: number }).port;
    fake = new Sandbox("sbx_fake", { baseUrl: `http://127.0.0.1:${port}`, apiKey: "k" });
  });
  after(() => new Promise<void>((r) => srv.close(() => r())));

  test("a platform error event rejects with its APIError, after the output before it", async () => {
    lines = [
      JSON.stringify({ type: "stdout", text: "partial\n" }),
      JSON.stringify({ type: "error", error: { code: "lease_ended", message: "the lease ended" } }),
    ];
    cut = false;
    const out: string[] = [];
    await assert.rejects(fake.runCode("x", { onStdout: (s) => void out.push(s) }), (e: unknown) => {
      assert.ok(e instanceof APIError, String(e));
      assert.equal(e.code, "lease_ended");
      assert.equal(e.message, "the lease ended");
      return true;
    });
    assert.deepEqual(out, ["partial\n"]);
  });

  test("a stream that ends or breaks before its end event rejects with TransportError", async () => {
    lines = [JSON.stringify({ type: "stdout", text: "a" })];
    cut = false;
    await assert.rejects(fake.runCode("x"), (e: unknown) => e instanceof TransportError && /without an end event/.test(e.message));
    cut = true;
    await assert.rejects(fake.runCode("x"), TransportError);
    lines = ["{not json"];
    cut = false;
    await assert.rejects(fake.runCode("x"), (e: unknown) => e instanceof TransportError && /malformed event/.test(e.message));
  });

  test("a callback's own error is passed on as it was", async () => {
    lines = [JSON.stringify({ type: "stdout", text: "a" }), JSON.stringify({ type: "end", execution_count: 1 })];
    cut = false;
    const mine = new Error("mine");
    await assert.rejects(fake.runCode("x", { onStdout: () => { throw mine; } }), (e: unknown) => e === mine);
    const ex = await fake.runCode("x");
    assert.equal(ex.executionCount, 1);
    assert.deepEqual(ex.logs.stdout, ["a"]);
  });
});
