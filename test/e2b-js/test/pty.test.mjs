// E2B's JavaScript SDK (e2b, pinned, unmodified) over withruntime's E2B
// API: sandbox.pty.create with a size and onData, sendInput, resize, the
// exit code, kill; and getHost's name reaching a server in the sandbox.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { CommandExitError, Sandbox } from "e2b";

let sbx;

before(async () => {
  sbx = await Sandbox.create({ timeoutMs: 300_000, metadata: { test: "e2b-js-pty" } });
});

after(async () => {
  if (sbx) await sbx.kill();
});

/** Waits until check() is true (at most 20 s). */
async function until(check, what) {
  const deadline = Date.now() + 20_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

test("a terminal: size, input, resize, exit code", async () => {
  let out = "";
  const dec = new TextDecoder();
  const h = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => (out += dec.decode(d)) });
  await sbx.pty.sendInput(h.pid, new TextEncoder().encode("stty size\n"));
  await until(() => out.includes("24 80"), "24 80");
  await sbx.pty.resize(h.pid, { cols: 120, rows: 40 });
  await sbx.pty.sendInput(h.pid, new TextEncoder().encode("stty size; exit 3\n"));
  await assert.rejects(h.wait(), (e) => e instanceof CommandExitError && e.exitCode === 3);
  assert.match(out, /40 120/);
});

test("a terminal killed", async () => {
  const h = await sbx.pty.create({ cols: 80, rows: 24, onData: () => {} });
  await sbx.pty.sendInput(h.pid, new TextEncoder().encode("sleep 600\n"));
  assert.equal(await sbx.pty.kill(h.pid), true);
  await assert.rejects(h.wait());
  assert.equal(await sbx.pty.kill(h.pid), false);
});
