import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { APIError, type Sandbox } from "../src/index.js";
import { small } from "./helpers.js";

class Screen {
  #text = "";
  readonly #decoder = new TextDecoder();
  onData = (b: Uint8Array): void => {
    assert.ok(b instanceof Uint8Array);
    this.#text += this.#decoder.decode(b, { stream: true });
  };
  get text(): string {
    return this.#text;
  }
  async waitFor(want: string): Promise<void> {
    const deadline = Date.now() + 30_000;
    while (!this.#text.includes(want)) {
      if (Date.now() > deadline) assert.fail(`waited for ${JSON.stringify(want)}, the terminal shows ${JSON.stringify(this.#text)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

describe("pty", () => {
  let sbx: Sandbox;
  before(async () => {
    sbx = await small();
  });
  after(async () => {
    await sbx?.stop().catch(() => undefined);
  });

  test("a shell: size, resize, input, Ctrl-C, attach again, exit code", async () => {
    const screen = new Screen();
    const term = await sbx.pty.create({ cols: 100, rows: 30, onData: screen.onData });
    await term.sendInput("stty size; echo term=$TERM\n");
    await screen.waitFor("term=xterm-256color");
    assert.ok(screen.text.includes("30 100"), screen.text);
    await term.resize({ cols: 132, rows: 43 });
    await term.sendInput("stty size\n");
    await screen.waitFor("43 132");
    await term.sendInput("sleep 100; echo slept\n");
    await new Promise((r) => setTimeout(r, 1000));
    await term.sendInput("\x03");
    await term.sendInput("echo back-$((4+5))\n");
    await screen.waitFor("back-9");
    assert.ok(!screen.text.includes("\nslept"), screen.text);

    const again = new Screen();
    const term2 = await sbx.pty.connect(term.pid, { onData: again.onData });
    await again.waitFor("back-9");
    await term2.sendInput("exit 3\n");
    assert.equal(await term2.wait(), 3);
    assert.equal(await term.wait(), 3);
  });

  test("a command, kill, one that cannot start, refusals", async () => {
    const term = await sbx.pty.create({ cmd: ["sleep", "100"] });
    await term.kill();
    assert.equal(await term.wait(), 137);

    const screen = new Screen();
    const missing = await sbx.pty.create({ cmd: ["no-such-command-here"], onData: screen.onData });
    assert.equal(await missing.wait(), 127);
    assert.ok(screen.text.includes("not found"), screen.text);

    await assert.rejects(sbx.pty.create({ cols: 0 }), (e: unknown) => e instanceof APIError && e.code === "invalid_request");
    const proc = await sbx.exec("sleep 30", { background: true });
    await assert.rejects(sbx.pty.connect(proc.pid), (e: unknown) => e instanceof APIError && e.code === "conflict");
    await proc.kill();
  });
});
