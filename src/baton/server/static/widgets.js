// Pieces several views show: an error box, a key-value table, a relative time, a run's path
// and a run summary line.

import { ApiError } from "./api.js";
import { badge, fmtAgo, fmtTime, fmtValue, h, sessionLink } from "./dom.js";

/** An error as an alert box; 401 and 403 are marked as sign-in problems. */
export function errorBox(err, testid = "error") {
  if (!err) return null;
  const status = err instanceof ApiError ? err.status : 0;
  const what =
    status === 401
      ? "Not signed in (401)"
      : status === 403
        ? "Not allowed (403)"
        : status
          ? `Error ${status}`
          : "Error";
  const detail = err instanceof ApiError ? err.detail : String(err && err.message ? err.message : err);
  return h(
    "div",
    { class: `error${status === 401 || status === 403 ? " error-auth" : ""}`, testid, role: "alert" },
    h("strong", {}, `${what}: `),
    detail,
  );
}

/** A key-value table of `obj` ("none" when empty). */
export function kv(obj, testid) {
  const entries = Object.entries(obj || {});
  if (!entries.length) return h("p", { class: "muted", testid }, "none");
  return h(
    "table",
    { class: "kv", testid },
    h(
      "tbody",
      {},
      entries.map(([k, v]) =>
        h("tr", {}, h("th", { class: "mono" }, k), h("td", { class: "mono" }, fmtValue(v))),
      ),
    ),
  );
}

/** A <time>: `3 min ago`, the exact time as its title. */
export function timeEl(ts) {
  return h("time", { title: fmtTime(ts), dataset: { ts } }, fmtAgo(ts));
}

/** The agents a run went through, as chips joined by arrows. */
export function pathChips(path) {
  const out = [];
  (path || []).forEach((agent, i) => {
    if (i) out.push(h("span", { class: "arrow" }, " → "));
    out.push(h("span", { class: `chip${agent === "human" ? " chip-human" : ""}` }, agent));
  });
  return h("span", { class: "path", testid: "path" }, out);
}

/** What a run summary says, as a line: status, output or error, where it waits. */
export function runSummaryEl(summary, testid = "run-summary") {
  const parts = [badge(summary.status, "run-status")];
  if (summary.output) parts.push(h("span", { class: "output", testid: "run-output" }, summary.output));
  if (summary.error) parts.push(h("span", { class: "error-text" }, summary.error));
  if (summary.status === "awaiting_approval" && summary.approval) {
    parts.push(
      h("a", { href: "#/approvals" }, `waits for approval ${summary.approval.id} (${summary.approval.tool || summary.approval.target})`),
    );
  }
  if (summary.status === "escalated") {
    parts.push(
      summary.ticket_id !== null && summary.ticket_id !== undefined
        ? h("a", { href: "#/tickets" }, `handed to a person: ticket #${summary.ticket_id}`)
        : h("span", {}, "handed to the fallback"),
    );
  }
  if (summary.path && summary.path.length) parts.push(pathChips(summary.path));
  if (summary.session_id) parts.push(sessionLink(summary.session_id, `session ${summary.session_id}`));
  return h("div", { class: "run-summary", testid, dataset: { status: summary.status } }, parts);
}
