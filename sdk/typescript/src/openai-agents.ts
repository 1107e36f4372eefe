/**
 * The agent tools for the OpenAI Agents SDK (`@openai/agents`):
 *
 *     import { Agent, run } from "@openai/agents";
 *     import { openaiAgentsTools } from "withruntime/openai-agents";
 *     const agent = new Agent({ name: "coder", instructions, tools: openaiAgentsTools(sbx) });
 *     const result = await run(agent, "Compute fib(90) in Python");
 *
 * Each is the SDK's `tool()` with a strict JSON schema: every argument is
 * listed as required and the optional ones accept null, which means their
 * default (strict mode's rule for optional arguments). Results reach the
 * model as text: strings as they are, the others as JSON (an array of
 * entries with a `type` field would otherwise be read as content parts).
 * A platform error is given to the model as the tool's answer by the SDK's
 * default error function. `@openai/agents` is an optional peer dependency.
 */

import { tool, type FunctionTool } from "@openai/agents";

import { type AdapterToolsOptions, adapterTools, type ToolParameters, type ToolSandbox } from "./tools.js";

export type { AdapterToolsOptions, SandboxToolsOptions, ToolSandbox } from "./tools.js";

/** The schema as strict mode wants it: every property required. */
export function strictParameters(p: ToolParameters): ToolParameters {
  return { ...p, required: Object.keys(p.properties) };
}

/** The four tools bound to `sbx` (with `runCode: true`, runtime_run_code
 * fifth, codeTools' tool), as OpenAI Agents function tools. */
export function openaiAgentsTools(sbx: ToolSandbox, options: AdapterToolsOptions = {}): FunctionTool[] {
  return adapterTools(sbx, options).map((t) => {
    const execute = t.execute as (args: unknown) => Promise<unknown>;
    return tool({
      name: t.name,
      description: t.description,
      parameters: strictParameters(t.parameters) as never,
      strict: true,
      execute: async (input: unknown) => {
        const out = await execute(input ?? {});
        return typeof out === "string" ? out : JSON.stringify(out);
      },
    }) as unknown as FunctionTool;
  });
}

/** The same as openaiAgentsTools, under the name every adapter shares (as in Python,
 * `withruntime.langchain.sandbox_tools(sbx)`). */
export const sandboxTools = openaiAgentsTools;
