// The sandbox JSON as the SDK shows it, fields of many hosts included.

import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";

import { Sandbox, sandboxInfoOf } from "../src/sandbox.js";

test("a many-host installation's node is shown, a single box's absent", () => {
  const info = sandboxInfoOf({ id: "sbx1", state: "ended", end_reason: "node_lost", node: "node1a2b3c4d" } as never);
  assert.equal(info.node, "node1a2b3c4d");
  assert.equal(info.endReason, "node_lost");
  assert.equal(sandboxInfoOf({ id: "sbx1", state: "running" } as never).node, undefined);
});

test("a sandbox's isolation is shown", () => {
  assert.equal(sandboxInfoOf({ id: "sbx1", state: "running", isolation: "microvm" } as never).isolation, "microvm");
  assert.equal(sandboxInfoOf({ id: "sbx1", state: "running", isolation: "gvisor" } as never).isolation, "gvisor");
});

test("create sends isolation only when given", async () => {
  const bodies: Array<Record<string, unknown>> = [];
  const srv = createServer((req, res) => {
    let data = "";
    req.on("data", (c) => (data += c));
    req.on("end", () => {
      if (req.method === "POST") bodies.push(JSON.parse(data) as Record<string, unknown>);
      const last = bodies[bodies.length - 1] ?? {};
      res.writeHead(req.method === "POST" ? 201 : 200, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ id: "sbx1", state: "running", isolation: last.isolation ?? "gvisor" }));
    });
  });
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
  try {
    const { port } = srv.address() as AddressInfo;
    const opts = { baseUrl: `http://127.0.0.1:${port}`, apiKey: "wr_test" };
    const vm = await Sandbox.create({ ...opts, isolation: "microvm" });
    assert.equal((await vm.info()).isolation, "microvm");
    await Sandbox.create(opts);
  } finally {
    srv.close();
  }
  assert.equal(bodies.length, 2);
  assert.equal(bodies[0].isolation, "microvm");
  assert.equal("isolation" in bodies[1], false);
});
