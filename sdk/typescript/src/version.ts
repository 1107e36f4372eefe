/** The SDK's version: package.json's (the package's versions move together). */

import { readFileSync } from "node:fs";

function read(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version?: string };
    return pkg.version ?? "0.0.0";
  } catch {
    return "0.0.0";
  }
}

export const VERSION: string = read();
