/**
 * The local daemon's admin key. The CLI starts the local daemon (`withruntime
 * serve` in the background) on the default address when nothing answers
 * there; it keeps its admin key in $XDG_DATA_HOME/withruntime/admin.key
 * (mode 0600, so only its owner reads it). A client of the default address
 * with no key set uses that key when it can read it, so that after any CLI
 * command `Sandbox.create()` works with nothing configured.
 */

import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { isAbsolute, join } from "node:path";

export const DEFAULT_BASE_URL = "http://127.0.0.1:7878";

/** What to do when no server answers, for the error that says so. */
export const START_HINT =
  "no server answers; start one with `withruntime serve`, or run any CLI command " +
  "such as `withruntime sandbox ls` (it starts the local daemon)";

/** $XDG_DATA_HOME/withruntime (a relative XDG_DATA_HOME is ignored, as the XDG spec says). */
export function dataDir(): string {
  let base = process.env.XDG_DATA_HOME ?? "";
  if (!isAbsolute(base)) base = join(homedir(), ".local", "share");
  return join(base, "withruntime");
}

/** The local daemon's admin key when baseUrl is the default address and the
 * key file is readable; undefined otherwise. */
export function localKey(baseUrl: string): string | undefined {
  if (baseUrl.replace(/\/+$/, "") !== DEFAULT_BASE_URL) return undefined;
  try {
    return readFileSync(join(dataDir(), "admin.key"), "utf8").trim() || undefined;
  } catch {
    return undefined;
  }
}
