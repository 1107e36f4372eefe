// E2B's JavaScript SDK (e2b, pinned, unmodified) over withruntime's E2B
// API: sandbox.createSnapshot, Sandbox.listSnapshots, Sandbox.create from
// a snapshot id, Sandbox.fork and Sandbox.deleteSnapshot map onto
// withruntime's snapshots; a process's memory goes on in each sandbox
// started from one, and each fork's files are its own.

import assert from "node:assert/strict";
import { test } from "node:test";

import { Sandbox } from "e2b";

// A process whose state is in its memory only: a token drawn at start and
// a count it keeps raising, written to /tmp/beat on each tick.
const BEAT = `python3 -u -c "import os, time
t = os.urandom(8).hex()
n = 0
while True:
    n += 1
    open('/tmp/beat.new', 'w').write('%s %d' % (t, n))
    os.rename('/tmp/beat.new', '/tmp/beat')
    time.sleep(0.05)"`;

/** The process's token and count once it has written them. */
async function beat(sbx) {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const out = (await sbx.commands.run("cat /tmp/beat 2>/dev/null || true")).stdout.split(/\s+/).filter(Boolean);
    if (out.length === 2) return [out[0], Number(out[1])];
    assert.ok(Date.now() < deadline, `no beat in ${sbx.sandboxId}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** sbx runs the process that drew token, counting on past after. */
async function goesOn(sbx, token, after) {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const [got, n] = await beat(sbx);
    assert.equal(got, token, `${sbx.sandboxId} runs another process`);
    if (n > after) return;
    assert.ok(Date.now() < deadline, `${sbx.sandboxId}'s process stopped at ${n}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

test("createSnapshot, create from it, fork of two, deleteSnapshot", async () => {
  const src = await Sandbox.create({ timeoutMs: 300_000 });
  const made = [];
  try {
    await src.commands.run(BEAT, { background: true });
    const [token] = await beat(src);
    const snap = await src.createSnapshot({ name: "e2b-js" });
    assert.match(snap.snapshotId, /^snap_/);
    assert.deepEqual(snap.names, ["e2b-js"]);
    const listed = await Sandbox.listSnapshots({ sandboxId: src.sandboxId }).nextItems();
    assert.deepEqual(listed.map((s) => s.snapshotId), [snap.snapshotId]);

    const again = await Sandbox.create(snap.snapshotId, { timeoutMs: 120_000 });
    made.push(again);
    await goesOn(again, token, 0);

    const [, at] = await beat(src);
    const forks = await Sandbox.fork(src.sandboxId, { count: 2, timeoutMs: 90_000 });
    assert.equal(forks.length, 2);
    for (const f of forks) assert.ok(f instanceof Sandbox, String(f));
    made.push(...forks);
    for (const f of forks) {
      await goesOn(f, token, at);
      await f.files.write("/tmp/own", f.sandboxId);
    }
    for (const f of forks) assert.equal(await f.files.read("/tmp/own"), f.sandboxId);
    assert.equal((await src.commands.run("test -e /tmp/own || echo none")).stdout, "none\n");

    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true);
    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false);
  } finally {
    for (const s of made) await s.kill();
    await src.kill();
  }
});
