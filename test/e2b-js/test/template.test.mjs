// E2B's JavaScript template builder (e2b, pinned, unmodified) over
// withruntime's E2B API: Template.build uploads a copy step's files,
// starts the build and follows its log; Sandbox.create(name) starts from
// the template it made, with its files, environment, working directory
// and start command; a failed step rejects with E2B's BuildError naming
// the step. One real sandbox.

import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { BuildError, Sandbox, Template, waitForPort } from "e2b";

import { withruntimeSandbox } from "./helpers.mjs";

test("Template.build, then a sandbox from the template", async () => {
  const ctx = mkdtempSync(join(tmpdir(), "e2b-js-tpl-"));
  mkdirSync(join(ctx, "site"));
  writeFileSync(join(ctx, "site", "index.html"), "hello from a js template\n");
  const name = `js-tpl-${Date.now()}`;
  const tpl = Template({ fileContextPath: ctx })
    .fromBaseImage()
    .copy("site", "/home/user/site")
    .runCmd("echo js-built > /home/user/marker")
    .setEnvs({ JS_TPL: "yes" })
    .setWorkdir("/home/user/site")
    .setStartCmd("python3 -m http.server 8124", waitForPort(8124));
  const logs = [];
  const info = await Template.build(tpl, name, { onBuildLogs: (e) => logs.push(String(e.message)) });
  assert.equal(info.name, name);
  assert.ok(logs.some((m) => m.startsWith("[builder 1/")), logs.join("\n"));
  assert.equal(await Template.exists(name), true);

  const sbx = await Sandbox.create(name, { timeoutMs: 120_000 });
  try {
    const r = await sbx.commands.run("cat /home/user/marker; echo $JS_TPL; pwd; curl -s http://127.0.0.1:8124/index.html");
    assert.deepEqual(r.stdout.split("\n").filter(Boolean), ["js-built", "yes", "/home/user/site", "hello from a js template"]);
    const ours = await withruntimeSandbox(sbx.sandboxId);
    assert.equal(ours.template, `${name}:latest`);
  } finally {
    await sbx.kill();
  }
});

test("a failing step rejects with BuildError naming it", async () => {
  const name = `js-tpl-bad-${Date.now()}`;
  const tpl = Template({ fileContextPath: tmpdir() }).fromTemplate("base").runCmd("exit 7");
  await assert.rejects(Template.build(tpl, name), (err) => err instanceof BuildError && /step 1/.test(err.message));
  assert.equal(await Template.exists(name), false);
});
