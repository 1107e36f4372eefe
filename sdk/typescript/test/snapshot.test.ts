import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { APIError, Sandbox, Snapshot } from "../src/index.js";
import { small } from "./helpers.js";

describe("snapshots and forks", () => {
  test("a snapshot and a fork of two go on with the kernel's state; each fork's files are its own", async () => {
    await using sbx = await small();
    assert.equal((await sbx.runCode("x = 40\nx")).text, "40");
    const snap = await sbx.snapshot({ name: "sdk-ts" });
    assert.ok(snap instanceof Snapshot);
    assert.match(snap.id, /^snap_/);
    assert.equal(snap.sandboxId, sbx.id);
    assert.equal(snap.name, "sdk-ts");
    assert.ok(snap.sizeBytes > 0 && snap.expiresAt! > snap.createdAt!);
    assert.ok((await Snapshot.list()).some((s) => s.id === snap.id));
    assert.equal((await Snapshot.get(snap.id)).sizeBytes, snap.sizeBytes);

    const forks = await sbx.fork(2);
    try {
      assert.equal(forks.length, 2);
      assert.equal(forks.snapshot, undefined);
      assert.equal(new Set([sbx.id, ...forks.map((f) => f.id)]).size, 3);
      const boots = new Set([(await sbx.exec("cat /proc/sys/kernel/random/boot_id")).stdout]);
      for (const f of forks) {
        assert.equal((await f.runCode("x + 2")).text, "42");
        await f.files.write("own.txt", f.id);
        boots.add((await f.exec("cat /proc/sys/kernel/random/boot_id")).stdout);
      }
      assert.equal(boots.size, 3);
      for (const f of forks) assert.equal(await f.files.read("own.txt"), f.id);
      assert.notEqual((await sbx.exec("test -e own.txt")).exitCode, 0);
      assert.equal((await sbx.runCode("x + 1")).text, "41");
    } finally {
      for (const f of forks) await f.stop();
    }

    {
      await using again = await Sandbox.create({ snapshot: snap.id, timeoutSeconds: 120 });
      assert.equal((await again.runCode("x")).text, "40");
    }
    const kept = await sbx.fork(1, { keepSnapshot: true });
    await kept[0]!.stop();
    assert.equal(kept.snapshot?.sandboxId, sbx.id);
    await kept.snapshot!.delete();
    await snap.delete();
    await assert.rejects(Snapshot.get(snap.id), (e) => e instanceof APIError && e.code === "not_found");
    await assert.rejects(sbx.fork(0), (e) => e instanceof APIError && e.code === "invalid_request");
    await assert.rejects(sbx.fork(17), (e) => e instanceof APIError && e.code === "invalid_request");
  });
});
