// A replicated engine's members: who leads, each member's role as the
// member this page is on sees it (leader, follower, learner, catching up,
// under reserve, unreachable), its lag, last contact and disk room.
// Followed live: redrawn every two seconds, so a failover shows as it
// happens. A single engine has no members route: the page says so.

import { ApiError, get, p } from "../api.js";
import { h, replace, badge, table, fmtDur } from "../dom.js";

const REFRESH_MS = 2000;

function mib(bytes) {
  return `${Math.floor(bytes / (1 << 20))} MiB`;
}

export async function render(root) {
  const summary = h("div", { id: "members-summary" });
  const list = h("div", { id: "members" });
  replace(root, h("h1", {}, "Members"), summary, list);

  const refresh = async () => {
    let v;
    try {
      v = await get(p("members"));
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) {
        replace(summary, h("p", { class: "muted", id: "single-engine" }, "A single engine: no members (a replicated engine runs with --raft-id)."));
        replace(list);
        return;
      }
      throw e;
    }
    const leader = v.members.find((m) => m.role === "leader");
    replace(summary,
      h("p", { id: "members-term" },
        `Term ${v.term}; `, leader ? `member ${leader.id} leads` : "no leader",
        `; member ${v.this} answered (${v.state}), log at ${v.last_log_index ?? "—"}, applied ${v.applied_index ?? "—"}.`),
      v.hears_majority === false
        ? h("p", { class: "error", id: "no-majority", role: "alert" },
          `Member ${v.this} cannot hear a majority: this view may be stale. Open the UI on another member.`)
        : null);
    replace(list, table(["Member", "Role", "Raft", "API", "Matched", "Lag", "Last contact", "Disk free"],
      v.members.map((m) => h("tr", { "data-member": String(m.id), "data-role": m.role },
        h("th", { scope: "row" }, String(m.id)),
        h("td", { class: "role" }, badge(m.role.replace(" ", "_"))),
        h("td", {}, h("code", {}, m.raft)),
        h("td", {}, m.api_url ? h("a", { href: `${m.api_url}/` }, m.api_url) : "—"),
        h("td", {}, m.matched_index ?? "—"),
        h("td", {}, m.lag ?? "—"),
        h("td", {}, m.last_contact_ms_ago === null || m.last_contact_ms_ago === undefined ? "—" : `${fmtDur(m.last_contact_ms_ago)} ago`),
        h("td", { class: m.free_bytes !== undefined && m.free_bytes !== null && m.free_bytes < m.reserve_bytes ? "error-cell" : "" },
          m.free_bytes === null || m.free_bytes === undefined ? "—" : `${mib(m.free_bytes)} (reserve ${mib(m.reserve_bytes)})`))),
    { class: "members" }));
  };
  await refresh();
  const timer = setInterval(() => {
    refresh().catch((e) => console.warn("members refresh failed", e));
  }, REFRESH_MS);
  return { refresh, leave: () => clearInterval(timer) };
}
