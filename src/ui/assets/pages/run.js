// One run: its nodes (state, rerun, attempts, times, exit codes, errors),
// a Gantt of attempts over time, and a node panel with the node's output,
// its artifacts (each a download link, sent with the session cookie as
// every API call is) and its logs per attempt, following a running
// attempt live. A mapped
// node's panel lists its members with their states, and a member's logs;
// a sensor's shows its checks that were not met and, while it waits, its
// last check: when, and what it saw. Once the run settles, its trace:
// the span tree the OTLP exporter sends (run, nodes, attempts, with their
// events and errors), as `weir trace` prints it — no collector needed.

import { get, post, p, qs } from "../api.js";
import {
  h, s, replace, fmtTime, fmtTimeIn, fmtDur, fmtBytes, badge, table, route, facts, nodeState, stateInfo,
} from "../dom.js";
import { confirmAction, checkbox } from "../actions.js";

const GANTT_ROW_H = 22;
const GANTT_LABEL_W = 150;
const GANTT_W = 760;
// The narrowest chart drawn: below it the box scrolls.
const GANTT_W_MIN = 280;
// Log lines fetched per page.
const LOG_PAGE = 2000;
// Members listed in a mapped node's panel (the counts cover all).
const MEMBERS_SHOWN = 200;
// Artifacts listed in a node's panel (a mapped node's members' can be
// thousands; `weir artifacts` lists all).
const ARTIFACTS_SHOWN = 200;
// Hex digits of an artifact's hash shown (the whole is its title).
const HASH_SHOWN = 12;

export async function render(root, [graph, partition, selectedNode]) {
  const head = h("div", { id: "run-head" });
  const actions = h("div", { class: "actions", id: "run-actions" });
  const nodesBox = h("div", { id: "run-nodes" });
  const ganttBox = h("div", { id: "gantt", class: "gantt-box" });
  const traceBox = h("div", { id: "trace", class: "trace-box" });
  const panel = h("section", { id: "node-panel", class: "panel", "aria-live": "polite" });
  replace(root,
    h("p", { class: "crumbs" }, h("a", { href: "#/" }, "Graphs"), " / ",
      h("a", { href: route("graph", graph, partition) }, graph), " / ", partition),
    h("h1", {}, `Run ${partition}`), head, actions,
    h("div", { class: "run-layout" },
      h("div", {}, h("h2", {}, "Nodes"), nodesBox, h("h2", {}, "Attempts over time"), ganttBox,
        h("h2", {}, "Trace"), traceBox),
      panel));

  // Node details (attempts with exit codes), cached by what changes them.
  const details = new Map();
  let logFollow = null;
  let panelKey = null;

  const nodeDetail = async (n) => {
    const key = `${n.run_id}|${n.state}|${n.attempts}|${n.finished_ms}`;
    const hit = details.get(n.node);
    if (hit && hit.key === key && n.state !== "ready") return hit.value;
    const value = await get(p("graphs", graph, "runs", partition, "nodes", n.node));
    details.set(n.node, { key, value });
    return value;
  };

  const refresh = async () => {
    const run = await get(p("graphs", graph, "runs", partition));
    const started = run.nodes.filter((n) => n.attempts > 0 || n.started_ms || n.state === "ready");
    const ds = new Map(await Promise.all(started.map(async (n) => [n.node, await nodeDetail(n).catch(() => null)])));
    replace(head, facts([
      ["Graph", h("a", { href: route("graph", graph) }, graph)],
      ["State", badge(run.state)],
      run.failure ? ["Failure", h("span", { class: "error", id: "run-failure" }, run.failure)] : null,
      (run.sla_misses || []).length ? ["SLA", h("span", { id: "run-sla" }, run.sla_misses.map((m, i) =>
        h("span", { class: "sla-badge", title: `${m.sla} after its ${m.anchor.replace("_", " ")}` },
          `${i ? " " : ""}missed: ${m.node || "the run"} by ${m.deadline}`)))] : null,
      run.window ? ["Window", h("span", { id: "run-window" },
        `${run.window.start} .. ${run.window.end} (${fmtDur(run.window.end_ms - run.window.start_ms)}, ${run.timezone})`)] : null,
      ["Started", fmtTimeIn(run.started_at_ms || run.requested_at_ms, run.timezone)],
      run.prepared_at_ms ? ["Prepared at", fmtTimeIn(run.prepared_at_ms, run.timezone)] : null,
      ["Settled", fmtTimeIn(run.settled_at_ms, run.timezone)],
      ["Took", run.settled_at_ms ? fmtDur(run.settled_at_ms - (run.started_at_ms || run.requested_at_ms)) : "—"],
      ["Definition", h("code", { title: run.definition }, run.definition.slice(0, 12))],
      Object.keys(run.params || {}).length
        ? ["Params", h("span", { class: "params" }, Object.entries(run.params).map(([k, v]) => h("code", { "data-param": k }, `${k}=${v}`)))]
        : null,
    ]));
    const failed = run.nodes.some((n) => ["failed", "upstream_failed", "cancelled"].includes(n.state));
    replace(actions,
      run.state === "active" ? h("button", {
        needs: "operator",
        id: "act-cancel", class: "danger",
        onclick: () => confirmAction({
          title: "Cancel the run", text: `Cancel ${graph} ${partition}: queued nodes are cancelled, running attempts are stopped.`,
          confirm: "Cancel run", danger: true, run: () => post(p("graphs", graph, "runs", partition, "cancel")),
        }).then(refresh),
      }, "Cancel run") : null,
      failed ? h("button", {
        needs: "operator",
        id: "act-clear",
        onclick: () => confirmAction({
          title: "Clear failed nodes", text: `Rerun every failed node of ${partition} with its downstreams.`,
          confirm: "Clear", run: () => post(p("graphs", graph, "runs", partition, "clear")),
        }).then(refresh),
      }, "Clear failed") : null);
    const rows = run.nodes.map((n) => {
      const st = nodeState(n, run.live);
      const d = ds.get(n.node);
      const last = d && d.attempt_log && d.attempt_log.length ? d.attempt_log[d.attempt_log.length - 1] : null;
      const live = run.live && run.live[n.node];
      return h("tr", { "data-node": n.node, "data-state": st, class: n.node === selectedNode ? "selected" : null },
        h("th", { scope: "row" }, h("a", { href: route("run", graph, partition, n.node), "data-focus": `n-${n.node}` }, n.node),
          n.kind && n.kind !== "task" ? h("small", { class: "kind" }, ` ${n.kind}`) : null),
        h("td", { class: "state" }, badge(st),
          n.members ? h("small", { class: "member-counts" }, ` ${n.members.succeeded}/${n.members.total}`) : null,
          n.waiting_for ? h("small", { class: "waiting-for" }, " waiting for ",
            h("a", { href: route("run", graph, n.waiting_for) }, n.waiting_for)) : null),
        h("td", { class: "rerun" }, String(n.rerun)),
        h("td", { class: "attempts" }, String(live ? Math.max(live.attempts, n.attempts) : n.attempts),
          n.deferrals ? h("small", {}, ` (${n.deferrals} deferred)`) : null),
        h("td", { class: "when", title: fmtTimeIn(n.started_ms, run.timezone) }, n.started_ms ? fmtTimeIn(n.started_ms, run.timezone).slice(11) : "—"),
        h("td", {}, fmtDur(n.duration_ms)),
        h("td", { class: "exit" }, last && last.exit_code !== null && last.exit_code !== undefined ? String(last.exit_code) : "—"),
        h("td", { class: "error-cell" }, n.error ? h("span", { class: "error", title: n.error }, n.error.split("\n")[0]) : "—"));
    });
    replace(nodesBox, table(["Node", "State", "Rerun", "Attempts", "Started", "Duration", "Exit", "Error"], rows, { class: "nodes" }));
    drawGantt(run, ds);
    await drawTrace(run);
    if (selectedNode) await drawPanel(run, ds.get(selectedNode) || null);
  };

  // The trace of a settled run, fetched once per settle (a rerun settles
  // it again).
  let traceKey = null;
  const drawTrace = async (run) => {
    if (!run.settled_at_ms) {
      traceKey = null;
      replace(traceBox, h("p", { class: "muted" }, "The trace is made when the run settles."));
      return;
    }
    if (traceKey === run.settled_at_ms) return;
    let t;
    try {
      t = await get(p("graphs", graph, "runs", partition, "trace"));
    } catch (e) {
      replace(traceBox, h("p", { class: "error" }, `No trace: ${e.message}`));
      return;
    }
    traceKey = run.settled_at_ms;
    const t0 = Math.min(...t.spans.map((x) => x.start_ms));
    const total = Math.max(1, Math.max(...t.spans.map((x) => x.end_ms)) - t0);
    const pct = (ms) => `${(100 * ms / total).toFixed(2)}%`;
    // Widths through the CSSOM: the UI's CSP takes no style attribute.
    const styled = (el, props) => { Object.assign(el.style, props); return el; };
    const rows = t.spans.map((x) => h("tr", { "data-span": x.name, "data-depth": String(x.depth), class: x.error ? "span-error" : null },
      styled(h("th", { scope: "row", class: "span-name" }, x.name), { paddingLeft: `${0.3 + 1.2 * x.depth}em` }),
      h("td", { class: "span-at" }, `+${fmtDur(x.start_ms - t0)}`),
      h("td", { class: "span-took" }, fmtDur(x.end_ms - x.start_ms)),
      h("td", { class: "span-bar-cell" }, styled(h("div", {
        class: "span-bar", title: `${x.name}: ${fmtDur(x.end_ms - x.start_ms)}`,
      }), { marginLeft: pct(x.start_ms - t0), width: pct(Math.max(x.end_ms - x.start_ms, total / 400)) })),
      h("td", { class: "span-events" }, x.events.map((e) => h("span", {
        class: "span-event", title: Object.entries(e.attributes).map(([k, v]) => `${k}=${v}`).join("\n"),
      }, `${e.name} `))),
      h("td", { class: "error-cell" }, x.error ? h("span", { class: "error", title: x.error }, x.error.split("\n")[0]) : "—")));
    replace(traceBox,
      h("p", { class: "muted" }, "trace ", h("code", { id: "trace-id" }, t.trace_id)),
      table(["Span", "Start", "Took", "", "Events", "Error"], rows, { class: "trace" }));
  };

  // Redrawn at the new width when the window is resized; the listener
  // goes once this page is left.
  let lastGantt = null;
  let resizeTimer = null;
  const onResize = () => {
    if (!document.body.contains(ganttBox)) {
      window.removeEventListener("resize", onResize);
      return;
    }
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => { if (lastGantt) drawGantt(...lastGantt); }, 100);
  };
  window.addEventListener("resize", onResize);

  const drawGantt = (run, ds) => {
    lastGantt = [run, ds];
    const bars = [];
    for (const n of run.nodes) {
      const d = ds.get(n.node);
      for (const a of (d && d.attempt_log) || []) {
        bars.push({ node: n.node, a });
      }
    }
    if (!bars.length) {
      replace(ganttBox, h("p", { class: "muted" }, "No attempt has started."));
      return;
    }
    const now = Date.now();
    const t0 = Math.min(...bars.map((b) => b.a.started_ms));
    const t1 = Math.max(...bars.map((b) => b.a.finished_ms || now), t0 + 1);
    // As wide as its box (a phone's, or the column at 1280 px), so the
    // run's end and every bar stay in sight; the labels take at most 30%.
    const W = Math.max(GANTT_W_MIN, Math.floor(ganttBox.clientWidth || GANTT_W));
    const labelW = Math.min(GANTT_LABEL_W, Math.floor(W * 0.3));
    const scale = (W - labelW - 12) / (t1 - t0);
    const rowOf = new Map(run.nodes.map((n, i) => [n.node, i]));
    const height = run.nodes.length * GANTT_ROW_H + 24;
    const svg = s("svg", { class: "gantt", viewBox: `0 0 ${W} ${height}`, width: W, height, role: "img", "aria-label": "attempts over time" },
      run.nodes.map((n, i) => s("text", { x: 4, y: i * GANTT_ROW_H + 15, class: "gantt-label" }, n.node)),
      bars.map(({ node, a }) => {
        const x = Math.min(W - 12, labelW + (a.started_ms - t0) * scale);
        const w = Math.min(W - 10 - x, Math.max(2, ((a.finished_ms || now) - a.started_ms) * scale));
        const outcome = a.finished_ms ? a.outcome || "succeeded" : "running";
        return s("rect", {
          x, y: rowOf.get(node) * GANTT_ROW_H + 4, width: w, height: GANTT_ROW_H - 8, rx: 3,
          class: `gantt-bar st-${outcome}`, "data-node": node, "data-attempt": a.attempt,
        }, s("title", {}, `${node} attempt ${a.attempt}: ${stateInfo(outcome).label}, ${fmtDur((a.finished_ms || now) - a.started_ms)}`));
      }),
      s("text", { x: labelW, y: height - 6, class: "gantt-axis" }, fmtTimeIn(t0, run.timezone).slice(11)),
      s("text", { x: W - 4, y: height - 6, class: "gantt-axis", "text-anchor": "end" }, `+${fmtDur(t1 - t0)}`));
    replace(ganttBox, h("div", { class: "table-wrap" }, svg));
  };

  const drawPanel = async (run, d) => {
    const n = run.nodes.find((x) => x.node === selectedNode);
    if (!n) {
      replace(panel, h("p", { class: "error" }, `This run has no node ${selectedNode}.`));
      return;
    }
    const st = nodeState(n, run.live);
    const live = run.live && run.live[n.node];
    const attempts = (d && d.attempt_log) || [];
    const lastCheck = live && live.last_check ? live.last_check.at_ms : 0;
    const key = `${n.run_id}|${st}|${attempts.length}|${n.finished_ms}|${n.pokes}|${lastCheck}`;
    if (key === panelKey) return; // nothing changed: keep the open log and its scroll
    panelKey = key;
    const output = d || n;
    let outputView;
    if (output.output !== null && output.output !== undefined) {
      outputView = h("pre", { class: "json", id: "node-output" }, JSON.stringify(output.output, null, 2));
    } else if (output.output_text) {
      outputView = h("pre", { id: "node-output" }, output.output_text);
    } else {
      outputView = h("p", { class: "muted" }, "No output.");
    }
    const logBox = h("div", { id: "node-logs" });
    const pick = h("select", { id: "attempt-pick", "aria-label": "attempt" },
      attempts.map((a) => h("option", { value: a.attempt }, `attempt ${a.attempt} (${a.finished_ms ? a.outcome : "running"})`)));
    if (attempts.length) pick.value = String(attempts[attempts.length - 1].attempt);
    pick.addEventListener("change", () => showLogs(Number(pick.value), attempts, logBox));
    replace(panel,
      h("h2", {}, `Node ${n.node}`),
      facts([
        ["State", badge(st)],
        ["Rerun", String(n.rerun)],
        ["Attempts", String(n.attempts)],
        (live && live.worker) || n.worker ? ["Worker", h("span", { id: "node-worker" }, (live && live.worker) || n.worker)] : null,
        n.waiting_for ? ["Waiting for", h("a", { href: route("run", graph, n.waiting_for) }, n.waiting_for)] : null,
        ["Upstreams", n.upstreams.length ? n.upstreams.join(", ") : "—"],
        n.trigger_rule !== "all_success" ? ["Trigger rule", n.trigger_rule] : null,
        ["Duration", fmtDur(n.duration_ms)],
        n.kind === "sensor" ? ["Checks not met", String(n.pokes || 0)] : null,
        n.kind === "sensor" && live && live.last_check ? ["Last check", `${fmtTime(live.last_check.at_ms)}: ${live.last_check.seen}`] : null,
        n.produces && n.produces.length ? ["Produces", n.produces.join(", ")] : null,
        n.previous ? ["Previous", `rerun ${n.previous.rerun} ${n.previous.state}, ${n.previous.attempts} attempt(s)` + (n.previous.error ? `: ${n.previous.error}` : "")] : null,
        n.members ? ["Members", `${n.members.total}: ${n.members.succeeded} succeeded, ${n.members.failed} failed, ${n.members.cancelled || 0} cancelled, ${n.members.skipped} skipped, ${n.members.pending} pending` + (n.members.kept ? ` (${n.members.kept} kept from an earlier rerun)` : "")] : null,
      ]),
      h("div", { class: "actions" },
        h("button", {
          needs: "operator",
          id: "act-rerun",
          onclick: () => confirmAction({
            title: "Rerun the node", text: `Rerun ${n.node} of ${partition}.`,
            fields: checkbox("With its downstreams", "downstream", true), confirm: "Rerun",
            run: (form) => post(p("graphs", graph, "runs", partition, "nodes", n.node, "rerun"), { downstream: form.elements.downstream.checked }),
          }).then(refresh),
        }, "Rerun…"),
        h("button", {
          needs: "operator",
          id: "act-mark-succeeded",
          onclick: () => confirmAction({
            title: "Mark succeeded", text: `Record ${n.node} of ${partition} as succeeded; its downstreams may start.`,
            confirm: "Mark", run: () => post(p("graphs", graph, "runs", partition, "nodes", n.node, "mark"), { state: "succeeded" }),
          }).then(refresh),
        }, "Mark succeeded…"),
        h("button", {
          needs: "operator",
          id: "act-mark-failed", class: "danger",
          onclick: () => confirmAction({
            title: "Mark failed", text: `Record ${n.node} of ${partition} as failed.`, danger: true,
            confirm: "Mark", run: () => post(p("graphs", graph, "runs", partition, "nodes", n.node, "mark"), { state: "failed" }),
          }).then(refresh),
        }, "Mark failed…")),
      n.error ? [h("h3", {}, "Error"), h("pre", { class: "error", id: "node-error" }, n.error)] : null,
      n.members ? membersView(n) : null,
      h("h3", {}, "Output"), outputView,
      artifactsView(n, (d && d.artifacts) || n.artifacts || []),
      attempts.length ? [
        h("h3", {}, "Attempts"),
        // An attempt's stderr tail has a row of its own below it: the
        // panel's whole width, never cut.
        table(["#", "Outcome", "Exit", "Started", "Took"], attempts.map((a) => [h("tr", { "data-attempt": a.attempt },
          h("td", {}, String(a.attempt)),
          h("td", {}, badge(a.finished_ms ? a.outcome : "running")),
          h("td", {}, a.exit_code === null || a.exit_code === undefined ? "—" : String(a.exit_code)),
          h("td", {}, fmtTime(a.started_ms)),
          h("td", {}, a.finished_ms ? fmtDur(a.finished_ms - a.started_ms) : "—")),
          a.stderr_tail && a.stderr_tail.length
            ? h("tr", { class: "stderr-row", "data-stderr-of": a.attempt }, h("td", { colspan: 5 }, h("pre", { class: "stderr", "aria-label": `stderr of attempt ${a.attempt}` }, a.stderr_tail.join("\n"))))
            : null]), { class: "attempts" }),
        h("h3", {}, "Logs ", pick), logBox,
      ] : h("p", { class: "muted" }, "No attempt has logs yet."));
    if (attempts.length) await showLogs(Number(pick.value), attempts, logBox);
  };

  // The artifacts of the node's current record: name (a link that saves
  // it), size and the start of its hash.
  const artifactsView = (n, arts) => {
    if (!arts.length) return null;
    const base = p("graphs", graph, "runs", partition, "nodes", n.node, "artifacts");
    const rows = arts.slice(0, ARTIFACTS_SHOWN).map((a) => h("tr", { "data-artifact": a.name },
      h("td", {}, h("a", {
        href: `${base}/${a.name.split("/").map(encodeURIComponent).join("/")}`,
        download: a.name.replace(/\//g, "_"),
      }, a.name)),
      h("td", { "data-bytes": a.bytes }, fmtBytes(a.bytes)),
      h("td", {}, h("code", { title: `blake3 ${a.hash}`, "data-hash": a.hash }, a.hash.slice(0, HASH_SHOWN)))));
    return [
      h("h3", {}, "Artifacts"),
      table(["Name", "Size", "Hash"], rows, { class: "artifacts", id: "artifacts" }),
      arts.length > rows.length ? h("p", { class: "muted" }, `${arts.length - rows.length} more (\`weir artifacts ${graph} ${partition} ${n.node}\` lists all).`) : null,
    ];
  };

  // A mapped node's members: index, state, the rerun whose record it is,
  // attempts, item and error; a member's name opens its logs.
  const membersView = (n) => {
    const m = n.members;
    const box = h("div", { id: "member-logs" });
    const rows = m.list.slice(0, MEMBERS_SHOWN).map((x) => h("tr", { "data-member": x.index, "data-state": x.state },
      h("td", {}, h("a", {
        href: "#", onclick: (ev) => { ev.preventDefault(); memberLogs(n, x, box); },
      }, String(x.index))),
      h("td", { class: "state" }, badge(x.state)),
      h("td", {}, String(x.rerun)),
      h("td", {}, String(x.attempts)),
      h("td", {}, x.item ? h("code", {}, x.item) : "—"),
      h("td", { class: "error-cell" }, x.error ? h("span", { class: "error", title: x.error }, x.error.split("\n")[0]) : "—")));
    return [
      h("h3", {}, `Members (rerun ${m.rerun})`),
      table(["#", "State", "Rerun", "Attempts", "Item", "Error"], rows, { class: "members", id: "members" }),
      m.total > rows.length ? h("p", { class: "muted" }, `${m.total - rows.length} more members (the counts above cover all).`) : null,
      box,
    ];
  };

  const memberLogs = async (n, x, box) => {
    const base = p("graphs", graph, "runs", partition, "nodes", n.node, "logs");
    const pre = h("pre", { class: "log", id: "member-log-lines", tabindex: "0", "aria-label": `log of member ${x.index}` });
    replace(box, h("h4", {}, `Member ${x.index}: logs of its last attempt`), pre);
    try {
      const chunk = await get(base + qs({ member: x.index, limit: LOG_PAGE }));
      chunk.lines.forEach((l) => pre.appendChild(h("span", { class: `log-${l.stream}` }, `${fmtTime(l.ts_ms).slice(11)} ${l.text}\n`)));
      if (!chunk.lines.length) pre.textContent = "No lines.";
    } catch (e) {
      pre.textContent = e.message;
    }
  };

  const showLogs = async (attempt, attempts, box) => {
    if (logFollow) {
      logFollow.close();
      logFollow = null;
    }
    const a = attempts.find((x) => x.attempt === attempt);
    const base = p("graphs", graph, "runs", partition, "nodes", selectedNode, "logs");
    const pre = h("pre", { class: "log", id: "log-lines", tabindex: "0", "aria-label": `log of attempt ${attempt}` });
    const status = h("p", { class: "muted", id: "log-status" });
    replace(box, status, pre);
    const add = (l) => {
      pre.appendChild(h("span", { class: `log-${l.stream}`, "data-line": l.line }, `${fmtTime(l.ts_ms).slice(11)} ${l.text}\n`));
    };
    let next = 0;
    try {
      const chunk = await get(base + qs({ attempt, limit: LOG_PAGE }));
      chunk.lines.forEach(add);
      next = chunk.next_line;
      status.textContent = chunk.lines.length ? "" : "No lines.";
    } catch (e) {
      status.textContent = e.message;
      return;
    }
    if (a && !a.finished_ms) {
      status.textContent = "following…";
      status.dataset.following = "true";
      const es = new EventSource(base + qs({ attempt, from_line: next, follow: true }), { withCredentials: true });
      es.addEventListener("line", (ev) => {
        try {
          add(JSON.parse(ev.data));
        } catch (_) {
          pre.appendChild(h("span", { class: "log-err" }, "(a log line the page could not read)\n"));
        }
      });
      es.addEventListener("end", () => {
        es.close();
        status.textContent = "attempt ended";
        status.dataset.following = "false";
      });
      logFollow = es;
    }
  };

  await refresh();
  return {
    refresh,
    leave: () => {
      if (logFollow) logFollow.close();
    },
  };
}
