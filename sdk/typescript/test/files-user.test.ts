import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { APIError, type Sandbox } from "../src/index.js";
import { small, tempDir } from "./helpers.js";

// The files API acts as the user it names and the sandbox's kernel checks
// that user's permissions: as the default user, /etc/shadow cannot be read
// nor /etc written, by any call; { user: "root" } can.

function forbidden(e: unknown): boolean {
  return e instanceof APIError && e.code === "forbidden" && e.status === 403;
}

async function owner(sbx: Sandbox, path: string): Promise<string> {
  const r = await sbx.exec(["sudo", "-n", "stat", "-c", "%U:%G", path], { check: true });
  return r.stdout.trim();
}

describe("files act as the user", () => {
  let sbx: Sandbox;
  before(async () => {
    sbx = await small();
  });
  after(async () => {
    await sbx?.stop().catch(() => undefined);
  });

  test("the default user is refused what the kernel refuses it", async () => {
    const dir = tempDir();
    await assert.rejects(sbx.files.read("/etc/shadow"), forbidden);
    await assert.rejects(sbx.files.readBytes("/etc/shadow", { user: "user" }), forbidden);
    await assert.rejects(sbx.files.readHead("/etc/shadow", 10), forbidden);
    await assert.rejects(sbx.files.write("/etc/ts-user.txt", "x"), forbidden);
    await assert.rejects(sbx.files.mkdir("/etc/ts-dir"), forbidden);
    await assert.rejects(sbx.files.remove("/etc/hostname"), forbidden);
    await assert.rejects(sbx.files.download("/etc/shadow", join(dir, "shadow")), forbidden);
    assert.equal(existsSync(join(dir, "shadow")), false);
    writeFileSync(join(dir, "f.txt"), "from the host");
    await assert.rejects(sbx.files.upload(join(dir, "f.txt"), "/etc/f.txt"), forbidden);
    mkdirSync(join(dir, "tree", "sub"), { recursive: true });
    writeFileSync(join(dir, "tree", "sub", "g.txt"), "g");
    await assert.rejects(sbx.files.upload(join(dir, "tree"), "/etc/ts-tree"), forbidden);
    const ls = await sbx.exec("ls /etc/ts-user.txt /etc/f.txt /etc/ts-tree /etc/ts-dir");
    assert.notEqual(ls.exitCode, 0);

    await sbx.files.upload(join(dir, "tree"), "/home/user/tree");
    assert.equal(await owner(sbx, "/home/user/tree/sub/g.txt"), "user:user");
  });

  test("root when asked", async () => {
    const dir = tempDir();
    assert.match(await sbx.files.read("/etc/shadow", { user: "root" }), /^root:/);
    await sbx.files.write("/etc/ts-root.txt", "by root", { user: "root" });
    assert.equal(await owner(sbx, "/etc/ts-root.txt"), "root:root");
    await assert.rejects(sbx.files.write("/etc/ts-root.txt", "by user"), forbidden);
    writeFileSync(join(dir, "f.txt"), "up");
    await sbx.files.upload(join(dir, "f.txt"), "/etc/ts-up.txt", { user: "root" });
    assert.equal(await owner(sbx, "/etc/ts-up.txt"), "root:root");
    await sbx.files.download("/etc/shadow", join(dir, "shadow"), { user: "root" });
    assert.match(readFileSync(join(dir, "shadow"), "utf8"), /^root:/);
    await sbx.files.mkdir("/root/made", { user: "root" });
    assert.equal((await sbx.files.stat("/root/made", { user: "root" })).type, "dir");
    await assert.rejects(sbx.files.stat("/root/made"), forbidden);
    assert.ok((await sbx.files.list("/etc", { user: "root" })).some((e) => e.name === "ts-root.txt"));
    await sbx.files.remove("/etc/ts-root.txt", { user: "root" });
    assert.equal(await sbx.files.exists("/etc/ts-root.txt", { user: "root" }), false);
  });
});
