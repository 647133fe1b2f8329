// The engine's event stream: pages redraw when something changed, within a
// second, without a reload. EventSource reconnects by itself and sends the
// last id it saw (Last-Event-ID), so the engine replays what was missed;
// a `reset` event (id from an older engine, or gone from its ring) means
// "refetch everything", which is what a redraw does anyway.

const KINDS = [
  "enqueued", "started", "retrying", "deferred", "completed", "breaker", "restarted",
  "run_started", "run_settled", "node_changed", "reconciled", "expired",
  "inventory_loaded", "inventory_failed", "cron_fired", "backfill_done", "stopped",
  "other", "reset",
];

// The longest a change waits before the page redraws; changes that come
// faster are batched into one redraw.
const REDRAW_DELAY_MS = 150;

let source = null;
let listener = null;
let timer = null;
let statusEl = null;
let lastId = null;

function setStatus(state, text) {
  if (!statusEl) return;
  statusEl.dataset.state = state;
  statusEl.textContent = text;
}

function changed() {
  if (timer) return;
  timer = setTimeout(() => {
    timer = null;
    if (listener) listener();
  }, REDRAW_DELAY_MS);
}

export function lastEventId() {
  return lastId;
}

// Follows the stream; `onChange` is called (batched) after events.
export function follow(el) {
  statusEl = el;
  if (source) return;
  source = new EventSource("/api/v1/events", { withCredentials: true });
  source.onopen = () => setStatus("live", "live");
  source.onerror = () => setStatus("reconnecting", "reconnecting…");
  for (const k of KINDS) {
    source.addEventListener(k, (ev) => {
      if (ev.lastEventId) lastId = ev.lastEventId;
      setStatus("live", "live");
      changed();
    });
  }
}

export function onChange(f) {
  listener = f;
}

export function stop() {
  if (source) source.close();
  source = null;
}
