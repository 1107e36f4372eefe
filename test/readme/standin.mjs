// The model stand-ins for the TypeScript examples marked
// <!-- example: standin -->, loaded with `node --import` before the example
// (readme_test.go copies this file into the examples' project, so that its
// imports resolve there). The AI SDK's default provider (what a model given
// as a string such as "openai/gpt-5" resolves through) and the OpenAI
// Agents SDK's default model provider become scripted models: each calls
// runtime_exec with the Fibonacci program, then answers with what the tool
// printed. The tools run for real, in a real sandbox; only the model's
// choices are scripted.

import { MockLanguageModelV3 } from "ai/test";
import { setDefaultModelProvider, setTracingDisabled, Usage } from "@openai/agents";

const FIB = "python3 -c 'a, b = 0, 1\nfor _ in range(20):\n    a, b = b, a + b\nprint(a)'";

/** The stdout of a runtime_exec result, whatever wrapper it arrived in. */
function stdoutOf(output) {
  let v = output;
  if (v && typeof v === "object" && "value" in v) v = v.value; // AI SDK: { type: "json" | "text", value }
  if (v && typeof v === "object" && "text" in v && !("stdout" in v)) v = v.text; // Agents: { type: "text", text }
  if (typeof v === "string") v = JSON.parse(v);
  if (!v || typeof v.stdout !== "string") throw new Error(`not a runtime_exec result: ${JSON.stringify(output)}`);
  return v.stdout.trim();
}

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};

function aiModel() {
  return new MockLanguageModelV3({
    doGenerate: async ({ prompt, tools }) => {
      const results = prompt.flatMap((m) => (m.role === "tool" ? m.content : [])).filter((p) => p.type === "tool-result");
      if (results.length === 0) {
        if (!(tools ?? []).some((t) => t.name === "runtime_exec")) throw new Error("the model was given no runtime_exec tool");
        return {
          content: [{ type: "tool-call", toolCallId: "call-1", toolName: "runtime_exec", input: JSON.stringify({ command: FIB }) }],
          finishReason: { unified: "tool-calls", raw: undefined },
          usage,
          warnings: [],
        };
      }
      return {
        content: [{ type: "text", text: stdoutOf(results[results.length - 1].output) }],
        finishReason: { unified: "stop", raw: undefined },
        usage,
        warnings: [],
      };
    },
  });
}

globalThis.AI_SDK_DEFAULT_PROVIDER = {
  specificationVersion: "v3",
  languageModel: () => aiModel(),
  textEmbeddingModel: () => {
    throw new Error("no embedding stand-in");
  },
  imageModel: () => {
    throw new Error("no image stand-in");
  },
};

class ScriptedAgentsModel {
  async getResponse(request) {
    const input = Array.isArray(request.input) ? request.input : [];
    const fed = input.filter((i) => i && i.type === "function_call_result");
    let output;
    if (fed.length === 0) {
      output = [{ type: "function_call", id: "fc-1", callId: "call-1", name: "runtime_exec", status: "completed", arguments: JSON.stringify({ command: FIB, cwd: null, timeout_seconds: null }) }];
    } else {
      const text = stdoutOf(fed[fed.length - 1].output);
      output = [{ type: "message", id: "msg-1", role: "assistant", status: "completed", content: [{ type: "output_text", text }] }];
    }
    return { usage: new Usage(), output, responseId: "resp-1" };
  }

  // eslint-disable-next-line require-yield
  async *getStreamedResponse() {
    throw new Error("the stand-in does not stream");
  }
}

setTracingDisabled(true);
setDefaultModelProvider({ getModel: async () => new ScriptedAgentsModel() });

// The model a fragment is given (<!-- example: given model -->).
globalThis.__readmeModel = aiModel();
