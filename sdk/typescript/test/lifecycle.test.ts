import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { APIError, Sandbox, TransportError, WithruntimeError } from "../src/index.js";
import { SMALL, small } from "./helpers.js";
import { packageRoot } from "./server.js";

describe("lifecycle", () => {
  let sbx: Sandbox;
  const tag = `ts-${process.pid}-${Date.now()}`;

  before(async () => {
    sbx = await small({
      metadata: { suite: tag },
      env: { GREETING: "hello from create" },
      network: { internet: true, allow: ["example.com"] },
      onLeaseEnd: "stop",
    });
  });
  after(async () => {
    await sbx?.stop().catch(() => undefined);
  });

  test("create applies its options", async () => {
    const info = await sbx.info();
    assert.equal(info.state, "running", `got state ${info.state}, want running`);
    assert.equal(info.vcpus, 1);
    assert.equal(info.memoryMib, 1024);
    assert.equal(info.onLeaseEnd, "stop");
    assert.deepEqual(info.metadata, { suite: tag });
    assert.deepEqual(info.network, { internet: true, allow: ["example.com"] });
    assert.ok(info.leaseEndsAt instanceof Date && info.leaseEndsAt.getTime() > Date.now());
    assert.equal(info.raw.id, sbx.id);
    const r = await sbx.exec("echo $GREETING");
    assert.equal(r.stdout, "hello from create\n");
  });

  test("list filters by metadata and state; connect attaches", async () => {
    const mine = await Sandbox.list({ metadata: { suite: tag } });
    assert.deepEqual(mine.map((s) => s.id), [sbx.id]);
    const running = await Sandbox.list({ state: ["running"], metadata: { suite: tag } });
    assert.equal(running.length, 1);
    assert.deepEqual(await Sandbox.list({ state: "paused", metadata: { suite: tag } }), []);
    const again = await Sandbox.connect(sbx.id);
    assert.equal((await again.exec("echo attached")).stdout, "attached\n");
  });

  test("extend moves the lease", async () => {
    const before = (await sbx.info()).leaseEndsAt!.getTime();
    const info = await sbx.extend(3000);
    assert.ok(info.leaseEndsAt!.getTime() > before, `lease ${info.leaseEndsAt?.toISOString()} not after ${before}`);
  });

  test("network policy get/set and the egress log", async () => {
    assert.deepEqual(await sbx.network(), { internet: true, allow: ["example.com"] });
    const info = await sbx.setNetwork({ internet: true, allow: ["allowed.invalid", "*.example.org"] });
    assert.deepEqual(info.network, { internet: true, allow: ["allowed.invalid", "*.example.org"] });
    // A name outside the allow list is refused by the sandbox's own
    // resolver (nothing leaves the host), and the refusal is logged.
    const name = "refused-ts-sdk.example.net";
    await sbx.exec(`getent hosts ${name}; true`, { timeoutMs: 20_000 });
    let refused: Awaited<ReturnType<Sandbox["egress"]>> = [];
    for (let i = 0; i < 100 && !refused.length; i++) {
      if (i) await new Promise((r) => setTimeout(r, 100));
      refused = (await sbx.egress()).filter((e) => e.verdict === "refused" && e.name.replace(/\.$/, "") === name);
    }
    assert.ok(refused.length > 0, `no refused event for ${name} in ${JSON.stringify(await sbx.egress())}`);
    assert.ok(refused[0]!.kind && refused[0]!.time instanceof Date, `got ${JSON.stringify(refused[0])}`);
    await sbx.setNetwork({ internet: false });
    assert.deepEqual(await sbx.network(), { internet: false, allow: [] });
  });

  test("pause and resume keep the sandbox's files", async () => {
    await sbx.files.write("kept.txt", "still here");
    const paused = await sbx.pause();
    assert.equal(paused.state, "paused");
    const resumed = await sbx.resume();
    assert.equal(resumed.state, "running");
    assert.equal(await sbx.files.read("kept.txt"), "still here");
  });

  test("autoResume: a paused sandbox resumes on its next exec", async () => {
    await using s = await small({ autoResume: true });
    assert.equal((await s.info()).autoResume, true);
    await s.files.write("kept.txt", "woken");
    assert.equal((await s.pause()).state, "paused");
    assert.equal((await s.exec("cat kept.txt")).stdout, "woken");
    assert.equal((await s.info()).state, "running");
  });

  test("stop ends it; commands then fail with an APIError", async () => {
    const s = await small();
    const info = await s.stop();
    assert.equal(info.state, "ended");
    assert.equal(info.endReason, "stopped");
    await assert.rejects(s.exec("true"), (e: unknown) => {
      assert.ok(e instanceof APIError, `got ${e}, want an APIError`);
      assert.ok(["lease_ended", "conflict", "not_found"].includes(e.code), `got code ${e.code}`);
      return true;
    });
  });
});

describe("await using", () => {
  test("stops the sandbox when the block throws", async () => {
    let id = "";
    await assert.rejects(
      (async () => {
        await using s = await Sandbox.create(SMALL);
        id = s.id;
        assert.equal((await s.info()).state, "running");
        throw new Error("the block fails");
      })(),
      /the block fails/,
    );
    assert.ok(id);
    const info = await (new Sandbox(id)).info();
    assert.equal(info.state, "ended", `got state ${info.state}, want ended`);
    assert.equal(info.endReason, "stopped");
  });

  test("a sandbox stopped inside the block is fine", async () => {
    let id = "";
    {
      await using s = await Sandbox.create(SMALL);
      id = s.id;
      await s.stop();
    }
    assert.equal((await new Sandbox(id).info()).state, "ended");
  });
});

describe("errors", () => {
  test("not_found with its status", async () => {
    await assert.rejects(Sandbox.connect("sbx_doesnotexist"), (e: unknown) => {
      assert.ok(e instanceof APIError && e instanceof WithruntimeError, `got ${e}`);
      assert.equal(e.code, "not_found");
      assert.equal(e.status, 404);
      assert.ok(e.message.length > 0);
      assert.match(String(e), /not_found \(404\)/);
      return true;
    });
  });

  test("invalid_request for a bad create", async () => {
    await assert.rejects(Sandbox.create({ ...SMALL, onLeaseEnd: "explode" as "stop" }), (e: unknown) => {
      assert.ok(e instanceof APIError, `got ${e}`);
      assert.equal(e.code, "invalid_request");
      assert.equal(e.status, 400);
      return true;
    });
  });

  test("unauthorized with a wrong key", async () => {
    await assert.rejects(Sandbox.list({ apiKey: "wr_not_a_key" }), (e: unknown) => {
      assert.ok(e instanceof APIError, `got ${e}`);
      assert.equal(e.code, "unauthorized");
      assert.equal(e.status, 401);
      return true;
    });
  });

  test("TransportError when nothing answers", async () => {
    await assert.rejects(Sandbox.list({ baseUrl: "http://127.0.0.1:9", apiKey: "x" }), (e: unknown) => {
      assert.ok(e instanceof TransportError && e instanceof WithruntimeError, `got ${e}`);
      assert.match(e.message, /connection refused/);
      return true;
    });
  });
});

describe("a plain script", () => {
  test("imports the built package and ends once its work is done (idle connections hold nothing)", () => {
    const entry = join(packageRoot, "dist", "index.js");
    const script = `
      import { Sandbox } from ${JSON.stringify(entry)};
      const sbx = await Sandbox.create({ vcpus: 1, memoryMib: 1024 });
      try {
        const r = await sbx.exec(["sh", "-c", "echo $((6 * 7))"]);
        process.stdout.write(r.stdout);
      } finally {
        await sbx.stop();
      }
      await Sandbox.list();
    `;
    // A script that never ended would be killed here and fail the test.
    const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8", timeout: 120_000 });
    assert.equal(r.status, 0, `exit ${r.status} (${r.signal}): ${r.stderr}`);
    assert.equal(r.stdout, "42\n");
  });
});
