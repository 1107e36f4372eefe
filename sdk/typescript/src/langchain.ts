/**
 * The agent tools for LangChain.js (`@langchain/core`):
 *
 *     import { langchainTools } from "withruntime/langchain";
 *     const tools = langchainTools(sbx);
 *     const model = chatModel.bindTools(tools);            // or createAgent({ model, tools })
 *     console.log(await tools[0].invoke({ command: "python3 -V" }));
 *
 * Each is a DynamicStructuredTool with the tool's JSON schema (LangChain
 * validates the input against it). Results are text: strings as they are,
 * the others as JSON (LangChain would read an array of entries with a
 * `type` field as message content blocks). A platform error rejects, as
 * LangChain tools do; `@langchain/core` is an optional peer dependency.
 */

import { DynamicStructuredTool } from "@langchain/core/tools";

import { type AdapterToolsOptions, adapterTools, type ToolSandbox } from "./tools.js";

export type { AdapterToolsOptions, SandboxToolsOptions, ToolSandbox } from "./tools.js";

/** The four tools bound to `sbx` (with `runCode: true`, runtime_run_code
 * fifth, codeTools' tool), as LangChain structured tools. */
export function langchainTools(sbx: ToolSandbox, options: AdapterToolsOptions = {}): DynamicStructuredTool[] {
  return adapterTools(sbx, options).map((t) => {
    const execute = t.execute as (args: unknown) => Promise<unknown>;
    return new DynamicStructuredTool({
      name: t.name,
      description: t.description,
      schema: t.parameters as never,
      func: async (input: unknown) => {
        const out = await execute(input ?? {});
        return typeof out === "string" ? out : JSON.stringify(out);
      },
    }) as unknown as DynamicStructuredTool;
  });
}

/** The same as langchainTools, under the name every adapter shares (as in Python,
 * `withruntime.langchain.sandbox_tools(sbx)`). */
export const sandboxTools = langchainTools;
