// The API client of the console: every call carries the key from session
// storage as Authorization: Bearer, never a cookie.

const keyName = "withruntime.key";

export function getKey() {
  return sessionStorage.getItem(keyName) || "";
}

export function setKey(k) {
  sessionStorage.setItem(keyName, k);
}

export function forgetKey() {
  sessionStorage.removeItem(keyName);
}

// ApiError is a refusal as the API answers it: a stable code and a
// message.
export class ApiError extends Error {
  constructor(status, code, message) {
    super(code + ": " + message);
    this.status = status;
    this.code = code;
  }
}

// call sends one request; body, when given, is sent as JSON. raw: the
// Response is returned as it is (a file's bytes).
export async function call(method, path, body, raw, signal) {
  const headers = { Authorization: "Bearer " + getKey() };
  const init = { method, headers, cache: "no-store", credentials: "omit", redirect: "error", signal };
  if (body !== undefined) {
    if (body instanceof Blob) {
      init.body = body;
    } else {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new ApiError(0, "network", String(e.message || e));
  }
  if (!resp.ok) {
    let code = "http_" + resp.status;
    let message = resp.statusText;
    try {
      const e = await resp.json();
      code = e.error.code || code;
      message = e.error.message || message;
    } catch (_) {
      // Not the API's JSON error: keep the status.
    }
    const err = new ApiError(resp.status, code, message);
    if (resp.status === 401) {
      window.dispatchEvent(new CustomEvent("wr-unauthorized", { detail: err }));
    }
    throw err;
  }
  if (raw) return resp;
  if (resp.status === 204) return null;
  return resp.json();
}

export const get = (p) => call("GET", p);
export const post = (p, b) => call("POST", p, b === undefined ? {} : b);
export const del = (p) => call("DELETE", p);

export function q(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== "") u.set(k, v);
  }
  const s = u.toString();
  return s ? "?" + s : "";
}
