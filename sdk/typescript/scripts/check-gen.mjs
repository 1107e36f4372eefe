// Fails when src/generated/openapi.ts is not what `npm run gen` makes from
// api/openapi.yaml now: the wire types have one source, the OpenAPI file;
// and when src/generated/tools.ts is not what it makes from api/tools.json
// (the agent tools' descriptions, see gen-tools.mjs).
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
// The file to check may be named (the check's own test does so).
const committed = process.argv[2] ?? join(root, "src", "generated", "openapi.ts");
const dir = mkdtempSync(join(tmpdir(), "withruntime-gen-"));
try {
  const fresh = join(dir, "openapi.ts");
  const bin = join(root, "node_modules", "openapi-typescript", "bin", "cli.js");
  execFileSync(process.execPath, [bin, join(root, "..", "..", "api", "openapi.yaml"), "-o", fresh], {
    stdio: ["ignore", "ignore", "inherit"],
  });
  if (readFileSync(fresh, "utf8") !== readFileSync(committed, "utf8")) {
    console.error("src/generated/openapi.ts is stale: run `npm run gen` in sdk/typescript and commit it");
    process.exit(1);
  }
  console.log("src/generated/openapi.ts matches api/openapi.yaml");
} finally {
  rmSync(dir, { recursive: true, force: true });
}
const tools = spawnSync(process.execPath, [join(root, "scripts", "gen-tools.mjs"), "--check"], {
  stdio: ["ignore", "inherit", "inherit"],
});
if (tools.status !== 0) process.exit(1);
