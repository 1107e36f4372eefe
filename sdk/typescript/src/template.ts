/**
 * Templates: the named, immutable file systems sandboxes start from.
 *
 *     import { Sandbox, Template } from "withruntime";
 *     const sbx = await Sandbox.create();
 *     await sbx.exec("python3 -m pip install --user pandas==2.2.3", { check: true });
 *     await sbx.snapshot("myteam/pandas:2.2");          // the sandbox keeps running
 *     console.log((await Template.list()).map((t) => t.ref));
 *     const child = await Sandbox.create({ template: "myteam/pandas:2.2" });
 *
 * A template is named `name` (tag `latest`) or `name:tag`; a name has one
 * or two parts joined by `/`. `Template.list/get/delete/importArchive`
 * follow the Go client (ListTemplates, GetTemplate, DeleteTemplate,
 * ImportTemplate) and resolve to TemplateInfo, the API's template.
 */

import { promises as fsp } from "node:fs";

import { APIError, WithruntimeError } from "./errors.js";
import { parseTime } from "./files.js";
import type { components } from "./generated/openapi.js";
import { type ClientOptions, Transport } from "./transport.js";

type TemplateWire = components["schemas"]["Template"];

/** What a sandbox of a template starts with unless its create says
 * otherwise. `startCmd` is a shell command every sandbox of it starts in
 * the background; `readyCmd` one a create waits on until it exits 0, at
 * most `readyTimeoutSeconds`. */
export interface TemplateDefaults {
  env: Record<string, string>;
  workdir: string;
  user: string;
  vcpus: number;
  memoryMib: number;
  startCmd: string;
  readyCmd: string;
  readyTimeoutSeconds: number;
}

/** A template as the API shows it, in JavaScript names; `raw` is the whole
 * JSON object, fields newer than this SDK included. */
export interface TemplateInfo {
  /** `tpl_` and 16 hex digits; a name:tag made again gets a new one. */
  id: string;
  name: string;
  tag: string;
  /** `name:tag`, as a create's `template` takes it. */
  ref: string;
  /** How it was made: `snapshot`, `oci` or `build`. */
  source: string;
  /** The built-in image it is layered on (`default`), or "" for an OCI image's own file system. */
  base: string;
  /** Its layers over the base, and what they hold on disk. */
  layers: number;
  sizeBytes: number;
  defaults: TemplateDefaults;
  createdAt?: Date;
  /** `ready`, or `deleting` once removed while sandboxes still use it. */
  state: string;
  /** The admin published it to every account. */
  public: boolean;
  raw: TemplateWire;
}

export function templateInfoOf(d: TemplateWire): TemplateInfo {
  const df = d?.defaults ?? {};
  const name = String(d?.name ?? "");
  const tag = String(d?.tag ?? "");
  return {
    id: String(d?.id ?? ""),
    name,
    tag,
    ref: `${name}:${tag}`,
    source: d?.source ?? "",
    base: d?.base ?? "",
    layers: d?.layers ?? 0,
    sizeBytes: d?.size_bytes ?? 0,
    defaults: {
      env: { ...(df.env ?? {}) },
      workdir: df.workdir ?? "",
      user: df.user ?? "",
      vcpus: df.vcpus ?? 0,
      memoryMib: df.memory_mib ?? 0,
      startCmd: df.start_cmd ?? "",
      readyCmd: df.ready_cmd ?? "",
      readyTimeoutSeconds: df.ready_timeout_seconds ?? 0,
    },
    createdAt: parseTime(d?.created_at),
    state: d?.state ?? "",
    public: Boolean(d?.public),
    raw: d,
  };
}

/** Refuse an empty name before it is sent, as the server would. */
export function checkTemplateName(name: unknown): asserts name is string {
  if (typeof name !== "string" || name === "") throw badName(name, "empty");
}

/** The route of template `name`. The route's `{name}` is one path segment,
 * so the whole name is escaped, its "/" as %2F. A name with a part between
 * "/" that is empty, "." or ".." is refused before anything is sent, as the
 * server would refuse it: some proxies unescape %2F and clean the path,
 * which would send the call to another route. */
export function templatePath(name: string): string {
  checkTemplateName(name);
  if (name.split("/").some((p) => p === "" || p === "." || p === "..")) {
    throw badName(name, 'a part between "/" is empty, "." or ".."');
  }
  return "/templates/" + encodeURIComponent(name).replace(/%3A/gi, ":");
}

function badName(name: unknown, why: string): APIError {
  return new APIError("invalid_request", 400, `bad template name ${JSON.stringify(name)}: ${why}`);
}

async function* fileChunks(path: string, size: number): AsyncGenerator<Uint8Array> {
  const f = await fsp.open(path, "r");
  try {
    let left = size;
    while (left > 0) {
      const buf = Buffer.allocUnsafe(Math.min(1 << 20, left));
      const { bytesRead } = await f.read(buf, 0, buf.length, null);
      if (!bytesRead) throw new WithruntimeError(`${path} shrank while it was being sent`);
      left -= bytesRead;
      yield buf.subarray(0, bytesRead);
    }
  } finally {
    await f.close();
  }
}

/**
 * Templates of the key's account, and the public ones. Every call takes
 * `apiKey` and `baseUrl` (default WITHRUNTIME_API_KEY and
 * WITHRUNTIME_BASE_URL) and resolves to TemplateInfo. A sandbox starts from
 * one with `Sandbox.create({ template: "name[:tag]" })`; `sbx.snapshot(name)`
 * makes one from a running sandbox.
 */
export class Template {
  /** The account's templates and the public ones, by name and tag. */
  static async list(opts: ClientOptions = {}): Promise<TemplateInfo[]> {
    const d = await new Transport(opts).json<components["schemas"]["TemplateList"]>("GET", "/templates");
    return (d?.templates ?? []).map(templateInfoOf);
  }

  /** Template `name` (`name` or `name:tag`); APIError not_found when there is none. */
  static async get(name: string, opts: ClientOptions = {}): Promise<TemplateInfo> {
    return templateInfoOf(await new Transport(opts).json<TemplateWire>("GET", templatePath(name)));
  }

  /** Remove template `name` and resolve to it as removed. Its name is free
   * at once; while sandboxes, pools or paused sandboxes still use it its
   * state is `deleting`, and its storage goes with the last of them. */
  static async delete(name: string, opts: ClientOptions = {}): Promise<TemplateInfo> {
    return templateInfoOf(await new Transport(opts).json<TemplateWire>("DELETE", templatePath(name)));
  }

  /** Make template `name` (`name` or `name:tag`) from an image archive: the
   * path of a `docker save` tarball or an OCI archive (`skopeo copy ...
   * oci-archive:FILE`), its bytes, or a stream of them. A file is sent as
   * it is read. The image's env, working directory, user and command become
   * the template's defaults. The call waits as long as the server takes to
   * store the image. */
  static async importArchive(
    name: string,
    archive: string | Uint8Array | AsyncIterable<Uint8Array>,
    opts: ClientOptions = {},
  ): Promise<TemplateInfo> {
    checkTemplateName(name);
    const headers: Record<string, string> = { "Content-Type": "application/x-tar" };
    let body: Uint8Array | AsyncIterable<Uint8Array>;
    if (typeof archive === "string") {
      const st = await fsp.stat(archive);
      if (!st.isFile()) throw new WithruntimeError(`${archive} is not a regular file (an image archive)`);
      headers["Content-Length"] = String(st.size);
      body = fileChunks(archive, st.size);
    } else {
      body = archive;
    }
    const d = await new Transport(opts).json<TemplateWire>("POST", "/templates/import", {
      query: { name },
      body,
      headers,
      timeoutMs: null,
    });
    return templateInfoOf(d);
  }
}
