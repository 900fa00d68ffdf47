// The approvals page (#/approvals): the calls and hand-offs that wait for a person's
// sign-off, each a card to approve or reject, and a log of what this page decided.

import { get, post } from "../api.js";
import { fill, fmtTime, h, sessionLink, syncList } from "../dom.js";
import { poller } from "../poll.js";
import { approverRoles, currentUser, hasRole } from "../user.js";
import { errorBox, kv, runSummaryEl, timeEl } from "../widgets.js";

const decisions = []; // what this page decided, newest first (kept while the page is open)

/** Show the approvals page in `viewEl`; returns {stop()}. */
export function mountApprovals(viewEl) {
  const list = h("div", { class: "cards", testid: "approvals-list" });
  const err = h("div", {});
  const log = h("div", { class: "log", testid: "decision-log" });
  const renderLog = () =>
    fill(
      log,
      decisions.length ? h("h3", {}, "Decided here") : null,
      decisions.map((d) =>
        h(
          "div",
          { class: "log-entry", testid: "decision-result", dataset: { approvalId: d.id, decision: d.decision } },
          h("span", { class: "mono muted" }, fmtTime(d.at)),
          ` ${d.decision} ${d.id} (${d.what}) → `,
          d.error ? errorBox(d.error, "decision-error") : runSummaryEl(d.result),
        ),
      ),
    );
  renderLog();
  fill(
    viewEl,
    h(
      "section",
      { testid: "approvals-view" },
      h("div", { class: "title-row" }, h("h2", {}, "Approvals"), h("span", { class: "muted" }, "calls and hand-offs that wait for a person's sign-off")),
      err,
      log,
      list,
    ),
  );
  let refresh = null;
  const card = (a) => {
    const result = h("div", { testid: "approval-result" });
    const mine = approverRoles();
    let roleSelect = null;
    if (a.required_roles && a.required_roles.length) {
      const usable = mine.includes("*") ? a.required_roles : a.required_roles.filter((r) => mine.includes(r));
      const options = usable.length ? usable : a.required_roles;
      roleSelect = h(
        "select",
        { testid: "approval-role", "aria-label": "decide as role" },
        options.map((r) => h("option", { value: r }, r)),
      );
    }
    const reason = h("input", { type: "text", testid: "approval-reject-reason", placeholder: "reason (for a rejection)", "aria-label": "rejection reason" });
    const what = a.kind === "tool" ? `tool ${a.tool}` : `hand-off to ${a.target}`;
    const decide = async (decision, buttons) => {
      buttons.forEach((b) => (b.disabled = true));
      fill(result, h("span", { class: "muted" }, decision === "approve" ? "approving… (the run continues)" : "rejecting…"));
      const body = { session_id: a.session_id };
      if (roleSelect) body.role = roleSelect.value;
      if (decision === "reject" && reason.value.trim()) body.reason = reason.value.trim();
      const entry = { id: a.id, what, decision: decision === "approve" ? "approved" : "rejected", at: Date.now() / 1000 };
      try {
        entry.result = await post(`/approvals/${encodeURIComponent(a.id)}/${decision}`, body);
        fill(result, runSummaryEl(entry.result, "approval-run"));
      } catch (e) {
        entry.error = e;
        fill(result, errorBox(e));
        buttons.forEach((b) => (b.disabled = false));
      }
      decisions.unshift(entry);
      decisions.splice(20);
      renderLog();
      if (refresh) refresh.now();
    };
    const approve = h("button", { type: "button", testid: "approval-approve", class: "ok" }, "Approve");
    const reject = h("button", { type: "button", testid: "approval-reject", class: "bad" }, "Reject");
    approve.addEventListener("click", () => decide("approve", [approve, reject]));
    reject.addEventListener("click", () => decide("reject", [approve, reject]));
    if (currentUser() && !hasRole("approver")) {
      approve.disabled = reject.disabled = true;
      approve.title = reject.title = "your token has no approver role";
    }
    const signed = (a.approvals || []).filter((x) => x.approved).map((x) => `${x.by}${x.role ? ` (${x.role})` : ""}`);
    const expires = a.timeout_s ? a.requested_at + a.timeout_s : null;
    return h(
      "article",
      { class: "card", testid: "approval-card", dataset: { approvalId: a.id, sessionId: a.session_id } },
      h("h3", {}, h("span", { testid: "approval-agent" }, a.agent), " wants to run ", h("span", { class: "mono", testid: "approval-what" }, what)),
      h(
        "div",
        { class: "meta" },
        sessionLink(a.session_id, `session ${a.session_id}`),
        h("span", {}, "requested ", timeEl(a.requested_at)),
        expires ? h("span", {}, `escalates at ${fmtTime(expires)}`) : null,
        h("span", { class: "mono muted" }, a.id),
      ),
      a.reason ? h("p", { testid: "approval-reason" }, h("strong", {}, "Why: "), a.reason) : null,
      h("div", {}, h("strong", {}, "Arguments (redacted):"), kv(a.arguments, "approval-arguments")),
      h(
        "p",
        { testid: "approval-roles" },
        h("strong", {}, "Who may decide: "),
        a.required_roles && a.required_roles.length ? a.required_roles.join(", ") : "anyone with an approver role",
        a.dual ? ` · needs two people · signed: ${signed.join(", ") || "nobody yet"}` : "",
      ),
      Object.keys(a.state || {}).length ? h("details", {}, h("summary", {}, "Session state"), kv(a.state)) : null,
      h(
        "div",
        { class: "actions" },
        h("span", { class: "group" }, roleSelect ? h("label", {}, "as ", roleSelect) : null, approve),
        h("span", { class: "group" }, reason, reject),
      ),
      result,
    );
  };
  refresh = poller(async () => {
    try {
      const cards = await get("/approvals");
      fill(err);
      syncList(list, cards, (a) => a.id, card, "Nothing waits for approval.");
    } catch (e) {
      fill(err, errorBox(e));
    }
  });
  return refresh;
}
