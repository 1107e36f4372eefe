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
}

/**
 * POST `body` to `path` and hand each event of the answer's stream to
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
  const resp = await t.open("POST", path, { json: body, timeoutMs: opts.timeoutMs });
  if (resp.statusCode !== 200) {
    resp.destroy();
    throw new TransportError(`${where}: expected a 200 event stream, got status ${resp.statusCode}`);
  }
  let buf = "";
  const lines = new TextDecoder();
  try {
    for await (const piece of resp as AsyncIterable<Buffer>) {
      buf += lines.decode(piece, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
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
    }
  } catch (e) {
    resp.destroy();
    if (e instanceof CallbackError) throw e.error;
    if (e instanceof WithruntimeError) throw e;
    const m = (e as Error)?.message ?? String(e);
    throw new TransportError(`${where}: the event stream broke: ${m}`, { cause: e });
  }
  const ends = [...opts.terminal].sort().join(" or ");
  throw new TransportError(`${where}: the event stream ended without an ${ends} event`);
}
