/**
 * Volumes: named persistent storage that outlives sandboxes.
 *
 * ```ts
 * const vol = await Volume.create("data", 1);
 * await vol.writeFile("/config.json", "{}");
 * await using sbx = await Sandbox.create({ volumes: [{ name: "data", path: "/data" }] });
 * ```
 *
 * Any number of sandboxes mount a volume read-only (`readOnly: true`), one
 * at a time writable (a second writer is APIError conflict). Writes past
 * its size fail inside with ENOSPC. Paths inside a volume are absolute
 * ("/" is its root). gVisor sandboxes only, for now.
 */

import type { components } from "./generated/openapi.js";
import { parseTime } from "./files.js";
import { type ClientOptions, Transport } from "./transport.js";

type VolumeWire = components["schemas"]["Volume"];

/** One volume of a create (CreateOptions.volumes). */
export interface VolumeMount {
  name: string;
  path: string;
  readOnly?: boolean;
}

/** One name in a volume's directory. */
export interface VolumeEntry {
  name: string;
  type: "file" | "dir" | "symlink" | "other";
  size: number;
}

function volumePath(name: string, suffix = ""): string {
  if (!name) throw new Error("volume name is empty");
  return `/volumes/${encodeURIComponent(name)}${suffix}`;
}

/** A named volume of the key's account. */
export class Volume {
  readonly name: string;
  readonly sizeGib: number;
  readonly usedBytes: number;
  readonly createdAt?: Date;
  /** The live and paused sandboxes that mount it. */
  readonly mountedBy: string[];
  readonly #t: Transport;

  private constructor(d: VolumeWire | undefined, t: Transport) {
    this.name = d?.name ?? "";
    this.sizeGib = d?.size_gib ?? 0;
    this.usedBytes = d?.used_bytes ?? 0;
    this.createdAt = parseTime(d?.created_at);
    this.mountedBy = [...(d?.mounted_by ?? [])];
    this.#t = t;
  }

  /** Make volume `name` of `sizeGib` GiB (conflict when the account has
   * one of that name; forbidden past its storage quota). */
  static async create(name: string, sizeGib: number, opts: ClientOptions = {}): Promise<Volume> {
    const t = new Transport(opts);
    return new Volume(await t.json<VolumeWire>("POST", "/volumes", { json: { name, size_gib: sizeGib } }), t);
  }

  /** The account's volumes, by name. */
  static async list(opts: ClientOptions = {}): Promise<Volume[]> {
    const t = new Transport(opts);
    const d = await t.json<components["schemas"]["VolumeList"]>("GET", "/volumes");
    return (d?.volumes ?? []).map((v) => new Volume(v, t));
  }

  /** Volume `name`; APIError not_found when there is none. */
  static async get(name: string, opts: ClientOptions = {}): Promise<Volume> {
    const t = new Transport(opts);
    return new Volume(await t.json<VolumeWire>("GET", volumePath(name)), t);
  }

  /** Remove the volume and its files (conflict while a live or paused
   * sandbox mounts it). */
  async delete(): Promise<void> {
    await this.#t.request("DELETE", volumePath(this.name));
  }

  /** The bytes of regular file `path`; a symbolic link a sandbox made is
   * never followed (invalid_request). */
  async readFile(path: string): Promise<Buffer> {
    return (await this.#t.request("GET", volumePath(this.name, "/files"), { query: { path } })).body;
  }

  /** Write `data` to `path`, making its parents. */
  async writeFile(path: string, data: string | Uint8Array): Promise<void> {
    const body = typeof data === "string" ? new TextEncoder().encode(data) : data;
    await this.#t.request("PUT", volumePath(this.name, "/files"), { query: { path }, body });
  }

  /** The entries of directory `path`. */
  async listFiles(path = "/"): Promise<VolumeEntry[]> {
    const d = await this.#t.json<components["schemas"]["VolumeFileList"]>("GET", volumePath(this.name, "/files"), { query: { path } });
    return (d?.entries ?? []).map((e) => ({ name: e.name, type: e.type, size: e.size }));
  }

  /** Remove a file, a link or an empty directory. */
  async removeFile(path: string): Promise<void> {
    await this.#t.request("DELETE", volumePath(this.name, "/files"), { query: { path } });
  }
}
