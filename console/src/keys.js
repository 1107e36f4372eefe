// Keys (list, create with a daily limit, the secret shown once, revoke),
// usage per day and per key, and the admin's accounts.
import { del, get, post, q } from "./api.js";
import { bars, clear, confirmThen, dollars, errorBox, h, table, when } from "./ui.js";

export function keysPage(el, session) {
  const err = errorBox("keys-error");
  const list = h("div", { id: "keys-list" });
  const secret = h("div", { id: "key-secret-box", hidden: true });
  const usage = h("div", { id: "usage" });
  el.append(h("h1", {}, "Keys"), err, secret, list);

  if (session.canChange) {
    const name = h("input", { id: "key-name", placeholder: "name", size: 16, "aria-label": "name" });
    const kind = h("select", { id: "key-kind", "aria-label": "kind" }, h("option", { value: "full" }, "full"), h("option", { value: "read_only" }, "read-only"));
    const limit = h("input", { id: "key-limit", type: "number", min: 0, step: "0.01", placeholder: "daily limit $", size: 10, "aria-label": "daily limit in dollars" });
    const form = h("form", { id: "key-create-form", class: "toolbar" }, "New key: ", name, kind, limit, h("button", { id: "key-create", type: "submit" }, "Create"));
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      err.show(null);
      try {
        const body = { name: name.value || undefined, kind: kind.value };
        if (limit.value) body.daily_limit_micros = Math.round(Number(limit.value) * 1e6);
        const k = await post("/v1/keys", body);
        clear(secret).append(h("p", {}, "The new key's secret, shown this once: copy it now."), h("code", { id: "key-secret" }, k.key));
        secret.hidden = false;
        name.value = "";
        limit.value = "";
        loadKeys();
      } catch (e) {
        err.show(e);
      }
    });
    el.append(form);
  }
  el.append(h("h2", {}, "Usage"), usage);

  async function loadKeys() {
    try {
      const keys = (await get("/v1/keys")).keys || [];
      clear(list).append(table("keys", ["Id", "Name", "Kind", "Account", "Daily limit", "Created", ""], keys.map((k) => {
        let revoke = "";
        if (session.canChange && k.id !== session.key.id) {
          revoke = h("button", { type: "button", class: "revoke", dataset: { id: k.id } }, "Revoke");
          revoke.addEventListener("click", () => confirmThen("Revoke key " + (k.name || k.id) + "? It stops working at once.", err, async () => {
            await del("/v1/keys/" + encodeURIComponent(k.id));
            loadKeys();
          }));
        }
        return [k.id + (k.id === session.key.id ? " (this key)" : ""), k.name || "", k.kind, k.account,
          k.daily_limit_micros ? dollars(k.daily_limit_micros) : "—", when(k.created_at), revoke];
      })));
    } catch (e) {
      err.show(e);
    }
  }

  async function loadUsage() {
    try {
      const from = new Date(Date.now() - 29 * 86400e3).toISOString().slice(0, 10);
      const u = await get("/v1/usage" + q({ from }));
      const perDay = new Map();
      for (const r of u.rows || []) perDay.set(r.day, (perDay.get(r.day) || 0) + r.cost_micros);
      const perKey = new Map();
      for (const r of u.rows || []) perKey.set(r.key_id, (perKey.get(r.key_id) || 0) + r.cost_micros);
      const days = [...perDay.keys()].sort();
      clear(usage).append(
        h("p", {}, "Last 30 days: ", h("strong", { id: "usage-total" }, dollars(u.cost_micros))),
        h("h3", {}, "Per day, against this key's daily limit"),
        bars("usage-chart", days.map((d) => ({ label: d, value: perDay.get(d) })), session.key.daily_limit_micros || 0, dollars),
        h("h3", {}, "Per key"),
        bars("usage-keys-chart", [...perKey.keys()].sort().map((k) => ({ label: k, value: perKey.get(k) })), 0, dollars),
        table("usage-table", ["Day", "Key", "Sandbox h", "CPU h", "GiB·h", "Cost"], (u.rows || []).map((r) => [
          r.day, r.key_id, r.sandbox_hours.toFixed(3), r.cpu_hours.toFixed(3), r.memory_gib_hours.toFixed(3), dollars(r.cost_micros)])));
    } catch (e) {
      const b = errorBox("usage-error");
      clear(usage).append(b);
      b.show(e);
    }
  }

  loadKeys();
  loadUsage();
  return null;
}

export function accountsPage(el) {
  const err = errorBox("accounts-error");
  const body = h("div", {});
  el.append(h("h1", {}, "Accounts"), err, body);
  get("/v1/accounts").then((a) => {
    clear(body).append(table("accounts", ["Id", "Name", "Concurrency", "Daily limit", "Created"], (a.accounts || []).map((x) => [
      x.id, x.name, String(x.concurrency), x.daily_limit_micros ? dollars(x.daily_limit_micros) : "—", when(x.created_at)])));
  }, (e) => err.show(e));
  return null;
}
