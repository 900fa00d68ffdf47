// The sessions list (#/): every session with its holder, status and what it waits on,
// refreshed every few seconds.

import { get } from "../api.js";
import { badge, fill, fmtTime, h, sessionLink, syncList } from "../dom.js";
import { poller } from "../poll.js";
import { errorBox, timeEl } from "../widgets.js";

/** Show the sessions list in `viewEl`; returns {stop()}. */
export function mountSessions(viewEl) {
  const table = h("tbody", { testid: "sessions-body" });
  const err = h("div", {});
  const stamp = h("span", { class: "muted", testid: "sessions-refreshed" });
  const root = h(
    "section",
    { testid: "sessions-view" },
    h(
      "div",
      { class: "title-row" },
      h("h2", {}, "Sessions"),
      stamp,
      h("a", { href: "#/chat", class: "button", testid: "new-chat" }, "New conversation"),
    ),
    err,
    h(
      "table",
      { class: "list", testid: "sessions-table" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ["Session", "User", "Holder", "Status", "Waits on", "Updated"].map((t) => h("th", {}, t)),
        ),
      ),
      table,
    ),
  );
  fill(viewEl, root);
  const row = (s) =>
    h(
      "tr",
      { testid: "session-row", dataset: { sessionId: s.session_id, status: s.status } },
      h("td", {}, sessionLink(s.session_id)),
      h("td", {}, s.user_id || ""),
      h("td", { testid: "session-holder" }, s.holder || ""),
      h("td", {}, badge(s.status)),
      h(
        "td",
        {},
        s.approval_id ? h("a", { href: "#/approvals" }, `approval ${s.approval_id}`) : null,
        s.interrupt_id ? h("span", {}, `interrupt ${s.interrupt_id}`) : null,
        s.ticket_ids && s.ticket_ids.length
          ? h("a", { href: "#/tickets" }, `ticket ${s.ticket_ids.map((t) => `#${t}`).join(", ")}`)
          : null,
      ),
      h("td", {}, timeEl(s.updated_at)),
    );
  return poller(async () => {
    try {
      const sessions = await get("/sessions?limit=200");
      fill(err);
      syncList(table, sessions, (s) => s.session_id, row, null);
      if (!sessions.length) {
        table.replaceChildren(
          h("tr", {}, h("td", { colspan: 6, class: "empty", testid: "empty" }, "No sessions yet: start a conversation.")),
        );
      }
      fill(stamp, `updated ${fmtTime(Date.now() / 1000)}`);
    } catch (e) {
      fill(err, errorBox(e));
    }
  });
}
