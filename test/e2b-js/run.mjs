// `npm test`: one real server for the whole run, the E2B variables pointed
// at its --e2b-listen address, then node's test runner over test/*.test.mjs
// (one file at a time), the server stopped at the end whatever happened.

import { spawn } from "node:child_process";
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { startServer } from "./server.mjs";

const dir = join(dirname(fileURLToPath(import.meta.url)), "test");
const only = process.argv.slice(2);
const files = readdirSync(dir)
  .filter((f) => f.endsWith(".test.mjs"))
  .filter((f) => !only.length || only.some((o) => f.startsWith(o)))
  .map((f) => join(dir, f));

const srv = await startServer();
let code = 1;
try {
  code = await new Promise((res) => {
    const child = spawn(process.execPath, ["--test", "--test-concurrency=1", ...files], {
      stdio: "inherit",
      env: {
        ...process.env,
        // What a user sets (README, "Coming from E2B"): nothing else.
        E2B_API_URL: srv.e2bUrl,
        E2B_SANDBOX_URL: srv.e2bUrl,
        E2B_API_KEY: srv.apiKey,
        // For the tests' own checks through withruntime's API.
        WITHRUNTIME_BASE_URL: srv.baseUrl,
        WITHRUNTIME_API_KEY: srv.apiKey,
      },
    });
    child.on("exit", (c, sig) => res(c ?? (sig ? 1 : 0)));
  });
} finally {
  await srv.stop();
}
process.exit(code);
