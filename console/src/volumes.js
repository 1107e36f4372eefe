// Volumes: the list, a create, a delete, and one volume's files with
// their downloads.
import { call, del, get, post, q } from "./api.js";
import { bytes, clear, confirmThen, errorBox, h, saveResponse, table, when } from "./ui.js";

const enc = encodeURIComponent;

export function volumesPage(el, session) {
  const err = errorBox("volumes-error");
  const body = h("div", { id: "volumes-list" });
  el.append(h("h1", {}, "Volumes"), err);
  if (session.canChange) {
    const name = h("input", { id: "volume-name", placeholder: "name", size: 16, required: true, "aria-label": "name" });
    const size = h("input", { id: "volume-size", type: "number", min: 1, value: 1, size: 4, "aria-label": "size in GiB" });
    const form = h("form", { id: "volume-create-form", class: "toolbar" }, "New volume: ", name, size, " GiB ",
      h("button", { id: "volume-create", type: "submit" }, "Create"));
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      err.show(null);
      try {
        await post("/v1/volumes", { name: name.value.trim(), size_gib: Number(size.value) || 0 });
        name.value = "";
        load();
      } catch (e) {
        err.show(e);
      }
    });
    el.append(form);
  }
  el.append(body);

  async function load() {
    try {
      const list = (await get("/v1/volumes")).volumes || [];
      clear(body).append(list.length === 0 ? h("p", { class: "muted", id: "volumes-empty" }, "No volumes.") :
        table("volumes", ["Name", "Size", "Used", "Mounted by", "Created", ""], list.map((v) => [
          h("a", { href: "#/volumes/" + enc(v.name), class: "volume-link" }, v.name), v.size_gib + " GiB", bytes(v.used_bytes || 0),
          (v.mounted_by || []).map((id, i) => [i ? ", " : "", h("a", { href: "#/sandboxes/" + enc(id) }, id)]).flat(),
          when(v.created_at), session.canChange ? deleteButton(v) : "",
        ]), (i) => ({ dataset: { name: list[i].name } })));
    } catch (e) {
      err.show(e);
    }
  }

  function deleteButton(v) {
    const b = h("button", { type: "button", class: "delete", dataset: { name: v.name } }, "Delete");
    b.addEventListener("click", () => confirmThen("Delete volume " + v.name + " and every file on it?", err, async () => {
      await del("/v1/volumes/" + enc(v.name));
      load();
    }));
    return b;
  }

  load();
  return null;
}

// volumePage lists one volume's files, a directory at a time.
export function volumePage(el, session, name) {
  const base = "/v1/volumes/" + enc(name);
  const err = errorBox("volume-files-error");
  const pathInput = h("input", { id: "volume-path", value: "/", size: 30, "aria-label": "directory" });
  const go = h("button", { type: "button", id: "volume-go" }, "List");
  const body = h("div", {});
  el.append(h("p", {}, h("a", { href: "#/volumes" }, "← Volumes")), h("h1", {}, "Volume ", h("code", {}, name)),
    h("div", { class: "toolbar" }, pathInput, go), err, body);
  let dir = "/";
  go.addEventListener("click", () => {
    dir = pathInput.value || "/";
    load();
  });
  pathInput.addEventListener("keydown", (ev) => ev.key === "Enter" && go.click());

  async function load() {
    err.show(null);
    pathInput.value = dir;
    const join = (n) => dir.replace(/\/$/, "") + "/" + n;
    try {
      const list = await get(base + "/files" + q({ path: dir }));
      const entries = (list.entries || []).sort((a, b) => (b.type === "dir") - (a.type === "dir") || a.name.localeCompare(b.name));
      const rows = entries.map((f) => {
        let open = "";
        if (f.type === "dir") {
          open = h("button", { type: "button", class: "open", dataset: { path: join(f.name) } }, "Open");
          open.addEventListener("click", () => {
            dir = join(f.name);
            load();
          });
        } else if (f.type === "file") {
          open = h("button", { type: "button", class: "download", dataset: { path: join(f.name) } }, "Download");
          open.addEventListener("click", async () => {
            err.show(null);
            try {
              await saveResponse(await call("GET", base + "/files" + q({ path: join(f.name) }), undefined, true), f.name);
            } catch (e) {
              err.show(e);
            }
          });
        }
        return [f.name, f.type, f.type === "file" ? bytes(f.size) : "", f.mtime ? when(f.mtime) : "", open];
      });
      if (dir !== "/") {
        const up = h("button", { type: "button", class: "open", id: "volume-up" }, "Up");
        up.addEventListener("click", () => {
          dir = dir.replace(/\/[^/]*\/?$/, "") || "/";
          load();
        });
        rows.unshift(["..", "dir", "", "", up]);
      }
      clear(body).append(rows.length === 0 ? h("p", { class: "muted", id: "volume-empty" }, "Empty.") :
        table("volume-files", ["Name", "Type", "Size", "Modified", ""], rows));
    } catch (e) {
      clear(body);
      err.show(e);
    }
  }

  load();
  return null;
}
