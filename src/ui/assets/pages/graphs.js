// Every graph: partitioning, cron and next firing, paused or not, and its
// newest runs as squares.

import { get, p, qs } from "../api.js";
import { h, replace, fmtTime, fmtRel, square, badge, table, route } from "../dom.js";

// Runs shown per graph.
const RUNS_SHOWN = 12;

export async function render(root) {
  const body = h("div", { id: "graphs-body" }, h("p", { class: "muted" }, "loading…"));
  replace(root, h("h1", {}, "Graphs"), body);
  const refresh = async () => {
    const graphs = await get(p("graphs"));
    const recent = await Promise.all(graphs.map((g) =>
      get(p("runs") + qs({ graph: g.name, limit: RUNS_SHOWN })).then((r) => r.runs)));
    if (!graphs.length) {
      replace(body, h("p", {}, "No graph is adopted: start the engine with a definition."));
      return;
    }
    const rows = graphs.map((g, i) => h("tr", { "data-graph": g.name },
      h("th", { scope: "row" }, h("a", { href: route("graph", g.name), "data-focus": `g-${g.name}` }, g.name)),
      h("td", {}, g.partitioning),
      h("td", {}, g.cron || "—"),
      h("td", {}, g.next_firing_ms ? [fmtTime(g.next_firing_ms), h("br"), h("small", {}, fmtRel(g.next_firing_ms))] : "—"),
      h("td", {}, g.paused ? badge("cancelled", "(paused)") : h("span", { class: "muted" }, "running")),
      h("td", {}, String(g.nodes)),
      h("td", { class: "squares" }, recent[i].length
        ? recent[i].map((r) => square(r.state, r.partition, route("run", g.name, r.partition), `r-${g.name}-${r.partition}`))
        : h("span", { class: "muted" }, "no runs yet"))));
    replace(body, table(["Graph", "Partitioning", "Cron", "Next firing", "Triggers", "Nodes", `Newest ${RUNS_SHOWN} runs`], rows, { class: "graphs" }));
  };
  await refresh();
  return { refresh };
}
