/**
 * Snapshots: running sandboxes saved whole (memory, processes and disk).
 *
 * ```ts
 * await using sbx = await Sandbox.create();
 * await sbx.runCode("x = 41");
 * const snap = await sbx.snapshot();                 // the sandbox keeps running
 * const forks = await sbx.fork(2);                   // two sandboxes going on from here
 * await using again = await Sandbox.create({ snapshot: snap.id });
 * await snap.delete();
 * ```
 *
 * A snapshot is kept until its `expiresAt` (the server's retention) or until
 * it is deleted; its `sizeBytes` counts in the account's storage quota.
 * Both isolations snapshot (gVisor and microVM); a sandbox that mounts a volume writable, or a microVM with any, does not (APIError not_supported): read-only volumes are mounted again by its copies.
 */

import type { components } from "./generated/openapi.js";
import { parseTime } from "./files.js";
import { type ClientOptions, Transport } from "./transport.js";

export type SnapshotWire = components["schemas"]["Snapshot"];

function snapshotPath(id: string): string {
  if (!id) throw new Error("snapshot id is empty");
  return `/snapshots/${encodeURIComponent(id)}`;
}

/** A snapshot of the key's account. */
export class Snapshot {
  /** `snap_...` */
  readonly id: string;
  /** The caller's label. */
  readonly name: string;
  /** The sandbox it was taken of. */
  readonly sandboxId: string;
  /** That sandbox's isolation, template, vCPUs and memory: a sandbox
   * started from it takes them. */
  readonly isolation: string;
  readonly template: string;
  readonly vcpus: number;
  readonly memoryMib: number;
  /** What it takes on disk (it counts in the account's storage quota). */
  readonly sizeBytes: number;
  readonly createdAt?: Date;
  /** When retention removes it. */
  readonly expiresAt?: Date;
  /** How long the sandbox did not answer while it was taken. */
  readonly freezeMs: number;
  /** The whole JSON object, fields newer than this SDK included. */
  readonly raw: SnapshotWire | undefined;
  readonly #t: Transport;

  /** @internal Snapshots come from Sandbox.snapshot, list and get. */
  constructor(d: SnapshotWire | undefined, t: Transport) {
    this.id = d?.id ?? "";
    this.name = d?.name ?? "";
    this.sandboxId = d?.sandbox_id ?? "";
    this.isolation = d?.isolation ?? "";
    this.template = d?.template ?? "";
    this.vcpus = d?.vcpus ?? 0;
    this.memoryMib = d?.memory_mib ?? 0;
    this.sizeBytes = d?.size_bytes ?? 0;
    this.createdAt = parseTime(d?.created_at);
    this.expiresAt = parseTime(d?.expires_at);
    this.freezeMs = d?.freeze_ms ?? 0;
    this.raw = d;
    this.#t = t;
  }

  /** The account's snapshots, newest first. */
  static async list(opts: ClientOptions = {}): Promise<Snapshot[]> {
    const t = new Transport(opts);
    const d = await t.json<components["schemas"]["SnapshotList"]>("GET", "/snapshots");
    return (d?.snapshots ?? []).map((s) => new Snapshot(s, t));
  }

  /** Snapshot `id`; APIError not_found when the account has none. */
  static async get(id: string, opts: ClientOptions = {}): Promise<Snapshot> {
    const t = new Transport(opts);
    return new Snapshot(await t.json<SnapshotWire>("GET", snapshotPath(id)), t);
  }

  /** Remove the snapshot; sandboxes started from it run on. */
  async delete(): Promise<void> {
    await this.#t.request("DELETE", snapshotPath(this.id));
  }
}
