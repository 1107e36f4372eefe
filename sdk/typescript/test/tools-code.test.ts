// runtime_run_code (codeTools) against a live sandbox's kernel: its schema,
// results, caps, errors and timeout as Python's code_tools; and the
// adapters, which add it with runCode: true and keep four tools without.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { aiTools } from "../src/ai.js";
import { type Sandbox, codeTools } from "../src/index.js";
import { langchainTools } from "../src/langchain.js";
import { openaiAgentsTools } from "../src/openai-agents.js";
import { type CodeToolSandbox, OUTPUT_CAP, sandboxTools } from "../src/tools.js";
import { small } from "./helpers.js";

let sbx: Sandbox;

before(async () => {
  sbx = await small({ metadata: { test: "sdk-ts-tools-code" } });
});

after(async () => {
  await sbx?.stop();
});

const FOUR = ["runtime_exec", "runtime_read_file", "runtime_write_file", "runtime_list_files"];

describe("shape", () => {
  test("the real Sandbox is a CodeToolSandbox; sandboxTools stays four", () => {
    const t: CodeToolSandbox = sbx; // compile-time: fails to build if it stops fitting
    assert.equal(typeof t.runCode, "function");
    assert.deepEqual(sandboxTools(sbx).map((x) => x.name), FOUR);
  });

  test("a timeout speaks of timeout_seconds, as the model passed it", async () => {
    const value = "the cell ran longer than timeout_ms=2500 and was interrupted; the context keeps its state";
    const stub = (name: string, v: string): CodeToolSandbox => ({
      runCode: async () => ({ results: [], logs: { stdout: [], stderr: [] }, error: { name, value: v, traceback: "" } }),
    });
    const [run] = codeTools(stub("TimeoutError", value));
    const out = await run.execute({ code: "x", timeout_seconds: 2.5 });
    assert.equal(out.error?.value, "the cell ran longer than timeout_seconds=2.5 and was interrupted; the context keeps its state");
    const [other] = codeTools(stub("ValueError", "timeout_ms=5"));
    assert.equal((await other.execute({ code: "x" })).error?.value, "timeout_ms=5");
  });

  test("one tool, runtime_run_code, with code and timeout_seconds", () => {
    const tools = codeTools(sbx);
    assert.equal(tools.length, 1);
    const [t] = tools;
    assert.equal(t.name, "runtime_run_code");
    assert.deepEqual(Object.keys(t.parameters.properties), ["code", "timeout_seconds"]);
    assert.deepEqual(t.parameters.required, ["code"]);
    assert.equal(t.parameters.properties.code!.type, "string");
    assert.deepEqual(t.parameters.properties.timeout_seconds!.type, ["integer", "null"]);
    assert.equal(t.parameters.additionalProperties, false);
    assert.match(t.description, /persistent IPython kernel/);
    assert.match(t.description, /TimeoutError/);
    assert.match(t.parameters.properties.timeout_seconds!.description, /null means 120 seconds\./);
    const lease = codeTools(sbx, { timeoutSeconds: null })[0].parameters.properties.timeout_seconds!.description;
    assert.match(lease, /null means no limit but the sandbox's lease\./);
    assert.throws(() => codeTools(sbx, { timeoutSeconds: 0 }), RangeError);
  });
});

describe("execute", () => {
  test("state across calls, the value as text, a figure's formats named, output", async () => {
    const [run] = codeTools(sbx);
    const first = await run.execute({ code: "x = 6\nprint('hi')\nx * 7" });
    assert.deepEqual(first, { results: ["42"], stdout: "hi\n", stderr: "", error: null });
    const fig = await run.execute({
      code: "import matplotlib.pyplot as plt\nplt.plot([1, 2]); plt.show()\nx",
    });
    assert.equal(fig.error, null, JSON.stringify(fig));
    assert.equal(fig.results.length, 2, JSON.stringify(fig.results));
    assert.match(fig.results[0]!, /^<Figure .*>\n\[also as png\]$/);
    assert.equal(fig.results[1], "6");
  });

  test("an exception and a timeout are data; the kernel keeps its state", async () => {
    const [run] = codeTools(sbx);
    const bad = await run.execute({ code: "raise KeyError('k')" });
    assert.deepEqual(bad.results, []);
    assert.equal(bad.error?.name, "KeyError");
    assert.equal(bad.error?.value, "'k'");
    assert.match(bad.error?.traceback ?? "", /KeyError/);
    await run.execute({ code: "kept = 'yes'" });
    const slow = await run.execute({ code: "while True: pass", timeout_seconds: 1 });
    assert.equal(slow.error?.name, "TimeoutError");
    assert.match(slow.error?.value ?? "", /timeout_seconds=1 and/);
    assert.deepEqual((await run.execute({ code: "kept" })).results, ["'yes'"]);
    await assert.rejects(run.execute({ code: 1 as unknown as string }), TypeError);
  });

  test("caps: results' text all together, stdout's tail", async () => {
    assert.equal(OUTPUT_CAP, 20_000);
    const [run] = codeTools(sbx, { outputCap: 50 });
    const r = await run.execute({
      code: "from IPython.display import display\ndisplay('a' * 40)\ndisplay('b' * 40)\ndisplay('c')\nprint('z' * 80)",
    });
    assert.equal(r.results.length, 3, JSON.stringify(r.results));
    assert.equal(r.results[0], `'${"a".repeat(40)}'`);
    assert.equal(r.results[1], `'${"b".repeat(7)}\n[result cut: only its first 8 of 42 characters are shown]`);
    assert.equal(r.results[2], "[1 more results not shown]");
    assert.equal(r.stdout, `[stdout was cut: only its last 50 characters are shown]\n${"z".repeat(49)}\n`);
  });
});

describe("adapters", () => {
  test("runCode: true adds runtime_run_code fifth; without it, four", () => {
    const five = [...FOUR, "runtime_run_code"];
    assert.deepEqual(Object.keys(aiTools(sbx)), FOUR);
    assert.deepEqual(Object.keys(aiTools(sbx, { runCode: true })), five);
    assert.deepEqual(openaiAgentsTools(sbx).map((t) => t.name), FOUR);
    assert.deepEqual(openaiAgentsTools(sbx, { runCode: true }).map((t) => t.name), five);
    assert.deepEqual(langchainTools(sbx, { runCode: true }).map((t) => t.name), five);
    assert.throws(() => aiTools({ exec: sbx.exec, files: sbx.files } as never, { runCode: true }), TypeError);
  });

  test("the code tool runs through LangChain and the AI SDK", async () => {
    const lc = langchainTools(sbx, { runCode: true })[4]!;
    const text = (await lc.invoke({ code: "y = 20\ny + 1" })) as string;
    assert.deepEqual(JSON.parse(text), { results: ["21"], stdout: "", stderr: "", error: null });
    const ai = aiTools(sbx, { runCode: true }).runtime_run_code!;
    const out = await ai.execute!({ code: "y * 2" }, { toolCallId: "c1", messages: [] });
    assert.deepEqual((out as { results: string[] }).results, ["40"]);
  });
});
