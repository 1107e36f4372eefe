// E2B's JavaScript SDK (e2b, pinned, unmodified): getMetrics on a sandbox
// that spins a CPU and holds 200 MiB shows both in withruntime's samples,
// in E2B's shape, and Sandbox.getMetrics(id) bounds them by start and end.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Sandbox, SandboxNotFoundError } from "e2b";

import { withruntimeSandbox } from "./helpers.mjs";

let sbx;

before(async () => {
  sbx = await Sandbox.create({ timeoutMs: 300_000, metadata: { test: "e2b-js-metrics" } });
});

after(async () => {
  if (sbx) await sbx.kill().catch(() => {});
});

test("getMetrics: the spinning CPU and the memory it holds", async () => {
  await sbx.commands.run("python3 -c 'b = bytearray(200 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nwhile True: pass'", {
    background: true,
  });
  let busy;
  const deadline = Date.now() + 60_000;
  while (!busy && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 1000));
    busy = (await sbx.getMetrics()).find((m) => m.cpuUsedPct >= 30 && m.memUsed >= 200 * 2 ** 20);
  }
  assert.ok(busy, `no sample shows the spinning CPU and 200 MiB: ${JSON.stringify(await sbx.getMetrics())}`);
  const native = await withruntimeSandbox(sbx.sandboxId);
  assert.equal(busy.cpuCount, native.vcpus);
  assert.ok(busy.cpuUsedPct <= 100 && busy.memUsed <= busy.memTotal && busy.diskTotal > 0, JSON.stringify(busy));
  assert.equal(busy.memCache, 0);
  assert.ok(busy.timestamp instanceof Date && Math.abs(busy.timestamp.getTime() - Date.now()) < 120_000, String(busy.timestamp));

  // Whole seconds on the wire (the client rounds): a window around the
  // sample keeps it, one after leaves it out.
  const t = busy.timestamp.getTime();
  const around = await Sandbox.getMetrics(sbx.sandboxId, { start: new Date(t - 2000), end: new Date(t + 1000) });
  assert.ok(around.some((m) => m.timestamp.getTime() === t), `not in ${JSON.stringify(around)}`);
  const later = await sbx.getMetrics({ start: new Date(t + 2000) });
  assert.ok(later.every((m) => m.timestamp.getTime() > t), JSON.stringify(later));
});

test("getMetrics of a killed sandbox: SandboxNotFoundError", async () => {
  await sbx.kill();
  await assert.rejects(Sandbox.getMetrics(sbx.sandboxId), SandboxNotFoundError);
});
