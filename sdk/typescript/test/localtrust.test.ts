// Who receives the local daemon's admin key. While no daemon runs, any local
// user can listen on the default address; the key read from
// $XDG_DATA_HOME/withruntime/admin.key goes only to a listener of the key
// file's owner (the kernel's socket table says whose it is). Another user's
// listener gets no request with the key, and the error names its process
// and user. A key the caller set goes wherever the caller said.

import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { chownSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, before, describe, test } from "node:test";

import { APIError, Sandbox } from "../src/index.js";
import { ipBytes, localDaemon, parseListeners } from "../src/local.js";

const NOBODY = 65534;
const skip =
  process.platform !== "linux"
    ? "the listener check reads Linux's /proc/net/tcp"
    : process.getuid?.() !== 0
      ? "needs root: starts a listener as another user"
      : false;

// The listener: an HTTP server on a loopback port, run as another uid, that
// answers every request with 200 and prints each Authorization header.
const LISTENER = `
const http = require("node:http");
const srv = http.createServer((req, res) => {
  console.log("auth " + JSON.stringify(req.headers.authorization ?? ""));
  res.writeHead(200, { "Content-Type": "application/json" });
  res.end('{"status":"ok","sandboxes":[]}');
});
srv.listen(0, "127.0.0.1", () => console.log("listening " + srv.address().port));
`;

class ForeignListener {
  readonly auth: string[] = [];
  addr = "";
  private constructor(readonly child: ChildProcess) {}

  static async start(uid: number): Promise<ForeignListener> {
    const child = spawn(process.execPath, ["-e", LISTENER], { uid, gid: uid, cwd: "/", stdio: ["ignore", "pipe", "inherit"] });
    const l = new ForeignListener(child);
    const lines = createInterface({ input: child.stdout! });
    await new Promise<void>((resolve, reject) => {
      child.once("error", reject);
      child.once("exit", (c) => reject(new Error(`the listener exited (${c}) before listening`)));
      lines.on("line", (line) => {
        const [word, rest] = [line.slice(0, line.indexOf(" ")), line.slice(line.indexOf(" ") + 1)];
        if (word === "listening") {
          l.addr = `127.0.0.1:${rest}`;
          resolve();
        } else if (word === "auth") l.auth.push(JSON.parse(rest) as string);
      });
    });
    return l;
  }

  get url(): string {
    return `http://${this.addr}`;
  }

  async keyed(): Promise<string[]> {
    await new Promise((r) => setTimeout(r, 50));
    return this.auth.filter((a) => a !== "");
  }

  stop(): void {
    this.child.kill("SIGKILL");
  }
}

describe("the local admin key", { skip }, () => {
  const saved: Record<string, string | undefined> = {};
  const names = ["WITHRUNTIME_API_KEY", "WITHRUNTIME_BASE_URL", "XDG_DATA_HOME"];
  let data = "";
  let l: ForeignListener;

  before(async () => {
    for (const k of names) saved[k] = process.env[k];
    l = await ForeignListener.start(NOBODY);
  });
  after(() => {
    for (const k of names) {
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
    }
    localDaemon.baseUrl = "http://127.0.0.1:7878";
    l?.stop();
    if (data) rmSync(data, { recursive: true, force: true });
  });

  // The local daemon's address is the listener's; its key file is owned by keyOwner.
  function use(keyOwner: number, envKey?: string): void {
    data = mkdtempSync(join(tmpdir(), "withruntime-ts-local-"));
    mkdirSync(join(data, "withruntime"), { mode: 0o700 });
    const key = join(data, "withruntime", "admin.key");
    writeFileSync(key, "wr_local_admin\n", { mode: 0o600 });
    chownSync(key, keyOwner, keyOwner);
    process.env.XDG_DATA_HOME = data;
    delete process.env.WITHRUNTIME_BASE_URL;
    if (envKey) process.env.WITHRUNTIME_API_KEY = envKey;
    else delete process.env.WITHRUNTIME_API_KEY;
    localDaemon.baseUrl = l.url;
    l.auth.length = 0;
  }

  test("another user's listener gets no key, and the error names it", async () => {
    use(0);
    await assert.rejects(Sandbox.list(), (e: unknown) => {
      assert.ok(e instanceof APIError, `got ${String(e)}, want an APIError`);
      assert.equal(e.code, "forbidden");
      for (const want of [
        `${l.addr} is held by process ${l.child.pid} (node)`,
        "of user nobody (uid 65534)",
        "not by the local daemon of user root (uid 0)",
        "refusing to send it the local admin key",
      ]) {
        assert.ok(e.message.includes(want), `got ${JSON.stringify(e.message)}, want it to contain ${JSON.stringify(want)}`);
      }
      return true;
    });
    assert.deepEqual(await l.keyed(), []);
  });

  test("the key owner's listener gets the key", async () => {
    use(NOBODY);
    assert.deepEqual(await Sandbox.list(), []);
    assert.deepEqual(await l.keyed(), ["Bearer wr_local_admin"]);
  });

  test("a key the user set goes where the user said", async () => {
    use(0, "wr_env");
    assert.deepEqual(await Sandbox.list(), []);
    assert.deepEqual(await l.keyed(), ["Bearer wr_env"]);
  });
});

describe("the kernel's socket table", { skip: process.platform === "linux" ? false : "Linux's format" }, () => {
  const tcp = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1ECE 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 101 1
   1: 00000000:1ECE 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 102 1
   2: 0200007F:1ECE 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1001        0 103 1
   3: 0100007F:1ECF 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1002        0 104 1
   4: 0100007F:1ECE 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000  1003        0 105 1
`;
  const tcp6 = `  sl  local_address                         remote_address                        st tx rx tr tm retr  uid  timeout inode
   0: 00000000000000000000000000000000:1ECE 00000000000000000000000000000000:0000 0A 0:0 0:0 0  2000        0 201 1
   1: 0000000000000000FFFF00000100007F:1ECE 00000000000000000000000000000000:0000 0A 0:0 0:0 0  2001        0 202 1
   2: 00000000000000000000000001000000:1ECE 00000000000000000000000000000000:0000 0A 0:0 0:0 0  2002        0 203 1
`;
  const cases: Array<[string, string, string, Array<{ uid: number; inode: number }>]> = [
    ["IPv4: the address and 0.0.0.0 only", tcp, "127.0.0.1", [{ uid: 0, inode: 101 }, { uid: 1000, inode: 102 }]],
    ["IPv4 in tcp6: :: and the mapped address", tcp6, "127.0.0.1", [{ uid: 2000, inode: 201 }, { uid: 2001, inode: 202 }]],
    ["IPv6: :: and ::1", tcp6, "::1", [{ uid: 2000, inode: 201 }, { uid: 2002, inode: 203 }]],
    ["IPv6 in tcp: none", tcp, "::1", []],
  ];
  for (const [name, table, ip, want] of cases) {
    test(name, () => {
      assert.deepEqual(parseListeners(table, ipBytes(ip), 0x1ece), want);
    });
  }
});
