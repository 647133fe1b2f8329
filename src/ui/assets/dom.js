// Building the page without ever parsing markup: every text from the
// engine (names, keys, outputs, log lines) becomes a text node, so a key
// like `<img src=x onerror=...>` shows as text and runs nothing.

import { can } from "./role.js";

const SVG_NS = "http://www.w3.org/2000/svg";

function append(el, child) {
  if (child === null || child === undefined || child === false) return;
  if (Array.isArray(child)) {
    for (const c of child) append(el, c);
  } else if (child instanceof Node) {
    el.appendChild(child);
  } else {
    el.appendChild(document.createTextNode(String(child)));
  }
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") {
      el.addEventListener(k.slice(2), v);
    } else if (k === "dataset") {
      for (const [dk, dv] of Object.entries(v)) el.dataset[dk] = dv;
    } else if (v === true) {
      el.setAttribute(k, "");
    } else {
      el.setAttribute(k, String(v));
    }
  }
}

// An HTML element: h("a", {href: "#/"}, "text", child, [more]). With
// `needs: "operator"` (or "admin") it is drawn only for a session with that
// role or above: an action the session may not take is not shown.
export function h(tag, attrs, ...children) {
  if (attrs && attrs.needs) {
    if (!can(attrs.needs)) return null;
    attrs = { ...attrs, needs: null, "data-needs": attrs.needs };
  }
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

// An SVG element, as h.
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

// Replaces the children of `el`, keeping keyboard focus on the element
// with the same data-focus key if one had it (live refreshes redraw
// tables; a keyboard user must not lose their place).
export function replace(el, ...children) {
  const active = document.activeElement;
  const key = active && el.contains(active) ? active.dataset.focus : undefined;
  el.replaceChildren();
  append(el, children);
  if (key !== undefined) {
    const again = el.querySelector(`[data-focus="${CSS.escape(key)}"]`);
    if (again) again.focus();
  }
}

export function fmtTime(ms) {
  if (ms === null || ms === undefined) return "—";
  const d = new Date(ms);
  const pad = (n, w = 2) => String(n).padStart(w, "0");
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ` +
    `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}Z`;
}

// An instant in an IANA zone with its offset (`2026-03-29 03:00:00+02:00`);
// UTC as fmtTime shows it.
export function fmtTimeIn(ms, zone) {
  if (!zone || zone === "UTC" || zone === "Etc/UTC") return fmtTime(ms);
  if (ms === null || ms === undefined) return "—";
  let parts;
  try {
    parts = Object.fromEntries(new Intl.DateTimeFormat("en-GB", {
      timeZone: zone, hourCycle: "h23", year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", second: "2-digit",
    }).formatToParts(new Date(ms)).map((x) => [x.type, x.value]));
  } catch (_) {
    return fmtTime(ms);
  }
  const wall = Date.UTC(+parts.year, +parts.month - 1, +parts.day, +parts.hour, +parts.minute, +parts.second);
  const off = Math.round((wall - Math.floor(ms / 1000) * 1000) / 60000);
  const pad = (n) => String(n).padStart(2, "0");
  const sign = off < 0 ? "-" : "+";
  return `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute}:${parts.second}` +
    `${sign}${pad(Math.floor(Math.abs(off) / 60))}:${pad(Math.abs(off) % 60)}`;
}

export function fmtDur(ms) {
  if (ms === null || ms === undefined) return "—";
  if (ms < 1000) return `${ms} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 2 : 1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${Math.round(s % 60)} s`;
  const hr = Math.floor(m / 60);
  if (hr < 48) return `${hr} h ${m % 60} min`;
  return `${Math.floor(hr / 24)} d ${hr % 24} h`;
}

// A size in bytes, short: "512 B", "97.7 KiB", "4.0 MiB".
export function fmtBytes(n) {
  if (n === null || n === undefined) return "—";
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let v = n / 1024;
  let u = 0;
  while (v >= 1024 && u + 1 < units.length) {
    v /= 1024;
    u += 1;
  }
  return `${v.toFixed(1)} ${units[u]}`;
}

// When an instant is, from now: "in 3 min", "12 s ago".
export function fmtRel(ms, nowMs = Date.now()) {
  if (ms === null || ms === undefined) return "—";
  const d = ms - nowMs;
  return d >= 0 ? `in ${fmtDur(d)}` : `${fmtDur(-d)} ago`;
}

// Each state has a glyph and a word as well as a colour, so it reads
// without colour vision and in a screen reader.
export const STATES = {
  succeeded: { glyph: "✓", label: "succeeded" },
  complete: { glyph: "✓", label: "complete" },
  failed: { glyph: "✗", label: "failed" },
  upstream_failed: { glyph: "⚠", label: "upstream failed" },
  running: { glyph: "▶", label: "running" },
  queued: { glyph: "◷", label: "queued" },
  ready: { glyph: "●", label: "ready" },
  active: { glyph: "▶", label: "active" },
  pending: { glyph: "○", label: "pending" },
  skipped: { glyph: "↷", label: "skipped" },
  cancelled: { glyph: "⊘", label: "cancelled" },
  withdrawn: { glyph: "↩", label: "withdrawn (prepared, not run)" },
  none: { glyph: "·", label: "no run" },
  closed: { glyph: "●", label: "closed" },
  open: { glyph: "✗", label: "open" },
  half_open: { glyph: "◐", label: "half-open" },
  leader: { glyph: "★", label: "leader" },
  follower: { glyph: "●", label: "follower" },
  learner: { glyph: "◔", label: "learner" },
  catching_up: { glyph: "◑", label: "catching up" },
  under_reserve: { glyph: "⚠", label: "under reserve" },
  unreachable: { glyph: "✗", label: "unreachable" },
};

export function stateInfo(state) {
  return STATES[state] || { glyph: "?", label: String(state) };
}

// A state badge: glyph, word, colour.
export function badge(state, extra) {
  const i = stateInfo(state);
  return h("span", { class: `badge st-${state}`, "data-state": state },
    h("span", { class: "glyph", "aria-hidden": "true" }, i.glyph), " ", i.label,
    extra ? ` ${extra}` : null);
}

// A square of a state, with its meaning in its title and label.
export function square(state, label, href, focusKey) {
  const i = stateInfo(state);
  const attrs = {
    class: `sq st-${state}`,
    title: `${label}: ${i.label}`,
    "aria-label": `${label}: ${i.label}`,
    "data-state": state,
  };
  if (focusKey) attrs["data-focus"] = focusKey;
  const glyph = h("span", { "aria-hidden": "true" }, i.glyph);
  return href ? h("a", { ...attrs, href }, glyph) : h("span", { ...attrs, role: "img" }, glyph);
}

export function table(headers, rows, attrs) {
  return h("div", { class: "table-wrap" },
    h("table", attrs || {},
      h("thead", {}, h("tr", {}, headers.map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, rows)));
}

// A route's hash: route("run", graph, partition) → "#/run/g/p".
export function route(...parts) {
  return "#/" + parts.map((p) => encodeURIComponent(p)).join("/");
}

// A definition list of label → value pairs.
export function facts(pairs) {
  return h("dl", { class: "facts" },
    pairs.filter((p) => p).map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

// A node's state as shown: the store says "ready" for a node whose ticket
// waits in the queue and for one that runs; the run's `live` map (from the
// queue) tells them apart.
export function nodeState(node, live) {
  if (node.state !== "ready") return node.state;
  const l = live && live[node.node];
  return l && l.running ? "running" : "queued";
}

// A partition as a column head: a key, or a window's date and time.
export function shortPartition(partition) {
  // A keyed run: its key and the time it was due (a key runs again and
  // again, so the key alone names no column).
  const keyed = /^key=(.*)@([^@]*)$/.exec(partition);
  if (keyed) return `${keyed[1]} ${keyed[2].slice(11, 19)}`;
  if (partition === "none") return "run";
  return partition.replace(/^\d{4}-/, "").replace("T", " ");
}
