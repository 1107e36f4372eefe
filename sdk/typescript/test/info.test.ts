// The sandbox JSON as the SDK shows it, fields of many hosts included.

import assert from "node:assert/strict";
import { test } from "node:test";

import { sandboxInfoOf } from "../src/sandbox.js";

test("a many-host installation's node is shown, a single box's absent", () => {
  const info = sandboxInfoOf({ id: "sbx1", state: "ended", end_reason: "node_lost", node: "node1a2b3c4d" } as never);
  assert.equal(info.node, "node1a2b3c4d");
  assert.equal(info.endReason, "node_lost");
  assert.equal(sandboxInfoOf({ id: "sbx1", state: "running" } as never).node, undefined);
});
