/**
 * withruntime: disposable, isolated Linux sandboxes for AI agents.
 *
 *     import { Sandbox } from "withruntime";
 *     await using sbx = await Sandbox.create({ timeoutSeconds: 600 });
 *     console.log((await sbx.exec("echo hi", { check: true })).stdout);
 *
 * Configuration comes from WITHRUNTIME_API_KEY and WITHRUNTIME_BASE_URL, or
 * from the apiKey and baseUrl options. No runtime dependencies: Node.js 18
 * or later.
 */

export { Sandbox, sandboxInfoOf } from "./sandbox.js";
export { Snapshot } from "./snapshot.js";
export type { CreateOptions, EgressEvent, Forks, ListOptions, MetricsOptions, NetworkPolicy, SandboxInfo, SandboxMetric } from "./sandbox.js";
export { Template, templateInfoOf } from "./template.js";
export { Volume } from "./volume.js";
export type { VolumeEntry, VolumeMount } from "./volume.js";
export type { BuildNetwork, BuildOptions, TemplateDefaults, TemplateInfo } from "./template.js";
export { Process, WaitTimeoutError, OUTPUT_LIMIT } from "./process.js";
export { Pty, PtyHandle } from "./pty.js";
export { PREVIEW_TOKEN_HEADER, PREVIEW_TOKEN_PARAM } from "./preview.js";
export type { Preview } from "./preview.js";
export type { PtyCreateOptions } from "./pty.js";
export type { Command, ExecOptions, ExecResult, OutputCallback, ProcessOutput } from "./process.js";
export { Contexts, Execution, resultFormats } from "./code.js";
export type { Context, ContextArg, ExecutionError, Logs, Result, RunCodeOptions } from "./code.js";
export { Files } from "./files.js";
export type { AsUser, FileInfo, TransferResult } from "./files.js";
export { ArchiveTooLargeError, DestinationError, UnsafeArchiveError } from "./archive.js";
export type { DownloadOptions } from "./archive.js";
export { Client, Secrets, Keys, Accounts } from "./admin.js";
export type { Account, CreateKeyOptions, Key, SecretInfo, Trial, Usage, UsageRow } from "./admin.js";
export { APIError, CommandError, TransportError, WithruntimeError, STATUS_OF_CODE } from "./errors.js";
export type { ErrorCode } from "./errors.js";
export { DEFAULT_BASE_URL } from "./local.js";
export type { ClientOptions } from "./transport.js";
export { VERSION } from "./version.js";
export type { components as WireTypes, paths as WirePaths } from "./generated/openapi.js";
// The four agent tools and the code tool, framework-neutral (adapters:
// withruntime/ai, withruntime/openai-agents, withruntime/langchain).
export { codeTools, sandboxTools } from "./tools.js";
export type {
  AdapterToolsOptions,
  CodeToolSandbox,
  CodeTools,
  RunCodeToolResult,
  SandboxTool,
  SandboxTools,
  SandboxToolsOptions,
  ToolSandbox,
} from "./tools.js";
