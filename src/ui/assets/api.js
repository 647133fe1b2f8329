// The JSON API, called with the session cookie (sent by the browser) and,
// for every action, the anti-CSRF token the session route gave us.

import { setSession } from "./role.js";

let csrf = null;
let onUnauthorized = () => {};

export class ApiError extends Error {
  constructor(status, kind, message) {
    super(message);
    this.status = status;
    this.kind = kind;
  }
}

export function setUnauthorizedHandler(f) {
  onUnauthorized = f;
}

async function parse(res) {
  const text = await res.text();
  let body = null;
  if (text) {
    try {
      body = JSON.parse(text);
    } catch (_) {
      body = { text };
    }
  }
  if (!res.ok) {
    const e = body && body.error ? body.error : {};
    throw new ApiError(res.status, e.kind || "http", e.message || `${res.status} ${res.statusText}`);
  }
  return body;
}

// Whether this browser holds a session; keeps its anti-CSRF token.
export async function checkSession() {
  const res = await fetch("/ui-session", { credentials: "same-origin" });
  if (res.status === 401) return false;
  const body = await parse(res);
  csrf = body.csrf;
  setSession(body.name, body.role);
  return true;
}

// Where the admin's token is (told to a browser on the engine's machine).
export async function tokenHint() {
  try {
    const res = await fetch("/ui-session/hint", { credentials: "same-origin" });
    return res.ok ? (await res.json()).token_file || null : null;
  } catch (_) {
    return null;
  }
}

export async function login(token) {
  const res = await fetch("/ui-session/login", {
    method: "POST",
    credentials: "same-origin",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ token }),
  });
  const body = await parse(res);
  csrf = body.csrf;
  setSession(body.name, body.role);
}

export async function logout() {
  await fetch("/ui-session", {
    method: "DELETE",
    credentials: "same-origin",
    headers: csrf ? { "x-weir-csrf": csrf } : {},
  });
  csrf = null;
}

async function call(method, path, body) {
  const headers = {};
  if (method !== "GET") {
    headers["x-weir-csrf"] = csrf || "";
    if (body !== undefined) headers["content-type"] = "application/json";
  }
  const res = await fetch(path, {
    method,
    credentials: "same-origin",
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (res.status === 401) onUnauthorized();
  return parse(res);
}

export const get = (path) => call("GET", path);
export const post = (path, body) => call("POST", path, body === undefined ? {} : body);

// Path segments are encoded one by one: partitions hold ':', '@' and '='.
export function p(...parts) {
  return "/api/v1/" + parts.map((x) => encodeURIComponent(x)).join("/");
}

export function qs(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== null && v !== undefined && v !== "") q.set(k, v);
  }
  const s = q.toString();
  return s ? `?${s}` : "";
}
