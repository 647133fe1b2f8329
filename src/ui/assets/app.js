// The UI's entry: the session (login once), the hash router, and the live
// stream that redraws the current page.

import { checkSession, login, logout, setUnauthorizedHandler, tokenHint, ApiError } from "./api.js";
import { h, replace } from "./dom.js";
import * as live from "./live.js";
import * as graphsPage from "./pages/graphs.js";
import * as graphPage from "./pages/graph.js";
import * as runPage from "./pages/run.js";
import * as queuePage from "./pages/queue.js";
import * as auditPage from "./pages/audit.js";
import * as membersPage from "./pages/members.js";
import { can, whoami } from "./role.js";

const main = document.getElementById("main");
let current = null;
let drawing = false;
let again = false;

// "#/run/g/p/n" → ["run", "g", "p", "n"]
function parseHash() {
  const raw = location.hash.replace(/^#\/?/, "");
  return raw ? raw.split("/").map((x) => decodeURIComponent(x)) : [];
}

function pageFor(parts) {
  switch (parts[0]) {
    case undefined:
    case "":
    case "graphs":
      return { page: graphsPage, args: [], nav: "graphs" };
    case "graph":
      return { page: graphPage, args: parts.slice(1), nav: "graphs" };
    case "run":
      return { page: runPage, args: parts.slice(1), nav: "graphs" };
    case "queue":
      return { page: queuePage, args: [], nav: "queue" };
    case "audit":
      return { page: auditPage, args: [], nav: "audit" };
    case "members":
      return { page: membersPage, args: [], nav: "members" };
    default:
      return null;
  }
}

function showError(e) {
  replace(main, h("h1", {}, "Something went wrong"),
    h("p", { class: "error", id: "page-error" }, e instanceof ApiError ? `${e.message} (${e.status})` : String(e)),
    h("p", {}, h("a", { href: "#/" }, "Back to the graphs")));
}

async function navigate() {
  if (current && current.leave) current.leave();
  current = null;
  const found = pageFor(parseHash());
  document.querySelectorAll("[data-nav]").forEach((a) => {
    if (found && a.dataset.nav === found.nav) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  });
  if (!found) {
    replace(main, h("h1", {}, "Not found"), h("p", {}, "No page has this address. ", h("a", { href: "#/" }, "Graphs")));
    return;
  }
  try {
    current = await found.page.render(main, found.args);
    document.title = `weir — ${[found.nav, ...found.args].join(" / ")}`;
  } catch (e) {
    showError(e);
  }
}

// Redraws the current page after events; one redraw at a time, and one
// more if events came while drawing.
async function redraw() {
  if (!current || !current.refresh) return;
  if (drawing) {
    again = true;
    return;
  }
  drawing = true;
  try {
    await current.refresh();
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 401)) console.warn("redraw failed", e);
  } finally {
    drawing = false;
    if (again) {
      again = false;
      redraw();
    }
  }
}

function showLogin(message) {
  live.stop();
  document.getElementById("logout").hidden = true;
  document.getElementById("whoami").textContent = "";
  document.getElementById("nav-audit").hidden = true;
  const input = h("input", { id: "token", name: "token", type: "password", autocomplete: "current-password", required: true });
  const err = h("p", { class: "error", id: "login-error", role: "alert" }, message || "");
  const form = h("form", { id: "login", class: "login" },
    h("h1", {}, "Log in to this engine"),
    h("p", {}, "Paste a token: the engine's admin token is in its data directory's file ", h("code", {}, "token"),
      " (", h("code", { id: "token-path" }, "cat DATA/token"), "; ", h("code", {}, "weir serve"), " prints where); others are made with ",
      h("code", {}, "weir token create"), ". It is asked for once: the browser keeps a session cookie."),
    h("p", { class: "field" }, h("label", { for: "token" }, "Token"), " ", input),
    err,
    h("button", { type: "submit", class: "primary" }, "Log in"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      await login(input.value.trim());
      start();
    } catch (e) {
      err.textContent = e.message;
      input.focus();
    }
  });
  replace(main, form);
  input.focus();
  tokenHint().then((path) => {
    const shown = document.getElementById("token-path");
    if (path && shown) shown.textContent = `cat ${path}`;
  });
}

// A replicated engine: which member this page is on and which leads
// (absent on a single engine, whose API has no members route).
async function showLeader() {
  const shown = document.getElementById("leader");
  try {
    const res = await fetch("/api/v1/members", { credentials: "same-origin" });
    if (!res.ok) {
      shown.hidden = true;
      document.getElementById("nav-members").hidden = true;
      return;
    }
    document.getElementById("nav-members").hidden = false;
    const v = await res.json();
    // The member this page is on (the view may be the leader's).
    const here = res.headers.get("x-weir-member") || v.this;
    const leader = v.members.find((m) => m.role === "leader");
    shown.textContent = leader
      ? `member ${here} · leader ${leader.id} (term ${v.term})`
      : `member ${here} · no leader (term ${v.term})`;
    shown.dataset.leader = leader ? String(leader.id) : "";
    shown.hidden = false;
  } catch (_) {
    shown.hidden = true;
  }
}

let leaderTimer = null;

function start() {
  showLeader();
  if (leaderTimer === null) leaderTimer = setInterval(showLeader, 3000);
  const out = document.getElementById("logout");
  out.hidden = false;
  const me = whoami();
  document.getElementById("whoami").textContent = `${me.name} (${me.role})`;
  document.getElementById("nav-audit").hidden = !can("admin");
  out.onclick = async () => {
    await logout();
    showLogin("Logged out.");
  };
  live.onChange(redraw);
  live.follow(document.getElementById("live"));
  navigate();
}

window.addEventListener("hashchange", () => {
  navigate().then(() => main.focus({ preventScroll: true }));
});
setUnauthorizedHandler(() => showLogin("The session is no longer valid: log in again."));

(async () => {
  try {
    if (await checkSession()) start();
    else showLogin();
  } catch (e) {
    showError(e);
  }
})();
