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
 * Or build one on the server from steps, layered on a template or an image:
 *
 *     const tpl = await new Template().fromTemplate("default")
 *       .pipInstall(["pandas==2.2.3"])
 *       .copy("app/", "/workspace/app")
 *       .startCmd("python3 -m http.server 8000")
 *       .build("myteam/app", { onLog: console.log, network: { internet: true } });
 *
 * A template is named `name` (tag `latest`) or `name:tag`; a name has one
 * or two parts joined by `/`. `Template.list/get/delete/importArchive`
 * follow the Go client (ListTemplates, GetTemplate, DeleteTemplate,
 * ImportTemplate) and resolve to TemplateInfo, the API's template.
 */

import { constants as C, promises as fsp } from "node:fs";
import type { Stats } from "node:fs";
import { isAbsolute, join, sep } from "node:path";

import { entryHeader } from "./archive.js";
import { APIError, TransportError, WithruntimeError, apiErrorFromDetail } from "./errors.js";
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

/** The steps' egress during a build: none without it. */
export interface BuildNetwork {
  internet: boolean;
  /** With internet, only these host names (exact or *.domain). */
  allow?: string[];
}

/** What Template.build takes besides the template's name. */
export interface BuildOptions extends ClientOptions {
  /** Called with each event of the build's log as a line of text:
   * `step 2/5: run make` as a step begins (` (cached)` when taken from the
   * cache), the steps' output as it comes, what the builder does. Awaited
   * when it returns a promise; what it throws ends the wait and is thrown. */
  onLog?: (line: string) => unknown;
  network?: BuildNetwork;
  /** Run every step (their results are still cached for the next build). */
  noCache?: boolean;
  /** The directory copy steps read from; default the current directory. */
  context?: string;
}

type Step = Record<string, unknown>;

/**
 * A template build, and the templates of the key's account.
 *
 * An instance is a builder: each method adds a step (or sets the base or a
 * default) and returns the builder; `build(name)` sends the whole as one
 * build specification (POST /v1/templates) and waits for it.
 *
 * The static methods work on the templates themselves. Every call takes
 * `apiKey` and `baseUrl` (default WITHRUNTIME_API_KEY and
 * WITHRUNTIME_BASE_URL) and resolves to TemplateInfo. A sandbox starts from
 * one with `Sandbox.create({ template: "name[:tag]" })`; `sbx.snapshot(name)`
 * makes one from a running sandbox.
 */
export class Template {
  #from?: Record<string, string>;
  #dockerfile?: string;
  #steps: Step[] = [];
  #defaults: Record<string, unknown> = {};

  /** Build on template `name` (`default`, the built-in image, or
   * `name[:tag]`). Without a base the build starts from `default`. */
  fromTemplate(name: string): this {
    checkTemplateName(name);
    this.#from = { template: name };
    return this;
  }

  /** Build on the OCI image `ref` (`python:3.12-slim`,
   * `registry:5000/team/app@sha256:...`). The server pulls it when the
   * build runs (the log shows its layers), anonymously, from a registry at
   * a public address unless the server allows private ones; a rebuild from
   * the same image digest is cached. A Dockerfile names an image archive in
   * the context with `FROM archive://PATH`. */
  fromImage(ref: string): this {
    if (typeof ref !== "string" || !ref) throw badBuild("fromImage: the image reference is empty");
    this.#from = { image: ref };
    return this;
  }

  /** Build from a Dockerfile's text (read a file with fs.readFileSync). A
   * Dockerfile is the whole build: it excludes the base and the steps of
   * the other methods (startCmd and readyCmd still apply). Its COPY sources
   * come from the `context` directory given to build(), then sent whole. */
  fromDockerfile(text: string): this {
    this.#dockerfile = text;
    return this;
  }

  /** Install Debian packages (as root). */
  aptInstall(packages: string | string[]): this {
    this.#steps.push({ apt_install: names(packages, "aptInstall") });
    return this;
  }

  /** Install Python packages with pip (`pandas==2.2.3`). */
  pipInstall(packages: string | string[]): this {
    this.#steps.push({ pip_install: names(packages, "pipInstall") });
    return this;
  }

  /** Install npm packages into the working directory, or with `global`
   * globally (`npm install -g`, as root). */
  npmInstall(packages: string | string[], opts: { global?: boolean } = {}): this {
    const step: Step = { npm_install: names(packages, "npmInstall") };
    if (opts.global) step.global = true;
    this.#steps.push(step);
    return this;
  }

  /** Run the shell command `cmd`, as `user` (default: the build's current
   * user); the build fails when it exits non-zero. */
  run(cmd: string, opts: { user?: string } = {}): this {
    const step: Step = { run: cmd };
    if (opts.user) step.user = opts.user;
    this.#steps.push(step);
    return this;
  }

  /** Copy `local`, a file or directory relative to the build's context
   * directory (`context` of build(), default the current directory), to
   * `dest` in the template: a directory's contents go into `dest`; a file
   * goes to `dest`, or into it when `dest` ends in "/". `user` owns what is
   * copied; `mode` ("0755") replaces its permissions. Only what copy steps
   * name is sent, read when build() runs; a path with `..`, an absolute
   * one, or one whose symbolic links lead out of the context is refused. */
  copy(local: string, dest: string, opts: { user?: string; mode?: string } = {}): this {
    const c: Record<string, string> = { src: contextRel(local), dest };
    if (opts.user) c.user = opts.user;
    if (opts.mode) c.mode = opts.mode;
    this.#steps.push({ copy: c });
    return this;
  }

  /** Set environment variables for the later steps and the template's sandboxes. */
  env(vars: Record<string, string>): this {
    this.#steps.push({ env: Object.fromEntries(Object.entries(vars).map(([k, v]) => [k, String(v)])) });
    return this;
  }

  /** Set the working directory of the later steps and of the template's
   * sandboxes (made when missing). */
  workdir(path: string): this {
    this.#steps.push({ workdir: path });
    return this;
  }

  /** Run the later steps as `name`, and make it the template's default user. */
  user(name: string): this {
    this.#steps.push({ user: name });
    return this;
  }

  /** A shell command every sandbox of the template starts in the background. */
  startCmd(cmd: string): this {
    this.#defaults.start_cmd = cmd;
    return this;
  }

  /** A shell command a create of the template waits on until it exits 0
   * (at most `timeoutSeconds`). */
  readyCmd(cmd: string, opts: { timeoutSeconds?: number } = {}): this {
    this.#defaults.ready_cmd = cmd;
    if (opts.timeoutSeconds) this.#defaults.ready_timeout_seconds = Math.ceil(opts.timeoutSeconds);
    else delete this.#defaults.ready_timeout_seconds;
    return this;
  }

  /** The build specification build() sends for template `name` (the JSON
   * body of POST /v1/templates). */
  toSpec(name: string, opts: { network?: BuildNetwork; noCache?: boolean } = {}): Record<string, unknown> {
    checkTemplateName(name);
    const spec: Record<string, unknown> = { name };
    if (this.#dockerfile !== undefined) {
      if (this.#from || this.#steps.length) {
        throw badBuild("a Dockerfile is the whole build: give it, or a base and steps, not both");
      }
      spec.dockerfile = this.#dockerfile;
    } else {
      if (this.#from) spec.from = { ...this.#from };
      if (this.#steps.length) spec.steps = JSON.parse(JSON.stringify(this.#steps));
    }
    Object.assign(spec, this.#defaults);
    if (opts.network) spec.network = { ...opts.network };
    if (opts.noCache) spec.no_cache = true;
    return spec;
  }

  /** Build template `name` (`name` or `name:tag`) on the server and resolve
   * to it once made. A build that fails rejects with APIError:
   * `invalid_request` for a step that failed (the message names the step
   * and its exit code), or the platform's refusal. */
  async build(name: string, opts: BuildOptions = {}): Promise<TemplateInfo> {
    const spec = this.toSpec(name, opts);
    const t = new Transport(opts);
    const srcs = this.#steps.flatMap((s) => (s.copy ? [(s.copy as { src: string }).src] : []));
    const sendContext = srcs.length > 0 || (this.#dockerfile !== undefined && opts.context !== undefined);
    let b: BuildWire;
    if (sendContext) {
      const root = await fsp.realpath(opts.context ?? process.cwd()).catch(() => "");
      if (!root || !(await fsp.stat(root)).isDirectory()) {
        throw badBuild(`the build context ${opts.context ?? process.cwd()} is not a directory`);
      }
      const entries = await contextEntries(root, this.#dockerfile === undefined ? srcs : undefined);
      b = await t.json<BuildWire>("POST", "/templates", {
        body: buildTar(Buffer.from(JSON.stringify(spec)), entries),
        headers: { "Content-Type": "application/x-tar" },
        timeoutMs: null,
      });
    } else {
      b = await t.json<BuildWire>("POST", "/templates", { json: spec, timeoutMs: null });
    }
    const id = String(b?.id ?? "");
    if (!id) throw new TransportError(`POST /templates: the answer names no build`);
    const path = "/templates/builds/" + encodeURIComponent(id);
    await followLogs(t, path + "/logs", opts.onLog);
    for (;;) {
      b = await t.json<BuildWire>("GET", path);
      if (b?.state === "succeeded" || b?.state === "failed") break;
      // The log ended a moment before the state was stored, or its stream
      // broke: look again shortly.
      await new Promise((r) => setTimeout(r, 500));
    }
    if (b.state !== "succeeded" || !b.result) {
      const e = apiErrorFromDetail(b.error ?? { code: "internal", message: "the build ended without a template" });
      throw new APIError(e.code, e.status,
        `build ${id} of ${b.template || name} failed at step ${b.step ?? 0} of ${b.steps ?? 0}: ${e.message}`);
    }
    return templateInfoOf(b.result);
  }

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

type BuildWire = components["schemas"]["TemplateBuild"];
type BuildLogEvent = components["schemas"]["BuildLogEvent"];

/** The build spec's entry of the application/x-tar form (api.BuildSpecEntry). */
const BUILD_SPEC_ENTRY = "withruntime-build.json";
/** A line of a build's log stream is at most this long (the Go client's bound). */
const MAX_LOG_LINE = 1 << 20;
const READ_FLAGS = C.O_RDONLY | (C.O_NOFOLLOW ?? 0);

function badBuild(why: string): APIError {
  return new APIError("invalid_request", 400, `bad template build: ${why}`);
}

function names(packages: string | string[], step: string): string[] {
  const out = typeof packages === "string" ? [packages] : packages.map(String);
  if (!out.length) throw badBuild(`${step}: no packages`);
  return out;
}

/** `local` as the spec's copy src: a clean relative path with "/"
 * separators, refused when absolute or holding `..`. */
function contextRel(local: string): string {
  if (typeof local !== "string" || !local) throw badBuild(`copy: empty source ${JSON.stringify(local)}`);
  const posix = sep === "/" ? local : local.split(sep).join("/");
  if (posix.startsWith("/") || isAbsolute(local)) {
    throw badBuild(`copy: ${JSON.stringify(local)} is absolute; give a path relative to the build context`);
  }
  const parts = posix.split("/").filter((p) => p !== "" && p !== ".");
  if (parts.includes("..")) throw badBuild(`copy: ${JSON.stringify(local)} leaves the build context ('..')`);
  if (!parts.length) throw badBuild(`copy: ${JSON.stringify(local)} is the context itself; name a file or directory in it`);
  return parts.join("/") + (posix.endsWith("/") ? "/" : "");
}

const inside = (root: string, p: string): boolean => p === root || p.startsWith(root.endsWith(sep) ? root : root + sep);

interface CtxEntry {
  rel: string;
  full?: string; // absent: a parent directory made up for the archive
  st?: Stats;
}

/** The entries of the build context to send, found before anything is
 * sent so that a refusal sends nothing: the sources of the copy steps
 * (`srcs`) with their parent directories, or with undefined the whole of
 * `root`. Symbolic links are sent as links, never followed; a source
 * reached through a link that leads out of root is refused, and so is
 * anything but files, directories and links. */
async function contextEntries(root: string, srcs: string[] | undefined): Promise<CtxEntry[]> {
  const out: CtxEntry[] = [];
  const added = new Set<string>();
  const add = async (rel: string): Promise<void> => {
    if (added.has(rel)) return;
    const full = join(root, ...rel.split("/"));
    const st = await fsp.lstat(full);
    if (!(st.isFile() || st.isDirectory() || st.isSymbolicLink())) {
      throw badBuild(`the build context holds ${full}, which is neither a file, a directory nor a symbolic link`);
    }
    added.add(rel);
    out.push({ rel, full, st });
    if (st.isDirectory()) {
      for (const child of (await fsp.readdir(full)).sort()) await add(`${rel}/${child}`);
    }
  };
  if (srcs === undefined) {
    for (const child of (await fsp.readdir(root)).sort()) await add(child);
    return out;
  }
  for (const src of srcs) {
    const rel = src.replace(/\/+$/, "");
    const full = join(root, ...rel.split("/"));
    // The parent directories must be the context's own: a link on the way
    // would take the copy out of it.
    const parent = await fsp.realpath(join(full, "..")).catch(() => "");
    if (!parent || !inside(root, parent)) {
      throw badBuild(`copy: ${JSON.stringify(src)} is not in the build context ${root}, or leads out of it through a symbolic link`);
    }
    const st = await fsp.lstat(full).catch(() => undefined);
    if (!st) throw badBuild(`copy: ${JSON.stringify(src)} is not in the build context ${root}`);
    if (st.isSymbolicLink()) {
      const target = await fsp.realpath(full).catch(() => "");
      if (!target || !inside(root, target)) {
        throw badBuild(`copy: ${JSON.stringify(src)} is a symbolic link out of the build context ${root}`);
      }
    }
    const parts = rel.split("/");
    for (let i = 1; i < parts.length; i++) {
      const p = parts.slice(0, i).join("/");
      if (!added.has(p)) {
        added.add(p);
        out.push({ rel: p });
      }
    }
    await add(rel);
  }
  return out;
}

const pad = (size: number): Buffer => Buffer.alloc((512 - (size % 512)) % 512);

/** The API's application/x-tar form: the spec's entry, then the context's
 * entries, streamed as the files are read. */
async function* buildTar(spec: Buffer, entries: CtxEntry[]): AsyncGenerator<Uint8Array> {
  const now = Math.floor(Date.now() / 1000);
  yield Buffer.concat([entryHeader({ name: BUILD_SPEC_ENTRY, type: "0", mode: 0o644, mtime: now, size: spec.length }), spec, pad(spec.length)]);
  for (const e of entries) {
    if (!e.st || !e.full) {
      yield entryHeader({ name: e.rel + "/", type: "5", mode: 0o755, mtime: now, size: 0 });
      continue;
    }
    const base = { name: e.rel, mode: e.st.mode & 0o7777, mtime: Math.floor(e.st.mtimeMs / 1000) };
    if (e.st.isDirectory()) {
      yield entryHeader({ ...base, name: e.rel + "/", type: "5", size: 0 });
    } else if (e.st.isSymbolicLink()) {
      yield entryHeader({ ...base, type: "2", size: 0, linkname: await fsp.readlink(e.full) });
    } else {
      yield entryHeader({ ...base, type: "0", size: e.st.size });
      const f = await fsp.open(e.full, READ_FLAGS);
      try {
        let left = e.st.size;
        while (left > 0) {
          const buf = Buffer.allocUnsafe(Math.min(1 << 20, left));
          const { bytesRead } = await f.read(buf, 0, buf.length, null);
          if (!bytesRead) throw new WithruntimeError(`${e.full} shrank while it was being sent`);
          left -= bytesRead;
          yield buf.subarray(0, bytesRead);
        }
      } finally {
        await f.close();
      }
      yield pad(e.st.size);
    }
  }
  yield Buffer.alloc(1024);
}

/** One event of a build's log as a line of text (the CLI's form), or
 * undefined for one that says nothing. */
export function buildLogLine(ev: BuildLogEvent): string | undefined {
  const msg = ev.message ?? "";
  switch (ev.type) {
    case "step":
      return `step ${ev.step ?? 0}/${ev.steps ?? 0}: ${msg}${ev.cached ? " (cached)" : ""}`;
    case "stdout":
    case "stderr":
      return msg.endsWith("\n") ? msg.slice(0, -1) : msg;
    case "info":
      return msg;
    case "dropped":
      return `(${ev.dropped ?? 0} older log events dropped)`;
    case "end":
      if (msg) return msg;
      return `build ${ev.state ?? ""}` + (ev.error?.message ? `: ${ev.error.message}` : "");
    default:
      return msg || undefined;
  }
}

/** Read a build's log until its end event, handing each event's line to
 * onLog. A stream that breaks or ends early is no error here: the caller
 * then waits on the build's state. */
async function followLogs(t: Transport, path: string, onLog: ((line: string) => unknown) | undefined): Promise<void> {
  let resp;
  try {
    resp = await t.open("GET", path, { headers: { Accept: "application/x-ndjson" }, timeoutMs: null });
  } catch (e) {
    if (e instanceof APIError) throw e;
    return;
  }
  let pending: Buffer = Buffer.alloc(0);
  let userFailed: { error: unknown } | undefined;
  const decoder = new TextDecoder();
  try {
    for await (const data of resp as AsyncIterable<Buffer>) {
      pending = pending.length ? Buffer.concat([pending, data]) : data;
      let nl: number;
      while ((nl = pending.indexOf(10)) >= 0) {
        const line = decoder.decode(pending.subarray(0, nl)).trim();
        pending = pending.subarray(nl + 1);
        if (!line) continue;
        let ev: BuildLogEvent;
        try {
          ev = JSON.parse(line) as BuildLogEvent;
        } catch {
          continue;
        }
        if (!ev || typeof ev !== "object") continue;
        const text = buildLogLine(ev);
        if (text !== undefined && onLog) {
          try {
            await onLog(text);
          } catch (err) {
            userFailed = { error: err };
            throw err;
          }
        }
        if (ev.type === "end") {
          resp.resume();
          return;
        }
      }
      if (pending.length > MAX_LOG_LINE) return;
    }
  } catch (e) {
    resp.destroy();
    // What the callback threw is passed on; a broken stream is not.
    if (userFailed) throw userFailed.error;
  }
}
