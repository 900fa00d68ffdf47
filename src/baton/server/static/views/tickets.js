// The human queue (#/tickets): the tickets of conversations handed to a person, each a
// hand-over card to claim, answer (handing the baton back or not) or close, and a log of
// what this page did.

import { ApiError, get, post } from "../api.js";
import { badge, fill, fmtTime, h, sessionLink, syncList } from "../dom.js";
import { poller } from "../poll.js";
import { currentUser, loadTeam } from "../user.js";
import { errorBox, kv, pathChips, timeEl } from "../widgets.js";

const ticketLog = []; // what this page did, newest first (kept while the page is open)

/** Show the human queue in `viewEl`; returns {stop()}. */
export function mountTickets(viewEl) {
  const list = h("div", { class: "cards", testid: "tickets-list" });
  const err = h("div", {});
  const log = h("div", { class: "log", testid: "ticket-log" });
  const filter = h(
    "select",
    { testid: "ticket-filter", "aria-label": "show tickets" },
    [
      ["active", "open and claimed"],
      ["open", "open"],
      ["claimed", "claimed"],
      ["answered", "answered"],
      ["closed", "closed"],
      ["all", "all"],
    ].map(([v, t]) => h("option", { value: v }, t)),
  );
  const renderLog = () =>
    fill(
      log,
      ticketLog.length ? h("h3", {}, "Done here") : null,
      ticketLog.map((e) =>
        h(
          "div",
          { class: "log-entry", testid: "ticket-log-entry", dataset: { ticketId: e.id, step: e.step } },
          h("span", { class: "mono muted" }, fmtTime(e.at)),
          ` ${e.step} ticket #${e.id} `,
          e.error ? errorBox(e.error, "ticket-error") : e.text,
          e.session ? [" ", sessionLink(e.session, "open the conversation")] : null,
        ),
      ),
    );
  renderLog();
  fill(
    viewEl,
    h(
      "section",
      { testid: "tickets-view" },
      h("div", { class: "title-row" }, h("h2", {}, "Human queue"), h("label", {}, "show ", filter)),
      err,
      log,
      list,
    ),
  );
  let refresh = null;
  const record = (entry) => {
    ticketLog.unshift({ ...entry, at: Date.now() / 1000 });
    ticketLog.splice(20);
    renderLog();
    if (refresh) refresh.now();
  };
  const card = (t) => {
    const c = t.card;
    const result = h("div", { testid: "ticket-result" });
    const active = t.status === "open" || t.status === "claimed";
    const me = currentUser();
    const mineClaimed = t.status === "claimed" && me && t.claimed_by === me.name;
    const step = async (name, path, body, text) => {
      fill(result, h("span", { class: "muted" }, `${name}…`));
      try {
        const out = await post(`/tickets/${t.id}/${path}`, body);
        fill(result, h("span", { testid: "ticket-done" }, text(out)));
        record({ id: t.id, step: name, text: text(out), session: t.session_id });
      } catch (e) {
        fill(result, errorBox(e));
        record({ id: t.id, step: name, error: e });
      }
    };
    const actions = [];
    if (active) {
      if (t.status === "open") {
        actions.push(
          h(
            "button",
            { type: "button", testid: "ticket-claim", onclick: () => step("claimed", "claim", undefined, (o) => `claimed by ${o.claimed_by}`) },
            "Claim",
          ),
        );
      }
      const reply = h("textarea", { testid: "ticket-reply", rows: 3, placeholder: "Your reply to the user", "aria-label": "reply to the user" });
      const handBack = h(
        "select",
        { testid: "ticket-handback", "aria-label": "then the baton goes to" },
        h("option", { value: "" }, "stays with a person"),
      );
      loadTeam().then((team) => {
        if (!team) return;
        for (const name of Object.keys(team.agents || {})) handBack.appendChild(h("option", { value: name }, name));
        const last = (c.path || []).filter((p) => p !== "human").pop();
        if (last && team.agents && team.agents[last]) handBack.value = last;
      });
      const answer = h("button", { type: "button", testid: "ticket-answer", class: "ok" }, "Send answer");
      answer.addEventListener("click", () => {
        const text = reply.value.trim();
        if (!text) {
          fill(result, errorBox(new ApiError(422, "write a reply first", "")));
          return;
        }
        const body = { reply: text };
        if (handBack.value) body.hand_back_to = handBack.value;
        step("answered", "answer", body, () =>
          handBack.value
            ? `answered; the reply is in the user's session and ${handBack.value} holds the baton`
            : "answered; the reply is in the user's session and a person keeps the baton",
        );
      });
      const note = h("input", { type: "text", testid: "ticket-note", placeholder: "note (why it is closed)", "aria-label": "closing note" });
      const close = h(
        "button",
        {
          type: "button",
          class: "secondary",
          testid: "ticket-close",
          onclick: () => step("closed", "close", { note: note.value.trim() }, () => "closed"),
        },
        "Close",
      );
      if (t.status === "claimed" && !mineClaimed && me) {
        answer.title = `claimed by ${t.claimed_by}`;
      }
      actions.push(
        h("div", { class: "answer" }, reply, h("div", { class: "actions" }, h("label", {}, "then the baton ", handBack), answer)),
        h("div", { class: "actions" }, note, close),
      );
    }
    return h(
      "article",
      { class: `card ticket ticket-${t.status}`, testid: "ticket-card", dataset: { ticketId: t.id, status: t.status, sessionId: t.session_id } },
      h(
        "h3",
        {},
        `Ticket #${t.id} `,
        badge(t.status, "ticket-status"),
        t.claimed_by ? h("span", { class: "muted", testid: "ticket-claimed-by" }, ` claimed by ${t.claimed_by}`) : null,
      ),
      h(
        "div",
        { class: "meta" },
        sessionLink(t.session_id, "open the conversation"),
        c.user_id ? h("span", {}, `user ${c.user_id}`) : null,
        h("span", {}, "escalated ", timeEl(c.created_at)),
      ),
      h(
        "div",
        { class: "handover", testid: "ticket-summary" },
        h("div", {}, h("strong", {}, "Path: "), pathChips(c.path)),
        h("div", {}, h("strong", {}, "Why it reached a person:"), h("ul", { testid: "ticket-reasons" }, (c.reasons || []).map((r) => h("li", {}, r)))),
        h("div", {}, h("strong", {}, "The user said:"), h("blockquote", { testid: "ticket-user-message" }, c.last_user_message || "(nothing)")),
        h("div", {}, h("strong", {}, "Last reply to the user: "), c.last_reply ? h("span", { testid: "ticket-last-reply" }, c.last_reply) : h("span", { class: "muted" }, "none")),
        h("div", {}, h("strong", {}, "Known facts:"), kv(c.state, "ticket-state")),
        h("details", {}, h("summary", {}, "Hand-over card as text"), h("pre", { testid: "ticket-summary-text" }, t.summary)),
      ),
      t.answer ? h("p", { testid: "ticket-answer-text" }, h("strong", {}, "Answered: "), t.answer) : null,
      t.note ? h("p", { class: "muted" }, `Note: ${t.note}`) : null,
      actions,
      result,
    );
  };
  const load = async () => {
    try {
      const which = filter.value;
      let tickets;
      if (which === "active") {
        const [open, claimed] = await Promise.all([get("/tickets?status=open"), get("/tickets?status=claimed")]);
        tickets = [...open, ...claimed].sort((a, b) => a.id - b.id);
      } else {
        tickets = await get(`/tickets?status=${which}`);
      }
      fill(err);
      syncList(list, tickets, (t) => t.id, card, which === "active" ? "The human queue is empty." : "No tickets.");
    } catch (e) {
      fill(err, errorBox(e));
    }
  };
  refresh = poller(load);
  filter.addEventListener("change", () => refresh.now());
  return refresh;
}
