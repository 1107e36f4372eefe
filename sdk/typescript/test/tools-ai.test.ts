// withruntime/ai with the real AI SDK: generateText drives the tools
// through its mock language model, against a live sandbox.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV3 } from "ai/test";

import { aiTools } from "../src/ai.js";
import type { Sandbox } from "../src/index.js";
import { sandboxTools } from "../src/tools.js";
import { small } from "./helpers.js";

let sbx: Sandbox;

before(async () => {
  sbx = await small({ metadata: { test: "sdk-ts-tools-ai" } });
});

after(async () => {
  await sbx?.stop();
});

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 5, text: 5, reasoning: undefined },
};

test("a tool set keyed by name with the tools' schemas", () => {
  const tools = aiTools(sbx);
  assert.deepEqual(Object.keys(tools), ["runtime_exec", "runtime_read_file", "runtime_write_file", "runtime_list_files"]);
  for (const t of sandboxTools(sbx)) assert.equal(tools[t.name].description, t.description);
});

test("generateText: the model calls runtime_exec and reads its result in the next step", async () => {
  const model = new MockLanguageModelV3({
    doGenerate: [
      {
        content: [
          {
            type: "tool-call",
            toolCallId: "call-1",
            toolName: "runtime_exec",
            input: JSON.stringify({ command: "python3 -c 'print(6 * 7)'; echo oops >&2; exit 3" }),
          },
          { type: "tool-call", toolCallId: "call-2", toolName: "runtime_read_file", input: JSON.stringify({ path: "missing.txt" }) },
          {
            type: "tool-call",
            toolCallId: "call-3",
            toolName: "runtime_exec",
            input: JSON.stringify({ command: "true", timeout_seconds: -1 }),
          },
        ],
        finishReason: { unified: "tool-calls", raw: undefined },
        usage,
        warnings: [],
      },
      {
        content: [{ type: "text", text: "The answer is 42." }],
        finishReason: { unified: "stop", raw: undefined },
        usage,
        warnings: [],
      },
    ],
  });

  const result = await generateText({
    model,
    tools: aiTools(sbx),
    stopWhen: stepCountIs(3),
    prompt: "What is 6 * 7? Use Python.",
  });

  assert.equal(result.text, "The answer is 42.");
  assert.equal(model.doGenerateCalls.length, 2);

  // The first call offered the four tools, with their JSON schemas.
  const offered = model.doGenerateCalls[0].tools ?? [];
  assert.deepEqual(
    offered.map((t) => t.name),
    ["runtime_exec", "runtime_read_file", "runtime_write_file", "runtime_list_files"],
  );
  const execTool = offered[0] as { inputSchema?: unknown };
  assert.deepEqual(execTool.inputSchema, sandboxTools(sbx)[0].parameters);

  // The second call carried the command's result, as the tool returned it.
  const toolMessages = model.doGenerateCalls[1].prompt.filter((m) => m.role === "tool");
  const parts = toolMessages.flatMap((m) => m.content as Array<Record<string, any>>);
  const execPart = parts.find((p) => p.toolCallId === "call-1");
  assert.ok(execPart, JSON.stringify(parts));
  assert.equal(execPart.toolName, "runtime_exec");
  assert.deepEqual(execPart.output, {
    type: "json",
    value: { exit_code: 3, stdout: "42\n", stderr: "oops\n", timed_out: false },
  });

  // A path that is not there reached the model as data, not as an error.
  const readPart = parts.find((p) => p.toolCallId === "call-2");
  assert.ok(readPart, JSON.stringify(parts));
  assert.doesNotMatch(readPart.output.type, /^error-/);
  assert.equal(readPart.output.value, "not found: /workspace/missing.txt (no such file or directory)");
  // A bad argument reached the model as the tool's answer, marked as an error.
  const badPart = parts.find((p) => p.toolCallId === "call-3");
  assert.ok(badPart, JSON.stringify(parts));
  assert.match(badPart.output.type, /^error-/);
  assert.match(JSON.stringify(badPart.output.value), /timeout_seconds must be positive/);

  assert.deepEqual(result.steps[0].toolResults.map((r) => r.output), [
    { exit_code: 3, stdout: "42\n", stderr: "oops\n", timed_out: false },
    "not found: /workspace/missing.txt (no such file or directory)",
  ]);
});
