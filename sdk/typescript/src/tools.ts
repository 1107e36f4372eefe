/**
 * Agent tools over a sandbox: `sandboxTools(sbx)` and `codeTools(sbx)`.
 *
 * The same four tools as the Python SDK's `withruntime.tools.sandbox_tools`,
 * in the same order, with the same inputs, results, caps and timeout
 * default: `runtime_exec`, `runtime_read_file`, `runtime_write_file`,
 * `runtime_list_files`; `codeTools` returns one more, `runtime_run_code`
 * (Python in the sandbox's persistent kernel, `sbx.runCode`), as Python's
 * `code_tools`. Each is framework-neutral, `{ name, description,
 * parameters, execute }` with `parameters` a JSON Schema object; the
 * adapters (`withruntime/ai`, `withruntime/openai-agents`,
 * `withruntime/langchain`) wrap them for each framework, the code tool
 * too with `runCode: true`.
 *
 * What they return is capped (the last 20,000 characters of stdout and of
 * stderr, the first 20,000 bytes of a file, 400 directory entries, the
 * first 20,000 characters of run_code's results), with a note saying what
 * was cut, because frameworks hand the result to the model whole.
 *
 * Failures: `runtime_exec` returns a non-zero exit code or a timeout as data,
 * never as an error, and `runtime_run_code` an exception in the code (or a
 * cell interrupted at its timeout) as its `error`, so the model sees a
 * failed command as a failure it can act on. A path that is not there is
 * data too: runtime_read_file resolves to "not found: /workspace/x (no such
 * file or directory)" and runtime_list_files to one entry of type `note`
 * whose name says the same, so the model reads it and tries another path. A
 * failure of the platform itself (sandbox gone, lease ended, server
 * unreachable) rejects with the SDK's error (APIError / TransportError); the
 * frameworks show that error to the model as the tool's answer, and
 * programs calling `execute` directly get a normal rejection.
 *
 * The model never sees the API key: the tools hold the sandbox, the model
 * only chooses commands and paths.
 *
 * The tools' descriptions and their arguments' (what a model reads) are
 * api/tools.json's, the text the MCP server and the Python tools are made
 * from too, generated into src/generated/tools.ts by `npm run gen`; edit
 * that file, not the texts here (check-gen fails on a stale copy).
 */

import type { ExecutionError, Result as CodeResult } from "./code.js";
import { TOOL_TEXTS } from "./generated/tools.js";

/** Characters of stdout and of stderr (and bytes of a file) a tool returns. */
export const OUTPUT_CAP = 20_000;
/** Directory entries runtime_list_files returns. */
export const LIST_CAP = 400;
/** Seconds runtime_exec gives a command when the model gives none: a server
 * started in the foreground then costs the agent two minutes, not the lease. */
export const TIMEOUT_SECONDS = 120;

// Bytes of a file's start searched for a NUL to call it binary, as in Python.
const BINARY_SNIFF = 8192;

/** What the tools need of a command's result (the SDK's ExecResult has it).
 * The tools ask for text; bytes (which they never ask for) are decoded. */
export interface ToolExecResult {
  exitCode: number;
  stdout: string | Uint8Array;
  stderr: string | Uint8Array;
  timedOut: boolean;
  /** Older output was dropped by the SDK before the tool saw it. */
  stdoutTruncated?: boolean;
  stderrTruncated?: boolean;
}

/** A directory entry as the tools need it. */
export interface ToolFileEntry {
  name: string;
  type: string;
  size: number;
}

/** The part of a sandbox the tools use; the SDK's Sandbox satisfies it. */
export interface ToolSandbox {
  exec(command: string, options: { cwd?: string; timeoutMs?: number; background?: false }): Promise<ToolExecResult>;
  files: {
    /** At most `limit` bytes from a file's start (the rest is not
     * transferred) and the file's whole size when known. */
    readHead(path: string, limit: number): Promise<{ data: Uint8Array; size?: number | undefined }>;
    write(path: string, data: string): Promise<{ path?: string } | unknown>;
    list(path: string): Promise<ReadonlyArray<ToolFileEntry>>;
  };
  /** The sandbox's state: asked when a path was not found, to tell a
   * missing path (data for the model) from a missing sandbox (an error). */
  info?(): Promise<{ state: string }>;
}

/** The tool's answer when err says that path is not there, or undefined
 * when err is another failure. The API answers not_found (an APIError, told
 * by its code) for a missing sandbox too: the sandbox is asked for, and
 * only while it is there and not ended was it the path that was missing. */
async function notFound(sbx: ToolSandbox, path: string, err: unknown): Promise<string | undefined> {
  if ((err as { code?: unknown } | null)?.code !== "not_found") return undefined;
  if (sbx.info) {
    try {
      if ((await sbx.info()).state === "ended") return undefined;
    } catch {
      return undefined; // the sandbox is not there: the first error stands
    }
  }
  return `not found: ${absolute(path)} (no such file or directory)`;
}

/** A sandbox path made absolute (relative ones land in /workspace) and clean. */
function absolute(path: string): string {
  const parts: string[] = [];
  for (const p of (path.startsWith("/") ? path : `/workspace/${path}`).split("/")) {
    if (p === "" || p === ".") continue;
    if (p === "..") parts.pop();
    else parts.push(p);
  }
  return "/" + parts.join("/");
}

/** A JSON Schema object describing a tool's arguments. */
export interface ToolParameters {
  type: "object";
  properties: Record<string, { type: string | string[]; description: string }>;
  required: string[];
  additionalProperties: false;
}

/** runtime_exec's result, with Python's field names: the model reads these. */
export interface ExecToolResult {
  exit_code: number;
  stdout: string;
  stderr: string;
  timed_out: boolean;
}

/** A framework-neutral tool. */
export interface SandboxTool<Args = Record<string, unknown>, Result = unknown> {
  name: string;
  description: string;
  parameters: ToolParameters;
  execute(args: Args): Promise<Result>;
}

export interface ExecArgs {
  command: string;
  cwd?: string | null;
  timeout_seconds?: number | null;
}
export interface ReadArgs {
  path: string;
}
export interface WriteArgs {
  path: string;
  content: string;
}
export interface ListArgs {
  path?: string | null;
}

/** The four tools, in order. */
export type SandboxTools = [
  SandboxTool<ExecArgs, ExecToolResult>,
  SandboxTool<ReadArgs, string>,
  SandboxTool<WriteArgs, string>,
  SandboxTool<ListArgs, ToolFileEntry[]>,
];

export interface SandboxToolsOptions {
  /** Seconds runtime_exec gives a command when the model gives none
   * (default 120); null: only the sandbox's lease bounds a command.
   * runtime_exec's description tells the model which applies. */
  timeoutSeconds?: number | null;
  /** What each tool returns at most (characters of each stream, bytes of a
   * file); default OUTPUT_CAP. */
  outputCap?: number;
}

/** The last `cap` characters (code points, as Python counts) of a stream,
 * with a note when anything was cut. */
export function keepTail(text: string, alreadyCut: boolean, cap: number, stream: string): string {
  // A string of at most `cap` UTF-16 units has at most `cap` code points.
  if (text.length <= cap && !alreadyCut) return text;
  let start = text.length;
  let kept = 0;
  while (start > 0 && kept < cap) {
    const lo = text.charCodeAt(start - 1);
    const hi = start >= 2 ? text.charCodeAt(start - 2) : 0;
    start -= lo >= 0xdc00 && lo <= 0xdfff && hi >= 0xd800 && hi <= 0xdbff ? 2 : 1;
    kept++;
  }
  if (start === 0 && !alreadyCut) return text;
  return `[${stream} was cut: only its last ${kept} characters are shown]\n${text.slice(start)}`;
}

function asText(s: string | Uint8Array): string {
  return typeof s === "string" ? s : new TextDecoder().decode(s);
}

function requireString(tool: string, name: string, v: unknown): string {
  if (typeof v !== "string") throw new TypeError(`${tool}: ${name} must be a string, got ${v === null ? "null" : typeof v}`);
  return v;
}

function optionalString(tool: string, name: string, v: unknown): string | undefined {
  if (v === undefined || v === null) return undefined;
  return requireString(tool, name, v);
}

// The options both tool lists take, checked: the cap, the timeout a call
// gets when the model gives none, and how the descriptions say that.
function checkOptions(options: SandboxToolsOptions): { cap: number; defaultTimeout: number | null; said: string } {
  const cap = Math.trunc(options.outputCap ?? OUTPUT_CAP);
  const defaultTimeout = options.timeoutSeconds === undefined ? TIMEOUT_SECONDS : options.timeoutSeconds;
  if (defaultTimeout !== null && !(defaultTimeout > 0)) {
    throw new RangeError("timeoutSeconds must be positive or null");
  }
  const said =
    defaultTimeout === null ? "no limit but the sandbox's lease" : `${Math.trunc(defaultTimeout)} seconds`;
  return { cap, defaultTimeout, said };
}

// The timeout_seconds argument's schema: its description (which states the
// default of TIMEOUT_SECONDS) made to state the default in force, `said`.
function timeoutParameter(description: string, said: string): { type: string[]; description: string } {
  return {
    type: ["integer", "null"],
    description: description.replace(`null means ${TIMEOUT_SECONDS} seconds.`, `null means ${said}.`),
  };
}

// The timeout of one call in milliseconds for the SDK: the model's
// timeout_seconds, else the default. As in Python, 0 (like null with no
// default) means no limit: undefined.
function callTimeoutMs(tool: string, given: number | null | undefined, defaultTimeout: number | null): number | undefined {
  if (given !== undefined && given !== null && typeof given !== "number") {
    throw new TypeError(`${tool}: timeout_seconds must be a number, got ${typeof given}`);
  }
  const timeout = given ?? defaultTimeout;
  if (timeout !== null && (timeout < 0 || Number.isNaN(timeout))) {
    throw new RangeError("timeout_seconds must be positive");
  }
  return timeout ? Math.trunc(timeout * 1000) : undefined;
}

/**
 * The four agent tools bound to one sandbox: runtime_exec,
 * runtime_read_file, runtime_write_file, runtime_list_files.
 */
export function sandboxTools(sbx: ToolSandbox, options: SandboxToolsOptions = {}): SandboxTools {
  const { cap, defaultTimeout, said } = checkOptions(options);

  const exec: SandboxTool<ExecArgs, ExecToolResult> = {
    name: "runtime_exec",
    description: TOOL_TEXTS.runtime_exec.description,
    parameters: {
      type: "object",
      properties: {
        command: { type: "string", description: TOOL_TEXTS.runtime_exec.parameters.command },
        cwd: { type: ["string", "null"], description: TOOL_TEXTS.runtime_exec.parameters.cwd },
        timeout_seconds: timeoutParameter(TOOL_TEXTS.runtime_exec.parameters.timeout_seconds, said),
      },
      required: ["command"],
      additionalProperties: false,
    },
    async execute(args) {
      const command = requireString("runtime_exec", "command", args?.command);
      const cwd = optionalString("runtime_exec", "cwd", args.cwd);
      const timeoutMs = callTimeoutMs("runtime_exec", args.timeout_seconds, defaultTimeout);
      const r = await sbx.exec(command, { cwd: cwd || undefined, timeoutMs });
      return {
        exit_code: r.exitCode,
        stdout: keepTail(asText(r.stdout), Boolean(r.stdoutTruncated), cap, "stdout"),
        stderr: keepTail(asText(r.stderr), Boolean(r.stderrTruncated), cap, "stderr"),
        timed_out: r.timedOut,
      };
    },
  };

  const read: SandboxTool<ReadArgs, string> = {
    name: "runtime_read_file",
    description: TOOL_TEXTS.runtime_read_file.description,
    parameters: {
      type: "object",
      properties: {
        path: { type: "string", description: TOOL_TEXTS.runtime_read_file.parameters.path },
      },
      required: ["path"],
      additionalProperties: false,
    },
    async execute(args) {
      const path = requireString("runtime_read_file", "path", args?.path);
      let head: Awaited<ReturnType<ToolSandbox["files"]["readHead"]>>;
      try {
        head = await sbx.files.readHead(path, cap);
      } catch (e) {
        const missing = await notFound(sbx, path, e);
        if (missing === undefined) throw e;
        return missing;
      }
      const { data, size: total = null } = head;
      if (data.subarray(0, BINARY_SNIFF).includes(0)) {
        const size = total === null ? "unknown size" : `${total} bytes`;
        return `[${path} is a binary file (${size}); use runtime_exec with file, xxd or python3 to inspect it]`;
      }
      let text = new TextDecoder("utf-8", { ignoreBOM: true }).decode(data);
      if (total === null || total > data.length) {
        const size = total === null ? "more" : `${total} bytes in all`;
        text += `\n[cut: only the first ${data.length} bytes of ${path} are shown (${size}); use runtime_exec with tail or sed -n to read the rest]`;
      }
      return text;
    },
  };

  const write: SandboxTool<WriteArgs, string> = {
    name: "runtime_write_file",
    description: TOOL_TEXTS.runtime_write_file.description,
    parameters: {
      type: "object",
      properties: {
        path: { type: "string", description: TOOL_TEXTS.runtime_write_file.parameters.path },
        content: { type: "string", description: TOOL_TEXTS.runtime_write_file.parameters.content },
      },
      required: ["path", "content"],
      additionalProperties: false,
    },
    async execute(args) {
      const path = requireString("runtime_write_file", "path", args?.path);
      const content = requireString("runtime_write_file", "content", args.content);
      const info = await sbx.files.write(path, content);
      const where = (info as { path?: unknown } | undefined)?.path;
      const size = new TextEncoder().encode(content).length;
      return `wrote ${size} bytes to ${typeof where === "string" && where ? where : path}`;
    },
  };

  const list: SandboxTool<ListArgs, ToolFileEntry[]> = {
    name: "runtime_list_files",
    description: TOOL_TEXTS.runtime_list_files.description,
    parameters: {
      type: "object",
      properties: {
        path: { type: ["string", "null"], description: TOOL_TEXTS.runtime_list_files.parameters.path },
      },
      required: [],
      additionalProperties: false,
    },
    async execute(args) {
      const path = optionalString("runtime_list_files", "path", args?.path);
      let listed: ReadonlyArray<ToolFileEntry>;
      try {
        listed = await sbx.files.list(path || ".");
      } catch (e) {
        const missing = await notFound(sbx, path || ".", e);
        if (missing === undefined) throw e;
        return [{ name: missing, type: "note", size: 0 }];
      }
      const entries = [...listed].sort((a, b) =>
        a.name < b.name ? -1 : a.name > b.name ? 1 : 0,
      );
      const out: ToolFileEntry[] = entries.slice(0, LIST_CAP).map((e) => ({ name: e.name, type: e.type, size: e.size }));
      if (entries.length > LIST_CAP) {
        out.push({ name: `[${entries.length - LIST_CAP} more entries not shown]`, type: "note", size: 0 });
      }
      return out;
    },
  };

  return [exec, read, write, list];
}

/** What runtime_run_code needs of a cell's outcome (the SDK's Execution has it). */
export interface ToolCodeExecution {
  results: ReadonlyArray<Omit<CodeResult, "isMainResult">>;
  logs: { stdout: readonly string[]; stderr: readonly string[] };
  error: ExecutionError | null;
}

/** The part of a sandbox runtime_run_code uses; the SDK's Sandbox satisfies it. */
export interface CodeToolSandbox {
  runCode(code: string, options: { timeoutMs?: number }): Promise<ToolCodeExecution>;
}

export interface RunCodeArgs {
  code: string;
  timeout_seconds?: number | null;
}

/** runtime_run_code's result, with Python's field names: each result as
 * text saying in which other formats it exists, the cell's output, and the
 * exception it raised (or null). */
export interface RunCodeToolResult {
  results: string[];
  stdout: string;
  stderr: string;
  error: ExecutionError | null;
}

/** The code tool, alone in its list (as Python's code_tools). */
export type CodeTools = [SandboxTool<RunCodeArgs, RunCodeToolResult>];

// The formats of a rich result other than text, as runtime_run_code names them.
const RICH_FORMATS = ["html", "markdown", "svg", "png", "jpeg", "latex", "javascript", "json"] as const;

// Lengths and cuts in code points, as Python counts characters.
function codePoints(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    n++;
  }
  return n;
}

function headCodePoints(s: string, n: number): string {
  let i = 0;
  for (let kept = 0; i < s.length && kept < n; kept++) {
    const c = s.charCodeAt(i);
    const d = i + 1 < s.length ? s.charCodeAt(i + 1) : 0;
    i += c >= 0xd800 && c <= 0xdbff && d >= 0xdc00 && d <= 0xdfff ? 2 : 1;
  }
  return s.slice(0, i);
}

/**
 * The code tool bound to one sandbox: `[runtime_run_code]`. It runs Python
 * in the sandbox's default code context (`sbx.runCode`), so state persists
 * between its calls and is shared with other callers of that context, not
 * with runtime_exec's shell. The options mean what they mean for
 * sandboxTools: `timeoutSeconds` is the cell's timeout when the model gives
 * none (default 120; null: only the lease), `outputCap` bounds the
 * results' text (all together), stdout, stderr and the traceback.
 */
export function codeTools(sbx: CodeToolSandbox, options: SandboxToolsOptions = {}): CodeTools {
  const { cap, defaultTimeout, said } = checkOptions(options);

  const runCode: SandboxTool<RunCodeArgs, RunCodeToolResult> = {
    name: "runtime_run_code",
    description: TOOL_TEXTS.runtime_run_code.description,
    parameters: {
      type: "object",
      properties: {
        code: { type: "string", description: TOOL_TEXTS.runtime_run_code.parameters.code },
        timeout_seconds: timeoutParameter(TOOL_TEXTS.runtime_run_code.parameters.timeout_seconds, said),
      },
      required: ["code"],
      additionalProperties: false,
    },
    async execute(args) {
      const code = requireString("runtime_run_code", "code", args?.code);
      const timeoutMs = callTimeoutMs("runtime_run_code", args.timeout_seconds, defaultTimeout);
      const run = await sbx.runCode(code, { timeoutMs });
      const results: string[] = [];
      let budget = cap;
      for (const [i, r] of run.results.entries()) {
        if (budget <= 0) {
          results.push(`[${run.results.length - i} more results not shown]`);
          break;
        }
        let text = r.text ?? "";
        const size = codePoints(text);
        if (size > budget) {
          text = headCodePoints(text, budget) + `\n[result cut: only its first ${budget} of ${size} characters are shown]`;
        }
        budget -= codePoints(text);
        const formats = RICH_FORMATS.filter((f) => r[f] !== undefined && r[f] !== null && r[f] !== "");
        if (formats.length) text += (text ? "\n" : "") + `[also as ${formats.join(", ")}]`;
        results.push(text);
      }
      const e = run.error;
      return {
        results,
        stdout: keepTail(run.logs.stdout.join(""), false, cap, "stdout"),
        stderr: keepTail(run.logs.stderr.join(""), false, cap, "stderr"),
        error: e
          ? {
              name: e.name,
              value: e.name === "TimeoutError" ? inSeconds(e.value) : e.value,
              traceback: keepTail(e.traceback ?? "", false, cap, "traceback"),
            }
          : null,
      };
    },
  };
  return [runCode];
}

/** The kernel's timeout message in the tool's own terms: the model passed
 * timeout_seconds, not the API's timeout_ms. */
function inSeconds(value: string): string {
  return value.replace(/\btimeout_ms=(\d+)/g, (_, ms: string) => `timeout_seconds=${Number(ms) / 1000}`);
}

/** The adapters' options: sandboxTools' and `runCode: true` to add
 * runtime_run_code (codeTools) after the four. */
export interface AdapterToolsOptions extends SandboxToolsOptions {
  runCode?: boolean;
}

/** The tools an adapter wraps: the four, then runtime_run_code if asked. */
export function adapterTools(sbx: ToolSandbox, options: AdapterToolsOptions = {}): SandboxTool<any, unknown>[] {
  const { runCode, ...rest } = options;
  const tools: SandboxTool<any, unknown>[] = [...sandboxTools(sbx, rest)];
  if (runCode) {
    const code = sbx as ToolSandbox & Partial<CodeToolSandbox>;
    if (typeof code.runCode !== "function") throw new TypeError("runCode: true needs a sandbox with runCode");
    tools.push(...codeTools(code as CodeToolSandbox, rest));
  }
  return tools;
}
