// The chat box of the chat page and the session page: sends a message with POST /runs/stream
// and shows the reply, the hand-offs and tool calls as they stream in.

import { ApiError, readEvents } from "./api.js";
import { fill, h } from "./dom.js";
import { errorBox, runSummaryEl } from "./widgets.js";

/**
 * A chat box: sends messages with POST /runs/stream and shows the reply as it streams in.
 * Keeps the session id for follow-ups (`fixed`: always that session).
 */
export function chatBox({ sessionId = null, fixed = false, onResult = null, onSession = null } = {}) {
  let sid = sessionId;
  let abort = null;
  const log = h("div", { class: "chat-log", testid: "chat-log" });
  const input = h("textarea", {
    testid: "chat-input",
    rows: 2,
    placeholder: "Write to the team… (Enter sends, Shift+Enter: new line)",
    "aria-label": "message",
  });
  const send = h("button", { type: "submit", testid: "chat-send" }, "Send");
  const sessionEl = h("span", { class: "mono", testid: "chat-session" }, sid || "(new session)");
  const newBtn = fixed
    ? null
    : h(
        "button",
        {
          type: "button",
          class: "secondary",
          testid: "chat-new",
          onclick: () => {
            sid = null;
            fill(sessionEl, "(new session)");
            log.replaceChildren();
            if (onSession) onSession(null);
          },
        },
        "New session",
      );
  const form = h(
    "form",
    { class: "chat-form", testid: "chat-form" },
    input,
    h("div", { class: "chat-actions" }, send, newBtn, h("span", { class: "muted" }, "session: ", sessionEl)),
  );
  input.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      form.requestSubmit();
    }
  });
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const message = input.value.trim();
    if (!message || abort) return;
    input.value = "";
    log.appendChild(h("div", { class: "bubble bubble-user", testid: "chat-user" }, message));
    const events = h("div", { class: "chat-events", testid: "chat-events" });
    const status = h("div", { class: "chat-status", testid: "chat-status" }, h("span", { class: "spinner" }), " thinking…");
    log.appendChild(events);
    let reply = null;
    let deltas = 0;
    const replies = [];
    const replyFor = (agent) => {
      if (reply && reply.dataset.agent === (agent || "")) return reply;
      const text = h("span", { class: "reply-text" });
      reply = h(
        "div",
        { class: "bubble bubble-agent", testid: "chat-reply", dataset: { agent: agent || "", deltas: 0 } },
        h("div", { class: "bubble-agent-name" }, agent || "team"),
        text,
      );
      reply.textEl = text;
      replies.push(reply);
      log.insertBefore(reply, status.parentNode === log ? status : null);
      return reply;
    };
    log.appendChild(status);
    log.scrollTop = log.scrollHeight;
    const chip = (text, cls = "") => {
      events.appendChild(h("span", { class: `chip ${cls}`, testid: "chat-event" }, text));
    };
    abort = new AbortController();
    send.disabled = true;
    try {
      await readEvents("/runs/stream", {
        method: "POST",
        body: sid ? { message, session_id: sid } : { message },
        signal: abort.signal,
        onMessage(name, data) {
          if (name === "run_started" && data.session_id && !sid) {
            sid = data.session_id;
            fill(sessionEl, sid);
            if (onSession) onSession(sid);
          } else if (name === "text_delta") {
            const r = replyFor(data.agent);
            r.textEl.appendChild(document.createTextNode(data.text));
            deltas += 1;
            r.dataset.deltas = String(Number(r.dataset.deltas) + 1);
            log.dataset.deltas = String(deltas);
          } else if (name === "handoff") {
            chip(`${data.payload.source} → ${data.payload.target}: ${data.payload.reason}`, "chip-handoff");
          } else if (name === "tool_called") {
            chip(`${data.tool} ${data.ok ? "✓" : "✗"}`, data.ok ? "" : "chip-bad");
          } else if (name === "guard_tripped") {
            chip(`guard ${data.guard}`, "chip-bad");
          } else if (name === "guardrail_tripped") {
            chip(`guardrail ${data.guardrail}`, "chip-bad");
          } else if (name === "approval_requested") {
            chip(`needs approval: ${data.card ? data.card.tool || data.card.target : ""}`, "chip-warn");
          } else if (name === "escalated") {
            chip(`escalated to ${data.to}`, "chip-warn");
          } else if (name === "result") {
            sid = data.session_id || sid;
            fill(sessionEl, sid || "(new session)");
            if (onSession) onSession(sid);
            if (!deltas && data.output) {
              replyFor(data.path && data.path.length ? data.path[data.path.length - 1] : null).textEl.textContent = data.output;
            }
            fill(status, runSummaryEl(data, "chat-result"));
            if (onResult) onResult(data);
          } else if (name === "error") {
            fill(status, errorBox(new ApiError(data.status || 500, data.detail || "the run failed", "/runs/stream")));
          }
          log.scrollTop = log.scrollHeight;
        },
      });
      if (status.querySelector(".spinner")) fill(status, h("span", { class: "muted" }, "the stream ended without a result"));
    } catch (e) {
      if (!(e && e.name === "AbortError")) fill(status, errorBox(e));
    } finally {
      abort = null;
      send.disabled = false;
      input.focus();
    }
  });
  return {
    el: h("div", { class: "chat", testid: "chat" }, log, form),
    stop() {
      if (abort) abort.abort();
    },
  };
}
