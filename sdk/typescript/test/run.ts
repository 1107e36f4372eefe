// `npm test`: one real server for the whole run, shared by every test file
// (the files run one at a time; each learns the server from the
// environment), stopped at the end whatever happened.

import { spawn } from "node:child_process";
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { startServer } from "./server.js";

const here = dirname(fileURLToPath(import.meta.url));
const only = process.argv.slice(2);
const files = readdirSync(here)
  .filter((f) => f.endsWith(".test.js"))
  .filter((f) => !only.length || only.some((o) => f.startsWith(o)))
  .map((f) => join(here, f));

const srv = await startServer();
let code = 1;
try {
  code = await new Promise<number>((res) => {
    const child = spawn(process.execPath, ["--test", "--test-concurrency=1", ...files], {
      stdio: "inherit",
      env: { ...process.env, WITHRUNTIME_BASE_URL: srv.baseUrl, WITHRUNTIME_API_KEY: srv.apiKey },
    });
    child.on("exit", (c, sig) => res(c ?? (sig ? 1 : 0)));
  });
} finally {
  await srv.stop();
}
process.exit(code);
