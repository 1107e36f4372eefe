// The webhook verification snippet of the docs (the section "Verifying a
// webhook", in README.md or else docs/*.md), compiled and run as written,
// against a signature the server's signing makes (the vector pinned by
// internal/webhooks' TestSignVector): it accepts that delivery and refuses
// one whose body, id, timestamp or secret differs, or that is too old.

import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

import ts from "typescript";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "..");

function block(heading: string, lang: string): string {
  const docs = join(root, "docs");
  const files = [join(root, "README.md"), ...readdirSync(docs).filter((f) => f.endsWith(".md")).sort().map((f) => join(docs, f))];
  for (const f of files) {
    if (!existsSync(f)) continue;
    const text = readFileSync(f, "utf8");
    const at = text.search(new RegExp(`^#+ ${heading}\\n`, "m"));
    if (at < 0) continue;
    const rest = text.slice(at).split("\n").slice(1).join("\n");
    const section = rest.split(/^#+ /m)[0];
    const m = section.match(new RegExp("^```" + lang + "\\n([\\s\\S]*?)^```$", "m"));
    if (m) return m[1];
  }
  throw new Error(`no ${lang} block under "${heading}"`);
}

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const BODY = Buffer.from('{"type":"sandbox.created"}');
const SIGNATURE = "v1,emQol+O3w9E3+SNBfGK3kW0WOckDpI1JPvdscfvI6kQ=";

test("the docs' TypeScript webhook verification, as written there", async () => {
  const js = ts.transpileModule(block("Verifying a webhook", "typescript"), {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
  }).outputText;
  const file = join(mkdtempSync(join(tmpdir(), "wr-verify-")), "verify.mjs");
  writeFileSync(file, js);
  const { verifyWebhook } = (await import(pathToFileURL(file).href)) as {
    verifyWebhook: (secret: string, headers: Record<string, string>, body: Buffer, toleranceSec?: number) => boolean;
  };
  const headers = { "webhook-id": "evt_1", "webhook-timestamp": "1700000000", "webhook-signature": "v1,bm90IGl0 " + SIGNATURE };
  const forever = 1e12; // the vector's timestamp is long past
  assert.equal(verifyWebhook(SECRET, headers, BODY, forever), true);
  assert.equal(verifyWebhook(SECRET, headers, Buffer.from('{"type":"sandbox.ended"}'), forever), false);
  assert.equal(verifyWebhook(SECRET, { ...headers, "webhook-id": "evt_2" }, BODY, forever), false);
  assert.equal(verifyWebhook(SECRET, { ...headers, "webhook-timestamp": "1700000001" }, BODY, forever), false);
  assert.equal(verifyWebhook("whsec_" + "A".repeat(32), headers, BODY, forever), false);
  assert.equal(verifyWebhook(SECRET, headers, BODY), false); // too old by default
});
