import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { CommandError, type Sandbox, WaitTimeoutError } from "../src/index.js";
import { small } from "./helpers.js";

describe("exec", () => {
  let sbx: Sandbox;
  before(async () => {
    sbx = await small();
  });
  after(async () => {
    await sbx?.stop().catch(() => undefined);
  });

  test("callbacks get the output in order, all before the result", async () => {
    const events: string[] = [];
    let resolved = false;
    const script = "for i in 1 2 3 4 5; do echo out$i; echo err$i >&2; sleep 0.1; done; exit 4";
    const p = sbx.exec(["sh", "-c", script], {
      onStdout: (s: string) => {
        assert.equal(resolved, false, "onStdout called after exec resolved");
        events.push(`o:${s}`);
      },
      onStderr: (s: string) => {
        assert.equal(resolved, false, "onStderr called after exec resolved");
        events.push(`e:${s}`);
      },
    });
    const r = await p.finally(() => (resolved = true));
    assert.equal(r.exitCode, 4);
    assert.equal(r.ok, false);
    assert.equal(r.timedOut, false);
    assert.equal(r.stdout, "out1\nout2\nout3\nout4\nout5\n");
    assert.equal(r.stderr, "err1\nerr2\nerr3\nerr4\nerr5\n");
    const out = events.filter((e) => e.startsWith("o:")).map((e) => e.slice(2)).join("");
    const err = events.filter((e) => e.startsWith("e:")).map((e) => e.slice(2)).join("");
    assert.equal(out, r.stdout);
    assert.equal(err, r.stderr);
    // The streams are interleaved as written: out3 reaches us before err4.
    const at = (s: string): number => events.findIndex((e) => e.includes(s));
    assert.ok(at("out3") < at("err4") && at("err1") < at("out2"), `events out of order: ${JSON.stringify(events)}`);
    assert.ok(typeof r.pid === "number" && r.pid > 0);
  });

  test("an async callback is awaited before the next one", async () => {
    const seen: string[] = [];
    let busy = false;
    await sbx.exec("for i in 1 2 3; do echo $i; sleep 0.05; done", {
      onStdout: async (s: string) => {
        assert.equal(busy, false, "a callback ran while the previous one was still running");
        busy = true;
        await new Promise((r) => setTimeout(r, 100));
        seen.push(s);
        busy = false;
      },
    });
    assert.equal(seen.join(""), "1\n2\n3\n");
  });

  test("an error a callback throws reaches the caller as it was, and the command is killed", async () => {
    class Stop extends Error {}
    for (const name of ["throws", "rejects"]) {
      const boom = new Stop("enough");
      const mark = `cb-${name}`;
      const cmd = `echo $$ > ${mark}.pid; echo go; exec sleep 300`;
      const onStdout =
        name === "throws"
          ? (): never => {
              throw boom;
            }
          : (): Promise<never> => Promise.reject(boom);
      await assert.rejects(sbx.exec(["sh", "-c", cmd], { onStdout }), (e: unknown) => {
        assert.equal(e, boom, `${name}: got ${e}, want the very error the callback threw`);
        assert.ok(e instanceof Stop);
        return true;
      });
      // The connection was closed, so the server ends the command.
      const pid = (await sbx.files.read(`${mark}.pid`)).trim();
      let alive = true;
      for (let i = 0; i < 300 && alive; i++) {
        alive = (await sbx.exec(`kill -0 ${pid} 2>/dev/null`)).exitCode === 0;
        if (alive) await new Promise((r) => setTimeout(r, 100));
      }
      assert.equal(alive, false, `${name}: the command (pid ${pid}) still runs after the callback failed`);
    }
  });

  test("stdin as bytes must be UTF-8", async () => {
    const r = await sbx.exec("cat", { stdin: new Uint8Array([0xef, 0xbb, 0xbf, 0xc3, 0xa9, 0x0a]) });
    assert.deepEqual([...Buffer.from(r.stdout)], [0xef, 0xbb, 0xbf, 0xc3, 0xa9, 0x0a]);
    for (const bad of [[0xff], [0xc3], [0x61, 0xed, 0xa0, 0x80]]) {
      await assert.rejects(sbx.exec("cat", { stdin: new Uint8Array(bad) }), (e: unknown) => {
        assert.ok(e instanceof TypeError, `stdin ${JSON.stringify(bad)}: got ${e}, want TypeError`);
        assert.match((e as Error).message, /not valid UTF-8/);
        return true;
      });
    }
  });

  test("cwd, env, stdin and a string command", async () => {
    await sbx.files.mkdir("sub");
    const r = await sbx.exec("pwd; echo $A-$B; cat", { cwd: "sub", env: { A: "x", B: "y" }, stdin: "from stdin" });
    assert.equal(r.stdout, "/workspace/sub\nx-y\nfrom stdin");
    assert.equal(r.exitCode, 0);
    assert.equal(r.ok, true);
  });

  test("an argv is not run by a shell", async () => {
    const r = await sbx.exec(["echo", "$HOME", "a b"]);
    assert.equal(r.stdout, "$HOME a b\n");
  });

  test("text: false gives the exact bytes", async () => {
    const r = await sbx.exec(["printf", "\\377\\000\\001"], { text: false });
    assert.ok(r.stdout instanceof Uint8Array);
    assert.deepEqual([...r.stdout], [0xff, 0x00, 0x01]);
  });

  test("check: true throws CommandError with the result", async () => {
    await assert.rejects(sbx.exec("echo oops >&2; exit 3", { check: true }), (e: unknown) => {
      assert.ok(e instanceof CommandError, `got ${e}`);
      assert.equal(e.result.exitCode, 3);
      assert.equal(e.result.stderr, "oops\n");
      assert.match(e.message, /exited with code 3: oops/);
      return true;
    });
    const ok = await sbx.exec("echo fine", { check: true });
    assert.equal(ok.stdout, "fine\n");
  });

  test("timeoutMs ends the command and says so", async () => {
    const r = await sbx.exec("echo started; sleep 60", { timeoutMs: 1000 });
    assert.equal(r.timedOut, true);
    assert.equal(r.stdout, "started\n");
    assert.notEqual(r.exitCode, 0);
    await assert.rejects(sbx.exec("sleep 60", { timeoutMs: 500, check: true }), /timed out/);
  });
});

describe("background processes", () => {
  let sbx: Sandbox;
  before(async () => {
    sbx = await small();
  });
  after(async () => {
    await sbx?.stop().catch(() => undefined);
  });

  test("output so far, kill, wait", async () => {
    const p = await sbx.exec("echo ready; echo warn >&2; sleep 300", { background: true });
    assert.ok(p.pid > 0);
    let out = await p.output();
    // The two streams are read apart: wait for both.
    for (let i = 0; i < 100 && !(out.stdout.includes("ready") && out.stderr.includes("warn")); i++) {
      await new Promise((r) => setTimeout(r, 100));
      out = await p.output();
    }
    assert.equal(out.running, true);
    assert.equal(out.exitCode, null);
    assert.equal(out.stdout, "ready\n");
    assert.equal(out.stderr, "warn\n");
    await assert.rejects(p.wait({ timeoutMs: 300 }), WaitTimeoutError);
    const listed = await sbx.processes();
    assert.ok(listed.some((q) => q.pid === p.pid), "the process is not listed");
    await p.kill();
    const r = await p.wait();
    assert.equal(r.exitCode, 137);
    assert.equal(r.stdout, "ready\n");
  });

  test("wait returns the result; check applies to wait", async () => {
    const p = await sbx.exec(["sh", "-c", "sleep 0.5; echo done"], { background: true });
    const r = await p.wait();
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout, "done\n");
    assert.equal(p.running, false);
    const again = await sbx.process(p.pid);
    assert.equal(again.exitCode, 0);

    const bad = await sbx.exec("exit 5", { background: true, check: true });
    await assert.rejects(bad.wait(), (e: unknown) => e instanceof CommandError && e.result.exitCode === 5);
  });
});
