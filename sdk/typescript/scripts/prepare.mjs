// The package's prepare script: builds dist/ (tsc) when the package is
// installed from a checkout. npm runs prepare there (npm install
// ./sdk/typescript, npm ci in this folder), but for a folder it links into
// another project it does not install this package's dev dependencies,
// which tsc and the adapters' types come from: this installs them first,
// from the lock file. A tarball (npm pack, the server's /sdk/npm/) ships
// dist/ and runs no prepare.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const dir = dirname(dirname(fileURLToPath(import.meta.url)));
const tsc = join(dir, "node_modules", "typescript", "bin", "tsc");
const run = (cmd, args) => execFileSync(cmd, args, { cwd: dir, stdio: ["ignore", "inherit", "inherit"] });

if (!existsSync(tsc)) {
  // npm_execpath is the npm running this script; --ignore-scripts keeps
  // this install from running prepare again.
  const npm = process.env.npm_execpath;
  const args = ["ci", "--ignore-scripts", "--include=dev", "--no-audit", "--no-fund", "--loglevel=error"];
  if (npm && npm.endsWith(".js")) {
    run(process.execPath, [npm, ...args]);
  } else {
    run(process.platform === "win32" ? "npm.cmd" : "npm", args);
  }
}
run(process.execPath, [tsc, "-p", "tsconfig.json"]);
