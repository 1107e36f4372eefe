// The exec overloads at the type level: this file only has to compile
// (`npm test` compiles it with the tests); the one test checks that the
// functions below exist, none of them is run against a server.

import assert from "node:assert/strict";
import { test } from "node:test";

import type { ExecResult, Process, Sandbox } from "../src/index.js";

// True only when A and B are the same type.
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
function expectType<A, B>(ok: Equal<A, B>): void {
  void ok;
}
type Resolved<P> = P extends Promise<infer R> ? R : never;

export async function known(sbx: Sandbox): Promise<void> {
  const a = await sbx.exec("x");
  expectType<typeof a, ExecResult<string>>(true);
  const b = await sbx.exec("x", { text: false });
  expectType<typeof b, ExecResult<Uint8Array>>(true);
  const c = await sbx.exec("x", { background: true });
  expectType<typeof c, Process<string>>(true);
  const d = await sbx.exec("x", { background: true, text: false });
  expectType<typeof d, Process<Uint8Array>>(true);
}

export async function atRunTime(sbx: Sandbox, flag: boolean, bg: boolean): Promise<void> {
  const a = await sbx.exec("x", { text: flag });
  expectType<typeof a, ExecResult<string | Uint8Array>>(true);
  const b = await sbx.exec("x", { background: true, text: flag });
  expectType<typeof b, Process<string | Uint8Array>>(true);
  const c = await sbx.exec(["x"], { background: bg, text: flag, cwd: "/tmp" });
  expectType<typeof c, ExecResult<string | Uint8Array> | Process<string | Uint8Array>>(true);
  const opts: { text?: boolean; check?: boolean } = { text: flag };
  const d = await sbx.exec("x", opts);
  expectType<typeof d, ExecResult<string | Uint8Array>>(true);
}

test("the exec overloads compile for options known only at run time", () => {
  assert.equal(typeof known, "function");
  assert.equal(typeof atRunTime, "function");
});
