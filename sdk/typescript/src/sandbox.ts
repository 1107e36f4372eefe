/** Sandboxes: create, connect, list, lease, lifecycle, network and exec. */

import { type Preview, getPreview, hostOf, revokePreviews, setPreview, urlOf } from "./preview.js";
import { Pty } from "./pty.js";
import { Contexts, type Execution, type RunCodeOptions, buildCodeBody, runCodeStream } from "./code.js";
import { APIError } from "./errors.js";
import { Files, parseTime } from "./files.js";
import type { components } from "./generated/openapi.js";
import {
  type Command,
  type ExecOptions,
  type ExecResult,
  Process,
  buildExecBody,
  checkResult,
  runStream,
} from "./process.js";
import { Snapshot } from "./snapshot.js";
import { type TemplateInfo, checkTemplateName, templateInfoOf } from "./template.js";
import { type ClientOptions, Transport } from "./transport.js";
import type { VolumeMount } from "./volume.js";

type SandboxWire = components["schemas"]["Sandbox"];
type EgressWire = components["schemas"]["EgressEvent"];
type MetricWire = components["schemas"]["SandboxMetric"];

// Stopping a sandbox that already ended is not a failure of the stop.
const ALREADY_GONE = new Set(["not_found", "conflict", "lease_ended"]);

// Node 18.18+ and 20.4+ define Symbol.asyncDispose; TypeScript's lowering of
// `await using` falls back to this registered symbol on older ones.
const asyncDispose: typeof Symbol.asyncDispose =
  (Symbol as { asyncDispose?: typeof Symbol.asyncDispose }).asyncDispose ??
  (Symbol.for("Symbol.asyncDispose") as typeof Symbol.asyncDispose);

/** A sandbox's egress policy: nothing without `internet`; with it every
 * public address, or only the names in `allow` (exact, or `*.` and a domain). */
export interface NetworkPolicy {
  internet: boolean;
  allow?: string[];
}

/** A sandbox as the API shows it, in JavaScript names; `raw` is the whole
 * JSON object, fields newer than this SDK included. */
export interface SandboxInfo {
  id: string;
  /** `starting`, `running`, `paused` or `ended`. */
  state: SandboxWire["state"];
  /** `gvisor` (gVisor's user-space kernel) or `microvm` (its own Linux kernel). */
  isolation: SandboxWire["isolation"];
  /** The template it started from, as `name:tag` (`default`: the built-in image). */
  template: string;
  /** The same as `template`, under its older name. */
  image: string;
  vcpus: number;
  memoryMib: number;
  diskGib: number;
  onLeaseEnd: SandboxWire["on_lease_end"];
  /** Whether a paused sandbox resumes on its next use (the create's autoResume). */
  autoResume: boolean;
  metadata: Record<string, string>;
  network: NetworkPolicy;
  createdAt?: Date;
  startedAt?: Date;
  pausedAt?: Date;
  endedAt?: Date;
  leaseEndsAt?: Date;
  retentionEndsAt?: Date;
  /** Once ended: `stopped`, `lease_ended`, `out_of_memory`, `spending_limit`, ... */
  endReason?: SandboxWire["end_reason"];
  endMessage?: string;
  /** The node that holds the sandbox, on a many-host installation. */
  node?: string;
  /** Cost so far (the final cost once ended), in USD millionths. */
  costMicros: number;
  /** `seconds` running, `cpu_seconds` consumed, `memory_gib_seconds`. */
  usage: { seconds: number; cpuSeconds: number; memoryGibSeconds: number };
  raw: SandboxWire;
}

/** One connection or DNS query of a sandbox (the API's EgressEvent). */
export interface EgressEvent {
  time?: Date;
  /** `dns`, `tcp`, `tls`, `http`, ... */
  kind: string;
  verdict: EgressWire["verdict"];
  name: string;
  address: string;
  port: number;
  reason: string;
}

/** One sample of a sandbox's resource use (the API's SandboxMetric), taken
 * every 5 seconds while it runs. `cpuUsedPct` is the share of its `cpuCount`
 * CPUs used since the sample before (0 to 100); memory and disk are used and
 * total bytes; `netRxBytes` and `netTxBytes` count every byte received and
 * sent since it started. Memory, disk and network are what the sandbox's
 * own kernel reports: for watching, never for billing. `costMicros` is the
 * sandbox's cost so far (USD millionths) when the sample was taken, as its
 * record and the usage ledger count it. */
export interface SandboxMetric {
  timestamp?: Date;
  cpuCount: number;
  cpuUsedPct: number;
  memUsedBytes: number;
  memTotalBytes: number;
  diskUsedBytes: number;
  diskTotalBytes: number;
  netRxBytes: number;
  netTxBytes: number;
  costMicros: number;
}

/** The bounds of `getMetrics`: Dates, or Unix seconds; absent: open. */
export interface MetricsOptions {
  start?: Date | number;
  end?: Date | number;
}

function metricsBound(v: Date | number | undefined, name: string): string | undefined {
  if (v === undefined || v === null) return undefined;
  const d = typeof v === "number" ? new Date(v * 1000) : v;
  if (!(d instanceof Date) || Number.isNaN(d.getTime())) {
    throw new TypeError(`${name}: want a Date or Unix seconds, not ${String(v)}`);
  }
  return d.toISOString();
}

function sandboxMetricOf(m: MetricWire): SandboxMetric {
  return {
    timestamp: parseTime(m?.timestamp),
    cpuCount: m?.cpu_count ?? 0,
    cpuUsedPct: m?.cpu_used_pct ?? 0,
    memUsedBytes: m?.mem_used_bytes ?? 0,
    memTotalBytes: m?.mem_total_bytes ?? 0,
    diskUsedBytes: m?.disk_used_bytes ?? 0,
    diskTotalBytes: m?.disk_total_bytes ?? 0,
    netRxBytes: m?.net_rx_bytes ?? 0,
    netTxBytes: m?.net_tx_bytes ?? 0,
    costMicros: m?.cost_micros ?? 0,
  };
}

export function sandboxInfoOf(d: SandboxWire): SandboxInfo {
  return {
    id: String(d?.id ?? ""),
    state: d?.state,
    isolation: d?.isolation,
    // A server older than templates names it only as image.
    template: d?.template || d?.image || "",
    image: d?.image ?? "",
    vcpus: d?.vcpus ?? 0,
    memoryMib: d?.memory_mib ?? 0,
    diskGib: d?.disk_gib ?? 0,
    onLeaseEnd: d?.on_lease_end,
    autoResume: Boolean(d?.auto_resume),
    metadata: { ...(d?.metadata ?? {}) },
    network: { internet: Boolean(d?.network?.internet), allow: [...(d?.network?.allow ?? [])] },
    createdAt: parseTime(d?.created_at),
    startedAt: parseTime(d?.started_at),
    pausedAt: parseTime(d?.paused_at),
    endedAt: parseTime(d?.ended_at),
    leaseEndsAt: parseTime(d?.lease_ends_at),
    retentionEndsAt: parseTime(d?.retention_ends_at),
    endReason: d?.end_reason || undefined,
    endMessage: d?.end_message || undefined,
    node: d?.node || undefined,
    costMicros: d?.cost_micros ?? 0,
    usage: {
      seconds: d?.usage?.seconds ?? 0,
      cpuSeconds: d?.usage?.cpu_seconds ?? 0,
      memoryGibSeconds: d?.usage?.memory_gib_seconds ?? 0,
    },
    raw: d,
  };
}

/** Options of Sandbox.create: only those given are sent, the server's
 * defaults apply to the rest (2 vCPU, 4 GiB, a 10 GiB disk, a 300 s lease,
 * no network). */
export interface CreateOptions extends ClientOptions {
  /** `microvm` (its own Linux kernel) or `gvisor`; the server's default
   * (serve --isolation) when left out; not_supported if the server does not run it. */
  isolation?: "gvisor" | "microvm";
  vcpus?: number;
  memoryMib?: number;
  /** The root disk's size (the server's limits apply, invalid_request otherwise). */
  diskGib?: number;
  /** The lease, in seconds. */
  timeoutSeconds?: number;
  /** What the lease's end does: `stop` or `pause`. */
  onLeaseEnd?: "stop" | "pause";
  env?: Record<string, string>;
  metadata?: Record<string, string>;
  /** The template to start from, `name` or `name:tag` (see Template; left
   * out, the built-in image). Its defaults apply where the create leaves
   * an option out; an unknown one is APIError not_found. */
  template?: string;
  /** The older name of `template`. */
  image?: string;
  network?: NetworkPolicy;
  /** Refuse the create (max_cost_exceeded) if its first lease could cost more, in USD millionths. */
  maxCostMicros?: number;
  /** Once paused (by `onLeaseEnd: "pause"` or `pause()`), resume on the next
   * exec, file, code, preview or port-forward call, which then proceeds;
   * without it such calls on a paused sandbox are APIError conflict. */
  autoResume?: boolean;
  /** Named volumes to mount (see Volume): `[{ name: "data", path: "/data", readOnly: false }]`. */
  volumes?: VolumeMount[];
  /** Start from this snapshot (see Snapshot): its processes and memory go
   * on where they were; its isolation, template, vCPUs and memory are the
   * snapshot's. An unknown one is APIError not_found. */
  snapshot?: string;
}

/** The sandboxes Sandbox.fork started; `snapshot` is the one they started
 * from when the fork kept it. */
export type Forks = Sandbox[] & { snapshot?: Snapshot };

/** Filters of Sandbox.list. */
export interface ListOptions extends ClientOptions {
  state?: string | string[];
  /** Only sandboxes whose metadata has every one of these pairs. */
  metadata?: Record<string, string>;
  /** Every sandbox, not only those not ended or ended in the last 24 hours. */
  all?: boolean;
}

/**
 * A sandbox: a disposable, isolated Linux machine. Make one with
 * `Sandbox.create` (with `await using`, it is stopped when the block ends,
 * error or not) or attach to an existing one with `Sandbox.connect`.
 */
export class Sandbox {
  readonly id: string;
  /** File operations: read, write, list, stat, mkdir, remove, upload, download. */
  readonly files: Files;
  /** Code contexts (kernels of their own): create, list, restart, remove. */
  readonly contexts: Contexts;
  /** Terminals: create({ cols, rows, onData }), connect(pid). */
  readonly pty: Pty;
  readonly #t: Transport;
  #info: SandboxInfo | undefined;
  #stopped = false;

  /** Use Sandbox.create or Sandbox.connect; this makes a handle without asking the server. */
  constructor(id: string, opts: ClientOptions & { transport?: Transport; info?: SandboxInfo } = {}) {
    if (!id) throw new TypeError("sandbox id is empty");
    this.id = id;
    this.#t = opts.transport ?? new Transport(opts);
    this.#info = opts.info;
    this.files = new Files(this.#t, id);
    this.contexts = new Contexts(this.#t, id);
    this.pty = new Pty(this.#t, id);
  }

  /** Create a sandbox and wait until it runs. `apiKey` and `baseUrl` default
   * to WITHRUNTIME_API_KEY and WITHRUNTIME_BASE_URL (then http://127.0.0.1:7878). */
  static async create(opts: CreateOptions = {}): Promise<Sandbox> {
    const body: components["schemas"]["CreateSandboxRequest"] = {};
    if (opts.isolation !== undefined) body.isolation = opts.isolation;
    if (opts.template !== undefined) body.template = opts.template;
    if (opts.image !== undefined) body.image = opts.image;
    if (opts.vcpus !== undefined) body.vcpus = opts.vcpus;
    if (opts.memoryMib !== undefined) body.memory_mib = opts.memoryMib;
    if (opts.diskGib !== undefined) body.disk_gib = opts.diskGib;
    if (opts.timeoutSeconds !== undefined) body.timeout_seconds = opts.timeoutSeconds;
    if (opts.onLeaseEnd !== undefined) body.on_lease_end = opts.onLeaseEnd;
    if (opts.maxCostMicros !== undefined) body.max_cost_micros = opts.maxCostMicros;
    if (opts.autoResume !== undefined) body.auto_resume = opts.autoResume;
    if (opts.snapshot !== undefined) body.snapshot = opts.snapshot;
    if (opts.env !== undefined) body.env = stringMap(opts.env);
    if (opts.metadata !== undefined) body.metadata = stringMap(opts.metadata);
    if (opts.network !== undefined) body.network = networkBody(opts.network);
    if (opts.volumes !== undefined) {
      body.volumes = opts.volumes.map((v) => ({ name: v.name, path: v.path, ...(v.readOnly ? { read_only: true } : {}) }));
    }
    const t = new Transport(opts);
    const info = sandboxInfoOf(await t.json<SandboxWire>("POST", "/sandboxes", { json: body }));
    return new Sandbox(info.id, { transport: t, info });
  }

  /** Attach to an existing sandbox (APIError not_found if there is none). */
  static async connect(id: string, opts: ClientOptions = {}): Promise<Sandbox> {
    const sbx = new Sandbox(id, opts);
    await sbx.info();
    return sbx;
  }

  /** The sandboxes this key's account can see, newest first: those not
   * ended and those ended in the last 24 hours (`all: true`: every one),
   * only in the given state or states, and only those whose metadata has
   * every given pair. Every page is fetched. */
  static async list(opts: ListOptions = {}): Promise<SandboxInfo[]> {
    const params: Array<[string, string]> = [];
    if (opts.state && opts.state.length) {
      params.push(["state", typeof opts.state === "string" ? opts.state : opts.state.join(",")]);
    }
    for (const [k, v] of Object.entries(opts.metadata ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      params.push(["metadata", `${k}=${v}`]);
    }
    if (opts.all) params.push(["all", "true"]);
    const t = new Transport(opts);
    const out: SandboxInfo[] = [];
    let token = "";
    for (;;) {
      const q: Array<[string, string]> = token ? [...params, ["page_token", token]] : params;
      const d = await t.json<components["schemas"]["SandboxList"]>("GET", "/sandboxes", { query: q });
      out.push(...(d?.sandboxes ?? []).map(sandboxInfoOf));
      token = d?.next_page_token ?? "";
      if (!token) return out;
    }
  }

  async #call(method: string, suffix = "", json?: unknown): Promise<SandboxInfo> {
    const d = await this.#t.json<SandboxWire>(method, `/sandboxes/${this.id}${suffix}`, { json });
    this.#info = sandboxInfoOf(d);
    return this.#info;
  }

  /** The sandbox's current state, lease deadline, end reason, ... */
  info(): Promise<SandboxInfo> {
    return this.#call("GET");
  }

  /** Make the lease last at least timeoutSeconds from now; never shortens it. */
  extend(timeoutSeconds: number): Promise<SandboxInfo> {
    return this.#call("POST", "/extend", { timeout_seconds: Math.floor(timeoutSeconds) });
  }

  /** Stop the sandbox for good (end reason `stopped`); removes a paused one. */
  async stop(): Promise<SandboxInfo> {
    const info = await this.#call("POST", "/stop");
    this.#stopped = true;
    return info;
  }

  /** Checkpoint disk, memory and processes; `resume` continues. */
  pause(): Promise<SandboxInfo> {
    return this.#call("POST", "/pause");
  }

  /** Resume a paused sandbox. */
  resume(): Promise<SandboxInfo> {
    return this.#call("POST", "/resume");
  }

  /** Stops the sandbox at the end of an `await using` block, error or not
   * (one that already ended is fine). */
  async [asyncDispose](): Promise<void> {
    if (this.#stopped) return;
    try {
      await this.stop();
    } catch (e) {
      if (e instanceof APIError && ALREADY_GONE.has(e.code)) return;
      throw e;
    } finally {
      this.#t.close();
    }
  }

  /** Without a template name: save the sandbox whole (memory, processes
   * and disk) as a Snapshot, labelled `opts.name`; `Sandbox.create({
   * snapshot: snap.id })` starts sandboxes that go on from it. The sandbox
   * keeps running (it pauses for the snapshot's `freezeMs`).
   *
   * With `template` (`name` or `name:tag`): make that template from the
   * sandbox's file system as it is now: what its commands installed and
   * wrote; what its processes hold in memory is not kept.
   * `Sandbox.create({ template })` starts a new sandbox from it.
   *
   * Either call waits as long as the server takes. */
  snapshot(opts?: { name?: string }): Promise<Snapshot>;
  snapshot(template: string): Promise<TemplateInfo>;
  async snapshot(arg?: string | { name?: string }): Promise<Snapshot | TemplateInfo> {
    if (typeof arg === "string") {
      checkTemplateName(arg);
      const d = await this.#t.json<components["schemas"]["Template"]>("POST", `/sandboxes/${this.id}/snapshot`, {
        json: { template: arg } satisfies components["schemas"]["SnapshotRequest"],
        timeoutMs: null,
      });
      return templateInfoOf(d);
    }
    const json: components["schemas"]["CreateSnapshotRequest"] = arg?.name ? { name: arg.name } : {};
    const d = await this.#t.json<components["schemas"]["Snapshot"]>("POST", `/sandboxes/${this.id}/snapshots`, { json, timeoutMs: null });
    return new Snapshot(d, this.#t);
  }

  /** Start `n` sandboxes (1 to 16) from a snapshot of this one taken now:
   * each goes on from where this sandbox is, processes and memory
   * included, with its own address, disk, boot id and randomness from then
   * on. This sandbox runs on. All or none: past the account's concurrency
   * nothing starts (APIError concurrency_limit_reached). The snapshot is
   * removed once they run unless `keepSnapshot`; then the result's
   * `snapshot` is it. */
  async fork(n = 1, opts: { keepSnapshot?: boolean } = {}): Promise<Forks> {
    // The API reads a count of 0 as 1.
    if (!Number.isInteger(n) || n < 1) throw new APIError("invalid_request", 400, `fork count ${n}: want 1 to 16`);
    const json: components["schemas"]["ForkRequest"] = { count: n, ...(opts.keepSnapshot ? { keep_snapshot: true } : {}) };
    const d = await this.#t.json<components["schemas"]["ForkResult"]>("POST", `/sandboxes/${this.id}/fork`, { json, timeoutMs: null });
    const out: Forks = (d?.sandboxes ?? []).map((w) => {
      const info = sandboxInfoOf(w);
      return new Sandbox(info.id, { transport: this.#t, info });
    });
    if (d?.snapshot) out.snapshot = new Snapshot(d.snapshot, this.#t);
    return out;
  }

  /** The egress policy: `{ internet, allow }`. */
  async network(): Promise<NetworkPolicy> {
    const d = await this.#t.json<components["schemas"]["Network"]>("GET", `/sandboxes/${this.id}/network`);
    return { internet: Boolean(d?.internet), allow: [...(d?.allow ?? [])] };
  }

  /** Replace the egress policy of a running or paused sandbox; new
   * connections and DNS queries follow it at once (open ones are not cut). */
  setNetwork(policy: NetworkPolicy): Promise<SandboxInfo> {
    return this.#call("PUT", "/network", networkBody(policy));
  }

  /** The egress log: allowed and refused connections and DNS queries, the newest last. */
  async egress(): Promise<EgressEvent[]> {
    const d = await this.#t.json<components["schemas"]["EgressLog"]>("GET", `/sandboxes/${this.id}/egress`);
    return (d?.events ?? []).map((e) => ({
      time: parseTime(e.time),
      kind: e.kind ?? "",
      verdict: e.verdict,
      name: e.name ?? "",
      address: e.address ?? "",
      port: e.port ?? 0,
      reason: e.reason ?? "",
    }));
  }

  /** The sandbox's resource samples (CPU, memory, disk, network), taken
   * every 5 seconds while it runs, oldest first; `start` and `end` (Dates or
   * Unix seconds) bound them, absent ones leave that side open. An ended
   * sandbox has none. As E2B's `getMetrics`. */
  async getMetrics(opts: MetricsOptions = {}): Promise<SandboxMetric[]> {
    const query = { start: metricsBound(opts.start, "start"), end: metricsBound(opts.end, "end") };
    const d = await this.#t.json<components["schemas"]["SandboxMetrics"]>("GET", `/sandboxes/${this.id}/metrics`, { query });
    return (d?.metrics ?? []).map(sandboxMetricOf);
  }

  /** Where the sandbox's `port` is reached over HTTP, without a scheme, as
   * E2B's `getHost` gives it: `{port}-{id}.{domain}` where the server serves
   * previews by host name, else `host:port/v1/sandboxes/{id}/ports/{port}`
   * on the API. A private port needs the API key (`Authorization: Bearer`)
   * or a preview token (see `previewUrl`); a public one nothing. */
  async getHost(port: number): Promise<string> {
    return hostOf(this.#t.baseUrl, await getPreview(this.#t, this.id, port));
  }

  /** A URL that opens the sandbox's `port` in a browser: unless the port is
   * public, signed with a new preview token for this sandbox and port, valid
   * `expiresInSeconds` (default a day; 60 to 604800). Its first visit
   * trades the token for a cookie and redirects to the URL without it. */
  async previewUrl(port: number, opts: { expiresInSeconds?: number } = {}): Promise<string> {
    return urlOf(this.#t.baseUrl, await getPreview(this.#t, this.id, port, opts.expiresInSeconds));
  }

  /** The port's Preview: path, host form, whether it is public and (when it
   * is not) a new token. */
  preview(port: number, opts: { expiresInSeconds?: number } = {}): Promise<Preview> {
    return getPreview(this.#t, this.id, port, opts.expiresInSeconds);
  }

  /** Make `port` public (anyone with its URL reaches it, no key or token)
   * or, with `{ public: false }`, private again. */
  expose(port: number, opts: { public?: boolean } = {}): Promise<Preview> {
    return setPreview(this.#t, this.id, port, opts.public ?? true);
  }

  /** Make every preview token made so far for this sandbox stop working,
   * signed URLs and their cookies included. Public ports stay public
   * (`expose(port, { public: false })` makes one private). */
  revokePreviews(): Promise<void> {
    return revokePreviews(this.#t, this.id);
  }

  /**
   * Run a command: a string runs under `/bin/sh -c`, an array is an argv.
   * Output is streamed to `onStdout` / `onStderr` as it is produced (each
   * call awaited, in order, before the result resolves). A non-zero exit is
   * returned, not thrown, unless `check: true` (then CommandError).
   * `timeoutMs` bounds the command (default: only the lease). With
   * `text: false` output is the exact bytes. With `background: true`,
   * resolves to a Process at once (pid, wait(), kill(), output()).
   */
  exec(cmd: Command, opts?: ExecOptions & { background?: false; text?: true }): Promise<ExecResult<string>>;
  exec(cmd: Command, opts: ExecOptions & { background?: false; text: false }): Promise<ExecResult<Uint8Array>>;
  exec(cmd: Command, opts: ExecOptions & { background: true; text?: true }): Promise<Process<string>>;
  exec(cmd: Command, opts: ExecOptions & { background: true; text: false }): Promise<Process<Uint8Array>>;
  // Options only known at run time (`text: flag`, `background: flag`): the
  // result is typed as either.
  exec(cmd: Command, opts: ExecOptions & { background?: false }): Promise<ExecResult<string | Uint8Array>>;
  exec(cmd: Command, opts: ExecOptions & { background: true }): Promise<Process<string | Uint8Array>>;
  exec(cmd: Command, opts?: ExecOptions): Promise<ExecResult<string | Uint8Array> | Process<string | Uint8Array>>;
  async exec(cmd: Command, opts: ExecOptions = {}): Promise<ExecResult | Process<string | Uint8Array>> {
    const body = buildExecBody(cmd, opts);
    if (opts.background) {
      if (opts.onStdout || opts.onStderr) {
        throw new TypeError("onStdout/onStderr are not used with background: true: read process.output()");
      }
      const d = await this.#t.json<components["schemas"]["Process"]>("POST", `/sandboxes/${this.id}/exec`, { json: body });
      return new Process<string | Uint8Array>(this.#t, this.id, d, { check: opts.check, text: opts.text });
    }
    const r = await runStream(this.#t, this.id, body, opts);
    return opts.check ? checkResult(r) : r;
  }

  /**
   * Run a cell of Python in a persistent kernel (the default context, or
   * `context`), like a notebook: variables and imports stay between calls.
   * Resolves to an Execution with the cell's results (its value, displays,
   * figures), stdout and stderr, and the exception it raised as data: an
   * exception in the code, or a cell interrupted at `timeoutMs`
   * (`error.name` "TimeoutError", the state kept), never rejects. A
   * platform failure rejects (APIError, e.g. not_found for an unknown
   * context; TransportError for a broken stream). The callbacks get output
   * and results as they come, each awaited, in order.
   */
  async runCode(code: string, opts: RunCodeOptions = {}): Promise<Execution> {
    const body = buildCodeBody(code, opts);
    return runCodeStream(this.#t, this.id, body, opts);
  }

  /** A handle on a background process by its pid. */
  async process(pid: number, opts: { text?: boolean } = {}): Promise<Process<string | Uint8Array>> {
    const d = await this.#t.json<components["schemas"]["Process"]>("GET", `/sandboxes/${this.id}/processes/${Math.floor(pid)}`);
    return new Process(this.#t, this.id, d, opts);
  }

  /** The sandbox's background processes. */
  async processes(opts: { text?: boolean } = {}): Promise<Array<Process<string | Uint8Array>>> {
    const d = await this.#t.json<components["schemas"]["ProcessList"]>("GET", `/sandboxes/${this.id}/processes`);
    return (d?.processes ?? []).map((p) => new Process(this.#t, this.id, p, opts));
  }

  /** The info last fetched (no request made). */
  get lastInfo(): SandboxInfo | undefined {
    return this.#info;
  }

  toString(): string {
    return `Sandbox(${this.id})`;
  }
}

function stringMap(m: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(m).map(([k, v]) => [k, String(v)]));
}

function networkBody(p: NetworkPolicy): components["schemas"]["Network"] {
  if (typeof p.allow === "string") throw new TypeError("allow is an array of host names, not a string");
  const body: components["schemas"]["Network"] = { internet: Boolean(p.internet) };
  if (p.allow?.length) body.allow = p.allow.map(String);
  return body;
}

