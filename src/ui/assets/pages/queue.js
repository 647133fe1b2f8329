// The queue: pools (slots, running, pending), dead letters with their
// error and a requeue button, breakers with their state and a reset.

import { get, post, p, qs } from "../api.js";
import { h, replace, fmtTime, fmtRel, badge, table, route } from "../dom.js";
import { confirmAction } from "../actions.js";

const DEAD_PAGE = 100;

export async function render(root) {
  const poolsBox = h("div", { id: "pools" });
  const deadBox = h("div", { id: "dead" });
  const breakersBox = h("div", { id: "breakers" });
  replace(root, h("h1", {}, "Queue"),
    h("h2", {}, "Pools"), poolsBox,
    h("h2", {}, "Breakers"), breakersBox,
    h("h2", {}, "Dead letters"), deadBox);

  const refresh = async () => {
    const [pools, engine, dead, breakers] = await Promise.all([
      get(p("queue", "pools")), get(p("engine")), get(p("queue", "dead") + qs({ limit: DEAD_PAGE })), get(p("breakers")),
    ]);
    replace(poolsBox, table(["Pool", "Slots", "Workers", "Running", "Pending", "Due now"],
      Object.entries(pools.pools).map(([name, q]) => h("tr", { "data-pool": name },
        h("th", { scope: "row" }, name),
        h("td", {}, String(engine.pools[name] !== undefined ? engine.pools[name] : q.credit)),
        h("td", {}, String(q.workers)),
        h("td", { class: "running" }, String(q.running)),
        h("td", { class: "pending" }, String(q.pending)),
        h("td", {}, String(q.due)))), { class: "pools" }));
    replace(breakersBox, breakers.length
      ? table(["Target", "State", "Since", "Failures", "Open until", ""], breakers.map((b) => h("tr", { "data-target": b.target },
        h("th", { scope: "row" }, b.target),
        h("td", {}, badge(b.state)),
        h("td", {}, fmtTime(b.since_ms)),
        h("td", {}, String(b.consecutive_failures)),
        h("td", {}, b.open_until_ms ? `${fmtTime(b.open_until_ms)} (${fmtRel(b.open_until_ms)})` : "—"),
        h("td", {}, b.state === "closed" ? null : h("button", {
          needs: "admin",
          "data-focus": `reset-${b.target}`,
          onclick: () => confirmAction({
            title: "Reset the breaker", text: `Close the breaker of ${b.target}: deferred work is handed out again.`,
            confirm: "Reset", run: () => post(p("breakers", b.target, "reset")),
          }).then(refresh),
        }, "Reset…")))), { class: "breakers" })
      : h("p", { class: "muted" }, "No targets."));
    const letters = dead.letters || [];
    replace(deadBox,
      letters.length ? h("div", { class: "actions" }, h("button", {
        needs: "operator",
        id: "act-requeue-all",
        onclick: () => confirmAction({
          title: "Requeue every dead letter", text: `Requeue ${letters.length}${dead.next_cursor ? "+" : ""} dead letters: jobs run again with fresh tries, graph nodes are rerun with their downstreams.`,
          confirm: "Requeue", run: () => post(p("queue", "dead", "requeue")),
        }).then(refresh),
      }, "Requeue all…")) : null,
      letters.length ? table(["Ticket", "Pool", "Target", "Attempts", "Finished", "Error", ""], letters.map((l) => h("tr", { "data-key": l.key },
        h("th", { scope: "row" }, l.graph
          ? h("a", { href: route("run", l.graph, l.partition, l.node) }, `${l.graph} / ${l.partition} / ${l.node}`)
          : l.key),
        h("td", {}, l.pool),
        h("td", {}, l.target || "—"),
        h("td", {}, String(l.attempts)),
        h("td", {}, fmtTime(l.finished_ms)),
        h("td", { class: "error-cell" }, h("details", {}, h("summary", {}, (l.error || "").split("\n")[0] || "error"), h("pre", {}, l.error || ""))),
        h("td", {}, h("button", {
          needs: "operator",
          "data-focus": `rq-${l.key}`,
          onclick: () => confirmAction({
            title: "Requeue", text: `Requeue ${l.key}.`, confirm: "Requeue",
            run: () => post(p("queue", "dead", l.key, "requeue")),
          }).then(refresh),
        }, "Requeue…")))), { class: "dead" })
        : h("p", { class: "muted" }, "No dead letters."));
  };
  await refresh();
  return { refresh };
}
