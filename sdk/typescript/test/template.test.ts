// Templates: Template.list/get/delete/importArchive, sbx.snapshot and
// Sandbox.create({ template }). Request shapes and name escaping from a
// loopback server that answers what each test sets; then a template made
// from a real sandbox, and a sandbox started from it, on the real server.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
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

describe("template builds: the spec each builder sends", () => {
  const BUILD = { id: "bld_00000000000000b1", template: "myteam/app:latest", state: "queued", steps: 3, step: 0,
    cached_steps: 0, created_at: NOW };
  const LOGS = "/v1/templates/builds/bld_00000000000000b1/logs";
  const GET = "/v1/templates/builds/bld_00000000000000b1";
  const seen: Seen[] = [];
  // Each route's answer: JSON, or a string sent as NDJSON.
  let routes: Record<string, [number, unknown]> = {};
  const srv = createServer((req, res: ServerResponse) => {
    const parts: Buffer[] = [];
    req.on("data", (c: Buffer) => parts.push(c));
    req.on("end", () => {
      seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body: Buffer.concat(parts) });
      const [status, obj] = routes[`${req.method} ${req.url}`] ?? [404, { error: { code: "not_found", message: "no route" } }];
      if (typeof obj === "string") {
        res.writeHead(status, { "Content-Type": "application/x-ndjson" });
        res.end(obj);
      } else {
        res.writeHead(status, { "Content-Type": "application/json" });
        res.end(JSON.stringify(obj));
      }
    });
  });
  const opts = { baseUrl: "", apiKey: "k" };
  before(async () => {
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
    opts.baseUrl = `http://127.0.0.1:${(srv.address() as { port: number }).port}`;
  });
  after(() => new Promise<void>((r) => srv.close(() => r())));
  const ndjson = (...evs: object[]): string => evs.map((e) => JSON.stringify({ time: NOW, ...e }) + "\n").join("");
  const answerBuild = (final: object, logs: string): void => {
    routes = {
      "POST /v1/templates": [202, BUILD],
      [`GET ${LOGS}`]: [200, logs],
      [`GET ${GET}`]: [200, { ...BUILD, ...final }],
    };
  };

  test("every step, the defaults and the build's options, as JSON; the log lines to onLog", async () => {
    answerBuild({ state: "succeeded", step: 3, result: wire("myteam/app", "latest", { source: "build" }) }, ndjson(
      { type: "step", step: 1, steps: 3, message: "pip_install pandas==2.2.3" },
      { type: "stdout", step: 1, message: "Successfully installed pandas\n" },
      { type: "step", step: 2, steps: 3, message: "run make", cached: true },
      { type: "info", message: "layer 2 stored" },
      { type: "end", state: "succeeded", message: "built myteam/app:latest" },
    ));
    seen.length = 0;
    const lines: string[] = [];
    const got = await new Template().fromTemplate("default")
      .aptInstall(["curl", "git"]).pipInstall(["pandas==2.2.3"])
      .npmInstall(["typescript"], { global: true }).npmInstall("left-pad")
      .run("make", { user: "root" }).run("make test")
      .env({ A: "1", B: "two" }).workdir("/workspace/app").user("app")
      .startCmd("python3 -m http.server 8000").readyCmd("curl -sf localhost:8000", { timeoutSeconds: 30 })
      .build("myteam/app", { ...opts, onLog: (l) => lines.push(l), network: { internet: true, allow: ["pypi.example"] }, noCache: true });
    assert.equal(got.ref, "myteam/app:latest");
    assert.equal(got.source, "build");
    assert.deepEqual(lines, ["step 1/3: pip_install pandas==2.2.3", "Successfully installed pandas",
      "step 2/3: run make (cached)", "layer 2 stored", "built myteam/app:latest"]);
    assert.deepEqual(seen.map((s) => `${s.method} ${s.url}`), ["POST /v1/templates", `GET ${LOGS}`, `GET ${GET}`]);
    assert.equal(seen[0].headers["content-type"], "application/json");
    assert.equal(seen[0].headers.authorization, "Bearer k");
    assert.deepEqual(JSON.parse(seen[0].body.toString()), {
      name: "myteam/app",
      from: { template: "default" },
      steps: [
        { apt_install: ["curl", "git"] }, { pip_install: ["pandas==2.2.3"] },
        { npm_install: ["typescript"], global: true }, { npm_install: ["left-pad"] },
        { run: "make", user: "root" }, { run: "make test" },
        { env: { A: "1", B: "two" } }, { workdir: "/workspace/app" }, { user: "app" },
      ],
      start_cmd: "python3 -m http.server 8000",
      ready_cmd: "curl -sf localhost:8000",
      ready_timeout_seconds: 30,
      network: { internet: true, allow: ["pypi.example"] },
      no_cache: true,
    });
    assert.deepEqual(new Template().fromImage("python:3.12-slim").toSpec("x"), { name: "x", from: { image: "python:3.12-slim" } });
    assert.deepEqual(new Template().toSpec("x:v2"), { name: "x:v2" });
    const df = "FROM default\nRUN echo hi\n";
    assert.deepEqual(new Template().fromDockerfile(df).startCmd("sleep 1").toSpec("x"), { name: "x", dockerfile: df, start_cmd: "sleep 1" });
  });

  test("fromImage sends the reference as from.image; the pull's log lines reach onLog", async () => {
    const ref = "registry.example:5000/team/py:3.12";
    answerBuild({ state: "succeeded", step: 1, result: wire("myteam/app", "latest", { source: "build" }) }, ndjson(
      { type: "info", message: `pulling ${ref}` },
      { type: "info", message: "layer 1: reading" },
      { type: "step", step: 1, steps: 1, message: "run make" },
      { type: "end", state: "succeeded", message: "built myteam/app:latest" },
    ));
    seen.length = 0;
    const lines: string[] = [];
    const got = await new Template().fromImage(ref).run("make").build("myteam/app", { ...opts, onLog: (l) => lines.push(l) });
    assert.equal(got.ref, "myteam/app:latest");
    assert.deepEqual(lines.slice(0, 2), [`pulling ${ref}`, "layer 1: reading"]);
    assert.deepEqual(JSON.parse(seen[0].body.toString()), { name: "myteam/app", from: { image: ref }, steps: [{ run: "make" }] });
    assert.throws(() => new Template().fromImage(""), (e: unknown) => e instanceof APIError && e.code === "invalid_request");
  });

  test("copy sends only what it names, links as links; paths out of the context are refused unsent", async () => {
    answerBuild({ state: "succeeded", result: wire("myteam/app", "latest", { source: "build" }) }, ndjson({ type: "end", state: "succeeded" }));
    const top = tempDir();
    const ctx = join(top, "ctx");
    mkdirSync(join(ctx, "app", "sub"), { recursive: true });
    writeFileSync(join(ctx, "app", "main.py"), "print('hi')\n");
    const data = Buffer.alloc(2560, 7);
    writeFileSync(join(ctx, "app", "sub", "data.bin"), data);
    symlinkSync("main.py", join(ctx, "app", "link"));
    mkdirSync(join(ctx, "conf"));
    writeFileSync(join(ctx, "conf", "a.ini"), "a=1\n");
    writeFileSync(join(ctx, "not-copied.txt"), "stays home\n");
    writeFileSync(join(top, "secret.txt"), "outside\n");
    seen.length = 0;
    await new Template().copy("app/", "/workspace/app").copy("conf/a.ini", "/etc/a.ini", { user: "app", mode: "0600" })
      .copy("./conf/a.ini", "/tmp/again/").build("myteam/app", { ...opts, context: ctx });
    assert.equal(seen[0].headers["content-type"], "application/x-tar");
    const entries = untar(seen[0].body);
    assert.equal(entries[0].name, "withruntime-build.json");
    const spec = JSON.parse(entries[0].data.toString());
    assert.deepEqual(spec.steps, [
      { copy: { src: "app/", dest: "/workspace/app" } },
      { copy: { src: "conf/a.ini", dest: "/etc/a.ini", user: "app", mode: "0600" } },
      { copy: { src: "conf/a.ini", dest: "/tmp/again/" } },
    ]);
    const byName = new Map(entries.slice(1).map((e) => [e.name.replace(/\/$/, ""), e]));
    assert.deepEqual([...byName.keys()].sort(), ["app", "app/link", "app/main.py", "app/sub", "app/sub/data.bin", "conf", "conf/a.ini"]);
    assert.equal(byName.get("app/link")!.type, "2");
    assert.equal(byName.get("app/link")!.linkname, "main.py");
    assert.deepEqual(byName.get("app/sub/data.bin")!.data, data);

    // A Dockerfile's build sends the whole context given (its COPYs are not
    // read here); without a context, the spec alone.
    writeFileSync(join(ctx, "Dockerfile"), "FROM default\nCOPY app/ /opt/app/\n");
    await new Template().fromDockerfile("FROM default\nCOPY app/ /opt/app/\n").build("myteam/df", { ...opts, context: ctx });
    const df = untar(seen.at(-3)!.body);
    assert.deepEqual(JSON.parse(df[0].data.toString()), { name: "myteam/df", dockerfile: "FROM default\nCOPY app/ /opt/app/\n" });
    assert.deepEqual(df.slice(1).map((e) => e.name.replace(/\/$/, "")).sort(),
      ["Dockerfile", "app", "app/link", "app/main.py", "app/sub", "app/sub/data.bin", "conf", "conf/a.ini", "not-copied.txt"]);
    await new Template().fromDockerfile("FROM default\nRUN true\n").build("myteam/df", opts);
    assert.equal(seen.at(-3)!.headers["content-type"], "application/json");

    symlinkSync(join(top, "secret.txt"), join(ctx, "escape"));
    symlinkSync(top, join(ctx, "up"));
    const before = seen.length;
    for (const bad of ["../secret.txt", "app/../../secret.txt", join(top, "secret.txt"), "", ".", "escape", "up/secret.txt", "missing.txt"]) {
      await assert.rejects(async () => new Template().copy(bad, "/x").build("myteam/app", { ...opts, context: ctx }),
        (e: unknown) => e instanceof APIError && e.code === "invalid_request", `copy ${JSON.stringify(bad)}`);
    }
    await assert.rejects(async () => new Template().fromDockerfile("FROM default\n").run("true").build("x", opts),
      (e: unknown) => e instanceof APIError && e.code === "invalid_request");
    assert.equal(seen.length, before, "refused builds were sent");
  });

  test("a failed step rejects with the step; a refused build with the refusal", async () => {
    const err = { code: "invalid_request", message: "step 2 (run false) exited with code 1" };
    answerBuild({ state: "failed", step: 2, error: err }, ndjson(
      { type: "step", step: 1, steps: 3, message: "run true" },
      { type: "step", step: 2, steps: 3, message: "run false" },
      { type: "end", state: "failed", error: err },
    ));
    const lines: string[] = [];
    await assert.rejects(new Template().run("true").run("false").run("true").build("myteam/app", { ...opts, onLog: (l) => lines.push(l) }),
      (e: unknown) => e instanceof APIError && e.code === "invalid_request" && e.status === 400 &&
        e.message.includes("failed at step 2 of 3") && e.message.includes("exited with code 1"));
    assert.equal(lines.at(-1), "build failed: step 2 (run false) exited with code 1");
    // What onLog throws ends the wait and is thrown as it was.
    const boom = new Error("boom");
    await assert.rejects(new Template().run("true").build("myteam/app", { ...opts, onLog: () => { throw boom; } }), (e) => e === boom);
    routes["POST /v1/templates"] = [429, { error: { code: "concurrency_limit_reached", message: "8 builds in flight" } }];
    await assert.rejects(new Template().run("true").build("myteam/app", opts),
      (e: unknown) => e instanceof APIError && e.code === "concurrency_limit_reached");
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

  test("a builder's template (a run, a copied file, an env) starts a sandbox that has them", async () => {
    const name = `sdk-built-ts-${process.pid}-${Date.now().toString(36)}`;
    const ctx = tempDir();
    writeFileSync(join(ctx, "small.txt"), "copied from the context\n");
    const lines: string[] = [];
    const made = await new Template().fromTemplate("default")
      .run("echo built > /workspace/b.txt")
      .copy("small.txt", "/workspace/small.txt")
      .env({ X: "1" })
      .build(name, { onLog: (l) => lines.push(l), context: ctx });
    try {
      assert.equal(made.ref, `${name}:latest`);
      assert.equal(made.source, "build");
      assert.equal(made.defaults.env.X, "1");
      assert.ok(lines.some((l) => l.startsWith("step 1/3: ")), `got ${JSON.stringify(lines)}`);
      assert.ok(lines.some((l) => l.startsWith("step 2/3: ")), `got ${JSON.stringify(lines)}`);
      {
        await using sbx = await Sandbox.create({ ...SMALL, template: name });
        const r = await sbx.exec("cat /workspace/b.txt /workspace/small.txt; echo X=$X", { check: true });
        assert.equal(r.stdout, "built\ncopied from the context\nX=1\n");
      }
      // A step that fails fails the build, naming the step.
      await assert.rejects(new Template().fromTemplate(name).run("exit 3").build(`${name}-bad`),
        (e: unknown) => e instanceof APIError && e.code === "invalid_request" && e.message.includes("step 1 of 1"));
    } finally {
      await Template.delete(name);
    }
  });
});

/** The entries of a tar (ustar and PAX path/linkpath records). */
function untar(buf: Buffer): { name: string; type: string; linkname: string; data: Buffer }[] {
  const out: { name: string; type: string; linkname: string; data: Buffer }[] = [];
  let off = 0;
  let pax: Record<string, string> = {};
  const str = (b: Buffer): string => b.toString("utf8").replace(/\0.*$/s, "");
  while (off + 512 <= buf.length) {
    const h = buf.subarray(off, off + 512);
    if (h.every((b) => b === 0)) break;
    const size = parseInt(str(h.subarray(124, 136)).trim() || "0", 8);
    const type = String.fromCharCode(h[156]);
    const data = buf.subarray(off + 512, off + 512 + size);
    off += 512 + Math.ceil(size / 512) * 512;
    if (type === "x") {
      for (const m of data.toString("utf8").matchAll(/\d+ ([^=]+)=([^\n]*)\n/g)) pax[m[1]] = m[2];
      continue;
    }
    out.push({ name: pax.path ?? str(h.subarray(0, 100)), type, linkname: pax.linkpath ?? str(h.subarray(157, 257)), data: Buffer.from(data) });
    pax = {};
  }
  return out;
}

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
