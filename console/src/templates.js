// Templates and snapshots, read only.
import { get } from "./api.js";
import { bytes, errorBox, h, table, when } from "./ui.js";

export function templatesPage(el) {
  const terr = errorBox("templates-error");
  const serr = errorBox("snapshots-error");
  const tbody = h("div", {});
  const sbody = h("div", {});
  el.append(h("h1", {}, "Templates"), terr, tbody, h("h1", {}, "Snapshots"), serr, sbody);
  get("/v1/templates").then((l) => {
    tbody.append(table("templates", ["Name", "State", "Source", "Size", "Public", "Created"], (l.templates || []).map((t) => [
      t.name + ":" + t.tag, t.state || "", t.source, bytes(t.size_bytes || 0), t.public ? "yes" : "", when(t.created_at)])));
  }, (e) => terr.show(e));
  get("/v1/snapshots").then((l) => {
    sbody.append(table("snapshots", ["Id", "Name", "Sandbox", "Template", "Size", "Created", "Expires"], (l.snapshots || []).map((s) => [
      s.id, s.name || "", s.sandbox_id, s.template, bytes(s.size_bytes || 0), when(s.created_at), when(s.expires_at)])));
  }, (e) => serr.show(e));
  return null;
}
