// One graph: its facts and actions, the DAG coloured by a selected run,
// the grid (runs as columns, nodes as rows), keys of a keyed graph, and
// backfills in progress.

import { get, post, p, qs } from "../api.js";
import {
  h, replace, fmtTime, fmtRel, badge, square, table, route, facts, nodeState, shortPartition,
} from "../dom.js";
import { drawDag } from "../dag.js";
import { confirmAction, field, checkbox } from "../actions.js";

// Runs per grid page.
const GRID_PAGE = 20;

export async function render(root, [graph, selected]) {
  // Older pages are reached by cursor; the stack takes us back.
  const cursors = [null];
  const head = h("div", { id: "graph-head" });
  const actions = h("div", { class: "actions", id: "graph-actions" });
  const dagBox = h("div", { class: "dag-box", id: "dag" });
  const gridBox = h("div", { id: "grid" });
  const keysBox = h("div", { id: "keys" });
  const backfillsBox = h("div", { id: "backfills" });
  replace(root,
    h("p", { class: "crumbs" }, h("a", { href: "#/" }, "Graphs"), " / ", graph),
    h("h1", {}, graph), head, actions,
    h("h2", {}, "Graph"), dagBox,
    h("h2", {}, "Runs"), gridBox, keysBox, backfillsBox);

  let detail = null;
  const refresh = async () => {
    const cursor = cursors[cursors.length - 1];
    const [d, grid, trig] = await Promise.all([
      get(p("graphs", graph)),
      get(p("graphs", graph, "grid") + qs({ limit: GRID_PAGE, cursor })),
      get(p("graphs", graph, "backfills")),
    ]);
    detail = d;
    const sum = d.summary;
    const sel = selected || (grid.runs[0] && grid.runs[0].partition) || null;
    const run = sel ? await get(p("graphs", graph, "runs", sel)).catch(() => null) : null;
    replace(head, facts([
      ["Partitioning", sum.partitioning],
      ["Cron", sum.cron || "—"],
      ["Timezone", sum.timezone || "UTC"],
      ["Next firing", sum.next_firing_ms ? `${sum.next_firing || fmtTime(sum.next_firing_ms)} (${fmtRel(sum.next_firing_ms)})` : "—"],
      ["Triggers", sum.paused ? badge("cancelled", "(paused)") : "running"],
      ["Definition", h("code", { title: sum.definition }, sum.definition.slice(0, 12))],
      ["Max active runs", String(d.definition.max_active_runs)],
    ]));
    drawActions(sum, d.definition.params || {});
    const states = new Map();
    if (run) for (const n of run.nodes) states.set(n.node, nodeState(n, run.live));
    replace(dagBox,
      h("p", { class: "muted" }, run
        ? ["Coloured by run ", h("a", { href: route("run", graph, run.partition) }, run.partition), " (", run.state, ")."]
        : "No run yet: nodes are uncoloured."),
      drawDag(d.definition.nodes.map((n) => ({ name: n.name, upstreams: n.upstreams, trigger_rule: n.trigger_rule })),
        (n) => states.get(n) || "none",
        run ? (n) => route("run", graph, run.partition, n) : null));
    drawGrid(grid, sel);
    if (sum.partitioning === "keyed") await drawKeys();
    drawBackfills(trig);
  };

  const drawActions = (sum, params) => {
    const windows = !["none", "keyed"].includes(sum.partitioning);
    replace(actions,
      sum.paused
        ? h("button", { needs: "operator", id: "act-unpause", onclick: () => act("Unpause the triggers", `Cron firings, backfills and key schedules of ${graph} start runs again.`, () => post(p("graphs", graph, "unpause"))) }, "Unpause")
        : h("button", { needs: "operator", id: "act-pause", onclick: () => act("Pause the triggers", `No cron firing, backfill window or key schedule of ${graph} starts a run until it is unpaused. Explicit starts and reruns still run.`, () => post(p("graphs", graph, "pause"))) }, "Pause"),
      h("button", { needs: "operator", id: "act-trigger", onclick: () => act("Trigger now", triggerText(sum.partitioning), () => post(p("graphs", graph, "trigger"))) }, "Trigger now"),
      sum.partitioning === "keyed" ? null : h("button", {
        needs: "operator",
        id: "act-start",
        onclick: () => confirmAction({
          title: "Start a run",
          text: sum.partitioning === "none" ? `Start the run of ${graph}.` : `Start the run of ${graph} for a partition (at most once: an existing run is not started again).`,
          // The graph's params, each with its default filled in: a value
          // left as it is starts with the default.
          fields: [
            sum.partitioning === "none" ? null : field("Partition", { name: "partition", required: true, placeholder: "2026-11-01", autocomplete: "off" }),
            ...Object.entries(params).map(([k, v]) =>
              field(`Param ${k}`, { name: `param-${k}`, value: v, autocomplete: "off", "data-param": k })),
          ],
          confirm: "Start",
          run: (form) => {
            const given = {};
            for (const [k, v] of Object.entries(params)) {
              const got = form.elements[`param-${k}`].value;
              if (got !== v) given[k] = got;
            }
            return post(p("graphs", graph, "runs"), {
              partitions: [sum.partitioning === "none" ? "none" : form.elements.partition.value.trim()],
              params: given,
            });
          },
        }).then(refresh),
      }, "Start run…"),
      windows ? h("button", {
        needs: "operator",
        id: "act-backfill",
        onclick: () => confirmAction({
          title: "Backfill a range",
          text: `Start a run of ${graph} for every window from the first to the last (both included), paced by max_active_runs. Asking again for the same range resumes it.`,
          fields: [
            field("From", { name: "from", required: true, placeholder: "2026-11-01", autocomplete: "off" }),
            field("To", { name: "to", required: true, placeholder: "2026-11-07", autocomplete: "off" }),
          ],
          confirm: "Backfill",
          run: (form) => post(p("graphs", graph, "backfills"), { from: form.elements.from.value.trim(), to: form.elements.to.value.trim() }),
        }).then(refresh),
      }, "Backfill…") : null);
  };

  const act = (title, text, run) => confirmAction({ title, text, confirm: title.split(" ")[0], run }).then(refresh);

  const drawGrid = (grid, sel) => {
    if (!grid.runs.length) {
      replace(gridBox, h("p", { class: "muted" }, "No runs on this page."), pager(grid));
      return;
    }
    const headRow = h("tr", {}, h("th", { scope: "col" }, "Node"), grid.runs.map((r) =>
      h("th", { scope: "col", class: r.partition === sel ? "selected" : null, "data-partition": r.partition },
        h("a", { href: route("graph", graph, r.partition), title: `${r.partition}: ${r.state}`, "data-focus": `c-${r.partition}` },
          square(r.state, r.partition), h("span", { class: "col-label" }, shortPartition(r.partition)),
          r.sla_missed ? h("span", { class: "sla-badge", title: "SLA missed" }, "SLA") : null))));
    const rows = grid.nodes.map((node, ni) => h("tr", { "data-node": node },
      h("th", { scope: "row" }, node),
      grid.runs.map((r) => {
        const c = r.cells[ni];
        return h("td", { class: r.partition === sel ? "selected" : null },
          c ? square(c.state, `${node} in ${r.partition}${c.rerun ? ` (rerun ${c.rerun})` : ""}`,
            route("run", graph, r.partition, node), `x-${node}-${r.partition}`) : h("span", { class: "muted" }, "·"));
      })));
    replace(gridBox,
      h("div", { class: "table-wrap" }, h("table", { class: "grid", "aria-label": "runs by node" }, h("thead", {}, headRow), h("tbody", {}, rows))),
      pager(grid));
  };

  const pager = (grid) => h("div", { class: "pager" },
    h("button", { id: "grid-newer", disabled: cursors.length === 1 ? true : null, onclick: () => { cursors.pop(); refresh(); } }, "← Newer"),
    h("button", { id: "grid-older", disabled: grid.next_cursor ? null : true, onclick: () => { cursors.push(grid.next_cursor); refresh(); } }, "Older →"));

  const drawKeys = async () => {
    const keys = await get(p("graphs", graph, "keys"));
    const rows = keys.map((k) => h("tr", { "data-key": k.key },
      h("th", { scope: "row" }, k.key),
      h("td", {}, k.due_at_ms ? [fmtTime(k.due_at_ms), h("br"), h("small", {}, fmtRel(k.due_at_ms))] : "—"),
      h("td", {}, k.due_reason || "—"),
      h("td", {}, k.lease_owner ? [k.lease_owner, h("br"), h("small", {}, `until ${fmtTime(k.lease_until_ms)}`)] : "—"),
      h("td", {}, k.running ? h("a", { href: route("run", graph, k.running) }, "running") : "—"),
      h("td", {}, fmtTime(k.last_started_at_ms)),
      h("td", {}, fmtTime(k.last_finished_at_ms)),
      h("td", {}, String(k.consecutive_failures)),
      h("td", { class: "error-cell" }, k.last_error ? h("details", {}, h("summary", {}, "error"), h("pre", {}, k.last_error)) : "—"),
      h("td", {}, h("button", {
        needs: "operator",
        class: "signal",
        "data-focus": `sig-${k.key}`,
        onclick: () => confirmAction({
          title: "Signal a key",
          text: `Signal ${k.key}: its run starts after the debounce, or at once.`,
          fields: checkbox("At once (no debounce)", "immediate", false),
          confirm: "Signal",
          run: (form) => post(p("graphs", graph, "keys", k.key, "signal"), { immediate: form.elements.immediate.checked, source: "ui" }),
        }).then(refresh),
      }, "Signal…"))));
    replace(keysBox, h("h2", {}, "Keys"),
      keys.length ? table(["Key", "Due", "Reason", "Lease", "Run", "Last start", "Last finish", "Failures", "Last error", ""], rows, { class: "keys" })
        : h("p", { class: "muted" }, "No keys (the inventory is empty or not loaded yet)."));
  };

  const drawBackfills = (trig) => {
    const list = trig.backfills || [];
    if (!list.length) {
      replace(backfillsBox);
      return;
    }
    replace(backfillsBox, h("h2", {}, "Backfills in progress"),
      table(["Range", "Windows", "Started", "Skipped", "Requested"], list.map((b) => h("tr", {},
        h("td", {}, `${b.from} … ${b.to}`), h("td", {}, String(b.windows)), h("td", {}, String(b.started)),
        h("td", {}, String(b.skipped)), h("td", {}, fmtTime(b.requested_at_ms))))));
  };

  await refresh();
  return { refresh };
}

function triggerText(partitioning) {
  if (partitioning === "keyed") return "Start a run for every key now.";
  if (partitioning === "none") return "Start the run now.";
  return "Start the run of the newest closed window now.";
}
