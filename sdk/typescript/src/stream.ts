/**
 * Reading an ndjson event stream (exec, code): one JSON object a line,
 * ending with one of a few terminal events. Shared by exec and runCode so
 * that both treat a broken stream, a malformed line, a user's failing
 * callback and the platform's "error" event alike.
 */

import { TransportError, WithruntimeError, apiErrorFromDetail } from "./errors.js";
import type { Transport } from "./transport.js";

// What a user's callback threw (or rejected with): passed on as it was,
// never mistaken for a broken stream.
class CallbackError {
  constructor(readonly error: unknown) {}
}

/** Call a user's callback (awaited if it returns a promise); what it throws
 * leaves followStream as it was thrown. */
export async function callUser<T>(cb: ((v: T) => unknown) | undefined, v: T): Promise<void> {
  if (!cb) return;
  try {
    const r = cb(v) as { then?: unknown } | undefined;
    if (r && typeof r.then === "function") await r;
  } catch (e) {
    throw new CallbackError(e);
  }
}

export interface StreamOptions {
  /** Event types that end the stream (the last one handled). */
  terminal: ReadonlySet<string>;
  /** Prefix of every error message, e.g. "exec in sandbox sbx_...". */
  where: string;
  /** Inactivity bound in ms; null: none (TCP keepalive notices a vanished server). */
  timeoutMs: number | null;
  /** Whether the wait for the answer's headers goes unbounded (timeoutMs
   * then bounds only the silences of the body). Default false. */
  untimedHeaders?: boolean;
  /** The longest line taken, in bytes; default DEFAULT_MAX_LINE. */
  maxLine?: number;
  /** GET the stream (a follow stream, with query) instead of POSTing body. */
  get?: { query?: Array<[string, string]> };
}

/** The default bound of one event line: the server cuts an exec stream at
 * a line over 256 KiB, so a longer one is a server gone wrong, refused
 * before it fills the memory. */
export const DEFAULT_MAX_LINE = 1 << 20;

function timedOut(): Error {
  return Object.assign(new Error("timed out"), { code: "ETIMEDOUT" });
}

/**
 * POST `body` to `path` (or GET it, opts.get) and hand each event of the answer's stream to
 * `onEvent`, in order, each awaited. Resolves to the terminal event (after
 * it the rest of the body is drained). An "error" event rejects with the
 * APIError it carries; a stream that breaks, a malformed line, or an end
 * before a terminal event rejects with TransportError. Leaving early closes
 * the connection, which ends the work on the server as any client leaving
 * does.
 */
export async function followStream<E extends { type?: string; error?: unknown }>(
  t: Transport,
  path: string,
  body: unknown,
  opts: StreamOptions,
  onEvent: (ev: E) => Promise<void> | void,
): Promise<E> {
  const { where } = opts;
  const maxLine = opts.maxLine ?? DEFAULT_MAX_LINE;
  const untimed = opts.untimedHeaders === true;
  const timeoutMs = untimed ? null : opts.timeoutMs;
  const resp = opts.get
    ? await t.open("GET", path, { query: opts.get.query, timeoutMs })
    : await t.open("POST", path, { json: body, timeoutMs });
  if (resp.statusCode !== 200) {
    resp.destroy();
    throw new TransportError(`${where}: expected a 200 event stream, got status ${resp.statusCode}`);
  }
  // With the headers untimed, the body's silences are bounded here.
  let timer: NodeJS.Timeout | undefined;
  if (untimed && opts.timeoutMs !== null) timer = setTimeout(() => resp.destroy(timedOut()), opts.timeoutMs);
  // The bytes of the line being read, not yet ended by a newline (a UTF-8
  // sequence never holds the byte 0x0a, so lines split on bytes).
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  const decoder = new TextDecoder();
  try {
    for await (const data of resp as AsyncIterable<Buffer>) {
      timer?.refresh();
      let piece = data;
      let nl: number;
      while ((nl = piece.indexOf(10)) >= 0) {
        if (pendingBytes + nl > maxLine) throw new TransportError(`${where}: an event line is longer than ${maxLine} bytes`);
        const raw = pending.length ? Buffer.concat([...pending, piece.subarray(0, nl)]) : piece.subarray(0, nl);
        pending = [];
        pendingBytes = 0;
        piece = piece.subarray(nl + 1);
        const line = decoder.decode(raw).trim();
        if (!line) continue;
        let ev: E;
        try {
          ev = JSON.parse(line) as E;
        } catch {
          throw new TransportError(`${where}: malformed event ${line.slice(0, 200)}`);
        }
        if (!ev || typeof ev !== "object" || Array.isArray(ev)) {
          throw new TransportError(`${where}: malformed event ${line.slice(0, 200)}`);
        }
        if (ev.type === "error") throw apiErrorFromDetail(ev.error);
        await onEvent(ev);
        if (ev.type !== undefined && opts.terminal.has(ev.type)) {
          resp.resume(); // what follows (nothing, normally) is drained
          return ev;
        }
      }
      if (piece.length) {
        pendingBytes += piece.length;
        if (pendingBytes > maxLine) throw new TransportError(`${where}: an event line is longer than ${maxLine} bytes`);
        pending.push(piece);
      }
    }
  } catch (e) {
    resp.destroy();
    if (e instanceof CallbackError) throw e.error;
    if (e instanceof WithruntimeError) throw e;
    const m = (e as Error)?.message ?? String(e);
    throw new TransportError(`${where}: the event stream broke: ${m}`, { cause: e });
  } finally {
    clearTimeout(timer);
  }
  const ends = [...opts.terminal].sort().join(" or ");
  throw new TransportError(`${where}: the event stream ended without an ${ends} event`);
}
