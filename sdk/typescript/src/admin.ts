/**
 * Account-wide resources: secrets, API keys, usage, accounts and trials.
 *
 *     const c = new Client();   // WITHRUNTIME_API_KEY / WITHRUNTIME_BASE_URL
 *     await c.secrets.set("OPENAI_API_KEY", value, { host: "api.openai.com" });
 *     const key = await c.keys.create({ kind: "read_only", name: "ci" });  // key.secret: shown this once
 *
 * Secret values go in and never come back: no call returns one, and the
 * only secret that ever comes out is a new key's, in the answer to its creation.
 */

import { parseTime } from "./files.js";
import type { components } from "./generated/openapi.js";
import { type ClientOptions, Transport } from "./transport.js";

type S = components["schemas"];

/** A stored secret: its name and host, never its value. */
export interface SecretInfo {
  name: string;
  host: string;
  updatedAt?: Date;
}

/** An API key. `kind` is `full`, `read_only` or `admin`; `dailyLimitMicros`
 * (0: none) in USD millionths; `parent` the id of the key that made it.
 * `secret` is the key itself, set only on the Key `keys.create` returns. */
export interface Key {
  id: string;
  account: string;
  kind: S["Key"]["kind"];
  name: string;
  dailyLimitMicros: number;
  parent: string;
  createdAt?: Date;
  secret?: string;
}

/** An account. `trialHours`: free sandbox time of a trial account (0: not a trial). */
export interface Account {
  id: string;
  name: string;
  concurrency: number;
  trialHours: number;
  trialUsedHours: number;
  createdAt?: Date;
}

/** One UTC day (YYYY-MM-DD) of one account's key. */
export interface UsageRow {
  day: string;
  account: string;
  keyId: string;
  sandboxHours: number;
  cpuHours: number;
  memoryGibHours: number;
  costMicros: number;
}

/** Usage rows by day, account and key, and their total cost in USD millionths. */
export interface Usage {
  rows: UsageRow[];
  costMicros: number;
}

/** A new trial account and its full key. */
export interface Trial {
  account: string;
  key: string;
  trialHours: number;
}

const KEY_KINDS = ["full", "read_only", "admin"] as const;
const KEY_FORMATS = ["withruntime", "e2b"] as const;

function namePath(collection: string, name: string, what: string): string {
  if (!name) throw new TypeError(`${what} is empty`);
  return `/${collection}/${encodeURIComponent(name)}`;
}

function keyOf(d: S["Key"]): Key {
  const k: Key = {
    id: d?.id ?? "",
    account: d?.account ?? "",
    kind: d?.kind,
    name: d?.name ?? "",
    dailyLimitMicros: d?.daily_limit_micros ?? 0,
    parent: d?.parent ?? "",
    createdAt: parseTime(d?.created_at),
  };
  // Not enumerable, so that logging a Key does not leak it.
  if (d?.key) Object.defineProperty(k, "secret", { value: d.key, enumerable: false });
  return k;
}

function accountOf(d: S["Account"]): Account {
  return {
    id: d?.id ?? "",
    name: d?.name ?? "",
    concurrency: d?.concurrency ?? 0,
    trialHours: d?.trial_hours ?? 0,
    trialUsedHours: d?.trial_used_hours ?? 0,
    createdAt: parseTime(d?.created_at),
  };
}

/** A UTC day as YYYY-MM-DD, from a string or a Date. */
function day(v: string | Date | undefined): string | undefined {
  if (v === undefined || v === "") return undefined;
  return v instanceof Date ? v.toISOString().slice(0, 10) : v;
}

/** The secrets of the key's account (`client.secrets`). A secret is bound
 * to one host: commands see a placeholder, and the egress proxy puts the
 * value in its place in HTTPS requests to that host only. */
export class Secrets {
  readonly #t: Transport;
  /** @internal */
  constructor(t: Transport) {
    this.#t = t;
  }

  /** Store `value` as the secret `name`, bound to `host` (a DNS name, or
   * `*.` and a domain), replacing one of that name. */
  async set(name: string, value: string, opts: { host: string }): Promise<SecretInfo> {
    if (typeof value !== "string") throw new TypeError("a secret's value is a string");
    const d = await this.#t.json<S["SecretInfo"]>("PUT", namePath("secrets", name, "secret name"), {
      json: { value, host: opts.host },
    });
    return { name: d?.name ?? "", host: d?.host ?? "", updatedAt: parseTime(d?.updated_at) };
  }

  /** The account's secrets: names and hosts, never values. */
  async list(): Promise<SecretInfo[]> {
    const d = await this.#t.json<S["SecretList"]>("GET", "/secrets");
    return (d?.secrets ?? []).map((s) => ({ name: s.name, host: s.host, updatedAt: parseTime(s.updated_at) }));
  }

  /** Remove the secret `name` (APIError not_found if there is none). */
  async remove(name: string): Promise<void> {
    await this.#t.request("DELETE", namePath("secrets", name, "secret name"));
  }
}

/** Options of keys.create. */
export interface CreateKeyOptions {
  /** `full` (the default), `read_only`, or `admin` (only with the admin key). */
  kind?: "full" | "read_only" | "admin";
  /** Another account's key (the admin key only). */
  account?: string;
  name?: string;
  /** The daily spending limit in USD (at most 6 decimals), or... */
  dailyLimitUsd?: number | string;
  /** ...in USD millionths. */
  dailyLimitMicros?: number;
  /** How the secret is written: `withruntime` (`wr_...`, the default) or
   * `e2b` (`e2b_` and hex digits, as E2B's keys are, for programs using
   * E2B's SDKs). The key is the same in every other respect. */
  format?: "withruntime" | "e2b";
}

/** API keys (`client.keys`). */
export class Keys {
  readonly #t: Transport;
  /** @internal */
  constructor(t: Transport) {
    this.#t = t;
  }

  /** Create an API key; the returned Key's `secret` is the key, shown this once. */
  async create(opts: CreateKeyOptions = {}): Promise<Key> {
    if (opts.kind !== undefined && !KEY_KINDS.includes(opts.kind)) {
      throw new RangeError(`kind must be one of ${KEY_KINDS.join(", ")}, got ${JSON.stringify(opts.kind)}`);
    }
    if (opts.format !== undefined && !KEY_FORMATS.includes(opts.format)) {
      throw new RangeError(`format must be one of ${KEY_FORMATS.join(", ")}, got ${JSON.stringify(opts.format)}`);
    }
    let micros = opts.dailyLimitMicros;
    if (opts.dailyLimitUsd !== undefined) {
      if (micros !== undefined) throw new TypeError("give dailyLimitUsd or dailyLimitMicros, not both");
      micros = usdToMicros(opts.dailyLimitUsd);
    }
    const body: S["CreateKeyRequest"] = {};
    if (opts.account) body.account = opts.account;
    if (opts.kind) body.kind = opts.kind;
    if (opts.name) body.name = opts.name;
    if (micros) body.daily_limit_micros = micros;
    // Only e2b: a server from before formats refuses the field.
    if (opts.format === "e2b") body.format = opts.format;
    return keyOf(await this.#t.json<S["Key"]>("POST", "/keys", { json: body }));
  }

  /** The keys of the caller's account, or with the admin key those of
   * `account` (every account's when none). Secrets are never shown. */
  async list(opts: { account?: string } = {}): Promise<Key[]> {
    const d = await this.#t.json<S["KeyList"]>("GET", "/keys", { query: { account: opts.account || undefined } });
    return (d?.keys ?? []).map(keyOf);
  }

  /** Remove key `id` (its id, not its secret) and the keys made with it. */
  async remove(id: string): Promise<void> {
    await this.#t.request("DELETE", namePath("keys", id, "key id"));
  }
}

/** Accounts (`client.accounts`; the admin key only). */
export class Accounts {
  readonly #t: Transport;
  /** @internal */
  constructor(t: Transport) {
    this.#t = t;
  }

  /** Create the account `name` (its id); `concurrency` and `trialHours`
   * default to the server's (100, not a trial). */
  async create(name: string, opts: { concurrency?: number; trialHours?: number } = {}): Promise<Account> {
    if (!name) throw new TypeError("account name is empty");
    const body: S["CreateAccountRequest"] = { name };
    if (opts.concurrency) body.concurrency = Math.floor(opts.concurrency);
    if (opts.trialHours) body.trial_hours = opts.trialHours;
    return accountOf(await this.#t.json<S["Account"]>("POST", "/accounts", { json: body }));
  }

  /** Every account, oldest first. */
  async list(): Promise<Account[]> {
    const d = await this.#t.json<S["AccountList"]>("GET", "/accounts");
    return (d?.accounts ?? []).map(accountOf);
  }
}

/**
 * The account-wide API: `secrets`, `keys`, `accounts`, `usage()` and
 * `trial()`. `apiKey` and `baseUrl` work as for Sandbox.
 */
export class Client {
  readonly secrets: Secrets;
  readonly keys: Keys;
  readonly accounts: Accounts;
  readonly #t: Transport;

  constructor(opts: ClientOptions = {}) {
    this.#t = new Transport(opts);
    this.secrets = new Secrets(this.#t);
    this.keys = new Keys(this.#t);
    this.accounts = new Accounts(this.#t);
  }

  /** The server's address. */
  get baseUrl(): string {
    return this.#t.baseUrl;
  }

  /** Usage per UTC day, account and key, and its total cost. `from` and
   * `to` are the first and last UTC days included; `key` keeps one key's
   * rows (its id); `account` is honored for the admin key only. */
  async usage(opts: { from?: string | Date; to?: string | Date; account?: string; key?: string } = {}): Promise<Usage> {
    const d = await this.#t.json<S["Usage"]>("GET", "/usage", {
      query: { account: opts.account || undefined, key: opts.key || undefined, from: day(opts.from), to: day(opts.to) },
    });
    return {
      rows: (d?.rows ?? []).map((r) => ({
        day: r.day,
        account: r.account,
        keyId: r.key_id,
        sandboxHours: r.sandbox_hours ?? 0,
        cpuHours: r.cpu_hours ?? 0,
        memoryGibHours: r.memory_gib_hours ?? 0,
        costMicros: r.cost_micros ?? 0,
      })),
      costMicros: d?.cost_micros ?? 0,
    };
  }

  /** Ask the server for a trial account and return its full key. Sends no
   * API key. Only servers started with `--allow-trial` offer trials. */
  async trial(): Promise<Trial> {
    const t = new Transport({ baseUrl: this.#t.baseUrl, apiKey: "" });
    try {
      const d = await t.json<S["Trial"]>("POST", "/trial");
      return { account: d?.account ?? "", key: d?.key ?? "", trialHours: d?.trial_hours ?? 0 };
    } finally {
      t.close();
    }
  }

  /** Close idle connections. */
  close(): void {
    this.#t.close();
  }
}

function usdToMicros(usd: number | string): number {
  const s = String(usd).trim();
  const m = /^(\d+)(?:\.(\d{0,6}))?$/.exec(s);
  if (!m) {
    if (/^\d+\.\d{7,}$/.test(s)) throw new RangeError(`dailyLimitUsd has at most 6 decimal places, got ${s}`);
    throw new RangeError(`dailyLimitUsd must be a non-negative number, got ${s}`);
  }
  return Number(m[1]) * 1_000_000 + Number((m[2] ?? "").padEnd(6, "0"));
}
