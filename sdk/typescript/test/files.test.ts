import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, readlinkSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { APIError, type Sandbox, UnsafeArchiveError } from "../src/index.js";
import { entryHeader, extract } from "../src/archive.js";
import { small, tempDir } from "./helpers.js";

/** Every entry under root: relative name -> file bytes (hex), link target, or "dir". */
function tree(root: string, rel = ""): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of readdirSync(join(root, rel)).sort()) {
    const r = rel ? `${rel}/${name}` : name;
    const st = lstatSync(join(root, r));
    if (st.isSymbolicLink()) out[r] = `link:${readlinkSync(join(root, r))}`;
    else if (st.isDirectory()) {
      out[r] = "dir";
      Object.assign(out, tree(root, r));
    } else out[r] = `file:${(st.mode & 0o777).toString(8)}:${readFileSync(join(root, r)).toString("hex")}`;
  }
  return out;
}

describe("files", () => {
  let sbx: Sandbox;
  before(async () => {
    sbx = await small();
  });
  after(async () => {
    await sbx?.stop().catch(() => undefined);
  });

  test("write, read, stat, list, mkdir, remove", async () => {
    const info = await sbx.files.write("notes/a.txt", "héllo\n");
    assert.equal(info.path, "/workspace/notes/a.txt");
    assert.equal(info.type, "file");
    assert.equal(info.size, Buffer.byteLength("héllo\n"));
    assert.equal(await sbx.files.read("notes/a.txt"), "héllo\n");
    const bin = new Uint8Array([0, 255, 1, 254, 10, 13]);
    await sbx.files.write("/workspace/notes/b.bin", bin, { mode: 0o600 });
    assert.deepEqual(await sbx.files.readBytes("notes/b.bin"), bin);
    const st = await sbx.files.stat("notes/b.bin");
    assert.equal(st.mode & 0o777, 0o600);
    assert.ok(st.mtime instanceof Date);
    const head = await sbx.files.readHead("notes/a.txt", 2);
    assert.deepEqual([...head.data], [0x68, 0xc3]);
    assert.equal(head.size, Buffer.byteLength("héllo\n"));
    await sbx.files.mkdir("notes/deep/er");
    assert.deepEqual((await sbx.files.list("notes")).map((e) => `${e.name}:${e.type}`).sort(), [
      "a.txt:file",
      "b.bin:file",
      "deep:dir",
    ]);
    assert.equal(await sbx.files.exists("notes/a.txt"), true);
    await sbx.files.remove("notes/a.txt");
    assert.equal(await sbx.files.exists("notes/a.txt"), false);
    await assert.rejects(sbx.files.remove("notes"), (e: unknown) => e instanceof APIError && e.code !== "not_found");
    await sbx.files.remove("notes", { recursive: true });
    await assert.rejects(sbx.files.stat("notes"), (e: unknown) => e instanceof APIError && e.code === "not_found" && e.status === 404);
  });

  test("a directory tree round trip: upload then download, binary files, links, long names", async () => {
    const src = tempDir();
    mkdirSync(join(src, "pkg", "sub", "empty"), { recursive: true });
    writeFileSync(join(src, "pkg", "main.py"), "print('hi')\n");
    writeFileSync(join(src, "pkg", "sub", "blob.bin"), randomBytes(3 * 1024 * 1024 + 7));
    writeFileSync(join(src, "pkg", "sub", "zero.bin"), Buffer.alloc(0));
    writeFileSync(join(src, "pkg", "run.sh"), "#!/bin/sh\necho run\n", { mode: 0o755 });
    const long = "n".repeat(120) + "-ünïcode.txt";
    writeFileSync(join(src, "pkg", "sub", long), "long name");
    symlinkSync("main.py", join(src, "pkg", "link.py"));
    symlinkSync("/usr/bin/python3", join(src, "pkg", "python"));

    const up = await sbx.files.upload(join(src, "pkg"), "/workspace/up/pkg");
    assert.ok(up.files >= 7, `uploaded ${up.files} files`);
    const r = await sbx.exec("cat up/pkg/link.py; ./up/pkg/run.sh; stat -c %s up/pkg/sub/blob.bin", { check: true });
    assert.equal(r.stdout, `print('hi')\nrun\n${3 * 1024 * 1024 + 7}\n`);

    const dest = join(tempDir(), "back");
    const down = await sbx.files.download("/workspace/up/pkg", dest);
    assert.equal(down.files, up.files);
    assert.deepEqual(tree(dest), tree(join(src, "pkg")));
  });

  test("single files both ways", async () => {
    const dir = tempDir();
    const data = randomBytes(200_000);
    writeFileSync(join(dir, "one.bin"), data, { mode: 0o640 });
    const up = await sbx.files.upload(join(dir, "one.bin"), "single/one.bin");
    assert.deepEqual(up, { files: 1, bytes: data.length });
    const st = await sbx.files.stat("single/one.bin");
    assert.equal(st.mode & 0o777, 0o640);
    const back = join(dir, "nested", "back.bin");
    const down = await sbx.files.download("single/one.bin", back);
    assert.deepEqual(down, { files: 1, bytes: data.length });
    assert.ok(readFileSync(back).equals(data));
    assert.equal(statSync(back).mode & 0o777, 0o640);
  });

  test("a download never writes through a link the sandbox made", async () => {
    const outside = tempDir();
    // In the sandbox: evil -> a host path, then a directory of that name's
    // contents cannot be sent through it (tar carries the link only).
    await sbx.exec(`mkdir -p trap && ln -sfn ${outside} trap/evil && echo x > trap/plain`, { check: true });
    const dest = join(tempDir(), "trap");
    await sbx.files.download("trap", dest);
    assert.equal(readlinkSync(join(dest, "evil")), outside);
    assert.deepEqual(readdirSync(outside), []);
  });
});

describe("safe extraction", () => {
  async function* tar(...entries: Array<{ name: string; type: "0" | "2" | "5"; data?: string; linkname?: string }>): AsyncGenerator<Uint8Array> {
    const out: Buffer[] = [];
    for (const e of entries) {
      const data = Buffer.from(e.data ?? "");
      out.push(entryHeader({ name: e.name, type: e.type, mode: 0o644, mtime: 0, size: data.length, linkname: e.linkname }));
      out.push(data, Buffer.alloc((512 - (data.length % 512)) % 512));
    }
    out.push(Buffer.alloc(1024));
    yield Buffer.concat(out);
  }

  const cases: Array<[string, AsyncGenerator<Uint8Array>, RegExp]> = [
    ["a '..' component", tar({ name: "a/../../escape.txt", type: "0", data: "x" }), /contains '\.\.'/],
    ["an absolute name", tar({ name: "/tmp/abs.txt", type: "0", data: "x" }), /absolute name/],
    [
      "a file through a link the archive made",
      tar({ name: "l", type: "2", linkname: "/tmp" }, { name: "l/through.txt", type: "0", data: "x" }),
      /symbolic link/,
    ],
    [
      "a file whose name is a link already",
      tar({ name: "l2", type: "2", linkname: "/tmp/withruntime-never" }, { name: "l2", type: "0", data: "x" }),
      /is a symbolic link/,
    ],
  ];
  for (const [name, chunks, want] of cases) {
    test(`refuses ${name}`, async () => {
      const dest = tempDir();
      await assert.rejects(extract(chunks, dest), (e: unknown) => {
        assert.ok(e instanceof UnsafeArchiveError, `got ${e}, want UnsafeArchiveError`);
        assert.match((e as Error).message, want);
        return true;
      });
      assert.equal(existsSync("/tmp/through.txt") || existsSync("/tmp/withruntime-never"), false);
    });
  }
});
