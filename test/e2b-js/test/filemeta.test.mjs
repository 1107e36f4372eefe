// E2B's JavaScript SDK (e2b, pinned, unmodified): envd 0.6.2 file metadata
// (X-Metadata-* on an upload, back on getInfo, list and rename) and the
// owner, group, permissions and link target of an entry, in one real
// sandbox.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { FileType, Sandbox } from "e2b";

let sbx;

before(async () => {
  sbx = await Sandbox.create({ timeoutMs: 600_000, metadata: { test: "e2b-js-filemeta" } });
});

after(async () => {
  if (sbx) await sbx.kill();
});

test("metadata set by a write is on the answer, getInfo, list and rename; a plain write clears it", async () => {
  const md = { author: "mish", purpose: "upload" };
  const w = await sbx.files.write("jsmeta/a.txt", "x", { metadata: md });
  assert.deepEqual(w.metadata, md);
  assert.deepEqual((await sbx.files.getInfo("jsmeta/a.txt")).metadata, md);
  const s = await sbx.files.write("jsmeta/s.txt", new Blob(["y"]).stream(), { metadata: { Stage: "stream" } });
  assert.deepEqual(s.metadata, { stage: "stream" });
  const listed = Object.fromEntries((await sbx.files.list("jsmeta")).map((e) => [e.name, e.metadata]));
  assert.deepEqual(listed, { "a.txt": md, "s.txt": { stage: "stream" } });
  assert.deepEqual((await sbx.files.rename("jsmeta/a.txt", "jsmeta/b.txt")).metadata, md);
  assert.equal((await sbx.files.write("jsmeta/b.txt", "z")).metadata, undefined);
  assert.equal((await sbx.files.getInfo("jsmeta/b.txt")).metadata, undefined);
});

test("owner, group, permissions, modified time and a link's target", async () => {
  await sbx.files.write("jsmeta/o.txt", "12345");
  await sbx.commands.run("ln -sf o.txt /home/user/jsmeta/l");
  const i = await sbx.files.getInfo("jsmeta/o.txt");
  assert.deepEqual([i.owner, i.group, i.permissions, i.size], ["user", "user", "-rw-r--r--", 5]);
  assert.ok(Math.abs(i.modifiedTime.getTime() - Date.now()) < 5 * 60_000, `modifiedTime ${i.modifiedTime}`);
  const root = await sbx.files.getInfo("/etc/passwd");
  assert.deepEqual([root.owner, root.group], ["root", "root"]);
  const l = (await sbx.files.list("jsmeta")).find((e) => e.name === "l");
  // As envd: the type of what the link names, with its absolute target.
  assert.deepEqual([l.type, l.symlinkTarget], [FileType.FILE, "/home/user/jsmeta/o.txt"]);
});
