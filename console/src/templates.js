// Templates, and a template build with its live log (snapshots have a
// page of their own: snapshots.js).
import { call, get } from "./api.js";
import { bytes, clear, errorBox, h, table, when } from "./ui.js";

export function templatesPage(el, session, buildID) {
  const terr = errorBox("templates-error");
  const tbody = h("div", {});
  const build = buildSection(buildID);
  el.append(h("h1", {}, "Templates"), terr, tbody, build.el);
  get("/v1/templates").then((l) => {
    if (!(l.templates || []).length) tbody.append(h("p", { class: "muted" }, "No templates of this account or public ones (the built-in default is always there)."));
    else tbody.append(table("templates", ["Name", "State", "Source", "Size", "Public", "Created"], (l.templates || []).map((t) => [
      t.name + ":" + t.tag, t.state || "", t.source, bytes(t.size_bytes || 0), t.public ? "yes" : "", when(t.created_at)])));
  }, (e) => terr.show(e));
  return build.leave;
}

// buildSection follows one build (its id as POST /v1/templates answered
// it): its state, and its log as it comes.
function buildSection(initial) {
  const err = errorBox("build-error");
  const id = h("input", { id: "build-id", placeholder: "bld_…", size: 24, "aria-label": "build id", value: initial || "" });
  const go = h("button", { type: "submit", id: "build-follow" }, "Follow");
  const state = h("p", { id: "build-state", class: "muted" });
  const log = h("pre", { id: "build-log", class: "log", tabindex: 0 });
  const form = h("form", { class: "toolbar" }, "A build's log: ", id, go);
  let abort = null;
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    location.hash = "#/templates/builds/" + encodeURIComponent(id.value.trim());
  });
  async function follow(bid) {
    err.show(null);
    clear(log);
    try {
      const b = await get("/v1/templates/builds/" + encodeURIComponent(bid));
      state.textContent = b.template + ": " + b.state;
      abort = new AbortController();
      const resp = await call("GET", "/v1/templates/builds/" + encodeURIComponent(bid) + "/logs", undefined, true, abort.signal);
      const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let nl;
        while ((nl = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (line) log.append(logLine(JSON.parse(line)));
        }
      }
      const end = await get("/v1/templates/builds/" + encodeURIComponent(bid));
      state.textContent = end.template + ": " + end.state + (end.error ? " (" + end.error.code + ": " + end.error.message + ")" : "");
      state.dataset.state = end.state;
    } catch (e) {
      if (e.name !== "AbortError") err.show(e);
    }
  }
  if (initial) follow(initial);
  return {
    el: h("section", { class: "card", id: "build-section" }, h("h2", {}, "Build"), form, err, state, log),
    leave: () => abort && abort.abort(),
  };
}

function logLine(ev) {
  let text;
  switch (ev.type) {
    case "step":
      text = `[${ev.step}/${ev.steps}] ${ev.message}${ev.cached ? " (cached)" : ""}`;
      break;
    case "end":
      text = "end: " + ev.state + (ev.error ? " (" + ev.error.code + ": " + ev.error.message + ")" : "");
      break;
    case "dropped":
      text = `(${ev.dropped} older events dropped)`;
      break;
    default:
      text = ev.message || "";
  }
  return h("span", { class: "ev-" + ev.type }, text.replace(/\n$/, "") + "\n");
}
