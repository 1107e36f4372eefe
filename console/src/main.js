// The console's entry: sign-in, the navigation and the router (#/...).
import { ApiError, forgetKey, get, getKey, setKey } from "./api.js";
import { clear, errorBox, h } from "./ui.js";
import { sandboxesPage } from "./sandboxes.js";
import { sandboxPage } from "./sandbox.js";
import { keysPage, accountsPage } from "./keys.js";
import { templatesPage } from "./templates.js";
import { snapshotsPage } from "./snapshots.js";
import { volumePage, volumesPage } from "./volumes.js";

// session is who the key is (GET /v1/keys/current): its kind decides
// what the console offers; the server decides what it allows.
const session = { key: null, canChange: false, admin: false };
let leave = null;

const main = () => document.getElementById("main");

function signedIn(k) {
  session.key = k;
  session.admin = k.kind === "admin";
  session.canChange = k.kind === "admin" || k.kind === "full";
  document.getElementById("nav").hidden = false;
  document.getElementById("nav-accounts").hidden = !session.admin;
  const who = document.getElementById("whoami");
  who.textContent = (k.name || k.id) + " (" + k.kind + ", account " + k.account + ")";
  document.body.classList.toggle("read-only", !session.canChange);
}

function signOut(reason) {
  forgetKey();
  session.key = null;
  document.getElementById("nav").hidden = true;
  document.getElementById("whoami").textContent = "";
  if (location.hash !== "#/") location.hash = "#/";
  route(reason);
}

function signInPage(el, reason) {
  const err = errorBox("signin-error");
  const input = h("input", { id: "key", type: "password", autocomplete: "off", spellcheck: "false", required: true, "aria-describedby": "key-help" });
  const form = h("form", { id: "signin", class: "card narrow" },
    h("h1", {}, "Sign in"),
    h("label", { for: "key" }, "API key"),
    input,
    h("p", { id: "key-help", class: "muted" }, "The key is kept in this tab's session storage only and sent as Authorization: Bearer; signing out or closing the tab forgets it."),
    h("button", { id: "signin-submit", type: "submit" }, "Sign in"),
    err);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    err.show(null);
    setKey(input.value.trim());
    try {
      signedIn(await get("/v1/keys/current"));
      location.hash = "#/sandboxes";
      route();
    } catch (e) {
      forgetKey();
      err.show(e);
    }
  });
  el.append(form);
  if (reason) err.show(reason);
  input.focus();
}

async function route(reason) {
  if (leave) {
    leave();
    leave = null;
  }
  const el = clear(main());
  if (!getKey()) {
    signInPage(el, reason);
    return;
  }
  if (!session.key) {
    try {
      signedIn(await get("/v1/keys/current"));
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) return; // signed out by the event
      el.append(h("p", { class: "error", role: "alert" }, e.message));
      return;
    }
  }
  const path = location.hash.replace(/^#/, "") || "/";
  const parts = path.split("/").filter(Boolean);
  let page;
  if (parts[0] === "sandboxes" && parts[1]) page = sandboxPage(el, session, decodeURIComponent(parts[1]));
  else if (parts[0] === "snapshots") page = snapshotsPage(el, session);
  else if (parts[0] === "volumes" && parts[1]) page = volumePage(el, session, decodeURIComponent(parts[1]));
  else if (parts[0] === "volumes") page = volumesPage(el, session);
  else if (parts[0] === "keys") page = keysPage(el, session);
  else if (parts[0] === "templates") page = templatesPage(el, session, parts[1] === "builds" && parts[2] ? decodeURIComponent(parts[2]) : "");
  else if (parts[0] === "accounts" && session.admin) page = accountsPage(el, session);
  else page = sandboxesPage(el, session);
  leave = page || null;
  for (const a of document.querySelectorAll("#nav a")) {
    a.toggleAttribute("aria-current", path.startsWith(a.getAttribute("href").slice(1)));
  }
}

window.addEventListener("wr-unauthorized", (ev) => signOut(ev.detail));
window.addEventListener("hashchange", () => route());
document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("logout").addEventListener("click", () => signOut());
  route();
});
