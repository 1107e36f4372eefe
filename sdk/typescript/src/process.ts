/** Running commands: the exec stream, its result, and background processes. */

import type { components } from "./generated/openapi.js";
import { CommandError, TransportError, WithruntimeError } from "./errors.js";
import { callUser, followStream } from "./stream.js";
import type { Transport } from "./transport.js";

type ExecEvent = components["schemas"]["ExecEvent"];
type ProcessWire = components["schemas"]["Process"];
export type Command = string | readonly string[];

/** At most this many characters (bytes with `text: false`) of each stream
 * are kept in an ExecResult (the last ones); the callbacks see everything. */
export const OUTPUT_LIMIT = 16 * 1024 * 1024;
// One long-poll of a background process waits at most this long on the server.
const WAIT_SLICE_MS = 30_000;

/**
 * How a command ended, with its output. `stdout` and `stderr` are text
 * (UTF-8, bytes that are not UTF-8 replaced by U+FFFD), or the exact bytes
 * when run with `text: false`; at most their last 16 MiB (`stdoutTruncated`
 * says older output was dropped). A process killed by signal N has
 * `exitCode` 128+N (137 after `kill()`); -1: the server reported none.
 */
export interface ExecResult<T extends string | Uint8Array = string | Uint8Array> {
  exitCode: number;
  stdout: T;
  stderr: T;
  timedOut: boolean;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  /** True when the command exited with code 0 and did not time out. */
  ok: boolean;
  pid?: number;
  durationMs?: number;
}

/** A callback receiving output as it is produced (awaited if it returns a promise). */
export type OutputCallback<T> = (chunk: T) => unknown;

export interface ExecOptions {
  /** Working directory; a relative one is under /workspace. */
  cwd?: string;
  env?: Record<string, string>;
  /** Text given to the command on its standard input; a Uint8Array must be
   * UTF-8 (TypeError otherwise): stdin carries text, not arbitrary bytes. */
  stdin?: string | Uint8Array;
  /** Bound on the command's run time (default: only the lease). */
  timeoutMs?: number;
  /** Throw CommandError when the command exits non-zero or times out. */
  check?: boolean;
  /** false: output (and what callbacks get) is the exact bytes, Uint8Array. */
  text?: boolean;
  onStdout?: OutputCallback<any>;
  onStderr?: OutputCallback<any>;
  /** Start the command and return a Process at once. */
  background?: boolean;
}

/** Raised by Process.wait when its timeoutMs passes first (the process keeps running). */
export class WaitTimeoutError extends WithruntimeError {}

function result<T extends string | Uint8Array>(r: Omit<ExecResult<T>, "ok">): ExecResult<T> {
  return { ...r, ok: r.exitCode === 0 && !r.timedOut };
}

/** Throw CommandError unless the command succeeded. */
export function checkResult<T extends ExecResult>(r: T): T {
  if (!r.ok) throw new CommandError(r);
  return r;
}

/** The last `limit` characters (or bytes) of a stream. */
class Tail {
  parts: Array<string | Uint8Array> = [];
  size = 0;
  truncated = false;
  constructor(readonly limit: number, readonly text: boolean) {}

  add(s: string | Uint8Array): void {
    this.parts.push(s);
    this.size += s.length;
    if (this.size > 2 * this.limit + 65536) this.compact();
  }

  compact(): void {
    let joined: string | Uint8Array = this.text
      ? (this.parts as string[]).join("")
      : Buffer.concat(this.parts as Uint8Array[]);
    if (joined.length > this.limit) {
      joined = joined.slice(joined.length - this.limit);
      this.truncated = true;
    }
    this.parts = [joined];
    this.size = joined.length;
  }

  value(): string | Uint8Array {
    this.compact();
    return this.parts[0] ?? (this.text ? "" : new Uint8Array());
  }
}

const decoder = new TextDecoder();
const encoder = new TextEncoder();

export function chunk(ev: ExecEvent, text: boolean, where: string): string | Uint8Array {
  if (ev.data_b64 === undefined || ev.data_b64 === null) {
    const data = String(ev.data ?? "");
    return text ? data : encoder.encode(data);
  }
  const raw = fromBase64(ev.data_b64, `${where}: an event's data_b64`);
  // The server never splits a UTF-8 character across two events.
  return text ? decoder.decode(raw) : raw;
}

function fromBase64(s: string, what: string): Uint8Array {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(s) || s.length % 4 !== 0) throw new TransportError(`${what} is not base64`);
  return new Uint8Array(Buffer.from(s, "base64"));
}

/** A process's stdout or stderr as text, or its exact bytes. */
export function outputOf(d: ProcessWire, name: "stdout" | "stderr", text: boolean): string | Uint8Array {
  if (text) return String(d[name] ?? "");
  const b64 = d[`${name}_b64`];
  if (b64 === undefined || b64 === null) return encoder.encode(String(d[name] ?? ""));
  return fromBase64(b64, `process ${d.pid}: ${name}_b64`);
}

// stdin travels as JSON text: bytes must be UTF-8 (kept exactly, a BOM
// too), else refused, as the Python SDK refuses them.
const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

function stdinText(stdin: string | Uint8Array): string {
  if (typeof stdin === "string") return stdin;
  if (!(stdin instanceof Uint8Array)) throw new TypeError("stdin must be a string or a Uint8Array");
  try {
    return strictUtf8.decode(stdin);
  } catch {
    throw new TypeError("stdin must be text: the bytes given are not valid UTF-8");
  }
}

/** The JSON body of POST /exec, with only what was given. */
export function buildExecBody(cmd: Command, opts: ExecOptions): components["schemas"]["ExecRequest"] {
  let body: components["schemas"]["ExecRequest"];
  if (typeof cmd === "string") {
    if (!cmd.trim()) throw new TypeError("cmd is empty");
    body = { cmd };
  } else if (Array.isArray(cmd)) {
    if (!cmd.length || !cmd.every((a) => typeof a === "string") || !cmd[0]) {
      throw new TypeError("cmd must be a non-empty array of strings when given as an argv");
    }
    body = { cmd: [...cmd] };
  } else {
    throw new TypeError("cmd must be a string (a shell command) or an array of strings (an argv)");
  }
  if (opts.cwd !== undefined) body.cwd = String(opts.cwd);
  if (opts.env && Object.keys(opts.env).length) {
    body.env = Object.fromEntries(Object.entries(opts.env).map(([k, v]) => [k, String(v)]));
  }
  if (opts.stdin !== undefined) body.stdin = stdinText(opts.stdin);
  if (opts.timeoutMs !== undefined) {
    if (!(opts.timeoutMs >= 0)) throw new RangeError("timeoutMs must be positive");
    if (opts.timeoutMs > 0) body.timeout_ms = Math.floor(opts.timeoutMs);
  }
  if (opts.background) body.background = true;
  return body;
}

async function call(cb: OutputCallback<any> | undefined, data: string | Uint8Array): Promise<void> {
  if (data.length) await callUser(cb, data);
}

const EXEC_END: ReadonlySet<string> = new Set(["exit"]);

/** POST an exec request and follow its ndjson event stream to the end. */
export async function runStream(
  t: Transport,
  sandboxId: string,
  body: components["schemas"]["ExecRequest"],
  opts: ExecOptions,
): Promise<ExecResult> {
  const text = opts.text !== false;
  const out = new Tail(OUTPUT_LIMIT, text);
  const err = new Tail(OUTPUT_LIMIT, text);
  let pid: number | undefined;
  const where = `exec in sandbox ${sandboxId}`;
  // With a timeout of its own the command ends by then; without one, only
  // the lease bounds it, so reading waits as long as the stream is alive.
  const timeoutMs = body.timeout_ms ? body.timeout_ms + 120_000 : null;
  const path = `/sandboxes/${sandboxId}/exec`;
  const end = await followStream<ExecEvent>(t, path, body, { terminal: EXEC_END, where, timeoutMs }, async (ev) => {
    switch (ev.type) {
      case "stdout": {
        const data = chunk(ev, text, where);
        out.add(data);
        await call(opts.onStdout, data);
        break;
      }
      case "stderr": {
        const data = chunk(ev, text, where);
        err.add(data);
        await call(opts.onStderr, data);
        break;
      }
      case "start":
        pid = ev.pid;
        break;
      // Unknown event types are skipped: newer servers may add some.
    }
  });
  return result({
    exitCode: end.exit_code ?? -1,
    stdout: out.value(),
    stderr: err.value(),
    timedOut: Boolean(end.timed_out),
    stdoutTruncated: out.truncated,
    stderrTruncated: err.truncated,
    pid,
    durationMs: end.duration_ms,
  });
}

/** What a background process has written so far, and whether it still runs. */
export interface ProcessOutput<T extends string | Uint8Array = string | Uint8Array> {
  running: boolean;
  exitCode: number | null;
  stdout: T;
  stderr: T;
}

/**
 * A command started with `exec(cmd, { background: true })`. It lives until
 * it exits, is killed, or the lease ends. `output()` fetches what it wrote
 * so far (the last 1 MiB of each stream, as the server keeps it); `wait()`
 * long-polls until it ends.
 */
export class Process<T extends string | Uint8Array = string> {
  readonly pid: number;
  readonly sandboxId: string;
  readonly text: boolean;
  readonly #t: Transport;
  readonly #check: boolean;
  #data: ProcessWire;

  /** @internal */
  constructor(t: Transport, sandboxId: string, data: ProcessWire, opts: { check?: boolean; text?: boolean } = {}) {
    if (typeof data?.pid !== "number") {
      throw new TransportError(`sandbox ${sandboxId}: the process answer has no pid: ${JSON.stringify(data).slice(0, 200)}`);
    }
    this.#t = t;
    this.sandboxId = sandboxId;
    this.pid = data.pid;
    this.text = opts.text !== false;
    this.#check = Boolean(opts.check);
    this.#data = data;
  }

  get #path(): string {
    return `/sandboxes/${this.sandboxId}/processes/${this.pid}`;
  }

  /** The command as it was started. */
  get cmd(): string | string[] {
    return this.#data.cmd;
  }

  /** Whether it was running when last seen (no request made). */
  get running(): boolean {
    return Boolean(this.#data.running);
  }

  /** The exit code as last seen (null while running; no request made). */
  get exitCode(): number | null {
    return this.#data.running ? null : (this.#data.exit_code ?? -1);
  }

  /** Fetch the current state and output. */
  async refresh(): Promise<this> {
    this.#data = await this.#t.json<ProcessWire>("GET", this.#path);
    return this;
  }

  /** Output so far and whether it still runs (asks the server). */
  async output(): Promise<ProcessOutput<T>> {
    await this.refresh();
    return {
      running: this.running,
      exitCode: this.exitCode,
      stdout: outputOf(this.#data, "stdout", this.text) as T,
      stderr: outputOf(this.#data, "stderr", this.text) as T,
    };
  }

  /** Wait for it to end and return its result. With `timeoutMs`, throws
   * WaitTimeoutError when that passes first (the process keeps running).
   * With `check: true` given to exec, throws CommandError on failure. */
  async wait(opts: { timeoutMs?: number } = {}): Promise<ExecResult<T>> {
    const deadline = opts.timeoutMs === undefined ? undefined : Date.now() + opts.timeoutMs;
    while (this.#data.running ?? true) {
      let slice = WAIT_SLICE_MS;
      if (deadline !== undefined) {
        const left = deadline - Date.now();
        if (left <= 0) throw new WaitTimeoutError(`process ${this.pid} still running after ${opts.timeoutMs} ms`);
        slice = Math.max(1, Math.min(WAIT_SLICE_MS, Math.floor(left)));
      }
      const started = Date.now();
      this.#data = await this.#t.json<ProcessWire>("GET", this.#path, {
        query: { wait: true, timeout_ms: slice },
        timeoutMs: slice + 60_000,
      });
      // A server that answers at once instead of long-polling must not
      // turn this into a busy loop.
      if (this.#data.running && Date.now() - started < 50) await new Promise((r) => setTimeout(r, 200));
    }
    const d = this.#data;
    const r = result({
      exitCode: d.exit_code ?? -1,
      stdout: outputOf(d, "stdout", this.text) as T,
      stderr: outputOf(d, "stderr", this.text) as T,
      timedOut: Boolean(d.timed_out),
      stdoutTruncated: Boolean(d.stdout_truncated),
      stderrTruncated: Boolean(d.stderr_truncated),
      pid: this.pid,
    });
    return this.#check ? checkResult(r) : r;
  }

  /** Kill the process (and what it started). Killing an ended one is harmless. */
  async kill(): Promise<void> {
    this.#data = await this.#t.json<ProcessWire>("POST", this.#path + "/kill");
  }
}
