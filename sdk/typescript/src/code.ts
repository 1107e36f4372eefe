/**
 * The code interpreter: cells run in a persistent Python kernel in the
 * sandbox. `sbx.runCode(code)` resolves to an Execution: the cell's rich
 * results (its value and what it displayed), its stdout and stderr, and
 * the exception it raised, if any, as data. `sbx.contexts` makes, lists,
 * restarts and removes kernels: each context keeps its own state.
 */

import { TransportError } from "./errors.js";
import type { components } from "./generated/openapi.js";
import { callUser, followStream } from "./stream.js";
import type { Transport } from "./transport.js";

type CodeEvent = components["schemas"]["CodeEvent"];
type CodeResultWire = components["schemas"]["CodeResult"];
type ContextWire = components["schemas"]["CodeContext"];

// The representations of a result, in the order a reader is shown them.
const FORMATS = ["text", "html", "markdown", "svg", "png", "jpeg", "latex", "javascript", "json"] as const;

/**
 * One rich result of a cell: its value (`isMainResult`) or something it
 * displayed (`display()`, a matplotlib figure). Each field is one
 * representation, absent when the result has none: `text` (text/plain),
 * `html`, `markdown`, `svg`, `png` and `jpeg` (base64), `latex`,
 * `javascript`, and `json` (application/json, decoded). A representation
 * over 4 MiB is dropped and `text` says so.
 */
export interface Result {
  text?: string;
  html?: string;
  markdown?: string;
  svg?: string;
  png?: string;
  jpeg?: string;
  latex?: string;
  javascript?: string;
  json?: unknown;
  isMainResult: boolean;
}

/** The representations a result has, e.g. `["text", "png"]`. */
export function resultFormats(r: Result): string[] {
  return FORMATS.filter((f) => r[f] !== undefined);
}

/** What a cell wrote, in chunks as they arrived (join them for the whole). */
export interface Logs {
  stdout: string[];
  stderr: string[];
}

/** The exception a cell raised: `name` (`ValueError`, ...), `value` (its
 * message) and `traceback` (plain text). `TimeoutError` is a cell stopped
 * by `timeoutMs` (the context keeps its state); `DeadKernelError` a kernel
 * that died and was restarted (state lost). Data, not a thrown error. */
export interface ExecutionError {
  name: string;
  value: string;
  traceback: string;
}

/**
 * The outcome of one cell: `results` in order (the value and displays),
 * `logs`, `error` (the exception it raised, or null), `executionCount`
 * (the kernel's cell number) and `text`, the value's text (null when the
 * cell's last line was not an expression). `String(execution)` is a
 * plain-text account of all of it, for a person or a model to read.
 */
export class Execution {
  results: Result[] = [];
  logs: Logs = { stdout: [], stderr: [] };
  error: ExecutionError | null = null;
  executionCount = 0;

  /** The text of the cell's value (its main result), or null. */
  get text(): string | null {
    const main = this.results.find((r) => r.isMainResult);
    return main ? (main.text ?? null) : null;
  }

  toString(): string {
    const out: string[] = [];
    const stdout = this.logs.stdout.join("");
    const stderr = this.logs.stderr.join("");
    if (stdout) out.push("stdout:\n" + stdout.replace(/\n+$/, ""));
    if (stderr) out.push("stderr:\n" + stderr.replace(/\n+$/, ""));
    for (const r of this.results) {
      const others = resultFormats(r).filter((f) => f !== "text");
      const also = others.length ? ` [${others.join(", ")}]` : "";
      out.push(`${r.isMainResult ? "result" : "display"}${also}:\n${r.text ?? ""}`.trimEnd());
    }
    if (this.error) {
      const tb = this.error.traceback.replace(/\n+$/, "");
      out.push(`error: ${this.error.name}: ${this.error.value}` + (tb ? `\n${tb}` : ""));
    }
    return out.length ? out.join("\n") : "(no output)";
  }
}

/** A kernel of its own: `id` (`"default"` or `ctx_...`), `language`
 * (`"python"`) and `cwd`. */
export interface Context {
  id: string;
  language: string;
  cwd: string;
}

/** A context or its id. */
export type ContextArg = Context | string;

export interface RunCodeOptions {
  /** The context to run in (default: the sandbox's default context, made on first use). */
  context?: ContextArg;
  /** Interrupt the cell after this long (its context keeps its state);
   * the Execution then has error.name "TimeoutError". Default: only the lease. */
  timeoutMs?: number;
  /** Each is awaited, in order, before runCode resolves. */
  onStdout?: (text: string) => unknown;
  onStderr?: (text: string) => unknown;
  onResult?: (result: Result) => unknown;
  /** Environment of the default context, used only when this call makes it. */
  env?: Record<string, string>;
}

function contextId(context: ContextArg): string {
  const cid = typeof context === "string" ? context : context?.id;
  if (typeof cid !== "string" || !cid) throw new TypeError("context must be a Context or a non-empty context id");
  return cid;
}

function stringMap(m: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(m).map(([k, v]) => [k, String(v)]));
}

function contextOf(d: ContextWire | undefined): Context {
  if (!d || typeof d !== "object" || typeof d.id !== "string" || !d.id) {
    throw new TransportError(`a context answer has no id: ${String(JSON.stringify(d)).slice(0, 200)}`);
  }
  const str = (v: unknown, name: string, dflt: string): string => {
    if (v === undefined || v === null || v === "") return dflt;
    if (typeof v !== "string") throw new TransportError(`context ${d.id}: its ${name} is not a string`);
    return v;
  };
  return { id: d.id, language: str(d.language, "language", "python"), cwd: str(d.cwd, "cwd", "") };
}

// A string field of an event: absent is "", anything but a string a server
// gone wrong (never shown as "[object Object]").
function textOf(v: unknown, what: string, where: string): string {
  if (v === undefined || v === null) return "";
  if (typeof v !== "string") throw new TransportError(`${where}: ${what} is not a string`);
  return v;
}

// The server cuts a code stream at a line over 8 MiB; a longer one is a
// server gone wrong, refused before it fills the memory.
const MAX_LINE = 9 << 20;

function resultOf(d: CodeResultWire): Result {
  const r: Result = { isMainResult: Boolean(d.is_main_result) };
  for (const f of FORMATS) {
    if (f === "json") {
      if (d.json !== undefined && d.json !== null) r.json = d.json;
    } else if (typeof d[f] === "string" && d[f] !== "") {
      r[f] = d[f];
    }
  }
  return r;
}

/** The code contexts of one sandbox (`sbx.contexts`): at most 16. */
export class Contexts {
  readonly #t: Transport;
  readonly #base: string;

  /** @internal */
  constructor(t: Transport, sandboxId: string) {
    this.#t = t;
    this.#base = `/sandboxes/${sandboxId}/contexts`;
  }

  #path(context: ContextArg): string {
    return `${this.#base}/${encodeURIComponent(contextId(context))}`;
  }

  /** Start a new kernel. A relative `cwd` is under /workspace (the
   * default); `env` is added to the sandbox's environment. */
  async create(opts: { cwd?: string; env?: Record<string, string> } = {}): Promise<Context> {
    const body: components["schemas"]["CreateContextRequest"] = {};
    if (opts.cwd !== undefined) body.cwd = String(opts.cwd);
    if (opts.env && Object.keys(opts.env).length) body.env = stringMap(opts.env);
    return contextOf(await this.#t.json<ContextWire>("POST", this.#base, { json: body }));
  }

  /** The sandbox's contexts (the default one once a call has made it). */
  async list(): Promise<Context[]> {
    const d = await this.#t.json<components["schemas"]["CodeContextList"] | undefined>("GET", this.#base);
    const cs: unknown = d === undefined || d === null ? [] : typeof d === "object" ? (d.contexts ?? []) : d;
    if (!Array.isArray(cs) || Array.isArray(d)) {
      throw new TransportError(`the contexts answer is not a context list: ${String(JSON.stringify(d)).slice(0, 200)}`);
    }
    return cs.map(contextOf);
  }

  /** Give the context a new kernel: its state is lost, its id, cwd and env stay. */
  async restart(context: ContextArg): Promise<Context> {
    return contextOf(await this.#t.json<ContextWire>("POST", this.#path(context) + "/restart"));
  }

  /** Stop the context's kernel and forget it. */
  async remove(context: ContextArg): Promise<void> {
    await this.#t.request("DELETE", this.#path(context));
  }
}

/** The JSON body of POST /code, with only what was given. */
export function buildCodeBody(code: string, opts: RunCodeOptions): components["schemas"]["CodeRequest"] {
  if (typeof code !== "string") throw new TypeError("code must be a string");
  const body: components["schemas"]["CodeRequest"] = { code };
  if (opts.context !== undefined && opts.context !== null) body.context_id = contextId(opts.context);
  if (opts.timeoutMs !== undefined) {
    const ms: unknown = opts.timeoutMs;
    if (typeof ms !== "number") throw new TypeError(`timeoutMs must be a number, not ${typeof ms}`);
    if (!(ms >= 0) || ms === Infinity) throw new RangeError(`timeoutMs must be a positive number of ms, not ${ms}`);
    // Rounded up: 0.5 must not become 0, which means no timeout at all.
    if (ms > 0) body.timeout_ms = Math.ceil(ms);
  }
  if (opts.env && Object.keys(opts.env).length) body.env = stringMap(opts.env);
  return body;
}

const CODE_END: ReadonlySet<string> = new Set(["end"]);

/** @internal How long past its timeout a cell's stream may stay silent, in
 * ms (an object so that tests can shorten it). */
export const readSlack = { ms: 120_000 };

/** POST a cell and follow its event stream to the "end" event. */
export async function runCodeStream(
  t: Transport,
  sandboxId: string,
  body: components["schemas"]["CodeRequest"],
  opts: RunCodeOptions,
): Promise<Execution> {
  const where = `runCode in sandbox ${sandboxId}`;
  // A cell over its timeout is interrupted (its kernel restarted after 3 s
  // if it ignores that): the stream ends soon after. Without one only the
  // lease bounds it; TCP keepalive notices a vanished server. The wait for
  // the headers is not bounded: the server counts timeout_ms only once the
  // cell runs, after its context's earlier cells and the kernel's start.
  const timeoutMs = body.timeout_ms ? body.timeout_ms + readSlack.ms : null;
  const ex = new Execution();
  const end = await followStream<CodeEvent>(t, `/sandboxes/${sandboxId}/code`, body, { terminal: CODE_END, where, timeoutMs, untimedHeaders: true, maxLine: MAX_LINE }, async (ev) => {
    switch (ev.type) {
      case "stdout":
      case "stderr": {
        const text = textOf(ev.text, `a ${ev.type} event's text`, where);
        if (!text) return;
        ex.logs[ev.type].push(text);
        await callUser(ev.type === "stdout" ? opts.onStdout : opts.onStderr, text);
        return;
      }
      case "result": {
        if (!ev.result || typeof ev.result !== "object") throw new TransportError(`${where}: a result event has no result`);
        const r = resultOf(ev.result);
        ex.results.push(r);
        await callUser(opts.onResult, r);
        return;
      }
      case "exception": {
        const e = ev.exception;
        if (!e || typeof e !== "object") throw new TransportError(`${where}: an exception event has no exception`);
        const f = (v: unknown, name: string): string => textOf(v, `the exception's ${name}`, where);
        ex.error = { name: f(e.name, "name") || "Error", value: f(e.value, "value"), traceback: f(e.traceback, "traceback") };
        return;
      }
      // Unknown event types are skipped: newer servers may add some.
    }
  });
  const n: unknown = end.execution_count ?? 0;
  if (typeof n !== "number" || !Number.isSafeInteger(n) || n < 0) {
    throw new TransportError(`${where}: the end event's execution_count is not a whole number: ${String(JSON.stringify(n)).slice(0, 50)}`);
  }
  ex.executionCount = n;
  return ex;
}
