// withruntime/openai-agents with the real OpenAI Agents SDK: a run of an
// agent whose model is scripted (a function call to runtime_exec, then a
// final answer), against a live sandbox.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import {
  Agent,
  Usage,
  run,
  setTracingDisabled,
  type Model,
  type ModelRequest,
  type ModelResponse,
} from "@openai/agents";

import type { Sandbox } from "../src/index.js";
import { openaiAgentsTools } from "../src/openai-agents.js";
import { small } from "./helpers.js";

// No trace export: the tests reach nothing beyond loopback.
setTracingDisabled(true);

let sbx: Sandbox;

before(async () => {
  sbx = await small({ metadata: { test: "sdk-ts-tools-openai-agents" } });
});

after(async () => {
  await sbx?.stop();
});

/** A model that answers from a script and keeps the requests it got. */
class ScriptedModel implements Model {
  readonly requests: ModelRequest[] = [];
  constructor(private readonly script: Array<ModelResponse["output"]>) {}

  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    this.requests.push(structuredClone(request));
    const output = this.script[this.requests.length - 1];
    if (!output) throw new Error(`the script has no answer for request ${this.requests.length}`);
    return { usage: new Usage(), output, responseId: `resp-${this.requests.length}` };
  }

  // eslint-disable-next-line require-yield
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error("not scripted for streaming");
  }
}

function functionCall(callId: string, name: string, args: unknown): ModelResponse["output"][number] {
  return { type: "function_call", id: `fc-${callId}`, callId, name, arguments: JSON.stringify(args), status: "completed" };
}

function message(text: string): ModelResponse["output"][number] {
  return {
    type: "message",
    id: "msg-1",
    role: "assistant",
    status: "completed",
    content: [{ type: "output_text", text }],
  };
}

test("strict function tools with every argument required and the optional ones nullable", () => {
  const tools = openaiAgentsTools(sbx);
  assert.deepEqual(
    tools.map((t) => t.name),
    ["runtime_exec", "runtime_read_file", "runtime_write_file", "runtime_list_files"],
  );
  const [exec, , , list] = tools;
  assert.equal(exec.strict, true);
  assert.deepEqual(exec.parameters.required, ["command", "cwd", "timeout_seconds"]);
  assert.equal(exec.parameters.additionalProperties, false);
  assert.deepEqual((exec.parameters.properties as any).cwd.type, ["string", "null"]);
  assert.deepEqual(list.parameters.required, ["path"]);
});

test("run: the agent calls runtime_exec and the model receives its output", async () => {
  const model = new ScriptedModel([
    [
      functionCall("call-1", "runtime_write_file", { path: "fib.py", content: "a, b = 0, 1\nfor _ in range(90): a, b = b, a + b\nprint(a)\n" }),
    ],
    // Strict mode: the model sends null for the arguments it leaves out.
    [functionCall("call-2", "runtime_exec", { command: "python3 fib.py", cwd: null, timeout_seconds: null })],
    [
      functionCall("call-3", "runtime_list_files", { path: null }),
      functionCall("call-4", "runtime_read_file", { path: "nope.txt" }),
      functionCall("call-5", "runtime_exec", { command: "true", cwd: null, timeout_seconds: -1 }),
    ],
    [message("fib(90) is 2880067194370816120.")],
  ]);
  const agent = new Agent({ name: "coder", instructions: "Use the sandbox.", model, tools: openaiAgentsTools(sbx) });

  const result = await run(agent, "Compute fib(90) in Python.");

  assert.equal(result.finalOutput, "fib(90) is 2880067194370816120.");
  assert.equal(model.requests.length, 4);

  // The tools the model was offered.
  const offered = model.requests[0].tools.map((t) => t.name);
  assert.deepEqual(offered, ["runtime_exec", "runtime_read_file", "runtime_write_file", "runtime_list_files"]);

  const outputs = new Map<string, unknown>();
  for (const item of model.requests[3].input as Array<Record<string, any>>) {
    if (item.type === "function_call_result") outputs.set(item.callId, item.output);
  }
  const text = (callId: string): string => {
    const o = outputs.get(callId) as any;
    assert.ok(o !== undefined, `no output for ${callId}: ${JSON.stringify([...outputs])}`);
    return typeof o === "string" ? o : o.type === "text" ? o.text : JSON.stringify(o);
  };

  assert.equal(text("call-1"), "wrote 57 bytes to /workspace/fib.py");
  assert.deepEqual(JSON.parse(text("call-2")), {
    exit_code: 0,
    stdout: "2880067194370816120\n",
    stderr: "",
    timed_out: false,
  });
  // The listing reaches the model as JSON text, not as content parts.
  const listing = JSON.parse(text("call-3")) as Array<{ name: string; type: string }>;
  assert.ok(listing.some((e) => e.name === "fib.py" && e.type === "file"), text("call-3"));
  // A path that is not there reaches the model as data.
  assert.equal(text("call-4"), "not found: /workspace/nope.txt (no such file or directory)");
  // A bad argument reaches the model as the tool's answer, with its words.
  assert.match(text("call-5"), /timeout_seconds must be positive/);
});
