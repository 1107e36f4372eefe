/**
 * The agent tools for the Vercel AI SDK (`ai`, 5 or later):
 *
 *     import { generateText, stepCountIs } from "ai";
 *     import { aiTools } from "withruntime/ai";
 *     const { text } = await generateText({ model, tools: aiTools(sbx), stopWhen: stepCountIs(10), prompt });
 *
 * A record keyed by tool name (runtime_exec, runtime_read_file,
 * runtime_write_file, runtime_list_files; runtime_run_code with
 * `runCode: true`), each made with the SDK's `tool()`
 * and a `jsonSchema()` input schema; `ai` is an optional peer dependency.
 */

import { jsonSchema, tool, type Tool } from "ai";

import { type AdapterToolsOptions, adapterTools, type ToolSandbox } from "./tools.js";

export type { AdapterToolsOptions, SandboxToolsOptions, ToolSandbox } from "./tools.js";

/** The four tools bound to `sbx` (with `runCode: true`, runtime_run_code
 * fifth, codeTools' tool), as an AI SDK tool set. */
export function aiTools(sbx: ToolSandbox, options: AdapterToolsOptions = {}): Record<string, Tool> {
  const out: Record<string, Tool> = {};
  for (const t of adapterTools(sbx, options)) {
    const execute = t.execute as (args: unknown) => Promise<unknown>;
    out[t.name] = tool({
      description: t.description,
      inputSchema: jsonSchema<Record<string, unknown>>(t.parameters as Parameters<typeof jsonSchema>[0]),
      // An error rejects: the SDK gives it to the model as the tool's answer.
      execute: (input: Record<string, unknown>) => execute(input),
    }) as Tool;
  }
  return out;
}

/** The same as aiTools, under the name every adapter shares (as in Python,
 * `withruntime.langchain.sandbox_tools(sbx)`). */
export const sandboxTools = aiTools;
