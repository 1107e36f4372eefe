// What a hostile or broken server stream must not do to the client: fill
// its memory with one endless line, make it misreport what it cannot
// represent, or time a cell out while it still waits for its turn. From a
// loopback server that answers what each test sets (no sandbox needed).

import assert from "node:assert/strict";
import { type IncomingMessage, type ServerResponse, createServer } from "node:http";
import { after, before, describe, test } from "node:test";

import { readSlack } from "../src/code.js";
import { Sandbox, TransportError } from "../src/index.js";

type Handler = (req: IncomingMessage, body: string, res: ServerResponse) => void | Promise<void>;

const MiB = 1 << 20;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("stream guards", () => {
  let handler: Handler = () => undefined;
  const srv = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on("data", (c: Buffer) => parts.push(c));
    req.on("end", () => void handler(req, Buffer.concat(parts).toString(), res));
  });
  let fake: Sandbox;
  before(async () => {
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
    const port = (srv.address() as { port: number }).port;
    fake = new Sandbox("sbx_fake", { baseUrl: `http://127.0.0.1:${port}`, apiKey: "k" });
  });
  after(() => new Promise<void>((r) => srv.close(() => r())));

  const stream = (...lines: string[]): Handler => (_req, _body, res) => {
    res.writeHead(200, { "Content-Type": "application/x-ndjson" });
    res.end(lines.map((l) => l + "\n").join(""));
  };
  const json = (status: number, obj: unknown): Handler => (_req, _body, res) => {
    res.writeHead(status, { "Content-Type": "application/json" });
    res.end(JSON.stringify(obj));
  };
  const ev = (o: unknown) => JSON.stringify(o);

  test("a code line over 9 MiB is a TransportError; one under the server's 8 MiB guard is read", async () => {
    handler = stream(ev({ type: "stdout", text: "x".repeat(9 * MiB + 10) }), ev({ type: "end" }));
    await assert.rejects(fake.runCode("x"), (e: unknown) => e instanceof TransportError && /longer than/.test(e.message));
    const r = { png: "A".repeat(4 * MiB - 10), jpeg: "B".repeat(4 * MiB - 10), text: "<Figure>" };
    handler = stream(ev({ type: "result", result: r }), ev({ type: "end", execution_count: 3 }));
    const ex = await fake.runCode("x");
    assert.equal(ex.results[0]?.png?.length, 4 * MiB - 10);
    assert.equal(ex.executionCount, 3);
  });

  test("a line that never ends is refused once past the bound, not read to its end", async () => {
    let sent = 0;
    let gone = false;
    handler = async (_req, _body, res) => {
      res.writeHead(200, { "Content-Type": "application/x-ndjson" });
      res.on("close", () => (gone = true));
      const chunk = Buffer.alloc(MiB, "y");
      while (!gone && sent < 64) {
        if (!res.write(chunk)) await new Promise((r) => res.once("drain", r).once("close", r));
        sent++;
      }
      res.end();
    };
    await assert.rejects(fake.runCode("x"), (e: unknown) => e instanceof TransportError && /longer than/.test(e.message));
    for (let i = 0; i < 100 && !gone && sent < 64; i++) await sleep(50);
    assert.ok(sent < 32, `got ${sent} MiB sent, want the client gone after about 9`);
  });

  test("an exec line over 1 MiB is a TransportError; 300 KB is read", async () => {
    handler = stream(ev({ type: "stdout", data: "y".repeat(MiB + 10) }), ev({ type: "exit", exit_code: 0 }));
    await assert.rejects(fake.exec("x"), (e: unknown) => e instanceof TransportError && /longer than/.test(e.message));
    handler = stream(ev({ type: "stdout", data: "y".repeat(300_000) }), ev({ type: "exit", exit_code: 0 }));
    assert.equal((await fake.exec("x")).stdout.length, 300_000);
  });

  test("a cell's wait for its turn is not timed; a silent stream still is", async () => {
    const slack = readSlack.ms;
    readSlack.ms = 300;
    try {
      handler = async (req, body, res) => {
        await sleep(1500); // queued behind another cell: no headers yet
        stream(ev({ type: "stdout", text: "ran\n" }), ev({ type: "end", execution_count: 2 }))(req, body, res);
      };
      const ex = await fake.runCode("x", { timeoutMs: 100 });
      assert.deepEqual(ex.logs.stdout, ["ran\n"]);
      assert.equal(ex.executionCount, 2);

      handler = async (_req, _body, res) => {
        res.writeHead(200, { "Content-Type": "application/x-ndjson" });
        res.write(ev({ type: "stdout", text: "a" }) + "\n");
        await sleep(2000);
        res.end(ev({ type: "end" }) + "\n");
      };
      await assert.rejects(fake.runCode("x", { timeoutMs: 100 }), (e: unknown) => e instanceof TransportError && /timed out/.test(e.message));
    } finally {
      readSlack.ms = slack;
    }
  });

  test("an execution_count that is not a whole number is a TransportError", async () => {
    for (const n of ["1e999", '"7"', "1.5", "true", "[1]", "-1"]) {
      handler = stream(`{"type":"end","execution_count":${n}}`);
      await assert.rejects(fake.runCode("x"), (e: unknown) => e instanceof TransportError && /execution_count/.test(e.message), n);
    }
  });

  test("event fields that are not strings are TransportErrors, not [object Object]", async () => {
    for (const bad of [
      { type: "stdout", text: { a: 1 } },
      { type: "stderr", text: 5 },
      { type: "exception", exception: { name: ["x"], value: "v" } },
    ]) {
      handler = stream(ev(bad), ev({ type: "end" }));
      await assert.rejects(fake.runCode("x"), TransportError, JSON.stringify(bad));
    }
  });

  test("context answers that are not contexts are TransportErrors", async () => {
    for (const answer of [[1], "ctx", 5, { id: 5 }, { id: "" }, { cwd: "/w" }, { id: "ctx_1", cwd: {} }]) {
      handler = json(201, answer);
      await assert.rejects(fake.contexts.create(), TransportError, JSON.stringify(answer));
      await assert.rejects(fake.contexts.restart("ctx_1"), TransportError, JSON.stringify(answer));
    }
    for (const answer of [[1], "x", 5, { contexts: 5 }, { contexts: { id: "a" } }, { contexts: [1] }]) {
      handler = json(200, answer);
      await assert.rejects(fake.contexts.list(), TransportError, JSON.stringify(answer));
    }
    handler = json(200, { contexts: [{ id: "ctx_1", language: "python", cwd: "/workspace" }] });
    assert.deepEqual(await fake.contexts.list(), [{ id: "ctx_1", language: "python", cwd: "/workspace" }]);
  });

  test("timeoutMs rounds up; what is not a positive number is refused locally", async () => {
    const bodies: unknown[] = [];
    handler = (req, body, res) => {
      bodies.push(JSON.parse(body));
      stream(ev({ type: "end" }))(req, body, res);
    };
    await fake.runCode("1", { timeoutMs: 0.5 });
    await fake.runCode("2", { timeoutMs: 1500.2 });
    await fake.runCode("3", { timeoutMs: 0 });
    assert.deepEqual(
      bodies.map((b) => (b as { timeout_ms?: number }).timeout_ms),
      [1, 1501, undefined],
    );
    for (const bad of [-1, -0.5, "5", true, NaN, Infinity]) {
      await assert.rejects(fake.runCode("1", { timeoutMs: bad as number }), /timeoutMs/, String(bad));
    }
    assert.equal(bodies.length, 3);
  });
});
