// A real `withruntime serve` with --e2b-listen for the test run: a fresh
// data dir, two free loopback ports, no warm pool. The CLI is
// WITHRUNTIME_CLI, or built from the repository's source into the data dir.

import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.on("error", rej);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
}

function cliPath(scratch) {
  if (process.env.WITHRUNTIME_CLI) return process.env.WITHRUNTIME_CLI;
  const out = join(scratch, "withruntime");
  execFileSync("go", ["build", "-o", out, "./cmd/withruntime"], { cwd: repoRoot, stdio: "inherit" });
  return out;
}

async function answers(url) {
  try {
    await fetch(url);
    return true; // any HTTP answer: it listens
  } catch {
    return false;
  }
}

/** Starts the server; resolves to its addresses, admin key and stop(). */
export async function startServer() {
  const dataDir = mkdtempSync(join(tmpdir(), "withruntime-e2bjs-"));
  const bin = cliPath(dataDir);
  const [port, e2bPort] = [await freePort(), await freePort()];
  const baseUrl = `http://127.0.0.1:${port}`;
  const e2bUrl = `http://127.0.0.1:${e2bPort}`;
  const log = openSync(join(dataDir, "server.log"), "a");
  const proc = spawn(
    bin,
    ["serve", "--listen", `127.0.0.1:${port}`, "--e2b-listen", `127.0.0.1:${e2bPort}`,
      "--data-dir", join(dataDir, "data"), "--pool", "none"],
    { stdio: ["ignore", log, log] },
  );
  let exited = false;
  proc.on("exit", () => (exited = true));
  const stop = async () => {
    if (!exited) {
      const gone = new Promise((r) => proc.once("exit", r));
      proc.kill("SIGTERM");
      const t = setTimeout(() => proc.kill("SIGKILL"), 20_000);
      await gone;
      clearTimeout(t);
    }
    rmSync(dataDir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline && !exited) {
    const r = await fetch(`${baseUrl}/v1/health`).catch(() => null);
    if (r?.ok && (await answers(e2bUrl))) {
      const apiKey = readFileSync(join(dataDir, "data", "admin.key"), "utf8").trim();
      return { baseUrl, e2bUrl, apiKey, dataDir, stop };
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const text = readFileSync(join(dataDir, "server.log"), "utf8").slice(-2000);
  await stop();
  throw new Error(`the server did not start: ${text}`);
}
