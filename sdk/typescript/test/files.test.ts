import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, readlinkSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { APIError, type Sandbox, UnsafeArchiveError } from "../src/index.js";
import { TarError, entryHeader, extract } from "../src/archive.js";
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
    assert.deepEqual([st.owner, st.group, st.attrs], ["user", "user", undefined]);
    assert.equal((await sbx.files.stat("/etc/passwd")).owner, "root");
    const tagged = await sbx.files.write("notes/t.txt", "t", { attrs: { "app.tag": "x=1", "app.by": "ts" } });
    assert.deepEqual(tagged.attrs, { "app.tag": "x=1", "app.by": "ts" });
    assert.deepEqual((await sbx.files.stat("notes/t.txt")).attrs, { "app.tag": "x=1", "app.by": "ts" });
    await assert.rejects(
      sbx.files.write("notes/t.txt", "t", { attrs: { "bad name": "v" } }),
      (e: unknown) => e instanceof APIError && e.code === "invalid_request",
    );
    await sbx.files.remove("notes/t.txt");
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

describe("extended tar headers", () => {
  /** A header block of `type` for `size` bytes of data, checksum fixed. */
  function typed(type: string, size: number): Buffer {
    const h = Buffer.from(entryHeader({ name: "ext", type: "0", mode: 0o644, mtime: 0, size }));
    h.write(type, 156, 1, "ascii");
    h.fill(0x20, 148, 156);
    let sum = 0;
    for (const b of h) sum += b;
    h.write(sum.toString(8).padStart(6, "0") + "\0 ", 148, 8, "ascii");
    return h;
  }
  const pad = (n: number): Buffer => Buffer.alloc((512 - (n % 512)) % 512);
  function paxRecord(key: string, value: string): Buffer {
    const body = ` ${key}=${value}\n`;
    let len = body.length + String(body.length).length;
    if (String(len).length !== String(len - body.length).length) len = body.length + String(len).length;
    return Buffer.from(`${len}${body}`);
  }
  /** A whole tar: an extended header of `type` with `data`, then file f. */
  function archive(type: string, data: Buffer): Buffer {
    const file = Buffer.from("hello");
    return Buffer.concat([
      typed(type, data.length), data, pad(data.length),
      entryHeader({ name: "f", type: "0", mode: 0o644, mtime: 0, size: file.length }), file, pad(file.length),
      Buffer.alloc(1024),
    ]);
  }
  /** `tar` in chunks of `size` bytes, counting what was taken. */
  function chunks(tar: Buffer, size: number, taken: { bytes: number }): AsyncGenerator<Uint8Array> {
    return (async function* () {
      for (let i = 0; i < tar.length; i += size) {
        const c = tar.subarray(i, i + size);
        taken.bytes += c.length;
        yield c;
      }
    })();
  }

  const big = 2 << 20;
  for (const [type, data] of [
    ["x", paxRecord("comment", "c".repeat(big))],
    ["g", paxRecord("comment", "c".repeat(big))],
    ["L", Buffer.from("n".repeat(big) + "\0")],
    ["K", Buffer.from("k".repeat(big) + "\0")],
  ] as const) {
    test(`a ${data.length}-byte '${type}' header is refused before it is read`, async () => {
      const dest = tempDir();
      const taken = { bytes: 0 };
      await assert.rejects(extract(chunks(archive(type, data), 512, taken), dest), (e: unknown) => {
        assert.ok(e instanceof TarError, `got ${String(e).slice(0, 200)}, want TarError`);
        assert.match((e as Error).message, /extended header of \d+ bytes is over the 1048576-byte limit/);
        return true;
      });
      assert.equal(taken.bytes, 512, "more than the header block was read");
      assert.deepEqual(readdirSync(dest), []);
    });
  }

  test("a PAX name up to the limit, the stream cut at every few bytes", async () => {
    const name = "d/" + "p".repeat(200);
    const pax = paxRecord("path", name);
    const tar = Buffer.concat([
      typed("x", pax.length), pax, pad(pax.length),
      entryHeader({ name: "short", type: "0", mode: 0o644, mtime: 0, size: 5 }), Buffer.from("hello"), pad(5),
      Buffer.alloc(1024),
    ]);
    for (const size of [7, 512, 100_000]) {
      const dest = tempDir();
      const got = await extract(chunks(tar, size, { bytes: 0 }), dest);
      assert.deepEqual(got, { files: 1, bytes: 5 }, `chunks of ${size}`);
      assert.equal(readFileSync(join(dest, name), "utf8"), "hello", `chunks of ${size}`);
    }
    const atLimit = paxRecord("comment", "c".repeat((1 << 20) - 20));
    assert.ok(atLimit.length <= 1 << 20);
    const dest = tempDir();
    assert.deepEqual(await extract(chunks(archive("x", atLimit), 4096, { bytes: 0 }), dest), { files: 1, bytes: 5 });
    assert.equal(readFileSync(join(dest, "f"), "utf8"), "hello");
  });
});
