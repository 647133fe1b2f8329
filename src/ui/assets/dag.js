// The graph drawn as SVG: a layered layout, left to right. A node's layer
// is its longest path from a root; within a layer nodes are ordered by the
// mean position of their neighbours (a few barycentre sweeps, which undo
// most crossings in the graphs people write). An edge that spans layers
// gets a waypoint in each layer it crosses, ordered and spaced like a
// node, so it runs through a lane of its own and never under a node's box
// (as Sugiyama's dummy nodes do in Airflow's and Dagster's graphs); edges
// are curves between columns with arrowheads; a trigger rule other than
// all_success is written on the node.

import { s, stateInfo } from "./dom.js";

const NODE_W = 168;
const NODE_H = 50;
const GAP_X = 64;
const GAP_Y = 18;
const PAD = 12;
const SWEEPS = 6;
const NAME_CHARS_MAX = 20;

// A waypoint's name: never a node's (names are [A-Za-z0-9_.-]).
const WAY = "\u0000";

export function isWaypoint(name) {
  return name.startsWith(WAY);
}

// Layers and order of `nodes` ([{name, upstreams}]): [[name, ...], ...],
// with the waypoints of the edges that span layers (see `routes`).
export function layout(nodes) {
  const byName = new Map(nodes.map((n) => [n.name, n]));
  const layer = new Map();
  const visiting = new Set();
  const depth = (name) => {
    if (layer.has(name)) return layer.get(name);
    if (visiting.has(name)) return 0; // a cycle: validation refuses these
    visiting.add(name);
    const n = byName.get(name);
    let d = 0;
    for (const u of (n && n.upstreams) || []) {
      if (byName.has(u)) d = Math.max(d, depth(u) + 1);
    }
    visiting.delete(name);
    layer.set(name, d);
    return d;
  };
  nodes.forEach((n) => depth(n.name));
  // The graph the layout orders: every edge between adjacent layers, a
  // longer one through a chain of waypoints.
  const ups = new Map(nodes.map((n) => [n.name, []]));
  for (const n of nodes) {
    for (const u of n.upstreams || []) {
      if (!byName.has(u)) continue;
      let prev = u;
      for (let l = layer.get(u) + 1; l < layer.get(n.name); l++) {
        const w = `${WAY}${u}>${n.name}>${l}`;
        layer.set(w, l);
        ups.set(w, [prev]);
        prev = w;
      }
      ups.get(n.name).push(prev);
    }
  }
  const layers = [];
  for (const name of ups.keys()) {
    const d = layer.get(name);
    (layers[d] = layers[d] || []).push(name);
  }
  const downs = new Map([...ups.keys()].map((n) => [n, []]));
  for (const [n, us] of ups) for (const u of us) downs.get(u).push(n);
  const pos = new Map();
  const index = () => layers.forEach((l) => l.forEach((name, i) => pos.set(name, i / Math.max(1, l.length - 1 || 1))));
  index();
  const sortBy = (l, neighbours) => {
    const key = new Map(l.map((name, i) => {
      const ns = neighbours(name).filter((x) => pos.has(x));
      return [name, ns.length ? ns.reduce((a, x) => a + pos.get(x), 0) / ns.length : i / Math.max(1, l.length)];
    }));
    l.sort((a, b) => key.get(a) - key.get(b));
  };
  for (let sweep = 0; sweep < SWEEPS; sweep++) {
    if (sweep % 2 === 0) {
      for (let i = 1; i < layers.length; i++) sortBy(layers[i], (n) => ups.get(n));
    } else {
      for (let i = layers.length - 2; i >= 0; i--) sortBy(layers[i], (n) => downs.get(n));
    }
    index();
  }
  return layers.filter((l) => l);
}

function short(name) {
  return name.length > NAME_CHARS_MAX ? name.slice(0, NAME_CHARS_MAX - 1) + "…" : name;
}

// The SVG of `nodes` ([{name, upstreams, trigger_rule}]), each coloured by
// `stateOf(name)`, linked to `hrefOf(name)` when given.
export function drawDag(nodes, stateOf, hrefOf) {
  const layers = layout(nodes);
  const tallest = Math.max(1, ...layers.map((l) => l.length));
  const width = PAD * 2 + layers.length * NODE_W + (layers.length - 1) * GAP_X;
  const height = PAD * 2 + tallest * NODE_H + (tallest - 1) * GAP_Y;
  const at = new Map();
  layers.forEach((l, li) => {
    const offset = ((tallest - l.length) * (NODE_H + GAP_Y)) / 2;
    l.forEach((name, i) => {
      at.set(name, { x: PAD + li * (NODE_W + GAP_X), y: PAD + offset + i * (NODE_H + GAP_Y) });
    });
  });
  const edges = [];
  for (const n of nodes) {
    for (const u of n.upstreams || []) {
      const a = at.get(u);
      const b = at.get(n.name);
      if (!a || !b) continue;
      // From u's right side, through the lane of each layer between (in at
      // its column's left, out at its right), to n's left side; the curves
      // stay in the gaps between columns.
      const points = [[a.x + NODE_W, a.y + NODE_H / 2]];
      for (const [w, p] of at) {
        if (w.startsWith(`${WAY}${u}>${n.name}>`)) points.push([p.x, p.y + NODE_H / 2], [p.x + NODE_W, p.y + NODE_H / 2]);
      }
      points.sort((p, q) => p[0] - q[0]);
      points.push([b.x - 3, b.y + NODE_H / 2]);
      let d = `M${points[0][0]},${points[0][1]}`;
      for (let i = 1; i < points.length; i++) {
        const [x1, y1] = points[i - 1];
        const [x2, y2] = points[i];
        if (i % 2 === 0) {
          d += ` L${x2},${y2}`; // along a lane, inside a column
        } else {
          const mid = (x1 + x2) / 2;
          d += ` C${mid},${y1} ${mid},${y2} ${x2},${y2}`;
        }
      }
      edges.push(s("path", {
        class: "dag-edge",
        d,
        "marker-end": "url(#arrow)",
        "data-from": u,
        "data-to": n.name,
      }, s("title", {}, `${u} → ${n.name}`)));
    }
  }
  const boxes = nodes.map((n) => {
    const p = at.get(n.name);
    const state = stateOf(n.name) || "none";
    const info = stateInfo(state);
    const rule = n.trigger_rule && n.trigger_rule !== "all_success" ? n.trigger_rule : null;
    const g = s("g", {
      class: `dag-node st-${state}`,
      "data-node": n.name,
      "data-state": state,
      transform: `translate(${p.x},${p.y})`,
    },
      s("title", {}, `${n.name}: ${info.label}${rule ? ` (trigger rule ${rule})` : ""}`),
      s("rect", { width: NODE_W, height: NODE_H, rx: 6, ry: 6 }),
      s("text", { x: 10, y: 19, class: "dag-name" }, short(n.name)),
      s("text", { x: 10, y: 37, class: "dag-state" }, `${info.glyph} ${info.label}`),
      rule ? s("text", { x: NODE_W - 8, y: 37, class: "dag-rule", "text-anchor": "end" }, rule) : null);
    const href = hrefOf ? hrefOf(n.name) : null;
    return href ? s("a", { href, class: "dag-link", "aria-label": `${n.name}: ${info.label}` }, g) : g;
  });
  return s("svg", {
    class: "dag",
    viewBox: `0 0 ${width} ${height}`,
    width,
    height,
    role: "img",
    "aria-label": `graph of ${nodes.length} nodes`,
  },
    s("defs", {},
      s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 8, markerHeight: 8, orient: "auto-start-reverse" },
        s("path", { d: "M0,0 L10,5 L0,10 z", class: "dag-arrow" }))),
    edges, boxes);
}
