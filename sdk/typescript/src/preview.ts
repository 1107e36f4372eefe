/** Preview URLs: reaching a sandbox's ports over HTTP (`sbx.getHost()`,
 * `sbx.previewUrl()`, `sbx.expose()`, `sbx.revokePreviews()`). */

import { parseTime } from "./files.js";
import type { components } from "./generated/openapi.js";
import type { Transport } from "./transport.js";

/** A preview token travels in this header, or as this query parameter of a
 * signed URL (the server then sets a cookie and redirects to the URL
 * without it). Neither reaches the sandbox. */
export const PREVIEW_TOKEN_HEADER = "X-Withruntime-Preview-Token";
export const PREVIEW_TOKEN_PARAM = "withruntime_preview_token";

/** How to reach one port of a sandbox over HTTP (the API's Preview).
 * `path` is the port's path on the API (join it with the base URL); `host`
 * and `url` its host form (`{port}-{id}.{domain}`), empty unless the server
 * serves previews by host name. `token` (empty when the port is public) is
 * valid for this sandbox and port only, until `expiresAt`: send it as the
 * `X-Withruntime-Preview-Token` header, or use `sbx.previewUrl(port)`. */
export interface Preview {
  port: number;
  public: boolean;
  path: string;
  host: string;
  url: string;
  token: string;
  expiresAt?: Date;
}

type PreviewWire = components["schemas"]["Preview"];

/** A Preview from the API's JSON. */
export function previewOf(d: PreviewWire | null | undefined): Preview {
  return {
    port: d?.port ?? 0,
    public: Boolean(d?.public),
    path: d?.path ?? "",
    host: d?.host ?? "",
    url: d?.url ?? "",
    token: d?.token ?? "",
    expiresAt: parseTime(d?.expires_at),
  };
}

function checkPort(port: number): number {
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new RangeError(`port ${port} is not a TCP port (1 to 65535)`);
  }
  return port;
}

/** Whole seconds, rounded up: a token never lives less than asked. */
function expiresSeconds(expiresInSeconds: number | undefined): number | undefined {
  if (expiresInSeconds === undefined) return undefined;
  if (typeof expiresInSeconds !== "number" || !(expiresInSeconds > 0)) {
    throw new RangeError(`expiresInSeconds must be a positive number, got ${expiresInSeconds}`);
  }
  return Math.ceil(expiresInSeconds);
}

export async function getPreview(t: Transport, id: string, port: number, expiresInSeconds?: number): Promise<Preview> {
  const d = await t.json<PreviewWire>("GET", `/sandboxes/${id}/previews/${checkPort(port)}`, {
    query: { expires_in: expiresSeconds(expiresInSeconds) },
  });
  return previewOf(d);
}

export async function setPreview(t: Transport, id: string, port: number, isPublic: boolean): Promise<Preview> {
  const d = await t.json<PreviewWire>("PUT", `/sandboxes/${id}/previews/${checkPort(port)}`, {
    json: { public: Boolean(isPublic) } satisfies components["schemas"]["SetPreviewRequest"],
  });
  return previewOf(d);
}

export async function revokePreviews(t: Transport, id: string): Promise<void> {
  await t.json<components["schemas"]["PreviewSettings"]>("POST", `/sandboxes/${id}/previews/revoke`);
}

/** E2B's shape: `{port}-{id}.{domain}[:port]` where the server has a
 * preview domain, else the API's `host:port/v1/sandboxes/{id}/ports/{port}`
 * (so that `http://${host}/path` works either way). */
export function hostOf(baseUrl: string, p: Preview): string {
  if (p.host) return p.host;
  const u = new URL(baseUrl);
  return u.host + u.pathname.replace(/\/+$/, "") + p.path.replace(/\/+$/, "");
}

/** The URL that opens p in a browser: its host form or its path on the
 * base URL, signed with its token unless the port is public. */
export function urlOf(baseUrl: string, p: Preview): string {
  const u = p.url || baseUrl.replace(/\/+$/, "") + p.path;
  if (!p.token) return u;
  const sep = new URL(u).search ? "&" : "?";
  return `${u}${sep}${PREVIEW_TOKEN_PARAM}=${encodeURIComponent(p.token)}`;
}
