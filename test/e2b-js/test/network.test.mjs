// E2B's JavaScript SDK (e2b, pinned, unmodified): the egress options as
// E2B documents them, mapped onto withruntime's policy and read back
// through withruntime's own API: allowOut with addresses, CIDR prefixes
// and names under denyOut ALL_TRAFFIC (allow beats deny), updateNetwork
// replacing a live sandbox's policy (fields left out cleared), a partial
// denyOut refused by name; setTimeout(0) expiring a sandbox at once; and
// lifecycle autoResume waking a paused sandbox on its next call.

import assert from "node:assert/strict";
import { test } from "node:test";

import { ALL_TRAFFIC, Sandbox } from "e2b";

import { withruntimeSandbox } from "./helpers.mjs";

test("allowOut addresses, prefixes and names under denyOut ALL_TRAFFIC; updateNetwork replaces the policy", async () => {
  const sbx = await Sandbox.create({
    timeoutMs: 120_000,
    network: { allowOut: ["1.1.1.1", "8.8.8.0/24", "example.org"], denyOut: [ALL_TRAFFIC] },
  });
  try {
    let net = (await withruntimeSandbox(sbx.sandboxId)).network;
    assert.deepEqual(net, { internet: true, allow: ["1.1.1.1", "8.8.8.0/24", "example.org"] });
    await sbx.updateNetwork({ denyOut: [ALL_TRAFFIC] });
    net = (await withruntimeSandbox(sbx.sandboxId)).network;
    assert.equal(net.internet, false);
    await sbx.updateNetwork({});
    net = (await withruntimeSandbox(sbx.sandboxId)).network;
    assert.deepEqual(net, { internet: true });
    await assert.rejects(sbx.updateNetwork({ denyOut: ["8.8.8.8"] }), (e) => /400/.test(e.message) && /denyOut/.test(e.message));
    assert.deepEqual((await withruntimeSandbox(sbx.sandboxId)).network, { internet: true }, "a refused update changed the policy");
  } finally {
    await sbx.kill();
  }
});

test("setTimeout(0) expires the sandbox now: a pause under onTimeout pause, else the end", async () => {
  const paused = await Sandbox.create({ timeoutMs: 300_000, lifecycle: { onTimeout: "pause" } });
  try {
    await paused.setTimeout(0);
    assert.equal((await withruntimeSandbox(paused.sandboxId)).state, "paused");
    assert.equal(await paused.isRunning(), false);
  } finally {
    await paused.kill();
  }
  const ended = await Sandbox.create({ timeoutMs: 300_000 });
  await ended.setTimeout(0);
  assert.equal((await withruntimeSandbox(ended.sandboxId)).state, "ended");
});

test("lifecycle autoResume: a paused sandbox wakes on its next command and file read", async () => {
  const sbx = await Sandbox.create({ timeoutMs: 120_000, lifecycle: { onTimeout: "pause", autoResume: true } });
  try {
    const ours = await withruntimeSandbox(sbx.sandboxId);
    assert.equal(ours.on_lease_end, "pause");
    assert.equal(ours.auto_resume, true);
    await sbx.files.write("/tmp/mark", "kept");
    assert.equal(await sbx.pause(), true);
    assert.equal((await withruntimeSandbox(sbx.sandboxId)).state, "paused");
    assert.equal((await sbx.commands.run("cat /tmp/mark")).stdout, "kept");
    assert.equal((await withruntimeSandbox(sbx.sandboxId)).state, "running");
    assert.equal(await sbx.pause(), true);
    assert.equal(await sbx.files.read("/tmp/mark"), "kept");
    assert.equal((await withruntimeSandbox(sbx.sandboxId)).state, "running");
  } finally {
    await sbx.kill();
  }
});
