import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Sandbox, type SandboxMetric } from "../src/index.js";
import { small } from "./helpers.js";

// getMetrics on a real sandbox that spins a CPU and holds 200 MiB: a
// sample shows both within the sandbox's size, and the bounds keep to
// themselves.
describe("metrics", () => {
  let sbx: Sandbox;

  before(async () => {
    sbx = await small({ vcpus: 2 });
  });
  after(async () => {
    await sbx?.stop().catch(() => undefined);
  });

  test("getMetrics shows a spinning CPU and the memory it holds", async () => {
    await sbx.exec(["python3", "-c", "b = bytearray(200 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nwhile True: pass"], {
      background: true,
    });
    let busy: SandboxMetric | undefined;
    const deadline = Date.now() + 60_000;
    while (!busy && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 1000));
      busy = (await sbx.getMetrics()).find((m) => m.cpuUsedPct >= 30 && m.memUsedBytes >= 200 * 2 ** 20);
    }
    assert.ok(busy, `no sample shows the spinning CPU and 200 MiB: ${JSON.stringify(await sbx.getMetrics())}`);
    assert.equal(busy.cpuCount, 2);
    assert.ok(busy.cpuUsedPct <= 100, `cpu ${busy.cpuUsedPct}%`);
    assert.ok(busy.memUsedBytes <= busy.memTotalBytes && busy.diskTotalBytes > 0, JSON.stringify(busy));
    assert.ok(busy.timestamp instanceof Date, `timestamp ${String(busy.timestamp)}`);

    const t = busy.timestamp.getTime();
    const later = await sbx.getMetrics({ start: new Date(t + 1) });
    assert.ok(later.every((m) => m.timestamp!.getTime() > t), `start after ${busy.timestamp.toISOString()}: ${JSON.stringify(later)}`);
    const upTo = await sbx.getMetrics({ start: new Date(t - 1), end: t / 1000 + 1 });
    assert.ok(upTo.some((m) => m.timestamp!.getTime() === t), `the sample was left out of [t-1ms, t+1s]: ${JSON.stringify(upTo)}`);
    assert.ok(upTo.every((m) => m.timestamp!.getTime() <= t + 1000));
    await assert.rejects(sbx.getMetrics({ start: new Date(Number.NaN) }), TypeError);
  });
});
