// Every graph: partitioning, cron and next firing, paused or not, and its
// newest runs as squares; then the assets that link graphs: producer
// graph/node → asset → the graphs that start on it, with the last
// materialization.

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
    const assets = await get(p("assets")).catch(() => []);
    const lineage = assets.length ? [
      h("h2", {}, "Assets"),
      table(["Produced by", "Asset", "Starts", "Last materialization"], assets.map((a) => h("tr", { "data-asset": a.asset },
        h("td", {}, a.producers.length
          ? a.producers.map((pr, i) => [i ? ", " : null, h("a", { href: route("graph", pr.graph) }, pr.graph), `/${pr.node}`])
          : h("span", { class: "muted" }, "no producer")),
        h("th", { scope: "row" }, "→ ", h("code", {}, a.asset), " →"),
        h("td", { class: "consumers" }, a.consumers.length
          ? a.consumers.map((c, i) => [i ? ", " : null, h("a", { href: route("graph", c) }, c)])
          : h("span", { class: "muted" }, "none")),
        h("td", {}, a.last
          ? [h("a", { href: route("run", a.last.graph, a.last.partition) }, `${a.last.graph} ${a.last.partition}`), " ", h("small", {}, `${fmtTime(a.last.at_ms)} (${a.last.count} in all${a.pending ? `, ${a.pending} pending` : ""})`)]
          : h("span", { class: "muted" }, a.pending ? `${a.pending} pending` : "never")))), { class: "assets", id: "assets" }),
    ] : null;
    replace(body, table(["Graph", "Partitioning", "Cron", "Next firing", "Triggers", "Nodes", `Newest ${RUNS_SHOWN} runs`], rows, { class: "graphs" }), lineage);
  };
  await refresh();
  return { refresh };
}
