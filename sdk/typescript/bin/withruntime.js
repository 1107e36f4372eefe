#!/usr/bin/env node
// The `withruntime` command of the npm package: it runs the Go CLI that npm
// installed as this platform's optional dependency (@withruntime/cli-<os>-<cpu>),
// with the same arguments, standard streams and exit status. There is no
// install script and no download: npm picks the platform package by its
// "os" and "cpu" fields. WITHRUNTIME_BINARY names another binary instead
// (for tests and development).

import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { constants } from "node:os";
import { basename, delimiter, dirname, join } from "node:path";

const require = createRequire(import.meta.url);
const { version } = require("../package.json");

// The platforms with a prebuilt CLI, as process.platform-process.arch.
const PLATFORMS = ["linux-x64", "linux-arm64", "darwin-x64", "darwin-arm64", "win32-x64"];

function fail(message) {
  process.stderr.write(`withruntime: ${message}\n`);
  process.exit(1);
}

// besidePath looks for pkg, at this package's version, in the node_modules
// folders whose .bin is on PATH. npx --package=SDK --package=CLI, run in a
// project that has the SDK installed already, fetches only the CLI package
// into its cache and runs this launcher from the project, which cannot
// resolve it; npx puts the cache's node_modules/.bin on PATH.
function besidePath(pkg) {
  for (const entry of (process.env.PATH || "").split(delimiter)) {
    if (basename(entry) !== ".bin" || basename(dirname(entry)) !== "node_modules") {
      continue;
    }
    try {
      const manifest = createRequire(join(dirname(dirname(entry)), "_.js")).resolve(`${pkg}/package.json`);
      if (require(manifest).version === version) {
        return dirname(manifest);
      }
    } catch {
      // not there
    }
  }
  return undefined;
}

function binaryPath() {
  if (process.env.WITHRUNTIME_BINARY) {
    return process.env.WITHRUNTIME_BINARY;
  }
  const platform = `${process.platform}-${process.arch}`;
  if (!PLATFORMS.includes(platform)) {
    fail(
      `there is no prebuilt withruntime CLI for ${platform} (there is for ${PLATFORMS.join(", ")}); ` +
        "build it from source (go build ./cmd/withruntime) and name it in WITHRUNTIME_BINARY",
    );
  }
  const pkg = `@withruntime/cli-${platform}`;
  let dir;
  try {
    dir = dirname(require.resolve(`${pkg}/package.json`));
  } catch {
    dir = besidePath(pkg);
  }
  if (!dir) {
    // The platform packages are served by the user's withruntime server
    // (GET /sdk/npm/), not by the registry, where they are not published.
    const base = (process.env.WITHRUNTIME_BASE_URL || "http://HOST:7878").replace(/\/+$/, "");
    fail(
      `the package ${pkg} (version ${version}), which holds the CLI for this platform, is not installed. ` +
        "Install it from your withruntime server beside this package: " +
        `npm install ${base}/sdk/npm/withruntime-cli-${platform}.tgz ` +
        "(withruntime sdk typescript --npx prints the npx command that fetches both; " +
        "npm also leaves it out with --omit=optional)",
    );
  }
  return join(dir, "bin", process.platform === "win32" ? "withruntime.exe" : "withruntime");
}

const binary = binaryPath();
const interactive = Boolean(process.stdin.isTTY);
const posix = process.platform !== "win32";

// A terminal's Ctrl-C reaches every process of its foreground group, and
// npm also forwards SIGINT and SIGTERM to this process: the CLI takes the
// first stop signal to clean up (sandbox run stops its sandbox) and a second
// to exit at once, so it must get each signal once. When standard input is
// not a terminal the CLI runs in its own process group and gets signals only
// from here; when it is, the CLI stays in the terminal's group (to read it),
// so the terminal's SIGINT reaches it directly and is not forwarded.
const ownGroup = posix && !interactive;

// Copies of one signal that arrive together (the terminal's and npm's) are
// forwarded once; a second Ctrl-C a moment later is forwarded.
const COALESCE_MS = 300;
const lastForwarded = {};
function forward(signal) {
  if (!posix || (signal === "SIGINT" && !ownGroup)) {
    return; // kept alive only, to report the CLI's exit status
  }
  const now = Date.now();
  if (now - (lastForwarded[signal] ?? -Infinity) < COALESCE_MS) {
    return;
  }
  lastForwarded[signal] = now;
  try {
    child.kill(signal);
  } catch {
    // it has exited already: its exit handler reports it
  }
}
const forwarded = ["SIGINT", "SIGTERM"];
if (ownGroup) {
  forwarded.push("SIGHUP"); // a closed terminal no longer reaches its group
}
for (const signal of forwarded) {
  process.on(signal, forward);
}
// The handlers come first: a signal sent as soon as the CLI runs (by a
// supervisor that saw its first output) must find them, not end this
// process and leave the CLI orphaned. They run from the event loop, so
// `child` is set by then.
const child = spawn(binary, process.argv.slice(2), { stdio: "inherit", detached: ownGroup });

child.on("error", (err) => {
  fail(`cannot run ${binary}: ${err.message}`);
});

child.on("exit", (code, signal) => {
  if (signal === null) {
    process.exit(code ?? 1);
  }
  // Die of the same signal, so that a parent sees what the CLI saw; where a
  // signal cannot end this process, exit as a shell reports it.
  for (const s of forwarded) {
    process.removeAllListeners(s);
  }
  const n = constants.signals[signal] ?? 0;
  try {
    process.kill(process.pid, signal);
  } catch {
    // fall through to the exit status
  }
  setTimeout(() => process.exit(128 + n), 100);
});
