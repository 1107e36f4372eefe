// A real `withruntime serve` for the test run: a fresh data dir, a free
// loopback port, no warm pool. The Go CLI is WITHRUNTIME_CLI, or built from
// the repository's source into a temp dir.

import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export interface TestServer {
  baseUrl: string;
  apiKey: string;
  dataDir: string;
  stop(): Promise<void>;
}

const here = dirname(fileURLToPath(import.meta.url));
// dist-test/test -> sdk/typescript -> the repository
export const packageRoot = resolve(here, "..", "..");
const repoRoot = resolve(packageRoot, "..", "..");

function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.on("error", rej);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => res(port));
    });
  });
}

/** The withruntime CLI binary to serve with (built once if not given). */
export function cliPath(scratch: string): string {
  if (process.env.WITHRUNTIME_CLI) return process.env.WITHRUNTIME_CLI;
  const out = join(scratch, "withruntime");
  execFileSync("go", ["build", "-o", out, "./cmd/withruntime"], { cwd: repoRoot, stdio: "inherit" });
  return out;
}

export async function startServer(): Promise<TestServer> {
  const dataDir = mkdtempSync(join(tmpdir(), "withruntime-nodetest-"));
  const bin = cliPath(dataDir);
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const log = openSync(join(dataDir, "server.log"), "a");
  const proc: ChildProcess = spawn(
    bin,
    ["serve", "--listen", `127.0.0.1:${port}`, "--data-dir", join(dataDir, "data"), "--pool", "none"],
    { stdio: ["ignore", log, log] },
  );
  let exited = false;
  proc.on("exit", () => (exited = true));
  const stop = async (): Promise<void> => {
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
    try {
      const r = await fetch(`${baseUrl}/v1/health`);
      if (r.ok) {
        const apiKey = readFileSync(join(dataDir, "data", "admin.key"), "utf8").trim();
        return { baseUrl, apiKey, dataDir, stop };
      }
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const text = readFileSync(join(dataDir, "server.log"), "utf8").slice(-2000);
  await stop();
  throw new Error(`the server did not start: ${text}`);
}
