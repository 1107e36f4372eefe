// Preview URLs (getHost, previewUrl, expose, revokePreviews) against the
// real server: python's http.server runs in the sandbox on its
// 127.0.0.1:8000, and fetch reaches it through the server.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { APIError, PREVIEW_TOKEN_HEADER, PREVIEW_TOKEN_PARAM, type Sandbox } from "../src/index.js";
import { small } from "./helpers.js";

const PAGE = "preview-page-42\n";
// The code of a port with nothing listening (502).
const NOTHING_LISTENS = "bad_gateway";
const baseUrl = process.env.WITHRUNTIME_BASE_URL!.replace(/\/+$/, "");

async function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string; headers: Headers }> {
  const r = await fetch(url, { headers, redirect: "manual" });
  return { status: r.status, body: await r.text(), headers: r.headers };
}

/** A browser's visit: follow redirects by hand, keeping the cookies set. */
async function visit(url: string, jar: Map<string, string>): Promise<{ status: number; body: string }> {
  for (let hops = 0; hops < 5; hops++) {
    const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join("; ");
    const r = await get(url, cookie ? { Cookie: cookie } : {});
    for (const c of r.headers.getSetCookie()) {
      const [pair] = c.split(";");
      const i = pair!.indexOf("=");
      jar.set(pair!.slice(0, i).trim(), pair!.slice(i + 1).trim());
    }
    if (r.status < 300 || r.status > 399) return r;
    url = new URL(r.headers.get("location")!, url).toString();
  }
  throw new Error("too many redirects");
}

describe("preview URLs", () => {
  let sbx: Sandbox;
  before(async () => {
    sbx = await small();
    await sbx.exec("mkdir -p /tmp/www && printf 'preview-page-42\\n' > /tmp/www/index.html", { check: true });
    await sbx.exec(["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1", "--directory", "/tmp/www"], { background: true });
    const deadline = Date.now() + 30_000;
    for (;;) {
      const r = await sbx.exec(`python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:8000/')"`);
      if (r.exitCode === 0) break;
      if (Date.now() > deadline) assert.fail(`http.server did not start: ${r.stderr}`);
      await new Promise((res) => setTimeout(res, 200));
    }
  });
  after(async () => {
    await sbx?.stop().catch(() => undefined);
  });

  test("public: getHost, no key or token", async () => {
    const p = await sbx.expose(8000, { public: true });
    try {
      assert.equal(p.public, true);
      assert.equal(p.token, "");
      assert.equal(p.expiresAt, undefined);
      assert.equal(p.path, `/v1/sandboxes/${sbx.id}/ports/8000/`);
      const host = await sbx.getHost(8000);
      // The test server has no preview domain: the API's form.
      assert.equal(host, `${new URL(baseUrl).host}/v1/sandboxes/${sbx.id}/ports/8000`);
      const r = await get(`http://${host}/index.html`);
      assert.deepEqual([r.status, r.body], [200, PAGE]);
      assert.equal(await sbx.previewUrl(8000), `${baseUrl}${p.path}`);
    } finally {
      await sbx.expose(8000, { public: false });
    }
  });

  test("private: refused bare, the header, the signed URL and its cookie", async () => {
    const p = await sbx.expose(8000, { public: false });
    assert.equal(p.public, false);
    assert.match(p.token, /^wrpt_/);
    assert.ok(p.expiresAt instanceof Date);
    const page = `${baseUrl}/v1/sandboxes/${sbx.id}/ports/8000/index.html`;
    const bare = await get(page);
    assert.ok([401, 403].includes(bare.status), `bare: ${bare.status} ${bare.body}`);
    assert.ok(!bare.body.includes(PAGE));
    const withHeader = await get(page, { [PREVIEW_TOKEN_HEADER]: p.token });
    assert.deepEqual([withHeader.status, withHeader.body], [200, PAGE]);

    const url = await sbx.previewUrl(8000, { expiresInSeconds: 600 });
    assert.ok(url.startsWith(`${baseUrl}/v1/sandboxes/${sbx.id}/ports/8000/?${PREVIEW_TOKEN_PARAM}=wrpt_`), url);
    assert.ok(!url.includes(process.env.WITHRUNTIME_API_KEY!));
    const first = await get(url);
    assert.equal(first.status, 303);
    assert.ok(!(first.headers.get("location") ?? "").includes(PREVIEW_TOKEN_PARAM));
    assert.match(first.headers.get("set-cookie") ?? "", /HttpOnly/i);
    const jar = new Map<string, string>();
    const r = await visit(url, jar);
    assert.deepEqual([r.status, r.body], [200, PAGE]);
    assert.ok(jar.size >= 1);
    // Later visits carry the cookie alone.
    const again = await visit(page, jar);
    assert.deepEqual([again.status, again.body], [200, PAGE]);
  });

  test("revokePreviews: the old signed URL, token and cookie are refused", async () => {
    await sbx.expose(8000, { public: false });
    const url = await sbx.previewUrl(8000);
    const token = new URL(url).searchParams.get(PREVIEW_TOKEN_PARAM)!;
    const jar = new Map<string, string>();
    assert.equal((await visit(url, jar)).body, PAGE);
    const page = `${baseUrl}/v1/sandboxes/${sbx.id}/ports/8000/index.html`;

    await sbx.revokePreviews();

    // The old signed URL: refused at once, no redirect and no cookie.
    const direct = await get(url);
    assert.equal(direct.status, 401);
    assert.equal(direct.headers.get("set-cookie"), null);
    // The old signed URL followed as a new browser would, the token as a
    // header, the cookie it set: all refused.
    for (const r of [await visit(url, new Map()), await get(page, { [PREVIEW_TOKEN_HEADER]: token }), await visit(page, jar)]) {
      assert.ok([401, 403].includes(r.status), `after revoke: ${r.status} ${r.body}`);
    }
    assert.equal((await visit(await sbx.previewUrl(8000), new Map())).body, PAGE);
  });

  test("refusals", async () => {
    await assert.rejects(sbx.getHost(0), RangeError);
    await assert.rejects(sbx.expose(70000), RangeError);
    await assert.rejects(sbx.previewUrl(8000, { expiresInSeconds: 0 }), RangeError);
    await assert.rejects(sbx.previewUrl(8000, { expiresInSeconds: 10 }), (e) => e instanceof APIError && e.code === "invalid_request");
    await sbx.expose(8001, { public: true });
    try {
      const r = await get(`http://${await sbx.getHost(8001)}/`);
      assert.equal(r.status, 502);
      assert.equal((JSON.parse(r.body) as { error: { code: string } }).error.code, NOTHING_LISTENS);
    } finally {
      await sbx.expose(8001, { public: false });
    }
  });
});
