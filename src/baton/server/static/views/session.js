// The session page (#/sessions/<id>): who holds the baton and what it waits on, the hand-off
// graph, the live events, the timeline of runs, the state slots and what set them, the
// transcript and a chat box for this session.

import { get, readEvents } from "../api.js";
import { chatBox } from "../chatbox.js";
import { badge, clip, fill, fmtMs, fmtTime, fmtValue, h } from "../dom.js";
import { graphSvg } from "../graph.js";
import { poller } from "../poll.js";
import { errorBox, pathChips, timeEl } from "../widgets.js";

function stepTokens(step) {
  if (step.input_tokens === null && step.output_tokens === null) return "";
  if (step.input_tokens === undefined && step.output_tokens === undefined) return "";
  return `${step.input_tokens || 0} / ${step.output_tokens || 0}`;
}

function timelineEl(runs) {
  if (!runs.length) return h("p", { class: "muted", testid: "timeline" }, "No runs yet.");
  const out = h("div", { testid: "timeline" });
  for (const run of runs) {
    const span = Math.max(run.end - run.start, 0.001);
    const rows = [];
    const bar = (step) => {
      const left = Math.min(100, Math.max(0, ((step.start - run.start) / span) * 100));
      const width = Math.max(0.6, Math.min(100 - left, ((step.end - step.start) / span) * 100));
      return h(
        "div",
        { class: "bar-track" },
        h("div", { class: `bar bar-${step.kind}${step.failed ? " bar-failed" : ""}`, style: `left:${left}%;width:${width}%` }),
      );
    };
    const addSteps = (steps, depth) => {
      for (const step of steps) {
        rows.push(
          h(
            "tr",
            {
              testid: "timeline-step",
              class: `step step-${step.kind}${step.failed ? " step-failed" : ""}`,
              dataset: { kind: step.kind, agent: step.agent || "", failed: step.failed ? "true" : "false" },
            },
            h("td", { class: "mono muted" }, `+${fmtMs((step.start - run.start) * 1000)}`),
            h("td", {}, step.agent || ""),
            h("td", {}, h("span", { class: `kind kind-${step.kind}` }, step.kind.replace("_", " "))),
            h("td", { class: "detail", style: depth ? `padding-left:${depth * 18 + 6}px` : null }, step.detail),
            h("td", { class: "num", testid: "step-tokens" }, stepTokens(step)),
            h("td", { class: "num", testid: "step-latency" }, step.latency_ms !== null && step.latency_ms !== undefined ? fmtMs(step.latency_ms) : ""),
            h("td", { class: "bar-cell" }, bar(step)),
          ),
        );
        for (const sub of step.subruns || []) {
          rows.push(h("tr", { class: "subrun" }, h("td", { colspan: 7, class: "muted" }, `↳ sub-run ${sub.run_id}: ${clip(sub.message || "", 80)} (${sub.status})`)));
          addSteps(sub.steps || [], depth + 1);
          for (const t of sub.turns || []) addSteps(t.steps || [], depth + 1);
        }
      }
    };
    addSteps(run.steps || [], 0);
    for (const turn of run.turns || []) {
      rows.push(
        h(
          "tr",
          { class: "turn", testid: "timeline-turn", dataset: { agent: turn.agent, conductor: turn.conductor ? "yes" : "no" } },
          h("td", { class: "mono muted" }, `+${fmtMs((turn.start - run.start) * 1000)}`),
          h(
            "td",
            { colspan: 3 },
            h("strong", {}, turn.agent),
            // a conductor decides in code: it has no model, so it shows no tokens either
            turn.conductor ? " " : "",
            turn.conductor ? h("span", { class: "badge", testid: "conductor-badge" }, "conductor") : "",
            turn.reason ? ` took the baton: ${turn.reason}` : " took the baton",
          ),
          h("td", { class: "num" }, turn.conductor ? "—" : `${turn.input_tokens} / ${turn.output_tokens}`),
          h("td", { class: "num" }, fmtMs(turn.latency_ms)),
          h("td", { class: "bar-cell" }, bar({ ...turn, kind: "turn" })),
        ),
      );
      addSteps(turn.steps || [], 0);
    }
    out.appendChild(
      h(
        "div",
        { class: "run", testid: "timeline-run", dataset: { runId: run.run_id, status: run.status } },
        h(
          "div",
          { class: "run-head" },
          h("strong", {}, `Run ${run.index}`),
          badge(run.status, "run-status"),
          run.message ? h("span", { class: "quote" }, `“${clip(run.message, 120)}”`) : null,
          h("span", { class: "muted" }, `${run.input_tokens} in / ${run.output_tokens} out tokens · ${fmtMs(run.latency_ms)}`),
          pathChips(run.path),
        ),
        run.error ? h("div", { class: "error-text" }, run.error) : null,
        h(
          "table",
          { class: "timeline" },
          h("thead", {}, h("tr", {}, ["at", "agent", "step", "detail", "tokens in / out", "latency", "timeline"].map((t) => h("th", {}, t)))),
          h("tbody", {}, rows),
        ),
      ),
    );
  }
  return out;
}

function causeText(w) {
  const c = w.cause;
  if (!c) return w.tool ? `tool ${w.tool}` : w.source;
  if (c.type === "tool_called") {
    const args = Object.entries(c.arguments || {})
      .map(([k, v]) => `${k}=${fmtValue(v)}`)
      .join(", ");
    return `tool call ${c.tool}(${args})${c.ok === false ? " (failed)" : ""}`;
  }
  if (c.type === "handoff") return `hand-off ${c.source} → ${c.target}: ${c.reason}`;
  if (c.type === "missing") return `event ${c.event_id} (not stored)`;
  return `${c.type} ${c.event_id}`;
}

function slotsEl(slots) {
  if (!slots || !slots.length) return h("p", { class: "muted", testid: "state-slots" }, "No state slots yet.");
  return h(
    "table",
    { class: "list", testid: "state-slots" },
    h("thead", {}, h("tr", {}, ["Slot", "Value", "Set by", "Because of", "When"].map((t) => h("th", {}, t)))),
    h(
      "tbody",
      {},
      slots.map((slot) => {
        const last = slot.writes && slot.writes.length ? slot.writes[slot.writes.length - 1] : null;
        return h(
          "tr",
          { testid: "state-slot", dataset: { slot: slot.slot } },
          h("td", { class: "mono" }, slot.slot),
          h("td", { class: "mono", testid: "slot-value" }, slot.value === null ? h("span", { class: "muted" }, "(not in the state)") : fmtValue(slot.value)),
          h(
            "td",
            { testid: "slot-setter" },
            last ? `${last.agent || "?"} (${last.source}${last.tool ? `: ${last.tool}` : ""}), run ${last.run} hop ${last.hop}` : "",
          ),
          h(
            "td",
            { testid: "slot-cause" },
            last ? causeText(last) : "",
            slot.writes && slot.writes.length > 1
              ? h(
                  "details",
                  {},
                  h("summary", {}, `${slot.writes.length} writes`),
                  h(
                    "ol",
                    {},
                    slot.writes.map((w) =>
                      h("li", {}, `${fmtValue(w.value)} by ${w.agent || "?"} (${w.source}), run ${w.run} hop ${w.hop}: ${causeText(w)}`),
                    ),
                  ),
                )
              : null,
          ),
          h("td", {}, last ? timeEl(last.ts) : ""),
        );
      }),
    ),
  );
}

function transcriptEl(messages) {
  if (!messages.length) return h("p", { class: "muted", testid: "transcript" }, "No messages yet.");
  return h(
    "ol",
    { class: "transcript", testid: "transcript" },
    messages.map((m) => {
      const human = m.role === "assistant" && m.agent === "human";
      const who =
        m.role === "user" ? "user" : human ? "person (human desk)" : m.role === "tool" ? `tool ${m.name || ""}` : m.agent || m.role;
      const body = [];
      if (m.content) body.push(h("div", { class: "content", testid: "message-content" }, m.role === "tool" ? clip(m.content, 400) : m.content));
      for (const call of m.tool_calls || []) {
        body.push(h("div", { class: "call mono" }, `→ ${call.name}(${clip(call.arguments, 200)})`));
      }
      return h(
        "li",
        {
          class: `msg msg-${m.role}${human ? " msg-human" : ""}`,
          testid: "message",
          dataset: { role: m.role, agent: m.agent || "" },
        },
        h("div", { class: "msg-head" }, h("strong", {}, who), " ", timeEl(m.ts)),
        body,
      );
    }),
  );
}

function pendingEl(detail) {
  const out = [];
  if (detail.approval) {
    const a = detail.approval;
    out.push(
      h(
        "div",
        { class: "pending", testid: "session-approval" },
        "Waits for approval: ",
        h("strong", {}, `${a.agent} → ${a.kind === "tool" ? `tool ${a.tool}` : `hand-off to ${a.target}`}`),
        a.reason ? ` (${a.reason}) ` : " ",
        h("a", { href: "#/approvals" }, "decide in Approvals"),
      ),
    );
  }
  if (detail.interrupt) {
    out.push(h("div", { class: "pending" }, `Waits for an answer to ${detail.interrupt.name}: ${fmtValue(detail.interrupt.value)}`));
  }
  for (const t of detail.tickets || []) {
    out.push(
      h(
        "div",
        { class: "pending", testid: "session-ticket", dataset: { ticketId: t.id, status: t.status } },
        `Ticket #${t.id} `,
        badge(t.status, "ticket-status"),
        t.claimed_by ? ` claimed by ${t.claimed_by}` : "",
        t.answer ? ` · answered: “${clip(t.answer, 120)}”` : "",
        " ",
        h("a", { href: "#/tickets" }, "human queue"),
      ),
    );
  }
  if (detail.incoming) {
    const p = detail.incoming;
    out.push(
      h("div", { class: "muted", testid: "session-incoming" }, `${p.target} holds the baton since a hand-off from ${p.source}: ${p.reason}`),
    );
  }
  return out;
}

/** Show session `id` in `viewEl`; returns {stop()}. */
export function mountSession(viewEl, id) {
  const enc = encodeURIComponent(id);
  const head = h("div", { class: "title-row" });
  const err = h("div", {});
  const pending = h("div", { testid: "session-pending" });
  const graph = h("div", { class: "graph-wrap", testid: "graph-container" });
  const timeline = h("div", {});
  const slots = h("div", {});
  const transcript = h("div", {});
  const live = h("ol", { class: "live-events", testid: "live-events" });
  const liveState = h("span", { class: "live-dot", testid: "live-indicator", dataset: { live: "false" } }, "idle");
  const chat = chatBox({ sessionId: id, fixed: true, onResult: () => refresh.now() });
  const root = h(
    "section",
    { testid: "session-view", dataset: { sessionId: id } },
    head,
    err,
    pending,
    h("div", { class: "grid2" },
      h("div", { class: "panel" }, h("h3", {}, "Hand-off graph"), graph),
      h("div", { class: "panel" }, h("h3", {}, "Live events ", liveState), live),
    ),
    h("div", { class: "panel" }, h("h3", {}, "Timeline"), timeline),
    h("div", { class: "panel" }, h("h3", {}, "State slots and where they came from"), slots),
    h("div", { class: "grid2" },
      h("div", { class: "panel" }, h("h3", {}, "Transcript"), transcript),
      h("div", { class: "panel" }, h("h3", {}, "Talk to the team in this session"), chat.el),
    ),
  );
  fill(viewEl, root);
  fill(head, h("h2", {}, "Session ", h("span", { class: "mono", testid: "session-id" }, id)));

  let lastDetail = "";
  let lastTrace = "";
  const refresh = poller(async () => {
    let detail;
    let trace;
    try {
      [detail, trace] = await Promise.all([get(`/sessions/${enc}`), get(`/sessions/${enc}/trace`)]);
      fill(err);
    } catch (e) {
      fill(err, errorBox(e));
      return;
    }
    const d = JSON.stringify(detail);
    if (d !== lastDetail) {
      lastDetail = d;
      const s = detail.session;
      fill(
        head,
        h("h2", {}, "Session ", h("span", { class: "mono", testid: "session-id" }, id)),
        badge(s.status, "session-status"),
        h("span", {}, "holder: ", h("strong", { testid: "session-holder" }, s.holder || "none")),
        s.user_id ? h("span", { class: "muted" }, `user ${s.user_id}`) : null,
        h("span", { class: "muted" }, "updated ", timeEl(s.updated_at)),
      );
      fill(pending, pendingEl(detail));
      fill(slots, slotsEl(detail.slots));
      fill(transcript, transcriptEl(detail.messages || []));
    }
    const t = JSON.stringify(trace);
    if (t !== lastTrace) {
      lastTrace = t;
      fill(graph, graphSvg(trace.runs || []));
      fill(timeline, timelineEl(trace.runs || []));
    }
  }, 3000);

  // live events: follow the session's event stream, reconnecting after each quiet end
  const abort = new AbortController();
  let debounce = null;
  const soon = () => {
    clearTimeout(debounce);
    debounce = setTimeout(() => refresh.now(), 250);
  };
  const setLive = (on) => {
    liveState.dataset.live = on ? "true" : "false";
    liveState.textContent = on ? "live" : "idle";
  };
  const describe = (name, e) => {
    switch (name) {
      case "handoff":
        return `${e.payload.source} → ${e.payload.target}: ${e.payload.reason}`;
      case "tool_called":
        return `${e.agent}: ${e.tool} ${e.ok ? "ok" : "failed"} (${fmtMs(e.latency_ms)})`;
      case "model_called":
        return `${e.agent}: model call (${fmtMs(e.latency_ms)})`;
      case "guard_tripped":
        return `guard ${e.guard}: ${e.detail}`;
      case "guardrail_tripped":
        return `guardrail ${e.guardrail} blocked the ${e.stage === "input" ? "message" : "reply"}: ${e.reason}`;
      case "guardrail_rewrote":
        return `guardrail ${e.guardrail} rewrote the reply${e.reason ? `: ${e.reason}` : ""}`;
      case "run_started":
        return `run started: “${clip(e.message, 80)}”`;
      case "run_finished":
        return `run ${e.status}`;
      case "escalated":
        return `escalated to ${e.to}`;
      case "approval_requested":
        return `approval requested: ${e.card && (e.card.tool || e.card.target)}`;
      case "approval_decided":
        return `approval ${e.decision || e.status || "decided"}`;
      default:
        return e.agent ? `${e.agent}` : "";
    }
  };
  (async () => {
    let after = null;
    while (!abort.signal.aborted) {
      try {
        const q = after ? `&after=${encodeURIComponent(after)}` : "";
        await readEvents(`/sessions/${enc}/events?quiet_s=30${q}`, {
          signal: abort.signal,
          onMessage(name, data, eventId) {
            if (name === "end") {
              if (data && data.last_event_id) after = data.last_event_id;
              return;
            }
            if (eventId) after = eventId;
            if (name === "run_started" || name === "run_resumed") setLive(true);
            if (name === "run_finished") setLive(false);
            const item = h(
              "li",
              { testid: "live-event", class: name === "guard_tripped" || name === "guardrail_tripped" ? "guard" : "", dataset: { type: name } },
              h("span", { class: "mono muted" }, fmtTime(data.ts)),
              " ",
              h("span", { class: `kind kind-${name}` }, name),
              " ",
              describe(name, data),
            );
            live.prepend(item);
            while (live.children.length > 40) live.lastChild.remove();
            soon(); // debounced: a replay of many stored events refreshes once
          },
        });
        await new Promise((r) => setTimeout(r, 500)); // ended quietly: watch again
      } catch (e) {
        if (abort.signal.aborted) return;
        await new Promise((r) => setTimeout(r, 3000));
      }
    }
  })();

  return {
    stop() {
      refresh.stop();
      abort.abort();
      clearTimeout(debounce);
      chat.stop();
    },
  };
}
