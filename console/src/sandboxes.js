// The sandboxes' live list.
import { get, q } from "./api.js";
import { clear, dollars, duration, errorBox, h, table } from "./ui.js";

const states = ["", "starting", "running", "paused", "ended"];

export function sandboxesPage(el, session) {
  const err = errorBox("list-error");
  const filter = h("select", { id: "state-filter" }, states.map((s) => h("option", { value: s }, s || "any state")));
  const meta = h("input", { id: "meta-filter", placeholder: "key=value", size: 16 });
  const body = h("div", { id: "list" });
  const stamp = h("span", { class: "muted", id: "list-stamp" });
  el.append(
    h("h1", {}, "Sandboxes"),
    h("div", { class: "toolbar" },
      h("label", { for: "state-filter" }, "State "), filter,
      h("label", { for: "meta-filter" }, " Metadata "), meta,
      " ", stamp),
    err, body);
  filter.value = sessionStorage.getItem("withruntime.stateFilter") || "";

  let stopped = false;
  async function load() {
    try {
      const list = await get("/v1/sandboxes" + q({ state: filter.value, metadata: /^[^=]+=/.test(meta.value) ? meta.value : "" }));
      err.show(null);
      render(list.sandboxes || []);
      stamp.textContent = "updated " + new Date().toLocaleTimeString();
    } catch (e) {
      err.show(e);
    }
  }
  function render(all) {
    const rows = all;
    const now = Date.now();
    // The table is made anew each refresh: the sandbox whose link had
    // the keyboard's focus gets it back.
    const row = body.contains(document.activeElement) && document.activeElement.closest("tr");
    const focused = row ? row.dataset.id : null;
    clear(body).append(rows.length === 0 ? h("p", { class: "muted", id: "list-empty" }, "No sandboxes.") :
      table("sandboxes", ["Id", "State", "Template", "Size", "Age", "Lease left", "Cost"], rows.map((s) => [
        h("a", { href: "#/sandboxes/" + encodeURIComponent(s.id), class: "sandbox-link" }, s.id),
        h("span", { class: "state state-" + s.state }, s.state + (s.end_reason ? " (" + s.end_reason + ")" : "")),
        s.template,
        s.vcpus + " vCPU, " + s.memory_mib + " MiB, " + s.disk_gib + " GiB",
        duration(now - Date.parse(s.created_at)),
        s.state === "ended" ? "—" : duration(Date.parse(s.lease_ends_at) - now),
        dollars(s.cost_micros),
      ]), (i) => ({ dataset: { id: rows[i].id, state: rows[i].state } })));
    if (focused) {
      const link = body.querySelector(`tr[data-id="${CSS.escape(focused)}"] a`);
      if (link) link.focus();
    }
  }
  filter.addEventListener("change", () => {
    sessionStorage.setItem("withruntime.stateFilter", filter.value);
    load();
  });
  meta.addEventListener("change", load);
  load();
  const timer = setInterval(() => !stopped && load(), 3000);
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}
