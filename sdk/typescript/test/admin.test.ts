import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";

import { APIError, Client, Sandbox } from "../src/index.js";
import { resolveConfig } from "../src/transport.js";
import { tempDir } from "./helpers.js";

describe("client", () => {
  const c = new Client();

  test("secrets: set, list, remove; values never come back", async () => {
    const name = `TS_SDK_${process.pid}`;
    const info = await c.secrets.set(name, "s3cr3t-value", { host: "api.example.com" });
    assert.equal(info.name, name);
    assert.equal(info.host, "api.example.com");
    const listed = await c.secrets.list();
    const mine = listed.find((s) => s.name === name);
    assert.ok(mine, `${name} not in ${JSON.stringify(listed)}`);
    assert.equal(JSON.stringify(listed).includes("s3cr3t-value"), false);
    await c.secrets.remove(name);
    assert.equal((await c.secrets.list()).some((s) => s.name === name), false);
    await assert.rejects(c.secrets.remove(name), (e: unknown) => e instanceof APIError && e.code === "not_found");
  });

  test("accounts and keys: a read-only key cannot create", async () => {
    const acct = `ts-sdk-${process.pid}`;
    const a = await c.accounts.create(acct, { concurrency: 3 });
    assert.equal(a.id, acct);
    assert.equal(a.concurrency, 3);
    assert.ok((await c.accounts.list()).some((x) => x.id === acct));

    const full = await c.keys.create({ account: acct, name: "ci", dailyLimitUsd: "1.5" });
    assert.ok(full.secret && full.secret.length > 10, "a new key carries its secret");
    assert.equal(full.dailyLimitMicros, 1_500_000);
    assert.equal(JSON.stringify(full).includes(full.secret!), false, "the secret is not enumerable");
    const ro = await new Client({ apiKey: full.secret }).keys.create({ kind: "read_only" });
    assert.equal(ro.kind, "read_only");
    await assert.rejects(Sandbox.create({ apiKey: ro.secret, vcpus: 1, memoryMib: 1024 }), (e: unknown) => {
      assert.ok(e instanceof APIError, `got ${e}`);
      assert.equal(e.code, "forbidden");
      assert.equal(e.status, 403);
      return true;
    });
    const keys = await c.keys.list({ account: acct });
    assert.deepEqual(keys.map((k) => k.id).sort(), [full.id, ro.id].sort());
    assert.ok(keys.every((k) => k.secret === undefined));
    await c.keys.remove(full.id);
    await assert.rejects(Sandbox.list({ apiKey: ro.secret }), (e: unknown) => e instanceof APIError && e.code === "unauthorized");
  });

  test("keys in E2B's format are keys like the others", async () => {
    const acct = `ts-sdk-e2b-${process.pid}`;
    await c.accounts.create(acct);
    const full = await c.keys.create({ account: acct, format: "e2b", dailyLimitUsd: "2" });
    // E2B's SDKs that check a key want "e2b_" and lowercase hex digits.
    assert.match(full.secret!, /^e2b_[0-9a-f]{64}$/);
    assert.equal(full.kind, "full");
    assert.equal(full.dailyLimitMicros, 2_000_000);
    const ro = await new Client({ apiKey: full.secret }).keys.create({ kind: "read_only", format: "e2b" });
    assert.match(ro.secret!, /^e2b_[0-9a-f]{64}$/);
    assert.equal(ro.parent, full.id);
    assert.deepEqual(await Sandbox.list({ apiKey: ro.secret }), []);
    await assert.rejects(Sandbox.create({ apiKey: ro.secret, vcpus: 1, memoryMib: 1024 }), (e: unknown) => e instanceof APIError && e.code === "forbidden");
    assert.deepEqual((await c.keys.list({ account: acct })).map((k) => k.id).sort(), [full.id, ro.id].sort());
    await c.keys.remove(full.id);
    await assert.rejects(Sandbox.list({ apiKey: ro.secret }), (e: unknown) => e instanceof APIError && e.code === "unauthorized");
    // A format the server does not know is refused before anything is sent.
    await assert.rejects(c.keys.create({ format: "E2B" as "e2b" }), RangeError);
  });

  test("usage answers rows and a total", async () => {
    const u = await c.usage({ from: new Date(Date.now() - 86_400_000), to: new Date() });
    assert.ok(Array.isArray(u.rows));
    assert.equal(typeof u.costMicros, "number");
    for (const r of u.rows) assert.match(r.day, /^\d{4}-\d{2}-\d{2}$/);
  });
});

describe("configuration", () => {
  const saved = { ...process.env };
  const restore = (): void => {
    for (const k of ["WITHRUNTIME_API_KEY", "WITHRUNTIME_BASE_URL", "XDG_DATA_HOME"]) {
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
    }
  };

  test("options, then the environment, then the local daemon's key on the default address", () => {
    try {
      const xdg = tempDir();
      mkdirSync(join(xdg, "withruntime"));
      writeFileSync(join(xdg, "withruntime", "admin.key"), "local-admin-key\n", { mode: 0o600 });
      process.env.XDG_DATA_HOME = xdg;
      delete process.env.WITHRUNTIME_API_KEY;
      delete process.env.WITHRUNTIME_BASE_URL;
      const cases: Array<[string, Parameters<typeof resolveConfig>[0], Record<string, string>, { baseUrl: string; apiKey?: string }]> = [
        ["nothing set", {}, {}, { baseUrl: "http://127.0.0.1:7878", apiKey: "local-admin-key" }],
        ["env key wins", {}, { WITHRUNTIME_API_KEY: "env-key" }, { baseUrl: "http://127.0.0.1:7878", apiKey: "env-key" }],
        ["option wins", { apiKey: "opt-key" }, { WITHRUNTIME_API_KEY: "env-key" }, { baseUrl: "http://127.0.0.1:7878", apiKey: "opt-key" }],
        ["another address: no local key", {}, { WITHRUNTIME_BASE_URL: "http://10.0.0.1:7878/" }, { baseUrl: "http://10.0.0.1:7878" }],
        ["an explicit empty key: none", { apiKey: "" }, {}, { baseUrl: "http://127.0.0.1:7878" }],
      ];
      for (const [name, opts, env, want] of cases) {
        delete process.env.WITHRUNTIME_API_KEY;
        delete process.env.WITHRUNTIME_BASE_URL;
        Object.assign(process.env, env);
        const got = resolveConfig(opts);
        assert.deepEqual({ ...got, ...(got.apiKey ? {} : { apiKey: undefined }) }, { apiKey: undefined, ...want }, name);
      }
    } finally {
      restore();
    }
  });
});
