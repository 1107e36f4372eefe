// E2B's JavaScript SDK (e2b, pinned, unmodified) over withruntime's E2B
// control plane: setTimeout, getInfo, Sandbox.connect, the Sandbox.list
// paginator with a metadata query, pause and resume through connect, and
// the errors of an unknown template and of an unknown or killed sandbox.
// Two real sandboxes in all: the lifecycle runs on one, then kills it.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Sandbox, SandboxError, SandboxNotFoundError } from "e2b";

import { withruntimeSandbox } from "./helpers.mjs";

const tag = `js-control-${Date.now()}`;
let a;
let b;

before(async () => {
  [a, b] = await Promise.all([
    Sandbox.create({ timeoutMs: 600_000, metadata: { test: "e2b-js-control", tag, n: "0" } }),
    Sandbox.create({ timeoutMs: 600_000, metadata: { test: "e2b-js-control", tag, n: "1" } }),
  ]);
});

after(async () => {
  for (const s of [a, b]) if (s) await s.kill().catch(() => {});
});

/** Seconds between two instants. */
const apart = (x, y) => Math.abs(new Date(x).getTime() - new Date(y).getTime()) / 1000;

async function listed(query, limit) {
  const pages = Sandbox.list({ query, limit });
  const out = [];
  while (pages.hasNext) out.push(...(await pages.nextItems()));
  return out;
}

test("getInfo: id, metadata, state and the lease as endAt", async () => {
  const info = await a.getInfo();
  assert.equal(info.sandboxId, a.sandboxId);
  assert.equal(info.state, "running");
  assert.equal(info.metadata.tag, tag);
  const ours = await withruntimeSandbox(a.sandboxId);
  assert.ok(apart(info.endAt, ours.lease_ends_at) <= 1, `endAt ${info.endAt}, lease ${ours.lease_ends_at}`);
  // The static form answers the same.
  assert.equal((await Sandbox.getInfo(a.sandboxId)).metadata.n, "0");
});

test("setTimeout moves the lease, shorter too", async () => {
  await a.setTimeout(1_200_000);
  let ours = await withruntimeSandbox(a.sandboxId);
  assert.ok(apart(ours.lease_ends_at, Date.now() + 1_200_000) < 30, ours.lease_ends_at);
  await a.setTimeout(500_000);
  ours = await withruntimeSandbox(a.sandboxId);
  assert.ok(apart(ours.lease_ends_at, Date.now() + 500_000) < 30, ours.lease_ends_at);
  assert.ok(apart((await a.getInfo()).endAt, ours.lease_ends_at) <= 1);
});

test("Sandbox.list pages through a metadata query", async () => {
  const both = await listed({ metadata: { tag } }, 1); // pages of one
  assert.deepEqual(both.map((s) => s.sandboxId).sort(), [a.sandboxId, b.sandboxId].sort());
  assert.ok(both.every((s) => s.metadata.tag === tag && s.state === "running"));
  const one = await listed({ metadata: { tag, n: "1" } });
  assert.deepEqual(one.map((s) => s.sandboxId), [b.sandboxId]);
  assert.deepEqual(await listed({ metadata: { tag: tag + "-nobody" } }), []);
});

test("Sandbox.connect gives a working sandbox of the same id", async () => {
  await a.commands.run("echo kept > /tmp/mark");
  const same = await Sandbox.connect(a.sandboxId);
  assert.equal(same.sandboxId, a.sandboxId);
  assert.equal((await same.commands.run("cat /tmp/mark")).stdout, "kept\n");
});

test("pause, then resume through connect: a running process survives", async () => {
  const h = await b.commands.run("echo alive; sleep 600", { background: true });
  assert.equal(await b.pause(), true);
  assert.equal((await withruntimeSandbox(b.sandboxId)).state, "paused");
  assert.equal((await b.getInfo()).state, "paused");
  const paused = await listed({ metadata: { tag }, state: ["paused"] });
  assert.deepEqual(paused.map((s) => s.sandboxId), [b.sandboxId]);

  const back = await Sandbox.connect(b.sandboxId, { timeoutMs: 400_000 });
  assert.equal(back.sandboxId, b.sandboxId);
  const ours = await withruntimeSandbox(b.sandboxId);
  assert.equal(ours.state, "running");
  assert.ok(apart(ours.lease_ends_at, Date.now() + 400_000) < 30, ours.lease_ends_at);
  // The process started before the pause is still there.
  assert.ok((await back.commands.list()).some((p) => p.pid === h.pid), "the background command did not survive the pause");
  assert.equal(await back.commands.kill(h.pid), true);
});

test("an unknown template is a 404 SandboxError naming it", async () => {
  await assert.rejects(Sandbox.create("no-such-template-js", { timeoutMs: 60_000 }), (e) => {
    assert.ok(e instanceof SandboxError, `${e?.constructor?.name}: ${e}`);
    assert.equal(e.statusCode, 404);
    assert.match(e.message, /no-such-template-js/);
    return true;
  });
});

test("an unknown sandbox: kill is false, connect and getInfo reject with SandboxNotFoundError", async () => {
  const id = "nosuchsandbox0000000";
  assert.equal(await Sandbox.kill(id), false);
  await assert.rejects(Sandbox.connect(id), (e) => e instanceof SandboxNotFoundError || assert.fail(`${e?.constructor?.name}: ${e}`));
  await assert.rejects(Sandbox.getInfo(id), (e) => e instanceof SandboxNotFoundError || assert.fail(`${e?.constructor?.name}: ${e}`));
});

test("a killed sandbox: kill is then false, connect, getInfo and setTimeout reject with SandboxNotFoundError", async () => {
  assert.equal(await a.kill(), true);
  assert.equal((await withruntimeSandbox(a.sandboxId)).state, "ended");
  assert.equal(await a.kill(), false);
  assert.equal(await Sandbox.kill(a.sandboxId), false);
  await assert.rejects(Sandbox.connect(a.sandboxId), (e) => e instanceof SandboxNotFoundError || assert.fail(`${e?.constructor?.name}: ${e}`));
  await assert.rejects(a.getInfo(), (e) => e instanceof SandboxNotFoundError || assert.fail(`${e?.constructor?.name}: ${e}`));
  await assert.rejects(a.setTimeout(60_000), (e) => e instanceof SandboxNotFoundError || assert.fail(`${e?.constructor?.name}: ${e}`));
  assert.equal(await a.isRunning(), false);
  // Not listed any more.
  assert.deepEqual((await listed({ metadata: { tag } })).map((s) => s.sandboxId), [b.sandboxId]);
});
