// Snapshots: the list, a delete, and a sandbox started from one.
import { del, get, post } from "./api.js";
import { bytes, clear, confirmThen, errorBox, h, table, when } from "./ui.js";

const enc = encodeURIComponent;

export function snapshotsPage(el, session) {
  const err = errorBox("snapshots-error");
  const body = h("div", { id: "snapshots-list" });
  el.append(h("h1", {}, "Snapshots"), err, body);

  async function load() {
    try {
      const list = (await get("/v1/snapshots")).snapshots || [];
      clear(body).append(list.length === 0 ? h("p", { class: "muted", id: "snapshots-empty" }, "No snapshots.") :
        table("snapshots", ["Id", "Name", "Sandbox", "Size", "Created", "Expires", ""], list.map((s) => [
          s.id, s.name || "", h("a", { href: "#/sandboxes/" + enc(s.sandbox_id) }, s.sandbox_id),
          bytes(s.size_bytes || 0), when(s.created_at), when(s.expires_at), session.canChange ? buttons(s) : "",
        ]), (i) => ({ dataset: { id: list[i].id } })));
    } catch (e) {
      err.show(e);
    }
  }

  function buttons(s) {
    const start = h("button", { type: "button", class: "start-from", dataset: { id: s.id }, "aria-label": "Start a sandbox from snapshot " + s.id }, "Start sandbox");
    start.addEventListener("click", () => confirmThen("Start a new sandbox from snapshot " + (s.name || s.id) + "?", err, async () => {
      const sbx = await post("/v1/sandboxes", { snapshot: s.id });
      location.hash = "#/sandboxes/" + enc(sbx.id);
    }));
    const remove = h("button", { type: "button", class: "delete", dataset: { id: s.id }, "aria-label": "Delete snapshot " + s.id }, "Delete");
    remove.addEventListener("click", () => confirmThen("Delete snapshot " + (s.name || s.id) + "? It cannot be brought back.", err, async () => {
      await del("/v1/snapshots/" + enc(s.id));
      load();
    }));
    return h("span", { class: "row-actions" }, start, remove);
  }

  load();
  return null;
}
