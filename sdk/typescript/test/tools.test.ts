// The four agent tools called directly against a live sandbox: their
// schemas, results, caps, timeouts and errors, as the Python SDK's.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { APIError, Sandbox } from "../src/index.js";
import {
  LIST_CAP,
  OUTPUT_CAP,
  TIMEOUT_SECONDS,
  sandboxTools,
  type ToolExecResult,
  type ToolSandbox,
} from "../src/tools.js";
import { small } from "./helpers.js";

let sbx: Sandbox;

before(async () => {
  sbx = await small({ timeoutSeconds: 900, metadata: { test: "sdk-ts-tools" } });
});

after(async () => {
  await sbx?.stop();
});

describe("shape", () => {
  test("the real Sandbox is a ToolSandbox", () => {
    // Compile-time: fails to build if the SDK's Sandbox stops fitting.
    const t: ToolSandbox = sbx;
    assert.equal(typeof t.exec, "function");
  });

  test("names, order and inputs as in Python", () => {
    const tools = sandboxTools(sbx);
    assert.deepEqual(
      tools.map((t) => t.name),
      ["runtime_exec", "runtime_read_file", "runtime_write_file", "runtime_list_files"],
    );
    const inputs = tools.map((t) => [Object.keys(t.parameters.properties), t.parameters.required]);
    assert.deepEqual(inputs, [
      [["command", "cwd", "timeout_seconds"], ["command"]],
      [["path"], ["path"]],
      [["path", "content"], ["path", "content"]],
      [["path"], []],
    ]);
    const exec = tools[0].parameters.properties;
    assert.equal(exec.command.type, "string");
    assert.deepEqual(exec.cwd.type, ["string", "null"]);
    assert.deepEqual(exec.timeout_seconds.type, ["integer", "null"]);
    for (const t of tools) {
      assert.equal(t.parameters.type, "object");
      assert.equal(t.parameters.additionalProperties, false);
      assert.ok(t.description.length > 20, t.name);
      for (const [k, p] of Object.entries(t.parameters.properties)) assert.ok(p.description, `${t.name}.${k}`);
    }
    assert.equal(OUTPUT_CAP, 20_000);
    assert.equal(LIST_CAP, 400);
    assert.equal(TIMEOUT_SECONDS, 120);
  });

  test("runtime_exec's description states the default timeout", () => {
    const cases: Array<[number | null | undefined, string]> = [
      [undefined, "null means 120 seconds."],
      [30, "null means 30 seconds."],
      [null, "null means no limit but the sandbox's lease."],
    ];
    for (const [timeoutSeconds, said] of cases) {
      const opts = timeoutSeconds === undefined ? {} : { timeoutSeconds };
      const [exec] = sandboxTools(sbx, opts);
      assert.equal(
        exec.parameters.properties.timeout_seconds.description,
        "Seconds after which the command is killed; " + said,
      );
      assert.match(exec.description, /nohup .*2>&1 &/);
      assert.match(exec.description, /timed_out true/);
    }
  });

  test("the default timeout must be positive", () => {
    assert.throws(() => sandboxTools(sbx, { timeoutSeconds: 0 }), RangeError);
    assert.throws(() => sandboxTools(sbx, { timeoutSeconds: -5 }), RangeError);
  });
});

describe("runtime_exec", () => {
  test("returns the four fields", async () => {
    const [exec, , write] = sandboxTools(sbx);
    await write.execute({ path: "fib.py", content: "a, b = 0, 1\nfor _ in range(90): a, b = b, a + b\nprint(a)\n" });
    const out = await exec.execute({ command: "python3 fib.py" });
    assert.deepEqual(out, { exit_code: 0, stdout: "2880067194370816120\n", stderr: "", timed_out: false });
    assert.deepEqual(Object.keys(out), ["exit_code", "stdout", "stderr", "timed_out"]);
  });

  test("null and omitted mean the default; cwd is relative to /workspace", async () => {
    const [exec] = sandboxTools(sbx);
    await exec.execute({ command: "mkdir -p sub" });
    assert.equal((await exec.execute({ command: "pwd", cwd: null, timeout_seconds: null })).stdout, "/workspace\n");
    assert.equal((await exec.execute({ command: "pwd", cwd: "sub", timeout_seconds: 5 })).stdout, "/workspace/sub\n");
  });

  test("the timeout reaches the SDK: 120 s by default, the binding's, the model's", async () => {
    const seen: Array<number | undefined> = [];
    const recording: ToolSandbox = {
      files: sbx.files,
      exec: (cmd, opts) => {
        seen.push(opts?.timeoutMs);
        return sbx.exec(cmd, opts) as Promise<ToolExecResult>;
      },
    };
    await sandboxTools(recording)[0].execute({ command: "true" });
    await sandboxTools(recording, { timeoutSeconds: 60 })[0].execute({ command: "true" });
    await sandboxTools(recording, { timeoutSeconds: 60 })[0].execute({ command: "true", timeout_seconds: 2 });
    await sandboxTools(recording, { timeoutSeconds: null })[0].execute({ command: "true" });
    assert.deepEqual(seen, [120_000, 60_000, 2_000, undefined]);
  });

  test("a failing command is returned, not thrown", async () => {
    const out = await sandboxTools(sbx)[0].execute({ command: "python3 -c '1/0'" });
    assert.equal(out.exit_code, 1);
    assert.match(out.stderr, /ZeroDivisionError/);
    assert.equal(out.timed_out, false);
  });

  test("a command past its timeout comes back timed_out", async () => {
    const [exec] = sandboxTools(sbx, { timeoutSeconds: 2 });
    const out = await exec.execute({ command: "echo started; sleep 60" });
    assert.equal(out.timed_out, true, JSON.stringify(out));
    assert.equal(out.stdout, "started\n");
    const perCall = await sandboxTools(sbx)[0].execute({ command: "sleep 60", timeout_seconds: 1 });
    assert.equal(perCall.timed_out, true, JSON.stringify(perCall));
  });

  test("a negative timeout is refused", async () => {
    await assert.rejects(sandboxTools(sbx)[0].execute({ command: "true", timeout_seconds: -1 }), RangeError);
  });

  test("long output keeps its end, with Python's note", async () => {
    const out = await sandboxTools(sbx)[0].execute({
      command: "python3 -c \"import sys\nfor i in range(20000): print(f'line {i}')\nsys.stderr.write('small')\"",
    });
    assert.equal(out.exit_code, 0);
    assert.ok(out.stdout.startsWith("[stdout was cut: only its last 20000 characters are shown]\n"), out.stdout.slice(0, 100));
    assert.ok(out.stdout.endsWith("line 19999\n"));
    const marker = "[stdout was cut: only its last 20000 characters are shown]\n".length;
    assert.equal(out.stdout.length, marker + OUTPUT_CAP);
    assert.equal(out.stderr, "small");
    assert.ok(JSON.stringify(out).length < 2 * OUTPUT_CAP + 500);
  });

  test("the cap counts characters, not UTF-16 units", async () => {
    // 30000 four-byte characters (two UTF-16 units each): 20000 are kept.
    const out = await sandboxTools(sbx)[0].execute({ command: "python3 -c \"print('\\U0001F600' * 30000, end='')\"" });
    assert.ok(out.stdout.startsWith("[stdout was cut: only its last 20000 characters are shown]\n"));
    const kept = out.stdout.slice(out.stdout.indexOf("\n") + 1);
    assert.equal([...kept].length, 20_000);
    assert.equal(kept, "\u{1F600}".repeat(20_000));
  });

  test("a smaller outputCap", async () => {
    const out = await sandboxTools(sbx, { outputCap: 10 })[0].execute({ command: "printf 0123456789abcdef" });
    assert.equal(out.stdout, "[stdout was cut: only its last 10 characters are shown]\n6789abcdef");
  });

  test("calls in parallel", async () => {
    const [exec, read, write] = sandboxTools(sbx);
    await Promise.all(
      Array.from({ length: 6 }, async (_, i) => {
        assert.match(await write.execute({ path: `par/${i}.txt`, content: `n${i}` }), /^wrote 2 bytes/);
        assert.equal(await read.execute({ path: `par/${i}.txt` }), `n${i}`);
        assert.equal((await exec.execute({ command: `echo ${i}` })).stdout, `${i}\n`);
      }),
    );
  });
});

describe("files", () => {
  test("write, read and list round trip", async () => {
    const [, read, write, list] = sandboxTools(sbx);
    const msg = await write.execute({ path: "rt/fib.py", content: "a, b = 0, 1\nfor _ in range(90): a, b = b, a + b\nprint(a)\n" });
    assert.equal(msg, "wrote 57 bytes to /workspace/rt/fib.py");
    assert.equal(await read.execute({ path: "rt/fib.py" }), "a, b = 0, 1\nfor _ in range(90): a, b = b, a + b\nprint(a)\n");
    assert.equal(await write.execute({ path: "/workspace/rt/sub/é.txt", content: "é" }), "wrote 2 bytes to /workspace/rt/sub/é.txt");
    const entries = await list.execute({ path: "rt" });
    assert.deepEqual(
      entries.map((e) => [e.name, e.type]),
      [
        ["fib.py", "file"],
        ["sub", "dir"],
      ],
    );
    assert.equal(entries[0].size, 57);
    assert.deepEqual(await list.execute({ path: "rt/sub" }), [{ name: "é.txt", type: "file", size: 2 }]);
    // No path (or null) is /workspace.
    const top = await list.execute({});
    assert.ok(top.some((e) => e.name === "rt" && e.type === "dir"));
    assert.deepEqual(await list.execute({ path: null }), top);
  });

  test("a long file is cut after its first 20000 bytes, with Python's note", async () => {
    const [, read, write] = sandboxTools(sbx);
    await write.execute({ path: "big.txt", content: "x".repeat(50_000) });
    const text = await read.execute({ path: "big.txt" });
    assert.ok(text.startsWith("x".repeat(OUTPUT_CAP) + "\n[cut: only the first 20000 bytes of big.txt are shown (50000 bytes in all);"), text.slice(19_990, 20_100));
    assert.ok(text.length < OUTPUT_CAP + 300);
    await write.execute({ path: "fits.txt", content: "ok" });
    assert.equal(await read.execute({ path: "fits.txt" }), "ok");
  });

  test("a binary file says so", async () => {
    await sbx.files.write("blob", new Uint8Array([0x7f, 0x45, 0x4c, 0x46, 0, 0, 1]));
    assert.equal(
      await sandboxTools(sbx)[1].execute({ path: "blob" }),
      "[blob is a binary file (7 bytes); use runtime_exec with file, xxd or python3 to inspect it]",
    );
  });

  test("a long directory listing is capped with a note", async () => {
    const [exec, , , list] = sandboxTools(sbx);
    const made = await exec.execute({ command: `mkdir -p many && cd many && seq -f 'f%04g' 0 ${LIST_CAP + 4} | xargs touch` });
    assert.equal(made.exit_code, 0, made.stderr);
    const out = await list.execute({ path: "many" });
    assert.equal(out.length, LIST_CAP + 1);
    assert.deepEqual(out[0], { name: "f0000", type: "file", size: 0 });
    assert.equal(out[LIST_CAP - 1].name, "f0399");
    assert.deepEqual(out[LIST_CAP], { name: "[5 more entries not shown]", type: "note", size: 0 });
  });
});

describe("errors", () => {
  test("a path that is not there is data the model reads", async () => {
    const [, read, , list] = sandboxTools(sbx);
    assert.equal(await read.execute({ path: "missing.txt" }), "not found: /workspace/missing.txt (no such file or directory)");
    assert.equal(await read.execute({ path: "/etc/nope" }), "not found: /etc/nope (no such file or directory)");
    assert.deepEqual(await list.execute({ path: "nodir" }), [
      { name: "not found: /workspace/nodir (no such file or directory)", type: "note", size: 0 },
    ]);
  });

  test("in a sandbox that is not there, not_found rejects", async () => {
    const notFound = Object.assign(new Error("no sandbox sbx_gone"), { code: "not_found" });
    const gone: ToolSandbox = {
      exec: () => Promise.reject(notFound),
      files: {
        readHead: () => Promise.reject(notFound),
        write: () => Promise.reject(notFound),
        list: () => Promise.reject(notFound),
      },
      info: () => Promise.reject(notFound),
    };
    const [, read, , list] = sandboxTools(gone);
    await assert.rejects(read.execute({ path: "missing.txt" }), (e) => e === notFound);
    await assert.rejects(list.execute({ path: "nodir" }), (e) => e === notFound);
    // An ended sandbox's not_found is the platform's too.
    const [, endedRead] = sandboxTools({ ...gone, info: () => Promise.resolve({ state: "ended" }) });
    await assert.rejects(endedRead.execute({ path: "missing.txt" }), (e) => e === notFound);
  });

  test("arguments of the wrong type are refused before any call", async () => {
    const [exec, read] = sandboxTools(sbx);
    await assert.rejects(exec.execute({} as never), TypeError);
    await assert.rejects(read.execute({ path: 5 } as never), TypeError);
  });

  test("a stopped sandbox rejects with an APIError", async () => {
    const gone = await small({ timeoutSeconds: 300, metadata: { test: "sdk-ts-tools" } });
    const [exec, read] = sandboxTools(gone);
    assert.equal((await exec.execute({ command: "echo alive" })).stdout, "alive\n");
    await gone.stop();
    await assert.rejects(exec.execute({ command: "echo x" }), APIError);
    // Its files are gone with it: not a path for the model to try again.
    await assert.rejects(read.execute({ path: "missing.txt" }), APIError);
  });
});
