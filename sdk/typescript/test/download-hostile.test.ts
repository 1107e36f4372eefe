// files.download against a hostile sandbox (issue 22): the archive, not an
// earlier stat, says whether a file or a directory came; names come from the
// caller's arguments; an existing directory is filled only when asked; the
// archive's entries and bytes are bounded. From a loopback server standing in
// for the API (no sandbox needed): its stat answers {"path": "/..", "type":
// "dir"}, its archive is what each test sets.

import assert from "node:assert/strict";
import { lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { type ServerResponse, createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { entryHeader } from "../src/archive.js";
import { ArchiveTooLargeError, DestinationError, Sandbox, UnsafeArchiveError } from "../src/index.js";

type E = { name: string; type: "0" | "2" | "5"; data?: string; linkname?: string };

function tarOf(...entries: E[]): Buffer {
  const out: Buffer[] = [];
  for (const e of entries) {
    const data = Buffer.from(e.data ?? "");
    out.push(entryHeader({ name: e.name, type: e.type, mode: 0o644, mtime: 0, size: data.length, linkname: e.linkname }));
    out.push(data, Buffer.alloc((512 - (data.length % 512)) % 512));
  }
  out.push(Buffer.alloc(1024));
  return Buffer.concat(out);
}

const file = (name: string, data: string): E => ({ name, type: "0", data });
const dir = (name: string): E => ({ name, type: "5" });

/** Every path under root: "rel/" for a directory, "rel=content" for a file, sorted. */
function tree(root: string, rel = ""): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(root, rel))) {
    const r = rel ? `${rel}/${name}` : name;
    if (lstatSync(join(root, r)).isDirectory()) out.push(`${r}/`, ...tree(root, r));
    else out.push(`${r}=${readFileSync(join(root, r), "utf8")}`);
  }
  return out.sort();
}

const BEFORE = [".bashrc=mine", "home/", "home/.bashrc=mine", "home/proj/"];

/** base/.bashrc, base/home/.bashrc and base/home/proj/: the user's. */
function base(): string {
  const b = mkdtempSync(join(tmpdir(), "withruntime-ts-hostile-"));
  mkdirSync(join(b, "home", "proj"), { recursive: true });
  writeFileSync(join(b, ".bashrc"), "mine");
  writeFileSync(join(b, "home", ".bashrc"), "mine");
  return b;
}

describe("download from a hostile sandbox", () => {
  let serve: (res: ServerResponse) => void = (res) => void res.end();
  let stats = 0;
  const srv = createServer((req, res) => {
    if (req.url?.includes("/files/stat")) {
      stats++;
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ name: "..", path: "/..", type: "dir" }));
      return;
    }
    serve(res);
  });
  let fake: Sandbox;
  before(async () => {
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
    fake = new Sandbox("sbx_fake", { baseUrl: `http://127.0.0.1:${(srv.address() as { port: number }).port}`, apiKey: "k" });
  });
  after(() => new Promise<void>((r) => srv.close(() => r())));
  const archive = (tar: Buffer) => (res: ServerResponse) => {
    res.writeHead(200, { "Content-Type": "application/x-tar" });
    res.end(tar);
  };

  // [name, remote, local under base, archive, merge, error class, paths added to BEFORE ("-" removes)]
  const cases: Array<[string, string, string, E[], boolean, (new (...a: never[]) => Error) | undefined, string[]]> = [
    ["the race: a directory onto an existing directory is refused", "out.txt", "home", [file(".bashrc", "pwned")], false, DestinationError, []],
    ["a file turned directory (first entry named as it) is refused onto a directory", "out.txt", "home",
      [file("out.txt", "x"), file(".bashrc", "pwned")], false, DestinationError, []],
    ["one file onto an existing directory lands inside under its own name", "/workspace/out.txt", "home",
      [file("out.txt", "data")], false, undefined, ["home/out.txt=data"]],
    ["one file onto a missing path becomes it", "out.txt", "home/new.txt", [file("out.txt", "data")], false, undefined, ["home/new.txt=data"]],
    ["one file onto a file replaces it", "out.txt", "home/.bashrc", [file("out.txt", "data")], false, undefined,
      ["-home/.bashrc=mine", "home/.bashrc=data"]],
    ["one file onto a directory of its name is refused", "proj", "home", [file("proj", "data")], false, DestinationError, []],
    ["a directory onto a missing path becomes it", "results", "home/r", [dir("a/"), file("a/b", "b")], false, undefined,
      ["home/r/", "home/r/a/", "home/r/a/b=b"]],
    ["a first entry named as the source, then more, is a directory", "out.txt", "home/r",
      [file("out.txt", "first"), file(".bashrc", "pwned")], false, undefined, ["home/r/", "home/r/.bashrc=pwned", "home/r/out.txt=first"]],
    ["a directory onto a file is refused", "results", "home/.bashrc", [file("x", "x")], false, DestinationError, []],
    ["merge: true extracts into an existing directory", "results", "home/proj", [file("x", "x")], true, undefined, ["home/proj/x=x"]],
    ["an empty archive is an empty directory", "empty", "home/e", [], false, undefined, ["home/e/"]],
    ["a staged file then a climbing entry leaves nothing", "out.txt", "home/r",
      [file("out.txt", "first"), file("../../evil", "x")], false, UnsafeArchiveError, ["home/r/", "home/r/out.txt=first"]],
  ];
  for (const [name, remote, local, entries, merge, wantErr, added] of cases) {
    test(name, async () => {
      const b = base();
      serve = archive(tarOf(...entries));
      stats = 0;
      const p = fake.files.download(remote, join(b, local), { merge });
      if (wantErr) await assert.rejects(p, (e: unknown) => e instanceof wantErr);
      else await p;
      const want = [...BEFORE.filter((x) => !added.includes(`-${x}`)), ...added.filter((x) => !x.startsWith("-"))].sort();
      assert.deepEqual(tree(b), want);
      assert.equal(stats, 0, "the download asked for a stat: the archive decides");
    });
  }

  const header = (name: string, type: "0" | "5", size = 0) => entryHeader({ name, type, mode: 0o644, mtime: 0, size });

  /** Serves n entries made as they are sent, counting the bytes the client took. */
  function endless(n: number, block: Buffer, sent: { bytes: number }) {
    return (res: ServerResponse) => {
      res.writeHead(200, { "Content-Type": "application/x-tar" });
      let left = n;
      let closed = false;
      res.on("close", () => (closed = true));
      const batch = Buffer.concat(Array(256).fill(block));
      const pump = () => {
        while (!closed && left > 0) {
          const k = Math.min(256, left);
          left -= k;
          sent.bytes += k * block.length;
          if (!res.write(k === 256 ? batch : batch.subarray(0, k * block.length))) return void res.once("drain", pump);
        }
        if (!closed) res.end(Buffer.alloc(1024));
      };
      pump();
    };
  }

  test("entries past maxEntries, bytes past maxBytes, an endless archive", async () => {
    const data = Buffer.concat([header("f", "0", 600), Buffer.alloc(1024)]);
    for (const [what, block, n, opts, want] of [
      ["entries", header("d/", "5"), 11, { maxEntries: 10 }, /more than 10 entries/],
      ["bytes", data, 3, { maxBytes: 1000 }, /more than 1000 bytes of files/],
      ["endless", header("d/", "5"), 2 ** 40, { maxEntries: 100 }, /more than 100 entries/],
    ] as const) {
      const sent = { bytes: 0 };
      serve = endless(n, block, sent);
      await assert.rejects(fake.files.download("x", join(base(), "out"), opts), (e: unknown) => e instanceof ArchiveTooLargeError && want.test(e.message), what);
      await new Promise((r) => setTimeout(r, 50));
      assert.ok(sent.bytes < 64 << 20, `${what}: the server sent ${sent.bytes} bytes`);
    }
  });

  test("a file announced past the default bound is refused before its bytes", async () => {
    const b = base();
    serve = archive(Buffer.concat([entryHeader({ name: "big", type: "0", mode: 0o644, mtime: 0, size: 10 * 2 ** 30 + 1 }), Buffer.alloc(4096)]));
    await assert.rejects(fake.files.download("big", join(b, "big")), ArchiveTooLargeError);
    assert.deepEqual(tree(b), BEFORE);
  });

  test("20,001 entries against maxEntries 20,000: refused with the heap flat", async () => {
    const n = 20_000;
    const sent = { bytes: 0 };
    serve = endless(n + 1, header("d/", "5"), sent);
    global.gc?.();
    const heap0 = process.memoryUsage().heapUsed;
    let peak = heap0;
    const t = setInterval(() => (peak = Math.max(peak, process.memoryUsage().heapUsed)), 20);
    const start = Date.now();
    try {
      await assert.rejects(fake.files.download("x", join(base(), "out"), { maxEntries: n }), /more than 20000 entries/);
    } finally {
      clearInterval(t);
    }
    console.log(`${n + 1} entries refused in ${Date.now() - start} ms; heap grew by at most ${(peak - heap0) >> 10} KiB`);
    assert.ok(peak - heap0 < 64 << 20, `the heap grew by ${peak - heap0} bytes`);
  });
});
