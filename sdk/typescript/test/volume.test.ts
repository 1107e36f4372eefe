import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { APIError, Volume } from "../src/index.js";
import { small } from "./helpers.js";

describe("volumes", () => {
  test("a volume outlives its sandbox; read-only mounts refuse writes; files without a sandbox", async () => {
    const name = `ts-${process.pid}-${Date.now() % 100000}`;
    const vol = await Volume.create(name, 1);
    try {
      assert.equal(vol.sizeGib, 1);
      await vol.writeFile("/from-api.txt", "api");
      {
        await using sbx = await small({ volumes: [{ name, path: "/data" }] });
        assert.equal((await sbx.exec("cat /data/from-api.txt")).stdout, "api");
        assert.equal((await sbx.exec("echo written > /data/s.txt")).exitCode, 0);
        assert.deepEqual((await Volume.get(name)).mountedBy, [sbx.id]);
        await assert.rejects(vol.delete(), (e) => e instanceof APIError && e.code === "conflict");
      }
      {
        await using ro = await small({ volumes: [{ name, path: "/ro", readOnly: true }] });
        assert.equal((await ro.exec("cat /ro/s.txt")).stdout, "written\n");
        assert.notEqual((await ro.exec("touch /ro/x")).exitCode, 0);
      }
      assert.equal((await vol.readFile("/s.txt")).toString(), "written\n");
      assert.deepEqual((await vol.listFiles("/")).map((e) => e.name).sort(), ["from-api.txt", "s.txt"]);
      assert.ok((await Volume.list()).some((v) => v.name === name));
    } finally {
      await vol.delete();
    }
    await assert.rejects(Volume.get(name), (e) => e instanceof APIError && e.code === "not_found");
  });
});
