/**
 * Directories as one streamed tar: written chunk by chunk for uploads,
 * extracted safely as it arrives for downloads.
 *
 * Extraction follows the Go client's rule (client.DownloadDir), as the
 * Python SDK does: symbolic links are made as they are, whatever they point
 * to, but nothing is ever written through one, and no entry's parent path
 * may pass through one (checked one component at a time with lstat, so a
 * link the archive made earlier, or one already in the destination, stops
 * the entry). Absolute names, `..` components, device files and FIFOs are
 * refused with UnsafeArchiveError.
 *
 * A download's archive comes from the sandbox, so its length is untrusted
 * too: the stream is read up to a bound on its own bytes, and its entries
 * and the bytes of its files are counted before anything of an entry is
 * written (ArchiveTooLargeError past maxEntries or maxBytes). Whether it
 * holds one file or a directory is decided from the archive itself
 * (download), never from an earlier stat.
 */

import { constants as C, promises as fsp } from "node:fs";
import type { Stats } from "node:fs";
import { randomBytes } from "node:crypto";
import { dirname, join, resolve } from "node:path";

import { WithruntimeError } from "./errors.js";

export const CHUNK = 1 << 20; // bytes of file data read at a time
const FLUSH = 256 << 10; // small entries are batched into chunks of about this size
const BLOCK = 512;
// PAX and GNU long-name headers are held whole: refused above this size, as
// Go's archive/tar refuses them.
const MAX_EXTENDED = 1 << 20;
const WINDOWS = process.platform === "win32";
// A new file only, never through a link that appeared meanwhile.
const CREATE_FLAGS = C.O_WRONLY | C.O_CREAT | C.O_EXCL | (C.O_NOFOLLOW ?? 0);
const READ_FLAGS = C.O_RDONLY | (C.O_NOFOLLOW ?? 0);

/** An archive entry is refused: it would be written outside its
 * destination, through a symbolic link, or is a special file. */
export class UnsafeArchiveError extends WithruntimeError {}

/** A download's archive is past a bound: more than maxEntries entries, more
 * than maxBytes bytes of files, or more archive bytes than those allow.
 * What was extracted before stays. */
export class ArchiveTooLargeError extends WithruntimeError {}

/** A download's archive does not fit its destination: a directory onto a
 * file, a file onto a directory of its name, or a directory onto an
 * existing directory without `merge: true`. */
export class DestinationError extends WithruntimeError {}

/** A download's bounds, unless the caller raises them: bytes of regular
 * files, and entries (files, directories, links). */
export const DEFAULT_MAX_BYTES = 10 * 2 ** 30;
export const DEFAULT_MAX_ENTRIES = 1_000_000;
// The archive bytes each entry may take beyond its file's data (headers,
// PAX records, padding): the stream is read up to maxBytes plus this much
// per entry allowed, so a stream of headers alone ends too.
const HEADER_ALLOWANCE = 4 << 10;
// Directories whose times are set once their entries are in: past this
// many, a directory keeps the time its extraction gave it.
const MAX_DIR_TIMES = 1 << 16;

/** The bounds of a download (defaults DEFAULT_MAX_BYTES, DEFAULT_MAX_ENTRIES). */
export interface DownloadBounds {
  maxBytes?: number;
  maxEntries?: number;
}

// -- writing ----------------------------------------------------------------

interface Entry {
  name: string;
  type: "0" | "2" | "5";
  mode: number;
  mtime: number;
  size: number;
  linkname?: string;
}

function octal(buf: Buffer, off: number, len: number, value: number): void {
  buf.write(value.toString(8).padStart(len - 1, "0") + "\0", off, len, "ascii");
}

function paxRecord(key: string, value: string): Buffer {
  // "<len> key=value\n", where len counts itself.
  const body = ` ${key}=${value}\n`;
  let n = Buffer.byteLength(body);
  let len = n + String(n).length;
  if (String(len).length !== String(n).length) len = n + String(len).length;
  return Buffer.from(`${len}${body}`, "utf8");
}

function header(name: string, type: string, mode: number, mtime: number, size: number, linkname = ""): Buffer {
  const h = Buffer.alloc(BLOCK);
  h.write(name, 0, 100, "utf8");
  octal(h, 100, 8, mode & 0o7777);
  octal(h, 108, 8, 0);
  octal(h, 116, 8, 0);
  octal(h, 124, 12, size);
  octal(h, 136, 12, Math.max(0, Math.floor(mtime)));
  h.fill(0x20, 148, 156);
  h.write(type, 156, 1, "ascii");
  h.write(linkname, 157, 100, "utf8");
  h.write("ustar\u000000", 257, 8, "ascii");
  let sum = 0;
  for (const b of h) sum += b;
  h.write(sum.toString(8).padStart(6, "0") + "\0 ", 148, 8, "ascii");
  return h;
}

function pad(size: number): Buffer {
  return Buffer.alloc((BLOCK - (size % BLOCK)) % BLOCK);
}

/** The header blocks of one entry: a PAX header first when a name, a link
 * target or the size does not fit the plain ustar fields. */
export function entryHeader(e: Entry): Buffer {
  const records: Buffer[] = [];
  const fits = (s: string): boolean => Buffer.byteLength(s) <= 100 && /^[\x20-\x7e]*$/.test(s);
  if (!fits(e.name)) records.push(paxRecord("path", e.name));
  if (e.linkname && !fits(e.linkname)) records.push(paxRecord("linkpath", e.linkname));
  if (e.size > 0o77777777777) records.push(paxRecord("size", String(e.size)));
  const plain = header(
    fits(e.name) ? e.name : e.name.slice(0, 99).replace(/[^\x20-\x7e]/g, "_"),
    e.type,
    e.mode,
    e.mtime,
    e.size > 0o77777777777 ? 0 : e.size,
    e.linkname && fits(e.linkname) ? e.linkname : "",
  );
  if (!records.length) return plain;
  const pax = Buffer.concat(records);
  return Buffer.concat([header("PaxHeaders/entry", "x", 0o644, e.mtime, pax.length), pax, pad(pax.length), plain]);
}

/** (relative name, full path, lstat) of every entry under root, parents
 * before children, in name order; skips what a tar should not carry. */
async function* walk(root: string): AsyncGenerator<[string, string, Stats]> {
  const stack = [""];
  while (stack.length) {
    const relDir = stack.pop()!;
    const fullDir = relDir ? join(root, relDir) : root;
    const names = (await fsp.readdir(fullDir)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    const subdirs: string[] = [];
    for (const n of names) {
      const rel = relDir ? `${relDir}/${n}` : n;
      const full = join(fullDir, n);
      const st = await fsp.lstat(full);
      if (st.isDirectory()) subdirs.push(rel);
      else if (!(st.isFile() || st.isSymbolicLink())) continue;
      yield [rel, full, st];
    }
    stack.push(...subdirs.reverse());
  }
}

async function* fileData(path: string, size: number): AsyncGenerator<Buffer> {
  const f = await fsp.open(path, READ_FLAGS);
  try {
    let left = size;
    while (left > 0) {
      const buf = Buffer.allocUnsafe(Math.min(CHUNK, left));
      const { bytesRead } = await f.read(buf, 0, buf.length, null);
      if (!bytesRead) throw new WithruntimeError(`${path} shrank while it was being uploaded`);
      left -= bytesRead;
      yield buf.subarray(0, bytesRead);
    }
  } finally {
    await f.close();
  }
}

/** A tar of the contents of directory `root`, names relative to it:
 * regular files, directories and symbolic links (kept as links). */
export async function* tarStream(root: string): AsyncGenerator<Uint8Array> {
  let buf: Buffer[] = [];
  let buffered = 0;
  const push = (b: Buffer): void => {
    buf.push(b);
    buffered += b.length;
  };
  const flush = (): Buffer => {
    const out = Buffer.concat(buf);
    buf = [];
    buffered = 0;
    return out;
  };
  for await (const [rel, full, st] of walk(root)) {
    const base = { name: rel, mode: st.mode & 0o777, mtime: Math.floor(st.mtimeMs / 1000) };
    if (st.isDirectory()) push(entryHeader({ ...base, type: "5", size: 0 }));
    else if (st.isSymbolicLink()) push(entryHeader({ ...base, type: "2", size: 0, linkname: await fsp.readlink(full) }));
    else {
      push(entryHeader({ ...base, type: "0", size: st.size }));
      for await (const data of fileData(full, st.size)) {
        push(data);
        if (buffered >= FLUSH) yield flush();
      }
      push(pad(st.size));
    }
    if (buffered >= FLUSH) yield flush();
  }
  push(Buffer.alloc(2 * BLOCK));
  yield flush();
}

/** A tar holding one file named `name`, for files above the single-body bound. */
export async function* singleFileTar(path: string, name: string, st: Stats): AsyncGenerator<Uint8Array> {
  yield entryHeader({ name, type: "0", mode: st.mode & 0o777, mtime: Math.floor(st.mtimeMs / 1000), size: st.size });
  yield* fileData(path, st.size);
  yield Buffer.concat([pad(st.size), Buffer.alloc(2 * BLOCK)]);
}

// -- reading ----------------------------------------------------------------

/** Reads exact byte counts from a stream of chunks. */
class Reader {
  #it: AsyncIterator<Uint8Array>;
  // Chunks received and not yet read, the first one possibly in part: each
  // byte is copied at most once, when a read spans chunks.
  #chunks: Buffer[] = [];
  #held = 0;
  #done = false;
  #left: number; // stream bytes still allowed
  #limit: number;

  constructor(src: AsyncIterable<Uint8Array>, limit = Infinity) {
    this.#it = src[Symbol.asyncIterator]();
    this.#left = this.#limit = limit;
  }

  /** Up to n bytes (fewer only at the end of the stream); with `partial`,
   * whatever is held once anything is (for file data, at most n). */
  async read(n: number, partial = false): Promise<Buffer> {
    while (this.#held < n && !this.#done && !(partial && this.#held)) {
      const r = await this.#it.next();
      if (r.done) this.#done = true;
      else if (r.value.length) {
        this.#left -= r.value.length;
        if (this.#left < 0) throw new ArchiveTooLargeError(`the archive is over ${this.#limit} bytes`);
        this.#chunks.push(Buffer.from(r.value.buffer, r.value.byteOffset, r.value.byteLength));
        this.#held += r.value.length;
      }
    }
    const want = Math.min(n, this.#held);
    const first = this.#chunks[0];
    if (first && (first.length >= want || partial)) {
      const out = first.subarray(0, want);
      if (out.length === first.length) this.#chunks.shift();
      else this.#chunks[0] = first.subarray(out.length);
      this.#held -= out.length;
      return out;
    }
    const out = Buffer.allocUnsafe(want);
    let off = 0;
    while (off < want) {
      const c = this.#chunks[0]!;
      const take = Math.min(c.length, want - off);
      c.copy(out, off, 0, take);
      off += take;
      if (take === c.length) this.#chunks.shift();
      else this.#chunks[0] = c.subarray(take);
    }
    this.#held -= want;
    return out;
  }

  async exact(n: number, what: string): Promise<Buffer> {
    const b = await this.read(n);
    if (b.length < n) throw new TarError(`the archive ends inside ${what}`);
    return b;
  }

  /** Pass the next n bytes to sink, chunk by chunk. */
  async copy(n: number, sink: (b: Buffer) => Promise<unknown>): Promise<void> {
    let left = n;
    while (left > 0) {
      const b = await this.read(Math.min(left, CHUNK), true);
      if (!b.length) throw new TarError("the archive ends inside a file's data");
      left -= b.length;
      await sink(b);
    }
  }

  async skip(n: number): Promise<void> {
    await this.copy(n, async () => undefined);
  }
}

/** The archive itself is malformed or cut. */
export class TarError extends WithruntimeError {}

interface Member {
  name: string;
  type: string;
  mode: number;
  mtime: number;
  size: number;
  linkname: string;
}

function cstr(h: Buffer, off: number, len: number): string {
  const f = h.subarray(off, off + len);
  const z = f.indexOf(0);
  return f.subarray(0, z < 0 ? len : z).toString("utf8");
}

function num(h: Buffer, off: number, len: number): number {
  const f = h.subarray(off, off + len);
  if (f[0]! & 0x80) {
    // base-256 (GNU) for large values
    let v = 0;
    for (let i = 1; i < f.length; i++) v = v * 256 + f[i]!;
    return v;
  }
  const s = cstr(h, off, len).trim();
  return s ? parseInt(s, 8) : 0;
}

function parsePax(data: Buffer): Record<string, string> {
  const out: Record<string, string> = {};
  let i = 0;
  while (i < data.length) {
    const sp = data.indexOf(0x20, i);
    if (sp < 0) break;
    const len = parseInt(data.subarray(i, sp).toString("ascii"), 10);
    if (!(len > 0)) throw new TarError("a PAX header record is malformed");
    const rec = data.subarray(sp + 1, i + len - 1).toString("utf8");
    const eq = rec.indexOf("=");
    if (eq > 0) out[rec.slice(0, eq)] = rec.slice(eq + 1);
    i += len;
  }
  return out;
}

/** The members of a tar stream, one at a time; the caller reads or skips
 * each member's data through `reader` before asking for the next. */
async function* members(reader: Reader): AsyncGenerator<Member> {
  let pax: Record<string, string> = {};
  let longName: string | undefined;
  let longLink: string | undefined;
  for (;;) {
    const h = await reader.read(BLOCK);
    if (h.length === 0) return; // no end blocks: tolerated, as Go's reader does
    if (h.length < BLOCK) throw new TarError("the archive ends inside a header");
    if (h.every((b) => b === 0)) return;
    let sum = 0;
    for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : h[i]!;
    if (sum !== num(h, 148, 8)) throw new TarError("a header's checksum is wrong");
    const type = String.fromCharCode(h[156]!) || "0";
    const size = num(h, 124, 12);
    const padded = size + ((BLOCK - (size % BLOCK)) % BLOCK);
    if (type === "x" || type === "g" || type === "L" || type === "K") {
      if (size > MAX_EXTENDED) {
        throw new TarError(`an extended header of ${size} bytes is over the ${MAX_EXTENDED}-byte limit`);
      }
      const data = await reader.exact(padded, "an extended header");
      if (type === "x") pax = { ...pax, ...parsePax(data.subarray(0, size)) };
      else if (type === "L") longName = cstr(data, 0, size);
      else if (type === "K") longLink = cstr(data, 0, size);
      continue;
    }
    let name = cstr(h, 0, 100);
    const magic = h.subarray(257, 262).toString("ascii");
    if (magic === "ustar") {
      const prefix = cstr(h, 345, 155);
      if (prefix) name = `${prefix}/${name}`;
    }
    const m: Member = {
      name: pax.path ?? longName ?? name,
      type: type === "\0" ? "0" : type,
      mode: num(h, 100, 8),
      mtime: pax.mtime ? Math.floor(Number(pax.mtime)) : num(h, 136, 12),
      size: pax.size ? Number(pax.size) : size,
      linkname: pax.linkpath ?? longLink ?? cstr(h, 157, 100),
    };
    pax = {};
    longName = longLink = undefined;
    yield m;
  }
}

function parts(name: string, what: string): string[] {
  if (name.startsWith("/") || (WINDOWS && (name.startsWith("\\") || name[1] === ":"))) {
    throw new UnsafeArchiveError(`refusing ${what} ${JSON.stringify(name)}: absolute name`);
  }
  if (name.includes("\0")) throw new UnsafeArchiveError(`refusing ${what} ${JSON.stringify(name)}: it contains a NUL byte`);
  const ps = (WINDOWS ? name.replace(/\\/g, "/") : name).split("/").filter((p) => p !== "" && p !== ".");
  if (ps.includes("..")) throw new UnsafeArchiveError(`refusing ${what} ${JSON.stringify(name)}: it contains '..'`);
  return ps;
}

async function lstat(path: string): Promise<Stats | undefined> {
  try {
    return await fsp.lstat(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  }
}

/** The directory holding the entry named by `ps`, checked one component at
 * a time from root: each must be a real directory, never a symbolic link;
 * with `create`, missing ones are made. */
async function parent(root: string, ps: string[], name: string, create: boolean): Promise<string> {
  let path = root;
  for (const p of ps.slice(0, -1)) {
    path = join(path, p);
    const st = await lstat(path);
    if (!st) {
      if (!create) throw new UnsafeArchiveError(`refusing ${JSON.stringify(name)}: ${path} does not exist`);
      await fsp.mkdir(path);
    } else if (st.isSymbolicLink()) {
      throw new UnsafeArchiveError(`refusing ${JSON.stringify(name)}: it passes through the symbolic link ${path}`);
    } else if (!st.isDirectory()) {
      throw new UnsafeArchiveError(`refusing ${JSON.stringify(name)}: it passes through ${path}, which is not a directory`);
    }
  }
  return path;
}

/** Create target (which must not exist: never through a link) with what
 * `fill` writes, then set its mode and time on the open descriptor. */
async function writeNew(target: string, mode: number, mtime: number, fill: (f: fsp.FileHandle) => Promise<void>): Promise<void> {
  const f = await fsp.open(target, CREATE_FLAGS, 0o600);
  try {
    await fill(f);
    await f.chmod(mode & 0o777);
    await f.utimes(mtime, mtime);
  } finally {
    await f.close();
  }
}

async function writeAll(f: fsp.FileHandle, b: Buffer): Promise<void> {
  let off = 0;
  while (off < b.length) off += (await f.write(b, off, b.length - off)).bytesWritten;
}

/** The members of a download's archive, each counted against the bounds
 * before anything of it is written. */
class Counted {
  entries = 0;
  bytes = 0;
  readonly reader: Reader;
  #it: AsyncGenerator<Member>;
  #maxBytes: number;
  #maxEntries: number;

  constructor(src: AsyncIterable<Uint8Array>, bounds: DownloadBounds = {}) {
    this.#maxBytes = bounds.maxBytes ?? DEFAULT_MAX_BYTES;
    this.#maxEntries = bounds.maxEntries ?? DEFAULT_MAX_ENTRIES;
    if (!(this.#maxBytes > 0 && this.#maxEntries > 0)) throw new TypeError("maxBytes and maxEntries must be positive");
    this.reader = new Reader(src, this.#maxBytes + (this.#maxEntries + 1) * HEADER_ALLOWANCE);
    this.#it = members(this.reader);
  }

  async next(): Promise<Member | undefined> {
    const r = await this.#it.next();
    if (r.done) return undefined;
    const m = r.value;
    if (++this.entries > this.#maxEntries) {
      throw new ArchiveTooLargeError(`the archive has more than ${this.#maxEntries} entries (at ${JSON.stringify(m.name)})`);
    }
    if (isRegular(m)) {
      if (!(m.size >= 0 && m.size <= this.#maxBytes - this.bytes)) {
        throw new ArchiveTooLargeError(
          `the archive has more than ${this.#maxBytes} bytes of files (at ${JSON.stringify(m.name)}, ${m.size} bytes)`,
        );
      }
      this.bytes += m.size;
    }
    return m;
  }
}

const isRegular = (m: Member): boolean => m.type === "0" || m.type === "7";
const padded = (n: number): number => (BLOCK - (n % BLOCK)) % BLOCK;

/** Extracts members into the directory root (a real path), with the rule
 * in extract's comment. */
class Extractor {
  files = 0;
  bytes = 0;
  #dirTimes = new Map<string, number>();

  constructor(
    readonly ms: Counted,
    readonly root: string,
    readonly dest: string,
  ) {}

  async run(first?: Member): Promise<{ files: number; bytes: number }> {
    for (let m = first ?? (await this.ms.next()); m; m = await this.ms.next()) await this.entry(m);
    // Directory times last, once their entries are in; never through a link.
    for (const [path, mtime] of [...this.#dirTimes].reverse()) {
      const st = await lstat(path);
      if (st?.isDirectory()) await fsp.utimes(path, mtime, mtime);
    }
    return { files: this.files, bytes: this.bytes };
  }

  async entry(m: Member): Promise<void> {
    const reader = this.ms.reader;
    const isDirEntry = m.type === "5";
    const ps = parts(m.name, "entry");
    if (!ps.length) {
      if (isDirEntry) return reader.skip(m.size + padded(m.size));
      throw new UnsafeArchiveError(`refusing entry ${JSON.stringify(m.name)}: it names the destination itself`);
    }
    if (!["0", "7", "1", "2", "5"].includes(m.type)) {
      throw new UnsafeArchiveError(
        `refusing entry ${JSON.stringify(m.name)}: device files, FIFOs and other special files are not extracted`,
      );
    }
    const target = join(await parent(this.root, ps, m.name, true), ps[ps.length - 1]!);
    const st = await lstat(target);
    const isLink = st?.isSymbolicLink() ?? false;
    const isDir = st?.isDirectory() ?? false;

    if (isDirEntry) {
      if (isLink) throw new UnsafeArchiveError(`refusing entry ${JSON.stringify(m.name)}: ${target} is a symbolic link`);
      if (!isDir) {
        if (st) await fsp.unlink(target); // a file gives way to the directory
        await fsp.mkdir(target, 0o700);
      }
      // The owner always keeps rwx, so the mode is set at once; the time
      // waits for the directory's entries.
      await fsp.chmod(target, (m.mode & 0o777) | 0o700);
      if (this.#dirTimes.has(target) || this.#dirTimes.size < MAX_DIR_TIMES) this.#dirTimes.set(target, m.mtime);
      return reader.skip(m.size + padded(m.size));
    }
    if (isDir) throw new UnsafeArchiveError(`refusing entry ${JSON.stringify(m.name)}: a directory of that name exists`);

    if (m.type === "2") {
      if (st) await fsp.unlink(target); // replaced, never followed
      await fsp.symlink(m.linkname, target);
      this.files++;
    } else if (m.type === "1") {
      const sp = parts(m.linkname, "hard link target");
      if (!sp.length) throw new UnsafeArchiveError(`refusing hard link ${JSON.stringify(m.name)}: it names the destination itself`);
      const source = join(await parent(this.root, sp, m.linkname, false), sp[sp.length - 1]!);
      const sst = await lstat(source);
      if (!sst || !(sst.isFile() || sst.isSymbolicLink())) {
        throw new UnsafeArchiveError(
          `refusing hard link ${JSON.stringify(m.name)} -> ${JSON.stringify(m.linkname)}: no such file inside ${this.dest}`,
        );
      }
      if (source !== target) {
        if (st) await fsp.unlink(target);
        if (sst.isSymbolicLink()) await fsp.symlink(await fsp.readlink(source), target);
        else {
          const from = await fsp.open(source, READ_FLAGS);
          try {
            await writeNew(target, sst.mode, sst.mtimeMs / 1000, async (f) => {
              const buf = Buffer.allocUnsafe(CHUNK);
              for (;;) {
                const { bytesRead } = await from.read(buf, 0, CHUNK, null);
                if (!bytesRead) break;
                await writeAll(f, buf.subarray(0, bytesRead));
              }
            });
          } finally {
            await from.close();
          }
          this.bytes += sst.size;
        }
        this.files++;
      }
    } else {
      if (isLink) throw new UnsafeArchiveError(`refusing entry ${JSON.stringify(m.name)}: ${target} is a symbolic link`);
      if (st) await fsp.unlink(target);
      await writeNew(target, m.mode, m.mtime, (f) => reader.copy(m.size, (b) => writeAll(f, b)));
      this.files++;
      this.bytes += m.size;
      return reader.skip(padded(m.size));
    }
    return reader.skip(m.size + padded(m.size));
  }

  /** Move a staged entry (a file or link held under a temporary name) to
   * `name` in root, with the rules of entry. */
  async place(staged: string, name: string, link: boolean, size: number): Promise<void> {
    const target = join(this.root, name);
    const st = await lstat(target);
    if (st?.isDirectory()) throw new UnsafeArchiveError(`refusing entry ${JSON.stringify(name)}: a directory of that name exists`);
    if (st?.isSymbolicLink() && !link) {
      throw new UnsafeArchiveError(`refusing entry ${JSON.stringify(name)}: ${target} is a symbolic link`);
    }
    await fsp.rename(staged, target);
    this.files++;
    this.bytes += size;
  }
}

/**
 * Extract the tar read from `src` (a stream) into directory `dest`. Returns
 * the files (and links) and bytes written. Throws UnsafeArchiveError on the
 * first entry that is not safe, ArchiveTooLargeError past the bounds; what
 * was extracted before stays.
 */
export async function extract(
  src: AsyncIterable<Uint8Array>,
  dest: string,
  bounds: DownloadBounds = {},
): Promise<{ files: number; bytes: number }> {
  const ms = new Counted(src, bounds);
  await fsp.mkdir(dest, { recursive: true });
  return new Extractor(ms, await fsp.realpath(dest), dest).run();
}

/** The own name of a sandbox path as the caller gave it ("" for a
 * directory's contents: "x/.", ".", "/"). */
export function sourceName(remote: string): string {
  if (remote === "." || remote.endsWith("/.")) return "";
  const name = remote.replace(/\/+$/, "").split("/").pop() ?? "";
  return name === "." || name === ".." ? "" : name;
}

/** Options of a download: its bounds, and whether a directory may be
 * extracted into an existing local directory. */
export interface DownloadOptions extends DownloadBounds {
  merge?: boolean;
}

/**
 * Write the archive of a sandbox path whose own name is `name` to `local`,
 * deciding from the archive, never from a stat, whether it is one file or
 * a directory. It is one file only when the archive holds exactly one
 * entry, a regular file or a symbolic link named `name`: that entry is
 * staged under a temporary name beside where it lands until the archive's
 * end proves it alone, then `local` becomes that file (or, when `local` is
 * an existing directory, the file lands inside it under `name`; a
 * directory there is never replaced). Anything else is a directory's
 * contents: `local` becomes that directory (made with its parents when
 * missing); a file there is refused, an existing directory is extracted
 * into only with `merge: true`. Names come from `local`, `name` and the
 * archive's checked entries only.
 */
export async function download(
  src: AsyncIterable<Uint8Array>,
  local: string,
  name: string,
  opts: DownloadOptions = {},
): Promise<{ files: number; bytes: number }> {
  const ms = new Counted(src, opts);
  const first = await ms.next();
  const st = await fsp.stat(local).catch((e: NodeJS.ErrnoException) => {
    if (e.code === "ENOENT" || e.code === "ENOTDIR") return undefined; // the user's own path: links followed
    throw e;
  });
  const localIsDir = st?.isDirectory() ?? false;
  const one =
    !!name && !!first && (isRegular(first) || first.type === "2") && parts(first.name, "entry").join("/") === name;
  let staged: string | undefined;
  try {
    let next = first;
    if (one && first) {
      const stageDir = localIsDir ? local : dirname(resolve(local));
      await fsp.mkdir(stageDir, { recursive: true });
      staged = join(stageDir, `.withruntime-${randomBytes(6).toString("hex")}`);
      if (first.type === "2") await fsp.symlink(first.linkname, staged);
      else {
        await writeNew(staged, first.mode, first.mtime, (f) => ms.reader.copy(first.size, (b) => writeAll(f, b)));
        await ms.reader.skip(padded(first.size));
      }
      next = await ms.next();
      if (!next) {
        const target = localIsDir ? join(local, name) : local;
        if ((await lstat(target))?.isDirectory()) {
          throw new DestinationError(`refusing to replace the directory ${target} with a file`);
        }
        await fsp.rename(staged, target);
        staged = undefined;
        return { files: 1, bytes: isRegular(first) ? first.size : 0 };
      }
    }
    // A directory's contents.
    if (st && !localIsDir) throw new DestinationError(`cannot copy a directory onto the file ${local}`);
    if (localIsDir && !opts.merge) {
      throw new DestinationError(
        `${local} is an existing directory: pass { merge: true } to extract the sandbox's directory into it, or name a path that does not exist`,
      );
    }
    await fsp.mkdir(local, { recursive: true });
    const x = new Extractor(ms, await fsp.realpath(local), local);
    if (staged && first) {
      await x.place(staged, name, first.type === "2", isRegular(first) ? first.size : 0);
      staged = undefined;
    }
    return await x.run(next);
  } finally {
    if (staged) await fsp.unlink(staged).catch(() => undefined);
  }
}
