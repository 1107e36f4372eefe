// DOM helpers: every value shown is text (textContent), never HTML.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

// table builds a table of rows, each a list of cells (text or nodes).
export function table(id, head, rows, rowAttrs) {
  return h("div", { class: "scroll" },
    h("table", { id },
      h("thead", {}, h("tr", {}, head.map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, rows.map((r, i) => h("tr", rowAttrs ? rowAttrs(i) : {}, r.map((c) => h("td", {}, c)))))));
}

// errorBox shows a refusal with its code and message.
export function errorBox(id) {
  const el = h("p", { id, class: "error", role: "alert", hidden: true });
  el.show = (e) => {
    if (!e) {
      el.hidden = true;
      el.textContent = "";
      return;
    }
    el.hidden = false;
    el.textContent = e.code ? e.code + ": " + e.message.replace(/^[^:]*: /, "") : String(e.message || e);
    el.dataset.code = e.code || "";
  };
  return el;
}

// confirmAction asks in the page's dialog (not window.confirm, which a
// keyboard and a test both reach the same way) and resolves to true on
// Confirm; Cancel and Escape resolve to false. The buttons answer this
// question only: no listener outlives it.
export function confirmAction(text) {
  const d = document.getElementById("confirm");
  const ok = document.getElementById("confirm-ok");
  const cancel = document.getElementById("confirm-cancel");
  document.getElementById("confirm-text").textContent = text;
  return new Promise((resolve) => {
    const done = (ev, v) => {
      ev.preventDefault();
      ok.removeEventListener("click", onOk);
      cancel.removeEventListener("click", onCancel);
      d.removeEventListener("cancel", onCancel);
      d.close();
      resolve(v);
    };
    const onOk = (ev) => done(ev, true);
    const onCancel = (ev) => done(ev, false);
    ok.addEventListener("click", onOk);
    cancel.addEventListener("click", onCancel);
    d.addEventListener("cancel", onCancel);
    d.showModal();
    cancel.focus();
  });
}

// confirmThen asks text through confirmAction and, on Confirm, clears err
// and runs action, showing what it throws (a refusal's code and
// message) in err.
export async function confirmThen(text, err, action) {
  if (!(await confirmAction(text))) return;
  err.show(null);
  try {
    await action();
  } catch (e) {
    err.show(e);
  }
}

// saveResponse hands a file's bytes (a Response) to the browser to save
// as name: whatever the server says the file is, the browser gets bytes to
// save, never a page to render in the console's origin.
export async function saveResponse(resp, name) {
  const url = URL.createObjectURL(new Blob([await resp.arrayBuffer()], { type: "application/octet-stream" }));
  const a = h("a", { href: url, download: name, hidden: true });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}

export function dollars(micros) {
  return "$" + (micros / 1e6).toFixed(micros < 100 ? 6 : micros < 10000 ? 4 : 2);
}

export function duration(ms) {
  if (ms < 0) return "—";
  const s = Math.floor(ms / 1000);
  if (s < 60) return s + "s";
  const m = Math.floor(s / 60);
  if (m < 60) return m + "m " + (s % 60) + "s";
  const hr = Math.floor(m / 60);
  if (hr < 48) return hr + "h " + (m % 60) + "m";
  return Math.floor(hr / 24) + "d " + (hr % 24) + "h";
}

export function bytes(n) {
  if (n < 1024) return n + " B";
  const u = ["KiB", "MiB", "GiB", "TiB"];
  let i = -1;
  do {
    n /= 1024;
    i++;
  } while (n >= 1024 && i < u.length - 1);
  return n.toFixed(1) + " " + u[i];
}

export function when(t) {
  return t ? new Date(t).toLocaleString() : "—";
}

// svg makes an SVG chart of W x H and the function that adds an element
// to it (text, when given, as a title when tip, else as content).
function svg(id, W, H) {
  const ns = "http://www.w3.org/2000/svg";
  const root = document.createElementNS(ns, "svg");
  for (const [k, v] of Object.entries({ id, viewBox: `0 0 ${W} ${H}`, role: "img", class: "chart" })) root.setAttribute(k, v);
  const add = (tag, attrs, text, tip) => {
    const el = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
    if (text && tip) {
      const t = document.createElementNS(ns, "title");
      t.textContent = text;
      el.appendChild(t);
    } else if (text) {
      el.textContent = text;
    }
    root.appendChild(el);
  };
  return [root, add];
}

// chart draws series (each {label, points: [[x, y]], cls}) as lines, y
// from 0 to max.
export function chart(id, series, max, yLabel) {
  const W = 600, H = 160, pad = 30;
  const [root, add] = svg(id, W, H);
  const xs = series.flatMap((s) => s.points.map((p) => p[0]));
  const x0 = Math.min(...xs), x1 = Math.max(...xs);
  const sx = (x) => pad + (x1 === x0 ? 0 : ((x - x0) / (x1 - x0)) * (W - 2 * pad));
  const sy = (y) => H - pad - (Math.min(y, max) / max) * (H - 2 * pad);
  add("line", { x1: pad, y1: H - pad, x2: W - pad, y2: H - pad, class: "axis" });
  add("line", { x1: pad, y1: pad, x2: pad, y2: H - pad, class: "axis" });
  add("text", { x: 2, y: pad - 6, class: "label" }, yLabel);
  series.forEach((s, i) => {
    if (s.points.length === 0) return;
    add("polyline", { points: s.points.map((p) => sx(p[0]) + "," + sy(p[1])).join(" "), class: "line " + s.cls });
    add("text", { x: W - pad - 150, y: 14 + 14 * i, class: "legend " + s.cls }, s.label);
  });
  return root;
}

// bars draws one bar per item ({label, value}) and, when given, the limit
// as a line.
export function bars(id, items, limit, fmt) {
  const W = 600, H = 180, pad = 30;
  const [root, add] = svg(id, W, H);
  const max = Math.max(1, limit || 0, ...items.map((i) => i.value));
  const bw = (W - 2 * pad) / Math.max(items.length, 1);
  items.forEach((it, i) => {
    const bh = (it.value / max) * (H - 2 * pad);
    const w = Math.min(Math.max(bw - 4, 1), 60);
    add("rect", { x: pad + (i + 0.5) * bw - w / 2, y: H - pad - bh, width: w, height: bh, class: "bar" }, it.label + ": " + fmt(it.value), true);
    if (items.length <= 12) add("text", { x: pad + (i + 0.5) * bw, y: H - pad + 14, class: "label", "text-anchor": "middle" }, it.label.slice(-10));
  });
  if (limit) {
    const y = H - pad - (limit / max) * (H - 2 * pad);
    add("line", { x1: pad, y1: y, x2: W - pad, y2: y, class: "limit" }, "daily limit " + fmt(limit), true);
  }
  add("line", { x1: pad, y1: H - pad, x2: W - pad, y2: H - pad, class: "axis" });
  return root;
}
