// What the test files share: the live server (from the environment `npm
// test` sets), small sandboxes, temp dirs.

import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { type CreateOptions, Sandbox } from "../src/index.js";

if (!process.env.WITHRUNTIME_BASE_URL || !process.env.WITHRUNTIME_API_KEY) {
  throw new Error("run the tests with `npm test` (it starts the server and sets WITHRUNTIME_BASE_URL/WITHRUNTIME_API_KEY)");
}

/** A small sandbox, for tests that do not need the default size. */
export const SMALL: CreateOptions = { vcpus: 1, memoryMib: 1024, timeoutSeconds: 600 };

export function small(extra: CreateOptions = {}): Promise<Sandbox> {
  return Sandbox.create({ ...SMALL, ...extra });
}

export function tempDir(prefix = "withruntime-ts-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}
