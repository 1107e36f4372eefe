// E2B's JavaScript SDK (e2b, pinned, unmodified) over withruntime's E2B
// API, in one real sandbox: background command handles, the process list
// and reattaching by pid; the files calls beyond write/read/list (bytes, a
// stream and a Blob, several files at once, exists, remove, makeDir,
// rename, getInfo); root for a command and a file; a missing file.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { CommandExitError, FileNotFoundError, FileType, NotFoundError, Sandbox } from "e2b";

let sbx;

before(async () => {
  sbx = await Sandbox.create({ timeoutMs: 600_000, metadata: { test: "e2b-js-commands-files" } });
});

after(async () => {
  if (sbx) await sbx.kill();
});

/** Polls fn until it returns something true (at most 20 s); that value. */
async function until(fn) {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const v = await fn();
    if (v || Date.now() > deadline) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
}

const pids = async () => (await sbx.commands.list()).map((p) => p.pid);

test("a background handle: list while it runs, then wait for its result", async () => {
  const h = await sbx.commands.run("echo started; read -r l; echo done:$l", { background: true, stdin: true });
  assert.ok(h.pid > 0);
  const listed = (await sbx.commands.list()).find((p) => p.pid === h.pid);
  assert.ok(listed, `pid ${h.pid} not in commands.list`);
  assert.equal(listed.args.at(-1), "echo started; read -r l; echo done:$l");
  await sbx.commands.sendStdin(h.pid, "x\n");
  const r = await h.wait();
  assert.equal(r.exitCode, 0);
  assert.equal(r.stdout, "started\ndone:x\n");
  assert.ok(!(await pids()).includes(h.pid), "an ended command is still listed");
});

test("a background handle's kill ends it; wait then rejects, kill again is false", async () => {
  const h = await sbx.commands.run("sleep 300", { background: true });
  assert.ok((await pids()).includes(h.pid));
  assert.equal(await h.kill(), true);
  await assert.rejects(h.wait(), (e) => {
    assert.ok(e instanceof CommandExitError, String(e));
    assert.notEqual(e.exitCode, 0);
    return true;
  });
  assert.equal(await sbx.commands.kill(h.pid), false);
  assert.equal(await sbx.commands.kill(999999), false);
});

test("sendStdin on the handle and through commands, then closeStdin ends the input", async () => {
  const h = await sbx.commands.run("while read -r l; do echo got:$l; done; echo eof", { background: true, stdin: true });
  await h.sendStdin("one\n");
  await sbx.commands.sendStdin(h.pid, new TextEncoder().encode("two\n"));
  await h.closeStdin();
  const r = await h.wait();
  assert.equal(r.stdout, "got:one\ngot:two\neof\n");
});

test("commands.connect(pid) follows a running command: its kept output, then the live rest", async () => {
  const h = await sbx.commands.run("echo before; read -r l; echo after:$l", { background: true, stdin: true });
  await until(async () => (await pids()).includes(h.pid));
  await h.disconnect();
  // Disconnecting never ends the command.
  assert.ok((await pids()).includes(h.pid));
  const out = [];
  const again = await sbx.commands.connect(h.pid, { onStdout: (d) => out.push(d) });
  assert.equal(again.pid, h.pid);
  await sbx.commands.sendStdin(h.pid, "x\n");
  const r = await again.wait();
  assert.equal(r.stdout, "before\nafter:x\n");
  assert.equal(out.join(""), "before\nafter:x\n");
  await assert.rejects(sbx.commands.connect(999999), (e) => e instanceof NotFoundError);
});

test("files: makeDir, exists, getInfo, rename, remove", async () => {
  assert.equal(await sbx.files.makeDir("/home/user/js-dir/sub"), true);
  assert.equal(await sbx.files.makeDir("/home/user/js-dir/sub"), false); // already there
  assert.equal(await sbx.files.exists("/home/user/js-dir/sub"), true);
  const dir = await sbx.files.getInfo("/home/user/js-dir/sub");
  assert.equal(dir.type, FileType.DIR);
  assert.equal(dir.name, "sub");

  await sbx.files.write("js-dir/a.txt", "12345"); // relative: under /home/user
  const info = await sbx.files.getInfo("/home/user/js-dir/a.txt");
  assert.equal(info.type, FileType.FILE);
  assert.equal(info.size, 5);
  assert.equal(info.path, "/home/user/js-dir/a.txt");
  assert.equal(info.owner, "user");

  const moved = await sbx.files.rename("/home/user/js-dir/a.txt", "/home/user/js-dir/sub/b.txt");
  assert.equal(moved.path, "/home/user/js-dir/sub/b.txt");
  assert.equal(await sbx.files.exists("/home/user/js-dir/a.txt"), false);
  assert.equal(await sbx.files.read("/home/user/js-dir/sub/b.txt"), "12345");

  await sbx.files.remove("/home/user/js-dir/sub/b.txt");
  assert.equal(await sbx.files.exists("/home/user/js-dir/sub/b.txt"), false);
  await sbx.files.remove("/home/user/js-dir");
  assert.equal(await sbx.files.exists("/home/user/js-dir"), false);
  // The command side sees the same filesystem.
  assert.equal((await sbx.commands.run("test -e /home/user/js-dir; echo $?")).stdout, "1\n");
});

test("files: bytes, a ReadableStream and a Blob upload", async () => {
  const raw = new Uint8Array(3 * 256);
  for (let i = 0; i < raw.length; i++) raw[i] = i % 256;
  await sbx.files.write("/tmp/js-raw.bin", raw);
  const back = await sbx.files.read("/tmp/js-raw.bin", { format: "bytes" });
  assert.ok(back instanceof Uint8Array);
  assert.deepEqual(Buffer.from(back), Buffer.from(raw));
  assert.equal((await sbx.commands.run("sha256sum < /tmp/js-raw.bin | cut -c1-64")).stdout.trim(),
    (await import("node:crypto")).createHash("sha256").update(raw).digest("hex"));

  const chunks = ["one ", "two ", "three"];
  const stream = new ReadableStream({
    start(c) {
      for (const s of chunks) c.enqueue(new TextEncoder().encode(s));
      c.close();
    },
  });
  await sbx.files.write("/tmp/js-stream.txt", stream);
  assert.equal(await sbx.files.read("/tmp/js-stream.txt"), "one two three");

  await sbx.files.write("/tmp/js-blob.txt", new Blob(["from ", "a blob"]));
  assert.equal(await sbx.files.read("/tmp/js-blob.txt"), "from a blob");

  const rs = await sbx.files.read("/tmp/js-blob.txt", { format: "stream" });
  let text = "";
  for await (const c of rs) text += new TextDecoder().decode(c);
  assert.equal(text, "from a blob");
});

test("files: several files at once", async () => {
  const infos = await sbx.files.write([
    { path: "/home/user/js-multi/a.txt", data: "A" },
    { path: "/home/user/js-multi/sub/b.bin", data: new Uint8Array([0, 66]).buffer },
    { path: "/tmp/js-multi-c.txt", data: new Blob(["C"]) },
  ]);
  assert.deepEqual(infos.map((i) => i.path).sort(), ["/home/user/js-multi/a.txt", "/home/user/js-multi/sub/b.bin", "/tmp/js-multi-c.txt"]);
  assert.equal(await sbx.files.read("/home/user/js-multi/a.txt"), "A");
  assert.deepEqual([...(await sbx.files.read("/home/user/js-multi/sub/b.bin", { format: "bytes" }))], [0, 66]);
  assert.equal(await sbx.files.read("/tmp/js-multi-c.txt"), "C");
});

test("user root: a command runs as uid 0 and a file written as root is root's", async () => {
  const r = await sbx.commands.run("id -u; echo $HOME; pwd", { user: "root" });
  assert.deepEqual(r.stdout.split("\n").slice(0, 3), ["0", "/root", "/root"]);
  const info = await sbx.files.write("/root/js-root.txt", "root's", { user: "root" });
  assert.equal(info.path, "/root/js-root.txt");
  assert.equal(await sbx.files.read("/root/js-root.txt", { user: "root" }), "root's");
  assert.equal((await sbx.commands.run("stat -c %u /root/js-root.txt", { user: "root" })).stdout, "0\n");
  // A relative path is under root's home for root.
  await sbx.files.write("rel-root.txt", "r", { user: "root" });
  assert.equal((await sbx.commands.run("cat /root/rel-root.txt", { user: "root" })).stdout, "r");
  const info2 = await sbx.files.getInfo("/root/js-root.txt", { user: "root" });
  assert.equal(info2.owner, "root");
  // Without user, the same call makes the default user's file (as E2B's
  // daemon does: it writes, then hands the file to the user it acts as).
  await sbx.files.write("/tmp/js-user.txt", "u");
  assert.equal((await sbx.files.getInfo("/tmp/js-user.txt")).owner, "user");
});

test("a missing file is a FileNotFoundError", async () => {
  await assert.rejects(sbx.files.read("/home/user/no-such-file"), (e) => {
    assert.ok(e instanceof FileNotFoundError, `${e?.constructor?.name}: ${e}`);
    return true;
  });
  await assert.rejects(sbx.files.getInfo("/home/user/no-such-file"), (e) => e instanceof FileNotFoundError);
  await assert.rejects(sbx.files.rename("/home/user/no-such-file", "/tmp/x"), (e) => e instanceof FileNotFoundError);
  assert.equal(await sbx.files.exists("/home/user/no-such-file"), false);
  // As on E2B, removing what is not there succeeds.
  await sbx.files.remove("/home/user/no-such-file");
});
