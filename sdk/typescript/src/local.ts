/**
 * The local daemon: starting it, its admin key, and who may receive it. The
 * CLI starts the local daemon (`withruntime serve` in the background) on the
 * default address when nothing answers there; it keeps its admin key in
 * $XDG_DATA_HOME/withruntime/admin.key (mode 0600, so only its owner reads
 * it). A client of the default address with no key set uses that key when it
 * can read it, so that `Sandbox.create()` works with nothing configured.
 *
 * The daemon exits by itself after ten idle minutes. A client with no base
 * URL configured (no `baseUrl` option, WITHRUNTIME_BASE_URL unset) that finds
 * nothing listening on the default address starts it again the way the CLI
 * does, by running `withruntime daemon start` (the CLI named by
 * WITHRUNTIME_BINARY, else this package's CLI for the platform, else
 * `withruntime` on PATH): the CLI takes the data dir's lock, so programs
 * starting it at once get one daemon, and it waits until the daemon answers.
 * A client given a base URL never starts anything.
 *
 * While no daemon runs, any local user can listen on the default address, so
 * the key goes only over connections to a socket that the key file's owner
 * listens on, as the kernel's socket table (/proc/net/tcp and tcp6) says just
 * before and just after connecting: the same socket both times, so the
 * connection reached it. Another user's listener is refused with an APIError
 * `forbidden` naming its process and user. Where the table cannot be read
 * (not Linux) the key is not sent at all. The same rule holds in the Go
 * client and the Python SDK.
 */

import { execFile } from "node:child_process";
import {
  accessSync,
  closeSync,
  constants,
  existsSync,
  fstatSync,
  openSync,
  readFileSync,
  readSync,
  readdirSync,
  readlinkSync,
  statSync,
} from "node:fs";
import * as http from "node:http";
import { createRequire } from "node:module";
import * as net from "node:net";
import { endianness, homedir } from "node:os";
import { delimiter, dirname, isAbsolute, join } from "node:path";
import type { Duplex } from "node:stream";

import { APIError, TransportError } from "./errors.js";

export const DEFAULT_BASE_URL = "http://127.0.0.1:7878";

/** Where the local daemon's key may go: DEFAULT_BASE_URL (tests point it elsewhere). */
export const localDaemon = { baseUrl: DEFAULT_BASE_URL };

const MAX_KEY = 4096;
const TCP_LISTEN = "0A";

/** What to do when no server answers, for the error that says so. */
export const START_HINT =
  "no server answers; start one with `withruntime serve`, or start the local daemon with " +
  "`withruntime daemon start` (any CLI command such as `withruntime sandbox ls` starts it too)";

/** The environment variable naming the CLI to start the local daemon with
 * (this package's `withruntime` launcher reads the same one). */
export const BINARY_ENV = "WITHRUNTIME_BINARY";

/** How long `withruntime daemon start` may take, in ms: it waits up to 20 s
 * itself for the daemon to answer (it first recovers the sandboxes an
 * earlier daemon left), and may wait on another program starting it. */
const START_TIMEOUT_MS = 60_000;

/** The withruntime CLI: WITHRUNTIME_BINARY, else the binary of this
 * package's optional dependency for the platform (what `npx withruntime`
 * runs), else `withruntime` on PATH; undefined when there is none. */
export function cliBinary(): string | undefined {
  if (process.env[BINARY_ENV]) return process.env[BINARY_ENV];
  const exe = process.platform === "win32" ? "withruntime.exe" : "withruntime";
  try {
    const require = createRequire(import.meta.url);
    const dir = dirname(require.resolve(`@withruntime/cli-${process.platform}-${process.arch}/package.json`));
    const p = join(dir, "bin", exe);
    if (existsSync(p)) return p;
  } catch {
    // not installed (npm leaves out optional dependencies on request)
  }
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (!dir) continue;
    const p = join(dir, exe);
    try {
      if (!statSync(p).isFile()) continue;
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // not there, or not executable
    }
  }
  return undefined;
}

// One start at a time in this process: requests that find nothing at once
// share it.
let starting: Promise<void> | undefined;

/** Start the local daemon with `withruntime daemon start` and resolve once
 * it answers on the default address. A missing CLI, a start that fails and
 * a start that takes too long reject with a TransportError saying what to
 * do; another user's process on the address with the CLI's APIError
 * `forbidden`. */
export function startDaemon(): Promise<void> {
  starting ??= runDaemonStart().finally(() => {
    starting = undefined;
  });
  return starting;
}

function runDaemonStart(): Promise<void> {
  const binary = cliBinary();
  if (!binary) {
    return Promise.reject(
      new TransportError(
        `nothing answers on ${DEFAULT_BASE_URL} and the local daemon cannot be started: there is no ` +
          `withruntime CLI on PATH (or named by ${BINARY_ENV}); install the CLI and start the daemon with ` +
          "`withruntime daemon start`, or set WITHRUNTIME_BASE_URL to a running server",
      ),
    );
  }
  const what = `starting the local daemon (\`${binary} daemon start\`)`;
  // The CLI's own default address and data dir are the SDK's: it reads the
  // same XDG_DATA_HOME and HOME, and WITHRUNTIME_BASE_URL is unset.
  const env = { ...process.env };
  delete env.WITHRUNTIME_BASE_URL;
  return new Promise((resolve, reject) => {
    execFile(
      binary,
      ["daemon", "start"],
      { env, timeout: START_TIMEOUT_MS, killSignal: "SIGKILL", encoding: "utf8", windowsHide: true },
      (err, _stdout, stderr) => {
        if (!err) return resolve();
        const e = err as NodeJS.ErrnoException & { killed?: boolean; code?: string | number };
        if (e.killed) {
          return reject(
            new TransportError(`${what}: no answer after ${START_TIMEOUT_MS / 1000} s; see ${join(dataDir(), "daemon.log")}`),
          );
        }
        if (typeof e.code === "string") {
          return reject(
            new TransportError(
              `${what}: ${e.message}; install the CLI and start the daemon with \`withruntime daemon start\`, ` +
                "or set WITHRUNTIME_BASE_URL to a running server",
              { cause: err },
            ),
          );
        }
        const lines = String(stderr).trim().split("\n");
        const last = lines[lines.length - 1] || `exit status ${String(e.code)}`;
        const forbidden = "error: forbidden: ";
        if (last.startsWith(forbidden)) return reject(new APIError("forbidden", 403, last.slice(forbidden.length)));
        reject(new TransportError(`${what}: ${last}`));
      },
    );
  });
}

/** $XDG_DATA_HOME/withruntime (a relative XDG_DATA_HOME is ignored, as the XDG spec says). */
export function dataDir(): string {
  let base = process.env.XDG_DATA_HOME ?? "";
  if (!isAbsolute(base)) base = join(homedir(), ".local", "share");
  return join(base, "withruntime");
}

/** The admin key and the uid of its file's owner (the user whose daemon it
 * is), or undefined. The file is opened without following a symbolic link
 * and must be a regular file. */
export function readLocalKey(): { key: string; owner: number } | undefined {
  if (constants.O_NOFOLLOW === undefined) return undefined; // no file owners (Windows)
  let fd: number;
  try {
    fd = openSync(join(dataDir(), "admin.key"), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) return undefined;
    const buf = Buffer.alloc(MAX_KEY);
    const n = readSync(fd, buf, 0, MAX_KEY, 0);
    const key = buf.subarray(0, n).toString("utf8").trim();
    return key ? { key, owner: st.uid } : undefined;
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

/** Whether the kernel's socket table can be read. */
export function canCheckListeners(): boolean {
  return process.platform === "linux" && existsSync("/proc/net/tcp");
}

/** The admin key and its owner's uid when baseUrl is the local daemon's
 * address, the key file is readable and who listens can be checked. */
export function localKeyAndOwner(baseUrl: string): { key: string; owner: number } | undefined {
  if (baseUrl.replace(/\/+$/, "") !== localDaemon.baseUrl || !canCheckListeners()) return undefined;
  return readLocalKey();
}

/** The local daemon's admin key when it may be sent to baseUrl (see
 * localKeyAndOwner); undefined otherwise. */
export function localKey(baseUrl: string): string | undefined {
  return localKeyAndOwner(baseUrl)?.key;
}

/** The kernel's "0100007F:1ECE": 32-bit words in host byte order, the port in hex. */
function parseAddr(s: string): { ip: Buffer; port: number } {
  const [h, p] = s.split(":");
  const raw = Buffer.from(h ?? "", "hex");
  if (raw.length !== 4 && raw.length !== 16) throw new Error(`bad socket address ${JSON.stringify(s)}`);
  const ip = Buffer.alloc(raw.length);
  for (let i = 0; i < raw.length; i += 4) {
    const v = raw.readUInt32BE(i);
    if (endianness() === "LE") ip.writeUInt32LE(v, i);
    else ip.writeUInt32BE(v, i);
  }
  return { ip, port: parseInt(p ?? "", 16) };
}

/** Whether a socket listening at local takes connections to target: the
 * same address or the unspecified one (tcp6's "::" counts for IPv4 too: a
 * dual-stack socket takes IPv4 connections). */
function takes(local: Buffer, target: Buffer): boolean {
  if (local.equals(target)) return true;
  const mapped = Buffer.concat([Buffer.alloc(10), Buffer.from([0xff, 0xff])]);
  if (local.length === 16 && target.length === 4 && local.equals(Buffer.concat([mapped, target]))) return true;
  return local.every((b) => b === 0) && (local.length === 16 || target.length === 4);
}

/** A listening socket as the kernel reports it. */
export interface Listener {
  uid: number;
  inode: number;
}

/** The listening sockets of one socket table that take connections to target:port. */
export function parseListeners(text: string, target: Buffer, port: number): Listener[] {
  const out: Listener[] = [];
  for (const line of text.split("\n").slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 10 || f[3] !== TCP_LISTEN) continue;
    const a = parseAddr(f[1]!);
    if (a.port === port && takes(a.ip, target)) out.push({ uid: Number(f[7]), inode: Number(f[9]) });
  }
  return out;
}

/** An IP address's bytes (4 for IPv4, 16 for IPv6). */
export function ipBytes(host: string): Buffer {
  const h = host.replace(/^\[|\]$/g, "");
  if (net.isIPv4(h)) return Buffer.from(h.split(".").map(Number));
  if (!net.isIPv6(h)) throw new Error(`${host}: the host must be an IP address for its listener to be checked`);
  const [head, tail] = h.includes("::") ? h.split("::") : [h, undefined];
  const words = (x: string | undefined) => (x ? x.split(":").filter((w) => w !== "") : []);
  const hw = words(head);
  const tw = words(tail);
  const all = tail === undefined ? hw : [...hw, ...Array(8 - hw.length - tw.length).fill("0"), ...tw];
  const b = Buffer.alloc(16);
  all.forEach((w, i) => b.writeUInt16BE(parseInt(w, 16), i * 2));
  return b;
}

/** Every socket that could take a connection to host:port. */
function listenersOn(host: string, port: number): Listener[] {
  const target = ipBytes(host);
  const out: Listener[] = [];
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text: string;
    try {
      text = readFileSync(table, "ascii");
    } catch (e) {
      if (table.endsWith("6") && (e as NodeJS.ErrnoException).code === "ENOENT") continue; // IPv6 disabled
      throw e;
    }
    out.push(...parseListeners(text, target, port));
  }
  return out;
}

/** The process holding socket inode, as far as this user can see. */
function holder(inode: number): string {
  const want = `socket:[${inode}]`;
  let pids: string[] = [];
  try {
    pids = readdirSync("/proc").filter((d) => /^\d+$/.test(d));
  } catch {
    // no /proc to read
  }
  for (const pid of pids) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue; // gone, or not ours to read
    }
    for (const fd of fds) {
      let link = "";
      try {
        link = readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        continue;
      }
      if (link !== want) continue;
      let comm = "?";
      try {
        comm = readFileSync(`/proc/${pid}/comm`, "utf8").trim();
      } catch {
        // keep "?"
      }
      return `process ${pid} (${comm})`;
    }
  }
  return `a process this user cannot see (socket inode ${inode})`;
}

/** "name (uid N)" from /etc/passwd, or "uid N". */
function userName(uid: number): string {
  try {
    for (const line of readFileSync("/etc/passwd", "utf8").split("\n")) {
      const f = line.split(":");
      if (f.length > 2 && Number(f[2]) === uid && f[2] !== "") return `${f[0]} (uid ${uid})`;
    }
  } catch {
    // unknown name
  }
  return `uid ${uid}`;
}

/** The inodes of the sockets listening on host:port, all of which must
 * belong to uid: another user's is an APIError forbidden naming it; none
 * at all an ECONNREFUSED error. */
export function ownedListeners(host: string, port: number, uid: number): Set<number> {
  const ls = listenersOn(host, port);
  if (ls.length === 0) {
    throw Object.assign(new Error(`connect ECONNREFUSED ${host}:${port} (nothing listens there)`), { code: "ECONNREFUSED" });
  }
  for (const l of ls) {
    if (l.uid !== uid) {
      const addr = host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
      throw new APIError(
        "forbidden",
        403,
        `${addr} is held by ${holder(l.inode)} of user ${userName(l.uid)}, not by the local daemon ` +
          `of user ${userName(uid)}, who owns its admin key; refusing to send it the local admin key`,
      );
    }
  }
  return new Set(ls.map((l) => l.inode));
}

/** An HTTP agent whose every connection goes only to a socket of uid
 * listening on host:port, checked before connecting and again once
 * connected (the same socket: no other user's socket can listen on the port
 * beside it, so the connection reached it). */
export class CheckedAgent extends http.Agent {
  readonly #host: string;
  readonly #port: number;
  readonly #uid: number;

  constructor(opts: http.AgentOptions, host: string, port: number, uid: number) {
    super(opts);
    this.#host = host.replace(/^\[|\]$/g, "");
    this.#port = port;
    this.#uid = uid;
  }

  override createConnection(_opts: unknown, cb: (err: Error | null, sock?: Duplex) => void): Duplex {
    let before: Set<number>;
    try {
      before = ownedListeners(this.#host, this.#port, this.#uid);
    } catch (e) {
      process.nextTick(() => cb(e as Error));
      return undefined as unknown as Duplex;
    }
    const sock = net.connect({ host: this.#host, port: this.#port });
    const fail = (e: Error) => {
      sock.destroy();
      cb(e);
    };
    sock.once("error", fail);
    sock.once("connect", () => {
      sock.removeListener("error", fail);
      try {
        const after = ownedListeners(this.#host, this.#port, this.#uid);
        if (![...before].some((i) => after.has(i))) {
          throw new APIError(
            "forbidden",
            403,
            `the socket listening on ${this.#host}:${this.#port} changed while connecting; refusing to send it the local admin key`,
          );
        }
      } catch (e) {
        fail(e as Error);
        return;
      }
      cb(null, sock);
    });
    return undefined as unknown as Duplex;
  }
}
