// The chat page (#/chat[/<id>]): talk to the team, the reply streaming in. Without an id it
// continues the session this tab last chatted in.

import { chatBox } from "../chatbox.js";
import { fill, h, sessionLink } from "../dom.js";

const CHAT_SESSION_KEY = "baton.chat.session";

/** Show the chat page in `viewEl`, on session `id` or else the last one; returns {stop()}. */
export function mountChat(viewEl, id) {
  let sid = id || null;
  if (!sid) {
    try {
      sid = sessionStorage.getItem(CHAT_SESSION_KEY) || null;
    } catch {
      sid = null;
    }
  }
  const link = h("span", { testid: "chat-session-link" });
  const showLink = (s) => fill(link, s ? sessionLink(s, "open the session page") : "");
  const chat = chatBox({
    sessionId: sid,
    onSession(s) {
      try {
        if (s) sessionStorage.setItem(CHAT_SESSION_KEY, s);
        else sessionStorage.removeItem(CHAT_SESSION_KEY);
      } catch {
        /* storage disabled */
      }
      showLink(s);
    },
  });
  showLink(sid);
  fill(
    viewEl,
    h(
      "section",
      { testid: "chat-view" },
      h("div", { class: "title-row" }, h("h2", {}, "Talk to the team"), link),
      h("p", { class: "muted" }, "Messages go to the agent holding the baton; the reply streams in as it is written."),
      h("div", { class: "panel" }, chat.el),
    ),
  );
  return chat;
}
