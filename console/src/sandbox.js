// One sandbox: details, usage and cost, metrics chart, processes, files,
// egress log, network policy, terminal, and the lifecycle actions.
import { call, get, getKey, post, q } from "./api.js";
import { bytes, chart, clear, confirmThen, dollars, duration, errorBox, h, saveResponse, table, when } from "./ui.js";
import { Terminal } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";

const enc = encodeURIComponent;

export function sandboxPage(el, session, id) {
  const base = "/v1/sandboxes/" + enc(id);
  const actionErr = errorBox("action-error");
  const details = h("div", { id: "details" });
  const actions = h("div", { class: "toolbar", id: "actions" });
  const snapNote = h("p", { id: "snapshot-note", role: "status" });
  const sections = {
    metrics: section("metrics", "Metrics"),
    processes: section("processes-section", "Processes"),
    files: section("files-section", "Files"),
    egress: section("egress-section", "Egress log"),
    network: section("network-section", "Network policy"),
    terminal: section("terminal-section", "Terminal"),
  };
  el.append(h("p", {}, h("a", { href: "#/sandboxes" }, "← Sandboxes")), h("h1", {}, "Sandbox ", h("code", {}, id)), actions, actionErr, snapNote, details,
    ...Object.values(sections).map((s) => s.el));

  let sbx = null;
  let stopped = false;
  const cleanups = [];

  async function loadDetails() {
    try {
      sbx = await get(base);
    } catch (e) {
      actionErr.show(e);
      return;
    }
    const now = Date.now();
    const rows = [
      ["State", h("span", { id: "sbx-state", class: "state state-" + sbx.state }, sbx.state)],
      ["End reason", h("span", { id: "sbx-end-reason" }, sbx.end_reason ? sbx.end_reason + (sbx.end_message ? ": " + sbx.end_message : "") : "—")],
      ["Template", sbx.template],
      ["Isolation", sbx.isolation],
      ["Size", sbx.vcpus + " vCPU, " + sbx.memory_mib + " MiB, " + sbx.disk_gib + " GiB disk"],
      ["Created", when(sbx.created_at)],
      ["Lease ends", sbx.state === "ended" ? "—" : when(sbx.lease_ends_at) + " (in " + duration(Date.parse(sbx.lease_ends_at) - now) + ")"],
      ["On lease end", sbx.on_lease_end],
      ["Ended", when(sbx.ended_at)],
      ["Cost so far", h("span", { id: "sbx-cost" }, dollars(sbx.cost_micros))],
      ["Usage", sbx.usage.seconds.toFixed(0) + " s running, " + sbx.usage.cpu_seconds.toFixed(1) + " CPU s, " + sbx.usage.memory_gib_seconds.toFixed(1) + " GiB·s"],
      ["Metadata", Object.entries(sbx.metadata || {}).map(([k, v]) => k + "=" + v).join(", ") || "—"],
    ];
    if (sbx.node) rows.push(["Node", sbx.node]);
    clear(details).append(h("dl", { class: "grid" }, rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])));
    renderActions();
  }

  function renderActions() {
    clear(actions);
    if (!session.canChange || !sbx) {
      actions.append(h("span", { class: "muted", id: "read-only-note" }, session.canChange ? "" : "Read-only key: no actions."));
      return;
    }
    const act = (name, label, path, body, question) => {
      const b = h("button", { id: "btn-" + name, type: "button" }, label);
      b.addEventListener("click", () => confirmThen(question, actionErr, async () => {
        await post(base + path, body ? body() : undefined);
        await loadDetails();
      }));
      actions.append(b);
    };
    if (sbx.state === "ended") return;
    act("stop", "Stop", "/stop", null, "Stop sandbox " + id + "? Its processes and files are gone.");
    if (sbx.state === "running") act("pause", "Pause", "/pause", null, "Pause sandbox " + id + "?");
    if (sbx.state === "paused") act("resume", "Resume", "/resume", null, "Resume sandbox " + id + "?");
    if (sbx.state === "running" || sbx.state === "paused") {
      // A snapshot: listed on the Snapshots page, where a sandbox starts
      // from it.
      const b = h("button", { id: "btn-snapshot", type: "button" }, "Snapshot");
      b.addEventListener("click", () => confirmThen("Take a snapshot of sandbox " + id + "? It stops answering for a moment while it is taken.", actionErr, async () => {
        const sn = await post(base + "/snapshots", {});
        clear(snapNote).append("Snapshot ", h("a", { href: "#/snapshots", id: "snapshot-taken", dataset: { id: sn.id } }, sn.id), " taken.");
        await loadDetails();
      }));
      actions.append(b);
    }
    const mins = h("input", { id: "extend-minutes", type: "number", min: 1, value: 30, size: 4, "aria-label": "minutes" });
    actions.append(mins);
    act("extend", "Extend", "/extend", () => ({ timeout_seconds: Math.max(1, Number(mins.value) || 30) * 60 }), "Extend the lease of " + id + "?");
  }

  async function loadMetrics() {
    const s = sections.metrics;
    try {
      const m = (await get(base + "/metrics")).metrics || [];
      clear(s.body);
      if (m.length === 0) {
        s.body.append(h("p", { class: "muted" }, "No samples yet (one every 5 s while it runs)."));
        return;
      }
      const t = (x) => Date.parse(x.timestamp);
      const last = m[m.length - 1];
      s.body.append(
        chart("metrics-chart", [
          { label: "CPU %", cls: "cpu", points: m.map((x) => [t(x), x.cpu_used_pct]) },
          { label: "memory %", cls: "mem", points: m.map((x) => [t(x), x.mem_total_bytes ? (100 * x.mem_used_bytes) / x.mem_total_bytes : 0]) },
          { label: "disk %", cls: "disk", points: m.map((x) => [t(x), x.disk_total_bytes ? (100 * x.disk_used_bytes) / x.disk_total_bytes : 0]) },
        ], 100, "%"),
        h("p", { class: "muted" }, `latest: CPU ${last.cpu_used_pct.toFixed(1)}% of ${last.cpu_count}, memory ${bytes(last.mem_used_bytes)} of ${bytes(last.mem_total_bytes)}, disk ${bytes(last.disk_used_bytes)} of ${bytes(last.disk_total_bytes)}, network in ${bytes(last.net_rx_bytes)} out ${bytes(last.net_tx_bytes)}`),
        // The cost so far at each sample: the record's (the bill's) figure.
        h("h3", {}, "Cost so far (USD)"),
        chart("cost-chart", [{ label: "cost so far", cls: "cost", points: m.map((x) => [t(x), (x.cost_micros || 0) / 1e6]) }],
          Math.max(1e-6, ...m.map((x) => (x.cost_micros || 0) / 1e6)), dollars(Math.max(0, ...m.map((x) => x.cost_micros || 0)))),
        h("p", { class: "muted", id: "cost-latest" }, `latest: ${dollars(last.cost_micros || 0)}`));
    } catch (e) {
      s.fail(e);
    }
  }

  async function loadProcesses() {
    const s = sections.processes;
    try {
      const list = (await get(base + "/processes" + q({ output: "false" }))).processes || [];
      clear(s.body).append(list.length === 0 ? h("p", { class: "muted" }, "No background processes.") :
        table("processes", ["Pid", "Command", "User", "Running", "Exit", "Started"], list.map((p) => [
          String(p.pid), p.cmd.argv ? p.cmd.argv.join(" ") : p.cmd.shell || "", p.user || "", p.running ? "yes" : "no",
          p.exit_code === undefined || p.exit_code === null ? "—" : String(p.exit_code), when(p.started_at)])));
    } catch (e) {
      s.fail(e);
    }
  }

  let dir = "/workspace";
  async function loadFiles() {
    const s = sections.files;
    const pathInput = h("input", { id: "files-path", value: dir, size: 30, "aria-label": "directory" });
    const go = h("button", { type: "button", id: "files-go" }, "List");
    go.addEventListener("click", () => {
      dir = pathInput.value || "/";
      loadFiles();
    });
    pathInput.addEventListener("keydown", (ev) => ev.key === "Enter" && go.click());
    const tools = h("div", { class: "toolbar" }, pathInput, go);
    const ferr = errorBox("files-error");
    if (session.canChange) {
      const up = h("input", { type: "file", id: "upload", "aria-label": "upload a file" });
      up.addEventListener("change", async () => {
        const f = up.files[0];
        if (!f) return;
        try {
          await call("PUT", base + "/files" + q({ path: dir.replace(/\/$/, "") + "/" + f.name }), f);
          loadFiles();
        } catch (e) {
          ferr.show(e);
        }
      });
      tools.append(h("label", { for: "upload" }, " Upload "), up);
    }
    clear(s.body).append(tools, ferr);
    try {
      const list = await get(base + "/files/list" + q({ path: dir, limit: 500 }));
      const entries = (list.entries || []).sort((a, b) => (b.type === "dir") - (a.type === "dir") || a.name.localeCompare(b.name));
      s.body.append(table("files", ["Name", "Type", "Size", "Modified", ""], entries.map((f) => {
        let open;
        if (f.type === "dir") {
          open = h("button", { type: "button", class: "open", dataset: { path: f.path } }, "Open");
          open.addEventListener("click", () => {
            dir = f.path;
            loadFiles();
          });
        } else if (f.type === "file") {
          open = h("button", { type: "button", class: "download", dataset: { path: f.path } }, "Download");
          open.addEventListener("click", () => download(f.path, f.name, ferr));
        }
        return [f.name, f.type, f.type === "file" ? bytes(f.size) : "", when(f.mtime), open || ""];
      })));
      if (list.truncated) s.body.append(h("p", { class: "muted" }, "Only the first 500 entries."));
    } catch (e) {
      ferr.show(e);
    }
  }

  async function download(path, name, ferr) {
    ferr.show(null);
    try {
      await saveResponse(await call("GET", base + "/files" + q({ path }), undefined, true), name);
    } catch (e) {
      ferr.show(e);
    }
  }

  async function loadEgress() {
    const s = sections.egress;
    try {
      const log = (await get(base + "/egress")).events || [];
      const refresh = h("button", { type: "button", id: "egress-refresh" }, "Refresh");
      refresh.addEventListener("click", loadEgress);
      clear(s.body).append(refresh, log.length === 0 ? h("p", { class: "muted", id: "egress-empty" }, "No connections yet.") :
        table("egress", ["Time", "Kind", "Name", "Address", "Verdict", "Reason"], log.slice().reverse().map((e) => [
          when(e.time), e.kind, e.name || "", e.address ? e.address + (e.port ? ":" + e.port : "") : "",
          h("span", { class: "verdict-" + e.verdict }, e.verdict), e.reason || ""])));
    } catch (e) {
      s.fail(e);
    }
  }

  async function loadNetwork() {
    const s = sections.network;
    try {
      const n = await get(base + "/network");
      clear(s.body).append(h("dl", { class: "grid", id: "network" },
        h("dt", {}, "Internet"), h("dd", {}, n.internet ? "yes" : "no"),
        h("dt", {}, "Allowed names"), h("dd", {}, n.allow && n.allow.length ? n.allow.join(", ") : n.internet ? "every public address" : "none")));
    } catch (e) {
      s.fail(e);
    }
  }

  function terminalSection() {
    const s = sections.terminal;
    if (!session.canChange) {
      s.body.append(h("p", { class: "muted" }, "A read-only key opens no terminal."));
      return;
    }
    const start = h("button", { type: "button", id: "term-start" }, "Open a terminal");
    const status = h("span", { class: "muted", id: "term-status" });
    const box = h("div", { id: "terminal" });
    s.body.append(h("div", { class: "toolbar" }, start, " ", status), box);
    let ws = null;
    let term = null;
    start.addEventListener("click", () => {
      if (ws) ws.close();
      if (term) term.dispose();
      clear(box);
      term = new Terminal({ cursorBlink: true, fontSize: 14, scrollback: 2000, convertEol: false });
      const fit = new FitAddon();
      term.loadAddon(fit);
      term.open(box);
      fit.fit();
      const proto = location.protocol === "https:" ? "wss:" : "ws:";
      const url = proto + "//" + location.host + base + "/pty" + q({ cols: term.cols, rows: term.rows });
      // The key rides as a subprotocol: browsers cannot set Authorization
      // on a WebSocket, and a URL reaches logs.
      ws = new WebSocket(url, ["withruntime.pty", "withruntime.bearer." + getKey()]);
      ws.binaryType = "arraybuffer";
      status.textContent = "connecting…";
      const te = new TextEncoder();
      ws.onmessage = (ev) => {
        if (typeof ev.data !== "string") {
          term.write(new Uint8Array(ev.data));
          return;
        }
        const m = JSON.parse(ev.data);
        if (m.type === "start") status.textContent = "terminal " + m.pty_id;
        else if (m.type === "exit") status.textContent = "exited with " + m.exit_code;
        else if (m.type === "error") status.textContent = m.code + ": " + m.message;
      };
      ws.onopen = () => term.focus();
      ws.onclose = (ev) => {
        if (!/exited|error/.test(status.textContent)) status.textContent = "closed" + (ev.reason ? ": " + ev.reason : " (" + ev.code + ")");
      };
      term.onData((d) => ws.readyState === WebSocket.OPEN && ws.send(te.encode(d)));
      term.onResize(({ cols, rows }) => ws.readyState === WebSocket.OPEN && ws.send(JSON.stringify({ type: "resize", cols, rows })));
      const onWin = () => fit.fit();
      window.addEventListener("resize", onWin);
      cleanups.push(() => window.removeEventListener("resize", onWin));
    });
    cleanups.push(() => {
      if (ws) ws.close();
      if (term) term.dispose();
    });
  }

  loadDetails().then(() => {
    if (stopped) return;
    loadMetrics();
    loadNetwork();
    loadEgress();
    if (sbx && sbx.state === "running") {
      loadProcesses();
      loadFiles();
    } else {
      for (const k of ["processes", "files"]) sections[k].body.append(h("p", { class: "muted" }, "Only while the sandbox runs."));
    }
  });
  terminalSection();
  const timer = setInterval(() => {
    if (stopped) return;
    loadDetails();
    loadMetrics();
  }, 5000);
  return () => {
    stopped = true;
    clearInterval(timer);
    cleanups.forEach((f) => f());
  };
}

function section(id, title) {
  const body = h("div", { class: "body" });
  const el = h("section", { id, class: "card" }, h("h2", {}, title), body);
  return {
    el,
    body,
    fail(e) {
      const b = errorBox(id + "-error");
      clear(body).append(b);
      b.show(e);
    },
  };
}
