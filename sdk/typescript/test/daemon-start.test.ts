// The SDK starts the local daemon when nothing answers on the default
// address. The daemon exits by itself when idle; a program with nothing
// configured then found "connection refused". Now the SDK runs `withruntime
// daemon start` (the CLI named by WITHRUNTIME_BINARY, else the package's,
// else on PATH) and goes on, as the CLI does. A base URL given by option or
// WITHRUNTIME_BASE_URL never starts anything.
//
// These tests use the default address itself, 127.0.0.1:7878, in programs
// run with a private HOME (so a fresh data dir). Something already
// listening there is not touched: the test skips, and under CI (where the
// address must be free) it fails, naming what holds it.

import assert from "node:assert/strict";
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from "node:fs";
import * as net from "node:net";
import { join, resolve } from "node:path";
import { test } from "node:test";

import { APIError, Sandbox, TransportError } from "../src/index.js";
import { startDaemon } from "../src/local.js";
import { tempDir } from "./helpers.js";
import { cliPath } from "./server.js";

const SDK = new URL("../src/index.js", import.meta.url).href;

/** Whether something listens on 127.0.0.1:7878. */
function listening(): Promise<boolean> {
  return new Promise((res) => {
    const s = net.connect({ host: "127.0.0.1", port: 7878 });
    s.setTimeout(1000, () => {
      s.destroy();
      res(false);
    });
    s.once("connect", () => {
      s.destroy();
      res(true);
    });
    s.once("error", () => res(false));
  });
}

/** Skips (or, under CI, fails) when something listens on the default address. */
async function requireFreeDefaultAddress(t: { skip(msg: string): void }): Promise<boolean> {
  if (!(await listening())) return true;
  const why = "something already listens on 127.0.0.1:7878 (another daemon?): not touching it";
  if (process.env.CI) assert.fail(`CI must have 127.0.0.1:7878 free for the daemon tests, but ${why}`);
  t.skip(why);
  return false;
}

/** The environment of a user with nothing configured: a private HOME, no
 * XDG directories, no server or key, no CLI named. */
function userEnv(home: string, path: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k.startsWith("WITHRUNTIME_") || ["XDG_DATA_HOME", "XDG_CONFIG_HOME", "HOME", "PATH"].includes(k)) continue;
    env[k] = v;
  }
  return { ...env, HOME: home, PATH: path };
}

/** Runs code (an ES module importing the SDK as `Sandbox`) in a node process. */
function runSdk(code: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; out: string; err: string }> {
  const src = `import { Sandbox, TransportError } from ${JSON.stringify(SDK)};\n${code}`;
  const child: ChildProcess = spawn(process.execPath, ["--input-type=module", "-e", src], { env });
  let out = "";
  let err = "";
  child.stdout!.on("data", (b: Buffer) => (out += b.toString()));
  child.stderr!.on("data", (b: Buffer) => (err += b.toString()));
  return new Promise((res) => child.on("close", (c) => res({ code: c, out, err })));
}

/** A fake `withruntime` in dir/where that records its arguments, then runs script. */
function fakeCli(dir: string, script: string, where = "bin"): { marker: string; cli: string } {
  const marker = join(dir, `${where}-args`);
  mkdirSync(join(dir, where));
  const cli = join(dir, where, "withruntime");
  writeFileSync(cli, `#!/bin/sh\necho "$@" >> ${marker}\n${script}\n`);
  chmodSync(cli, 0o755);
  return { marker, cli };
}

test("nothing answers: the SDK runs `withruntime daemon start` from PATH", async (t) => {
  if (!(await requireFreeDefaultAddress(t))) return;
  const dir = tempDir();
  const { marker, cli } = fakeCli(dir, 'echo "error: unavailable: the fake daemon fails" >&2; exit 1');
  const env = userEnv(join(dir, "home"), `${resolve(cli, "..")}:/usr/bin:/bin`);
  const r = await runSdk(
    "try { await Sandbox.list(); console.log('listed'); } catch (e) { console.log(e instanceof TransportError, e.message); }",
    env,
  );
  assert.equal(r.code, 0, r.err);
  assert.equal(readFileSync(marker, "utf8"), "daemon start\n", "the SDK did not run `withruntime daemon start`");
  for (const want of ["true", "connection refused", "daemon start", "the fake daemon fails"]) {
    assert.ok(r.out.includes(want), `got ${JSON.stringify(r.out)}, want it to contain ${JSON.stringify(want)}`);
  }
});

test("a base URL never starts the daemon", async () => {
  const dir = tempDir();
  const { marker, cli } = fakeCli(dir, "exit 1");
  const free = await new Promise<number>((res) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => res(port));
    });
  });
  const closed = `http://127.0.0.1:${free}`;
  const base = userEnv(join(dir, "home"), "/usr/bin:/bin");
  for (const [how, env, code] of [
    ["option", { ...base, WITHRUNTIME_BINARY: cli }, `await Sandbox.list({ baseUrl: ${JSON.stringify(closed)} })`],
    ["environment", { ...base, WITHRUNTIME_BINARY: cli, WITHRUNTIME_BASE_URL: closed }, "await Sandbox.list()"],
  ] as const) {
    const r = await runSdk(`try { ${code}; console.log("listed"); } catch (e) { console.log(e instanceof TransportError); }`, env);
    assert.equal(r.out.trim(), "true", `${how}: ${r.out} ${r.err}`);
  }
  assert.ok(!existsSync(marker), `ran the CLI although a base URL was given: ${existsSync(marker) ? readFileSync(marker, "utf8") : ""}`);
});

test("no CLI, or a failing one: errors that say what to do", async () => {
  const dir = tempDir();
  const saved = { PATH: process.env.PATH, WITHRUNTIME_BINARY: process.env.WITHRUNTIME_BINARY };
  try {
    process.env.PATH = dir; // no withruntime there
    delete process.env.WITHRUNTIME_BINARY;
    await assert.rejects(startDaemon(), (e: unknown) => {
      assert.ok(e instanceof TransportError, String(e));
      for (const want of ["no withruntime CLI on PATH", "WITHRUNTIME_BINARY", "withruntime daemon start"]) {
        assert.ok(e.message.includes(want), `got ${e.message}, want ${want}`);
      }
      return true;
    });
    process.env.WITHRUNTIME_BINARY = fakeCli(dir, 'echo "error: unavailable: nothing here" >&2; exit 1').cli;
    await assert.rejects(startDaemon(), (e: unknown) => e instanceof TransportError && e.message.includes("nothing here"));
    process.env.WITHRUNTIME_BINARY = fakeCli(
      dir,
      'echo "error: forbidden: 127.0.0.1:7878 is held by process 1 (x)" >&2; exit 1',
      "bin2",
    ).cli;
    await assert.rejects(
      startDaemon(),
      (e: unknown) => e instanceof APIError && e.code === "forbidden" && e.message.includes("is held by process 1"),
    );
  } finally {
    process.env.PATH = saved.PATH;
    if (saved.WITHRUNTIME_BINARY === undefined) delete process.env.WITHRUNTIME_BINARY;
    else process.env.WITHRUNTIME_BINARY = saved.WITHRUNTIME_BINARY;
  }
});

/** The pids of the "serve" processes on dataDir. */
function servePids(dataDir: string): number[] {
  const pids: number[] = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    let args: string[];
    try {
      args = readFileSync(`/proc/${d}/cmdline`, "utf8").split("\0");
    } catch {
      continue;
    }
    const i = args.indexOf("--data-dir");
    if (args[1] === "serve" && i > 0 && args[i + 1] === dataDir) pids.push(Number(d));
  }
  return pids;
}

test(
  "two programs with nothing configured start one daemon and work; daemon stop stops it",
  { skip: process.platform !== "linux" || process.getuid?.() !== 0 ? "the local daemon runs sandboxes: needs root on Linux" : false },
  async (t) => {
    if (!(await requireFreeDefaultAddress(t))) return;
    const dir = tempDir();
    const bindir = join(dir, "bin");
    mkdirSync(bindir);
    symlinkSync(resolve(cliPath(dir)), join(bindir, "withruntime"));
    const home = join(dir, "home");
    mkdirSync(home);
    const env = userEnv(home, `${bindir}:${process.env.PATH ?? "/usr/bin:/bin"}`);
    const dataDir = join(home, ".local", "share", "withruntime");
    const cli = (...args: string[]) => execFileSync(join(bindir, "withruntime"), args, { env, encoding: "utf8", stdio: "pipe" });
    try {
      const [created, listed] = await Promise.all([
        runSdk(
          `const sbx = await Sandbox.create({ vcpus: 1, memoryMib: 1024, metadata: { test: "sdk-ts-daemon-start" } });
           try { console.log((await sbx.exec("echo $((6 * 7))")).stdout.trim()); } finally { await sbx.stop(); }`,
          env,
        ),
        // Two requests of one program at once share one start.
        runSdk("console.log((await Promise.all([Sandbox.list(), Sandbox.list()])).length);", env),
      ]);
      assert.equal(created.code, 0, `create: ${created.out} ${created.err}`);
      assert.equal(created.out.trim(), "42");
      assert.equal(listed.code, 0, `list: ${listed.out} ${listed.err}`);
      const pids = servePids(dataDir);
      assert.equal(pids.length, 1, `serve processes on ${dataDir}: ${pids.join(", ")}, want one`);
      assert.match(cli("daemon", "status"), /^running\n/);
      // A program run later finds it running and starts nothing more.
      const again = await runSdk("console.log((await Sandbox.list()).length);", env);
      assert.equal(again.code, 0, again.err);
      assert.deepEqual(servePids(dataDir), pids);
    } finally {
      try {
        cli("daemon", "stop");
      } catch (e) {
        const log = join(dataDir, "daemon.log");
        assert.fail(`daemon stop: ${String(e)}; daemon.log: ${existsSync(log) ? readFileSync(log, "utf8").slice(-3000) : "(none)"}`);
      }
    }
    for (let i = 0; i < 100 && (await listening()); i++) await new Promise((r) => setTimeout(r, 100));
    assert.ok(!(await listening()), "something still listens on 127.0.0.1:7878 after daemon stop");
  },
);

