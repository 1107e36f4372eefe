/**
 * Terminals: a command on a pseudo-terminal in the sandbox (`sbx.pty`),
 * carried by the background-process routes (exec with `pty`, then
 * `.../stream`, `.../stdin`, `.../resize`, `.../kill`).
 */

import { APIError, TransportError } from "./errors.js";
import type { components } from "./generated/openapi.js";
import { chunk } from "./process.js";
import { callUser, followStream } from "./stream.js";
import type { Transport } from "./transport.js";

type ExecEvent = components["schemas"]["ExecEvent"];
type ProcessWire = components["schemas"]["Process"];

/** What `sbx.pty.create` starts. */
export interface PtyCreateOptions {
  /** The terminal's size; default 80x24. */
  cols?: number;
  rows?: number;
  /** The terminal's output, raw bytes (CRLF line ends, escape sequences), as it comes. */
  onData?: (data: Uint8Array) => unknown;
  /** A string runs under /bin/sh -c, an array is an argv; default the user's login shell. */
  cmd?: string | string[];
  cwd?: string;
  /** TERM is xterm-256color unless set here. */
  env?: Record<string, string>;
  user?: "user" | "root";
  timeoutMs?: number;
}

// One POST .../stdin carries at most this many bytes (the server's bound).
const MAX_STDIN = 1 << 20;
// How often a broken output stream is resumed in a row.
const RESUMES = 5;
const END = new Set(["exit"]);

/** The sandbox's terminals. */
export class Pty {
  readonly #t: Transport;
  readonly #id: string;

  constructor(t: Transport, sandboxId: string) {
    this.#t = t;
    this.#id = sandboxId;
  }

  /** Start a command (default the login shell) on a new terminal. */
  async create(opts: PtyCreateOptions = {}): Promise<PtyHandle> {
    const body: components["schemas"]["ExecRequest"] = {
      cmd: opts.cmd ?? "",
      background: true,
      pty: { cols: opts.cols ?? 80, rows: opts.rows ?? 24 },
    };
    if (opts.cwd !== undefined) body.cwd = opts.cwd;
    if (opts.env !== undefined) body.env = { ...opts.env };
    if (opts.user !== undefined) body.user = opts.user;
    if (opts.timeoutMs) body.timeout_ms = Math.floor(opts.timeoutMs);
    const d = await this.#t.json<ProcessWire>("POST", `/sandboxes/${this.#id}/exec`, { json: body });
    return new PtyHandle(this.#t, this.#id, d, opts.onData);
  }

  /** Attach to a running terminal again: the output it kept (its last
   * 64 KiB) comes first. */
  async connect(pid: number, opts: { onData?: (data: Uint8Array) => unknown } = {}): Promise<PtyHandle> {
    const d = await this.#t.json<ProcessWire>("GET", `/sandboxes/${this.#id}/processes/${Math.floor(pid)}`, {
      query: { output: "false" },
    });
    if (!d?.pty) throw new APIError("conflict", 409, `process ${pid} has no terminal`);
    return new PtyHandle(this.#t, this.#id, d, opts.onData);
  }
}

/** One terminal: sendInput, resize, kill, wait. */
export class PtyHandle {
  /** The terminal's process id (for `sbx.pty.connect`). */
  readonly pid: number;
  readonly #t: Transport;
  readonly #id: string;
  readonly #onData: ((data: Uint8Array) => unknown) | undefined;
  readonly #done: Promise<number>;
  #stopped = false;
  #input: Promise<unknown> = Promise.resolve();

  constructor(t: Transport, sandboxId: string, d: ProcessWire, onData?: (data: Uint8Array) => unknown) {
    this.#t = t;
    this.#id = sandboxId;
    this.pid = d?.pid ?? 0;
    this.#onData = onData;
    if (!this.pid) {
      // It could not start (not found: 127, not executable: 126).
      const msg = new TextEncoder().encode(String(d?.stderr ?? "").replace(/\n/g, "\r\n"));
      this.#done = (async () => {
        if (msg.length) await callUser(onData, msg);
        return d?.exit_code ?? -1;
      })();
    } else {
      this.#done = this.#follow();
    }
    // Not awaited by anyone yet: an unhandled rejection must not end the program.
    this.#done.catch(() => undefined);
  }

  get #path(): string {
    return `/sandboxes/${this.#id}/processes/${this.pid}`;
  }

  async #follow(): Promise<number> {
    let offset = 0;
    const where = `terminal ${this.pid} of sandbox ${this.#id}`;
    for (let tries = 0; ; tries++) {
      try {
        const query: Array<[string, string]> = offset ? [["stdout_offset", String(offset)]] : [];
        const end = await followStream<ExecEvent>(
          this.#t,
          `${this.#path}/stream`,
          undefined,
          { terminal: END, where, timeoutMs: null, get: { query } },
          async (ev) => {
            if (this.#stopped) throw new TransportError(`${where}: disconnected`);
            if (ev.type === "stdout" || ev.type === "stderr") {
              const data = chunk(ev, false, where) as Uint8Array;
              offset += data.length;
              if (data.length) await callUser(this.#onData, data);
            }
          },
        );
        return end.exit_code ?? -1;
      } catch (e) {
        if (this.#stopped) throw new TransportError(`terminal ${this.pid}: disconnected before it ended`);
        if (!(e instanceof TransportError) || tries >= RESUMES) throw e;
        await new Promise((r) => setTimeout(r, 200 * (tries + 1)));
      }
    }
  }

  /** Type into the terminal ("\x03" is Ctrl-C); a string is sent as UTF-8.
   * Inputs are sent in the order of the calls. */
  sendInput(data: string | Uint8Array): Promise<void> {
    const b = typeof data === "string" ? new TextEncoder().encode(data) : data;
    const send = async () => {
      for (let i = 0; i < b.length; i += MAX_STDIN) {
        await this.#t.request("POST", `${this.#path}/stdin`, {
          body: b.subarray(i, i + MAX_STDIN),
          headers: { "Content-Type": "application/octet-stream" },
        });
      }
    };
    const p = this.#input.then(send, send);
    this.#input = p.catch(() => undefined);
    return p;
  }

  /** Set the terminal's size; its foreground process gets SIGWINCH. */
  async resize(size: { cols: number; rows: number }): Promise<void> {
    await this.#t.request("POST", `${this.#path}/resize`, { json: { cols: size.cols, rows: size.rows } });
  }

  /** End the process and what it started. Killing an ended one is harmless. */
  async kill(): Promise<void> {
    if (this.pid) await this.#t.json("POST", `${this.#path}/kill`);
  }

  /** The exit code once the process has ended and its output all went to
   * onData (128+n for a death by signal n). */
  wait(): Promise<number> {
    return this.#done;
  }

  /** Stop following the output (at its next chunk); the terminal keeps
   * running, and wait() rejects. */
  disconnect(): void {
    this.#stopped = true;
  }
}
