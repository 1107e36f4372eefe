// What the tests check through withruntime's own API: the sandbox an E2B
// client made is a withruntime sandbox with the same id.

import { createRequire } from "node:module";

const require = createRequire(import.meta.url);

/** The installed version of an npm package. */
export function installedVersion(name) {
  return require(`${name}/package.json`).version;
}

/** GET /v1/sandboxes/{id} of withruntime's API. */
export async function withruntimeSandbox(id) {
  const r = await fetch(`${process.env.WITHRUNTIME_BASE_URL}/v1/sandboxes/${id}`, {
    headers: { Authorization: `Bearer ${process.env.WITHRUNTIME_API_KEY}` },
  });
  if (!r.ok) throw new Error(`GET sandbox ${id}: ${r.status} ${await r.text()}`);
  return r.json();
}
