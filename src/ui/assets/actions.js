// Every action goes through one confirmation dialog and shows the API's
// answer: what was done, or the error as the engine worded it.

import { h, replace } from "./dom.js";

// A one-line account of an answer, for the common shapes.
function summarize(answer) {
  if (answer === null || answer === undefined) return "done";
  if (typeof answer !== "object") return String(answer);
  if (Array.isArray(answer)) return answer.map(summarize).join("; ") || "done";
  const parts = [];
  for (const [k, v] of Object.entries(answer)) {
    if (v === null || typeof v === "object") continue;
    parts.push(`${k}: ${v}`);
    if (parts.length >= 6) break;
  }
  return parts.length ? parts.join(", ") : "done";
}

function flash(text, ok) {
  const el = document.getElementById("flash");
  if (!el) return;
  el.dataset.ok = ok ? "true" : "false";
  el.textContent = text;
}

// Opens the dialog: `title`, `text` (what will happen), optional `fields`
// (form controls), `confirm` (the button's word) and `run(form)`, which
// calls the API. Resolves with the answer, or null when dismissed.
export function confirmAction({ title, text, fields, confirm, run, danger }) {
  const dlg = document.getElementById("confirm");
  return new Promise((resolve) => {
    const answer = h("div", { class: "answer", role: "status", "aria-live": "polite" });
    const ok = h("button", { type: "submit", class: danger ? "danger" : "primary", id: "confirm-ok" },
      confirm || "Confirm");
    const cancel = h("button", { type: "button", id: "confirm-cancel" }, "Cancel");
    const form = h("form", { method: "dialog" },
      h("h2", { id: "confirm-title" }, title),
      h("p", {}, text),
      fields || null,
      answer,
      h("div", { class: "buttons" }, cancel, ok));
    let result = null;
    let done = false;
    cancel.addEventListener("click", () => dlg.close());
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      if (done) {
        dlg.close();
        return;
      }
      ok.disabled = true;
      try {
        result = await run(form);
        done = true;
        answer.dataset.ok = "true";
        replace(answer, h("strong", {}, "Done. "), summarize(result),
          h("pre", { class: "json" }, JSON.stringify(result, null, 2)));
        flash(`${title}: ${summarize(result)}`, true);
      } catch (e) {
        done = true;
        answer.dataset.ok = "false";
        replace(answer, h("strong", {}, `Refused (${e.status || "error"}). `), e.message);
        flash(`${title}: ${e.message}`, false);
      }
      ok.disabled = false;
      ok.textContent = "Close";
      cancel.hidden = true;
      ok.focus();
    });
    dlg.onclose = () => resolve(result);
    replace(dlg, form);
    dlg.showModal();
    const first = form.querySelector("input, select");
    (first || ok).focus();
  });
}

// A labelled input for a dialog.
export function field(label, attrs) {
  const id = `f-${attrs.name}`;
  return h("p", { class: "field" },
    h("label", { for: id }, label), " ",
    h("input", { id, ...attrs }));
}

export function checkbox(label, name, checked) {
  const id = `f-${name}`;
  return h("p", { class: "field" },
    h("input", { type: "checkbox", id, name, checked: checked ? true : null }), " ",
    h("label", { for: id }, label));
}
