// Templates: Template.list/get/delete/importArchive, sbx.snapshot and
// Sandbox.create({ template }). Request shapes and name escaping from a
// loopback server that answers what each test sets; then a template made
// from a real sandbox, and a sandbox started from it, on the real server.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { writeFileSync } from "node:fs";
import { type IncomingMessage, type ServerResponse, createServer } from "node:http";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { APIError, Sandbox, Template, type TemplateInfo } from "../src/index.js";
import { SMALL, tempDir } from "./helpers.js";

const NOW = "2026-01-02T03:04:05.123456789Z";

const wire = (name: string, tag = "latest", extra: Record<string, unknown> = {}) => ({
  id: "tpl_00000000000000aa", name, tag, source: "snapshot", base: "default", layers: 1, size_bytes: 4096,
  defaults: {}, created_at: NOW, state: "ready", ...extra,
});

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage["headers"];
  body: Buffer;
}

describe("templates: request shapes", () => {
  const seen: Seen[] = [];
  let answer: (s: Seen) => [number, unknown] = () => [404, { error: { code: "not_found", message: "no route" } }];
  const srv = createServer((req, res: ServerResponse) => {
    const parts: Buffer[] = [];
    req.on("data", (c: Buffer) => parts.push(c));
    req.on("end", () => {
      const s = { method: req.method ?? "", url: req.url ?? "", headers: req.headers, body: Buffer.concat(parts) };
      seen.push(s);
      const [status, obj] = answer(s);
      res.writeHead(status, { "Content-Type": "application/json" });
      res.end(JSON.stringify(obj));
    });
  });
  const opts = { baseUrl: "", apiKey: "k" };
  before(async () => {
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
    opts.baseUrl = `http://127.0.0.1:${(srv.address() as { port: number }).port}`;
  });
  after(() => new Promise<void>((r) => srv.close(() => r())));

  test("list, get and delete, each name one escaped path segment", async () => {
    const full = wire("myteam/app", "v1", {
      source: "oci", base: "", layers: 3, size_bytes: 10 << 20, public: true,
      defaults: { env: { A: "1" }, workdir: "/app", user: "app", vcpus: 1, memory_mib: 1024,
        start_cmd: "python3 -m http.server", ready_cmd: "curl -sf localhost:8000", ready_timeout_seconds: 30 },
    });
    answer = (s) => {
      if (s.url === "/v1/templates") return [200, { templates: [wire("app"), full] }];
      if (s.url === "/v1/templates/myteam%2Fapp:v1") return [200, full];
      if (s.method === "DELETE" && s.url === "/v1/templates/app") return [200, wire("app", "latest", { state: "deleting" })];
      return [404, { error: { code: "not_found", message: `no template at ${s.url}` } }];
    };
    seen.length = 0;
    assert.deepEqual((await Template.list(opts)).map((t) => t.ref), ["app:latest", "myteam/app:v1"]);
    const got = await Template.get("myteam/app:v1", opts);
    const want: Omit<TemplateInfo, "raw"> = {
      id: "tpl_00000000000000aa", name: "myteam/app", tag: "v1", ref: "myteam/app:v1", source: "oci", base: "",
      layers: 3, sizeBytes: 10 << 20, public: true, state: "ready", createdAt: new Date("2026-01-02T03:04:05.123Z"),
      defaults: { env: { A: "1" }, workdir: "/app", user: "app", vcpus: 1, memoryMib: 1024,
        startCmd: "python3 -m http.server", readyCmd: "curl -sf localhost:8000", readyTimeoutSeconds: 30 },
    };
    const { raw, ...rest } = got;
    assert.deepEqual(rest, want);
    assert.equal(raw.name, "myteam/app");
    assert.equal((await Template.delete("app", opts)).state, "deleting");
    await assert.rejects(Template.get("nope", opts), (e: unknown) => e instanceof APIError && e.code === "not_found" && e.status === 404);
    for (const [name, url] of [
      ["a b", "/v1/templates/a%20b"], ["a?b", "/v1/templates/a%3Fb"],
      ["t/a#b:v1", "/v1/templates/t%2Fa%23b:v1"], ["t/a%2Fb", "/v1/templates/t%2Fa%252Fb"],
    ]) {
      await assert.rejects(Template.get(name!, opts), APIError);
      assert.equal(seen.at(-1)?.url, url, `name ${name}`);
    }
    assert.deepEqual(seen.slice(0, 4).map((s) => `${s.method} ${s.url} ${s.headers.authorization}`), [
      "GET /v1/templates Bearer k",
      "GET /v1/templates/myteam%2Fapp:v1 Bearer k",
      "DELETE /v1/templates/app Bearer k",
      "GET /v1/templates/nope Bearer k",
    ]);
  });

  test("names a path cleaner would change are refused before anything is sent", async () => {
    seen.length = 0;
    for (const bad of ["", "/", "/app", "app/", "t//app", "..", "../secrets/K", "t/..", "./app"]) {
      for (const call of [Template.get, Template.delete]) {
        await assert.rejects(call(bad, opts), (e: unknown) => e instanceof APIError && e.code === "invalid_request", `name ${JSON.stringify(bad)}`);
      }
    }
    await assert.rejects(new Sandbox("sbx_a", opts).snapshot(""), (e: unknown) => e instanceof APIError && e.code === "invalid_request");
    await assert.rejects(Template.importArchive("", new Uint8Array([1]), opts), (e: unknown) => e instanceof APIError && e.code === "invalid_request");
    assert.deepEqual(seen, []);
  });

  test("importArchive sends a file as it reads it, or bytes, or a stream", async () => {
    answer = (s) => {
      if (!s.body.subarray(0, 6).equals(Buffer.from("image:"))) {
        return [400, { error: { code: "invalid_request", message: "the body is not an image archive" } }];
      }
      return [201, wire(new URL(s.url, "http://x").searchParams.get("name")!, "latest", { source: "oci" })];
    };
    seen.length = 0;
    const data = Buffer.concat([Buffer.from("image:"), Buffer.alloc(3 << 20, 7)]); // more than one read
    const file = join(tempDir(), "app.tar");
    writeFileSync(file, data);
    assert.equal((await Template.importArchive("from-file", file, opts)).source, "oci");
    await Template.importArchive("from-bytes", new TextEncoder().encode("image:bytes"), opts);
    await Template.importArchive("from-stream", (async function* () {
      yield new TextEncoder().encode("image:");
      yield new TextEncoder().encode("streamed");
    })(), opts);
    assert.deepEqual(seen.map((s) => s.url), [
      "/v1/templates/import?name=from-file", "/v1/templates/import?name=from-bytes", "/v1/templates/import?name=from-stream",
    ]);
    assert.ok(seen[0]!.body.equals(data), `got ${seen[0]!.body.length} bytes, want ${data.length}`);
    assert.equal(seen[0]!.headers["content-length"], String(data.length));
    assert.equal(seen[0]!.headers["content-type"], "application/x-tar");
    assert.equal(seen[1]!.body.toString(), "image:bytes");
    assert.equal(seen[2]!.body.toString(), "image:streamed");
    await assert.rejects(Template.importArchive("bad", new TextEncoder().encode("nope"), opts),
      (e: unknown) => e instanceof APIError && e.code === "invalid_request" && /not an image/.test(e.message));
    await assert.rejects(Template.importArchive("missing", join(tempDir(), "missing.tar"), opts), /ENOENT/);
  });

  test("snapshot and create with a template", async () => {
    answer = (s) => {
      if (s.url === "/v1/sandboxes") return [201, { id: "sbx_a", state: "running", template: "myteam/app:v1", image: "myteam/app:v1" }];
      if (s.url === "/v1/sandboxes/sbx_a/snapshot") return [201, wire("snap", "v2")];
      return [404, { error: { code: "not_found", message: "no route" } }];
    };
    seen.length = 0;
    const sbx = await Sandbox.create({ ...opts, template: "myteam/app:v1" });
    await Sandbox.create({ ...opts, image: "default" });
    const t = await sbx.snapshot("snap:v2");
    assert.equal(t.ref, "snap:v2");
    assert.equal(t.source, "snapshot");
    assert.deepEqual(seen.map((s) => JSON.parse(s.body.toString())), [
      { template: "myteam/app:v1" }, { image: "default" }, { template: "snap:v2" },
    ]);
  });
});

describe("templates: on the server", () => {
  test("a snapshot of a sandbox starts a new sandbox with its files; removed, it is not_found", async () => {
    const name = `sdk-ts-${process.pid}-${Date.now().toString(36)}:v1`;
    let made: TemplateInfo;
    {
      await using sbx = await Sandbox.create(SMALL);
      await sbx.exec("mkdir -p /workspace/tpl && echo made-in-the-source > /workspace/tpl/mark", { check: true });
      made = await sbx.snapshot(name);
      // The source keeps running.
      assert.equal((await sbx.exec("cat /workspace/tpl/mark", { check: true })).stdout, "made-in-the-source\n");
    }
    try {
      assert.equal(made.ref, name);
      assert.equal(made.source, "snapshot");
      assert.match(made.id, /^tpl_[0-9a-f]{16}$/);
      assert.ok((await Template.list()).some((t) => t.ref === name));
      assert.equal((await Template.get(name)).id, made.id);
      await using child = await Sandbox.create({ ...SMALL, template: name });
      assert.equal((await child.info()).template, name);
      assert.equal((await child.exec("cat /workspace/tpl/mark", { check: true })).stdout, "made-in-the-source\n");
    } finally {
      await Template.delete(name);
    }
    await assert.rejects(Template.get(name), (e: unknown) => e instanceof APIError && e.code === "not_found");
    await assert.rejects(Sandbox.create({ ...SMALL, template: name }), (e: unknown) => e instanceof APIError && e.code === "not_found");
  });

  test("an imported image (one file, no shell) starts a sandbox that holds its file", async () => {
    const name = `sdk-ts-img-${process.pid}-${Date.now().toString(36)}`;
    const file = join(tempDir(), "image.tar");
    writeFileSync(file, dockerSave({ "hello.txt": "hello from the image\n" }, ["IMPORTED=yes"]));
    const made = await Template.importArchive(name, file);
    try {
      assert.equal(made.ref, `${name}:latest`);
      assert.equal(made.source, "oci");
      assert.equal(made.defaults.env.IMPORTED, "yes");
      await using sbx = await Sandbox.create({ ...SMALL, template: name });
      assert.equal(await sbx.files.read("/hello.txt"), "hello from the image\n");
    } finally {
      await Template.delete(name);
    }
    await assert.rejects(Template.importArchive(`${name}-bad`, tarOf({ "notes.txt": "no manifest\n" })),
      (e: unknown) => e instanceof APIError && e.code === "invalid_request");
  });
});

/** A tar stream of regular files (ustar headers; names under 100 bytes). */
function tarOf(files: Record<string, string | Buffer>): Buffer {
  const parts: Buffer[] = [];
  for (const [name, content] of Object.entries(files)) {
    const data = Buffer.isBuffer(content) ? content : Buffer.from(content);
    const h = Buffer.alloc(512);
    h.write(name, 0, "utf8");
    h.write("0000644\0", 100);
    h.write("0000000\0", 108);
    h.write("0000000\0", 116);
    h.write(data.length.toString(8).padStart(11, "0") + "\0", 124);
    h.write("00000000000\0", 136);
    h.write("        ", 148);
    h.write("0", 156);
    h.write("ustar\x0000", 257, "binary");
    let sum = 0;
    for (const b of h) sum += b;
    h.write(sum.toString(8).padStart(6, "0") + "\0 ", 148);
    parts.push(h, data, Buffer.alloc((512 - (data.length % 512)) % 512));
  }
  parts.push(Buffer.alloc(1024));
  return Buffer.concat(parts);
}

/** What `docker save` writes for an image of one layer holding files. */
function dockerSave(files: Record<string, string>, env: string[]): Buffer {
  const layer = tarOf(files);
  const hex = createHash("sha256").update(layer).digest("hex");
  const config = Buffer.from(JSON.stringify({
    architecture: "amd64", os: "linux", config: { Env: env },
    rootfs: { type: "layers", diff_ids: [`sha256:${hex}`] },
  }));
  const configName = createHash("sha256").update(config).digest("hex") + ".json";
  const layerName = `${hex}/layer.tar`;
  const manifest = JSON.stringify([{ Config: configName, RepoTags: ["sdk/ts:latest"], Layers: [layerName] }]);
  return tarOf({ [configName]: config, [layerName]: layer, "manifest.json": manifest });
}
