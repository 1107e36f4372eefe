/**
 * HTTP transport over node:http and node:https (not fetch: its client gives
 * up on a response body silent for five minutes, and a quiet command's exec
 * stream may be silent much longer).
 *
 * Every failure to reach the server becomes a TransportError; every error
 * answer becomes an APIError carrying the server's stable code.
 */

import { once } from "node:events";
import * as http from "node:http";
import * as https from "node:https";

import { APIError, TransportError, apiErrorFromDetail, codeForStatus } from "./errors.js";
import { CheckedAgent, DEFAULT_BASE_URL, START_HINT, localDaemon, localKeyAndOwner, startDaemon } from "./local.js";
import { VERSION } from "./version.js";

/** How long a plain request may wait in silence for the server, in ms. */
export const DEFAULT_TIMEOUT_MS = 300_000;
const IDEMPOTENT = new Set(["GET", "HEAD", "PUT", "DELETE", "OPTIONS"]);

/** Where and as whom to connect. */
export interface ClientOptions {
  /** The API key; default WITHRUNTIME_API_KEY (then the local daemon's key on the default address). */
  apiKey?: string;
  /** The server; default WITHRUNTIME_BASE_URL, then http://127.0.0.1:7878. */
  baseUrl?: string;
}

export type QueryValue = string | number | boolean | undefined | null;
export type Query = Record<string, QueryValue> | Array<[string, string]>;

export interface RequestOptions {
  query?: Query;
  json?: unknown;
  body?: Uint8Array | AsyncIterable<Uint8Array>;
  headers?: Record<string, string>;
  /** Inactivity bound in ms; null: none. Default DEFAULT_TIMEOUT_MS. */
  timeoutMs?: number | null;
}

/** Options first, then the environment; with no key from either on the
 * default address, the local daemon's admin key. */
export function resolveConfig(opts: ClientOptions = {}): { baseUrl: string; apiKey?: string } {
  const { baseUrl, apiKey } = resolveWithOwner(opts);
  return { baseUrl, apiKey };
}

/** resolveConfig, and the uid whose listener alone may receive the key (the
 * local admin key's owner; undefined for a key the caller gave). */
function resolveWithOwner(opts: ClientOptions): { baseUrl: string; apiKey?: string; owner?: number } {
  const url = (opts.baseUrl || process.env.WITHRUNTIME_BASE_URL || localDaemon.baseUrl).replace(/\/+$/, "");
  let key = opts.apiKey !== undefined ? opts.apiKey : process.env.WITHRUNTIME_API_KEY;
  let owner: number | undefined;
  if (!key && opts.apiKey === undefined) {
    const local = localKeyAndOwner(url);
    if (local) ({ key, owner } = local);
  }
  return { baseUrl: url, apiKey: key || undefined, owner };
}

// A body that failed while being produced (a local file read, say): thrown
// as it was, never mistaken for a network failure.
class BodyError {
  constructor(readonly error: unknown) {}
}

/** Sends requests to one server with one API key. */
export class Transport {
  readonly baseUrl: string;
  #apiKey: string | undefined;
  readonly #url: URL;
  #agent: http.Agent;
  #owner: number | undefined;
  readonly #mod: typeof http | typeof https;
  readonly #opts: ClientOptions;
  // With no base URL configured, a refused connection to the default
  // address starts the local daemon (it exits when idle); a base URL the
  // caller gave is used as it is.
  readonly #mayStartDaemon: boolean;

  constructor(opts: ClientOptions = {}) {
    const cfg = resolveWithOwner(opts);
    this.baseUrl = cfg.baseUrl;
    this.#apiKey = cfg.apiKey;
    this.#opts = { ...opts };
    this.#mayStartDaemon = !opts.baseUrl && !process.env.WITHRUNTIME_BASE_URL && this.baseUrl === DEFAULT_BASE_URL;
    let u: URL;
    try {
      u = new URL(this.baseUrl);
    } catch {
      throw new TypeError(`baseUrl must be an http:// or https:// URL, got ${JSON.stringify(this.baseUrl)}`);
    }
    if (u.protocol !== "http:" && u.protocol !== "https:") {
      throw new TypeError(`baseUrl must be an http:// or https:// URL, got ${JSON.stringify(this.baseUrl)}`);
    }
    this.#url = u;
    this.#mod = u.protocol === "https:" ? https : http;
    this.#owner = cfg.owner;
    this.#agent = this.#newAgent(cfg.owner);
  }

  #newAgent(owner: number | undefined): http.Agent {
    const u = this.#url;
    // Keep-alive connections, but never keep the process alive for them.
    const agentOpts = { keepAlive: true, maxFreeSockets: 4 };
    // The local admin key goes only to its owner's listener (see local.ts).
    return owner !== undefined && u.protocol === "http:"
      ? new CheckedAgent(agentOpts, u.hostname, Number(u.port || 80), owner)
      : new this.#mod.Agent(agentOpts);
  }

  /** Start the local daemon (see local.ts), then take the admin key it
   * keeps and its owner, as at construction: a daemon started on a fresh
   * data dir has just written them. */
  async #startDaemon(): Promise<void> {
    await startDaemon();
    const cfg = resolveWithOwner(this.#opts);
    this.#apiKey = cfg.apiKey;
    // A new agent only for a new owner (a key file just written): requests
    // refused at once share one start, and the first one's agent may carry
    // requests already. The old agent's idle sockets never keep the process.
    if (cfg.owner !== this.#owner) {
      this.#owner = cfg.owner;
      this.#agent = this.#newAgent(cfg.owner);
    }
  }

  /** The path and query of a request to the API. */
  path(path: string, query?: Query): string {
    let p = this.#url.pathname.replace(/\/+$/, "") + "/v1" + path;
    if (query) {
      const q = new URLSearchParams();
      const pairs = Array.isArray(query) ? query : Object.entries(query);
      for (const [k, v] of pairs) {
        if (v !== undefined && v !== null) q.append(k, String(v));
      }
      const s = q.toString().replace(/\+/g, "%20");
      if (s) p += "?" + s;
    }
    return p;
  }

  /** Send a request; resolve to a 2xx response whose body is unread. Error
   * answers are read and thrown as APIError. */
  async open(method: string, path: string, opts: RequestOptions = {}): Promise<http.IncomingMessage> {
    const url = this.path(path, opts.query);
    const headers: Record<string, string> = {
      "User-Agent": `withruntime-js/${VERSION}`,
      Accept: "application/json",
    };
    if (this.#apiKey) headers.Authorization = `Bearer ${this.#apiKey}`;
    let body = opts.body;
    if (opts.json !== undefined) {
      body = new TextEncoder().encode(JSON.stringify(opts.json));
      headers["Content-Type"] = "application/json";
    }
    Object.assign(headers, opts.headers);
    if (body instanceof Uint8Array) headers["Content-Length"] = String(body.byteLength);
    const replayable = body === undefined || body instanceof Uint8Array;
    const timeoutMs = opts.timeoutMs === undefined ? DEFAULT_TIMEOUT_MS : opts.timeoutMs;
    const where = `${method} ${this.baseUrl}${url.slice(this.#url.pathname.replace(/\/+$/, "").length)}`;

    let started = false;
    for (let attempt = 1; ; attempt++) {
      try {
        const resp = await this.#send(method, url, headers, body, timeoutMs);
        if ((resp.statusCode ?? 0) >= 400) throw await errorOf(resp, where);
        return resp;
      } catch (e) {
        if (e instanceof BodyError) throw e.error;
        if (e instanceof APIError || e instanceof TransportError) throw e;
        const err = e as NodeJS.ErrnoException & { reused?: boolean };
        if (err.code === "ECONNREFUSED" && this.#mayStartDaemon && !started && replayable) {
          // The connection was refused: a request whose body can be sent
          // again goes again once the daemon answers, with the key it
          // keeps. (A streamed body may have been partly read already.)
          started = true;
          try {
            await this.#startDaemon();
          } catch (se) {
            if (se instanceof TransportError) {
              throw new TransportError(`${where}: connection refused: ${se.message}`, { cause: se });
            }
            throw se;
          }
          if (this.#apiKey) headers.Authorization = `Bearer ${this.#apiKey}`;
          else delete headers.Authorization;
          continue;
        }
        const stale = err.code === "ECONNRESET" || err.code === "EPIPE";
        if (attempt === 1 && err.reused && stale && replayable && IDEMPOTENT.has(method)) continue;
        throw new TransportError(`${where}: ${describe(err)}`, { cause: e });
      }
    }
  }

  #send(
    method: string,
    path: string,
    headers: Record<string, string>,
    body: RequestOptions["body"],
    timeoutMs: number | null,
  ): Promise<http.IncomingMessage> {
    return new Promise((resolve, reject) => {
      const req = this.#mod.request({
        protocol: this.#url.protocol,
        hostname: this.#url.hostname.replace(/^\[|\]$/g, ""),
        port: this.#url.port || undefined,
        method,
        path,
        headers,
        agent: this.#agent,
      });
      let answered = false;
      let sendError: unknown;
      req.on("socket", (sock) => {
        sock.setNoDelay(true);
        // A stream may legitimately stay silent for a long time; TCP
        // keepalive notices a peer that vanished without a word.
        sock.setKeepAlive(true, 60_000);
      });
      if (timeoutMs !== null) {
        req.setTimeout(timeoutMs, () => req.destroy(Object.assign(new Error("timed out"), { code: "ETIMEDOUT" })));
      }
      req.on("response", (resp) => {
        answered = true;
        // The timeout keeps watching the body for silence.
        resolve(resp);
      });
      req.on("error", (e) => {
        if (answered) return;
        if (sendError instanceof BodyError) return reject(sendError);
        reject(Object.assign(e, { reused: req.reusedSocket }));
      });
      const write = async (): Promise<void> => {
        if (body === undefined || body instanceof Uint8Array) {
          req.end(body);
          return;
        }
        const it = body[Symbol.asyncIterator]();
        for (;;) {
          let r: IteratorResult<Uint8Array>;
          try {
            r = await it.next();
          } catch (e) {
            throw new BodyError(e);
          }
          if (r.done) break;
          if (answered || req.destroyed) {
            await it.return?.();
            return;
          }
          if (!req.write(r.value)) await once(req, "drain");
        }
        req.end();
      };
      write().catch((e) => {
        sendError = e;
        if (e instanceof BodyError) {
          reject(e);
          req.destroy();
        }
        // A failure to send: the server may have answered already (refusing
        // a body it does not want); the "error" or "response" event decides.
      });
    });
  }

  /** Send a request and read the whole answer. */
  async request(method: string, path: string, opts: RequestOptions = {}): Promise<{ status: number; body: Buffer }> {
    const resp = await this.open(method, path, opts);
    try {
      return { status: resp.statusCode ?? 0, body: await readAll(resp) };
    } catch (e) {
      throw new TransportError(`${method} ${this.baseUrl}${path}: reading the answer: ${describe(e)}`, { cause: e });
    }
  }

  /** Send a request and decode its JSON answer (undefined for an empty one). */
  async json<T = unknown>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    const { status, body } = await this.request(method, path, opts);
    const text = body.toString("utf8");
    if (!text.trim()) return undefined as T;
    try {
      return JSON.parse(text) as T;
    } catch (e) {
      throw new TransportError(
        `${method} ${this.baseUrl}${path}: answer ${status} is not JSON: ${text.slice(0, 200)}`,
        { cause: e },
      );
    }
  }

  /** Close idle connections. */
  close(): void {
    this.#agent.destroy();
  }
}

export async function readAll(resp: AsyncIterable<Buffer>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of resp) parts.push(c);
  return Buffer.concat(parts);
}

async function errorOf(resp: http.IncomingMessage, where: string): Promise<APIError | TransportError> {
  const status = resp.statusCode ?? 0;
  let raw: Buffer;
  try {
    raw = await readAll(resp);
  } catch (e) {
    return new TransportError(`${where}: reading the error answer: ${describe(e)}`, { cause: e });
  }
  let body: unknown;
  try {
    body = JSON.parse(raw.toString("utf8"));
  } catch {
    body = undefined;
  }
  const detail = (body as { error?: unknown } | undefined)?.error;
  if (detail && typeof detail === "object") return apiErrorFromDetail(detail, status);
  const text = raw.toString("utf8").trim().slice(0, 500) || http.STATUS_CODES[status] || `HTTP ${status}`;
  return new APIError(codeForStatus(status), status, text);
}

export function describe(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  if (err?.code === "ECONNREFUSED") return `connection refused: ${START_HINT}`;
  if (err?.code === "ETIMEDOUT") return "timed out";
  if (err?.code === "ECONNRESET") return "the connection was reset";
  return err?.message ? `${err.code ?? err.name}: ${err.message}` : String(e);
}
