/** Files inside a sandbox: `sbx.files`. Paths inside the sandbox may be
 * relative: they land in /workspace. */

import { promises as fsp } from "node:fs";

import { type DownloadOptions, TarError, download, singleFileTar, sourceName, tarStream } from "./archive.js";
import { APIError, TransportError, WithruntimeError } from "./errors.js";
import type { components } from "./generated/openapi.js";
import { type Transport, describe } from "./transport.js";

type FileInfoWire = components["schemas"]["FileInfo"];

// The server's bound on a single-file body; larger files go as an archive.
const MAX_FILE_BODY = 512 << 20;

/** One file inside a sandbox. `path` is absolute; `type` is `file`, `dir`,
 * `symlink` or `other`; `target` is a link's target; `owner` and `group` are
 * names from the sandbox's /etc/passwd and /etc/group (the decimal id where
 * none); `attrs` are the extended attributes in the user namespace, named
 * without `user.`. */
export interface FileInfo {
  name: string;
  path: string;
  type: FileInfoWire["type"];
  size: number;
  mode: number;
  mtime?: Date;
  target?: string;
  owner?: string;
  group?: string;
  attrs?: Record<string, string>;
}

/** What an upload or download moved: regular files and links, and bytes. */
export interface TransferResult {
  files: number;
  bytes: number;
}

export function fileInfoOf(d: FileInfoWire): FileInfo {
  return {
    name: String(d?.name ?? ""),
    path: String(d?.path ?? ""),
    type: d?.type,
    size: Number(d?.size ?? 0),
    mode: Number(d?.mode ?? 0),
    mtime: parseTime(d?.mtime),
    ...(d?.target ? { target: d.target } : {}),
    ...(d?.owner ? { owner: d.owner } : {}),
    ...(d?.group ? { group: d.group } : {}),
    ...(d?.attrs && Object.keys(d.attrs).length ? { attrs: { ...d.attrs } } : {}),
  };
}

/** A Date from the API's RFC 3339 time; undefined for none or Go's zero time. */
export function parseTime(v: unknown): Date | undefined {
  if (typeof v !== "string" || !v || v.startsWith("0001-01-01")) return undefined;
  const d = new Date(v);
  return Number.isNaN(d.getTime()) ? undefined : d;
}

function remote(path: string): string {
  if (!path) throw new TypeError("path is empty");
  return String(path);
}

/** Whom a files call acts as: `user` (the default, who owns /workspace and
 * /home/user) or `root`. The sandbox's kernel checks that user's
 * permissions; what it refuses throws APIError with code `forbidden`. */
export interface AsUser {
  user?: "user" | "root";
}

function mode4(mode: number): string {
  return (mode & 0o777).toString(8).padStart(4, "0");
}

/** File operations on one sandbox (`sbx.files`). Every call acts as a user
 * of the sandbox (`{ user: "root" }` for root; see AsUser). */
export class Files {
  readonly #t: Transport;
  readonly #id: string;

  /** @internal */
  constructor(t: Transport, sandboxId: string) {
    this.#t = t;
    this.#id = sandboxId;
  }

  #p(suffix: string): string {
    return `/sandboxes/${this.#id}/${suffix}`;
  }

  /** The content of a file as text (UTF-8). */
  async read(path: string, opts: AsUser = {}): Promise<string> {
    return new TextDecoder().decode(await this.readBytes(path, opts));
  }

  /** The content of a file as bytes. */
  async readBytes(path: string, opts: AsUser = {}): Promise<Uint8Array> {
    const { body } = await this.#t.request("GET", this.#p("files"), { query: { path: remote(path), user: opts.user } });
    return new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
  }

  /** At most `limit` bytes from the start of a file, and its whole size when
   * the server said it (the rest is not transferred). Used by the agent tools. */
  async readHead(
    path: string,
    limit: number,
    opts: AsUser = {},
  ): Promise<{ data: Uint8Array; size: number | undefined }> {
    const resp = await this.#t.open("GET", this.#p("files"), { query: { path: remote(path), user: opts.user } });
    const parts: Buffer[] = [];
    let got = 0;
    let more = false;
    try {
      for await (const c of resp as AsyncIterable<Buffer>) {
        parts.push(c);
        got += c.length;
        if (got > limit) {
          more = true;
          break;
        }
      }
    } catch (e) {
      throw new TransportError(`reading ${path}: the stream broke: ${describe(e)}`, { cause: e });
    } finally {
      resp.destroy();
    }
    const data = Buffer.concat(parts).subarray(0, limit);
    const length = resp.headers["content-length"];
    const size = length && /^\d+$/.test(length) ? Number(length) : more ? undefined : data.length;
    return { data: new Uint8Array(data), size };
  }

  /** Write a whole file (a string is encoded as UTF-8); parent directories are made. */
  async write(
    path: string,
    data: string | Uint8Array,
    opts: { mode?: number; attrs?: Record<string, string> } & AsUser = {},
  ): Promise<FileInfo> {
    const body = typeof data === "string" ? new TextEncoder().encode(data) : data;
    // attrs: extended attributes in the user namespace (names without
    // "user."), one attr=NAME=VALUE each; the new file keeps no others.
    const query: Array<[string, string]> = [
      ["path", remote(path)],
      ["mode", mode4(opts.mode ?? 0o644)],
      ...(opts.user !== undefined ? [["user", opts.user] as [string, string]] : []),
      ...Object.entries(opts.attrs ?? {}).map(([k, v]): [string, string] => ["attr", `${k}=${v}`]),
    ];
    const d = await this.#t.json<FileInfoWire>("PUT", this.#p("files"), {
      query,
      body,
      headers: { "Content-Type": "application/octet-stream" },
    });
    return fileInfoOf(d);
  }

  /** The entries of a directory. */
  async list(path = ".", opts: AsUser = {}): Promise<FileInfo[]> {
    const d = await this.#t.json<components["schemas"]["FileList"]>("GET", this.#p("files/list"), {
      query: { path: remote(path), user: opts.user },
    });
    return (d?.entries ?? []).map(fileInfoOf);
  }

  /** Information about one file; APIError with code not_found if missing. */
  async stat(path: string, opts: AsUser = {}): Promise<FileInfo> {
    return fileInfoOf(
      await this.#t.json<FileInfoWire>("GET", this.#p("files/stat"), { query: { path: remote(path), user: opts.user } }),
    );
  }

  /** Whether the path exists in the sandbox. */
  async exists(path: string, opts: AsUser = {}): Promise<boolean> {
    try {
      await this.stat(path, opts);
      return true;
    } catch (e) {
      if (e instanceof APIError && e.code === "not_found") return false;
      throw e;
    }
  }

  /** Make a directory and its parents (no error if it exists). */
  async mkdir(path: string, opts: AsUser = {}): Promise<FileInfo> {
    return fileInfoOf(
      await this.#t.json<FileInfoWire>("POST", this.#p("files/mkdir"), { query: { path: remote(path), user: opts.user } }),
    );
  }

  /** Remove a file, or a directory (with `recursive: true` when not empty). */
  async remove(path: string, opts: { recursive?: boolean } & AsUser = {}): Promise<void> {
    await this.#t.request("DELETE", this.#p("files"), {
      query: { path: remote(path), recursive: opts.recursive ? true : undefined, user: opts.user },
    });
  }

  /** Copy a local file or directory to `remotePath`, which becomes that file
   * or directory (parents are made). A directory goes as one tar stream,
   * read from disk as it is sent. */
  async upload(local: string, remotePath: string, opts: AsUser = {}): Promise<TransferResult> {
    const r = remote(remotePath);
    const st = await fsp.stat(local);
    if (st.isDirectory()) return this.#putArchive(r, tarStream(local), opts);
    if (!st.isFile()) throw new WithruntimeError(`${local} is neither a regular file nor a directory`);
    if (st.size > MAX_FILE_BODY) {
      const trimmed = r.replace(/\/+$/, "");
      const i = trimmed.lastIndexOf("/");
      const [dir, name] = i < 0 ? [".", trimmed] : [trimmed.slice(0, i) || "/", trimmed.slice(i + 1)];
      await this.#putArchive(dir, singleFileTar(local, name, st), opts);
    } else {
      await this.#t.request("PUT", this.#p("files"), {
        query: { path: r, mode: mode4(st.mode), user: opts.user },
        body: fileChunks(local, st.size),
        headers: { "Content-Type": "application/octet-stream", "Content-Length": String(st.size) },
      });
    }
    return { files: 1, bytes: st.size };
  }

  async #putArchive(dir: string, chunks: AsyncIterable<Uint8Array>, opts: AsUser): Promise<TransferResult> {
    // The server makes dir (and its parents) if missing, and says how many
    // files (and links) and bytes it wrote.
    const d = await this.#t.json<components["schemas"]["ArchiveResult"]>("PUT", this.#p("archive"), {
      query: { path: dir, user: opts.user },
      body: chunks,
      headers: { "Content-Type": "application/x-tar" },
    });
    return { files: Number(d?.files ?? 0), bytes: Number(d?.bytes ?? 0) };
  }

  /**
   * Copy a file or directory of the sandbox to `local`, which becomes that
   * file or directory; a file onto an existing directory lands inside it
   * under its own name (the last element of `remotePath` as given).
   *
   * Everything comes as one tar stream, extracted as it arrives, and what
   * the sandbox sends is untrusted. Whether `remotePath` is a file or a
   * directory is decided from the archive itself, never from an earlier
   * stat: one file only when the archive holds that file (or link) alone
   * under the path's own name. A directory is refused (DestinationError)
   * onto an existing file, and onto an existing directory unless
   * `merge: true` (then its entries are extracted into it, files there
   * replaced). Symbolic links come back as links, whatever they point to,
   * but nothing is written through a link: an entry whose parent path
   * passes through one, a file or directory entry whose name is already a
   * link, an absolute name, `..`, a device file or a FIFO stops the
   * extraction with UnsafeArchiveError. More than `maxEntries` entries
   * (default 1,000,000) or `maxBytes` bytes of files (default 10 GiB) throw
   * ArchiveTooLargeError. What was extracted before an error stays.
   */
  async download(remotePath: string, local: string, opts: DownloadOptions & AsUser = {}): Promise<TransferResult> {
    const r = remote(remotePath);
    const resp = await this.#t.open("GET", this.#p("archive"), {
      query: { path: r, user: opts.user },
      headers: { Accept: "application/x-tar" },
    });
    try {
      return await download(resp as AsyncIterable<Buffer>, local, sourceName(r), opts);
    } catch (e) {
      if (e instanceof TarError) throw new TransportError(`downloading ${r}: bad or cut archive: ${e.message}`, { cause: e });
      if (e instanceof WithruntimeError || e instanceof TypeError || (e as NodeJS.ErrnoException).syscall) throw e;
      throw new TransportError(`downloading ${r}: the archive stream broke: ${describe(e)}`, { cause: e });
    } finally {
      // What follows the archive's end is not read: the sandbox could send
      // without end.
      resp.destroy();
    }
  }
}

async function* fileChunks(path: string, size: number): AsyncGenerator<Uint8Array> {
  const f = await fsp.open(path, "r");
  try {
    let left = size;
    while (left > 0) {
      const buf = Buffer.allocUnsafe(Math.min(1 << 20, left));
      const { bytesRead } = await f.read(buf, 0, buf.length, null);
      if (!bytesRead) throw new WithruntimeError(`${path} shrank while it was being uploaded`);
      left -= bytesRead;
      yield buf.subarray(0, bytesRead);
    }
  } finally {
    await f.close();
  }
}

