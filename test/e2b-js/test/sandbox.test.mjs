// E2B's JavaScript SDK (e2b, pinned, unmodified) over withruntime's E2B
// API: create, commands, files and kill.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { CommandExitError, Sandbox } from "e2b";

import { withruntimeSandbox } from "./helpers.mjs";

let sbx;

before(async () => {
  sbx = await Sandbox.create({ timeoutMs: 600_000, metadata: { test: "e2b-js" }, envs: { GREETING: "hello" } });
});

after(async () => {
  if (sbx) await sbx.kill();
});

test("Sandbox.create is a withruntime sandbox with the metadata", async () => {
  const info = await withruntimeSandbox(sbx.sandboxId);
  assert.equal(info.state, "running");
  assert.equal(info.metadata.test, "e2b-js");
});

test("commands.run streams output, with the sandbox's envs, as user", async () => {
  const out = [];
  const err = [];
  const r = await sbx.commands.run("echo $GREETING; id -un; echo oops >&2", {
    onStdout: (d) => out.push(d),
    onStderr: (d) => err.push(d),
  });
  assert.equal(r.exitCode, 0);
  assert.equal(r.stdout, "hello\nuser\n");
  assert.equal(r.stderr, "oops\n");
  assert.equal(out.join(""), "hello\nuser\n");
  assert.equal(err.join(""), "oops\n");
});

test("a non-zero exit is a CommandExitError with the output", async () => {
  await assert.rejects(sbx.commands.run("echo partial; echo bad >&2; exit 3"), (e) => {
    assert.ok(e instanceof CommandExitError, String(e));
    assert.equal(e.exitCode, 3);
    assert.equal(e.stdout, "partial\n");
    assert.equal(e.stderr, "bad\n");
    return true;
  });
});

test("files: write, read, list", async () => {
  await sbx.files.write("/home/user/e2b-js/a.txt", "hello file");
  assert.equal(await sbx.files.read("/home/user/e2b-js/a.txt"), "hello file");
  const names = (await sbx.files.list("/home/user/e2b-js")).map((e) => e.name);
  assert.deepEqual(names, ["a.txt"]);
  // What the files API wrote, a command sees.
  assert.equal((await sbx.commands.run("cat /home/user/e2b-js/a.txt")).stdout, "hello file");
});

test("kill ends the sandbox", async () => {
  const s = await Sandbox.create({ timeoutMs: 300_000 });
  await s.kill();
  assert.equal((await withruntimeSandbox(s.sandboxId)).state, "ended");
  assert.equal(await s.isRunning(), false);
});
