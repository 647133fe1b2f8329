// The audit log (an admin's page): every request that changed something or
// tried to, newest first, with who, what, from where and how it ended;
// filtered by token name.

import { get, p, qs } from "../api.js";
import { h, replace, fmtTime, table } from "../dom.js";

// Entries shown at most.
const ENTRIES_SHOWN = 500;

export async function render(root) {
  let who = "";
  const input = h("input", { id: "audit-who", name: "who", type: "search", placeholder: "token name", autocomplete: "off" });
  const body = h("div", { id: "audit-body" }, h("p", { class: "muted" }, "loading…"));
  const form = h("form", { class: "filters", id: "audit-filter" },
    h("label", { for: "audit-who" }, "Who"), " ", input, " ",
    h("button", { type: "submit" }, "Filter"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    who = input.value.trim();
    refresh();
  });
  replace(root, h("h1", {}, "Audit log"),
    h("p", { class: "muted" }, "Every request that changes something, written before it runs; its outcome once it answered."),
    form, body);

  const refresh = async () => {
    const q = { limit: ENTRIES_SHOWN };
    if (who) q.who = who;
    const entries = (await get(p("audit") + qs(q))).reverse();
    if (!entries.length) {
      replace(body, h("p", { id: "audit-empty" }, who ? `No entry of ${who}.` : "No entry yet."));
      return;
    }
    replace(body, table(["At", "Who", "Request", "Params", "Outcome", "Client"], entries.map((e) => h("tr", { "data-who": e.who },
      h("td", {}, fmtTime(e.at_ms)),
      h("td", {}, `${e.who} (${e.role})`),
      h("td", {}, h("code", {}, `${e.method} ${e.path}`)),
      h("td", { class: "params" }, e.params ? h("code", {}, e.params) : "—"),
      h("td", { class: `outcome outcome-${e.outcome}`, "data-outcome": e.outcome }, e.status ? `${e.outcome} ${e.status}` : e.outcome,
        e.error ? [h("br"), h("small", {}, e.error)] : null),
      h("td", {}, e.client))), { class: "audit" }));
  };
  await refresh();
  return { refresh };
}
