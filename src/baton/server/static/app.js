// The Baton dashboard: one page, hash routes, plain ES modules (no build step).
//   #/                 sessions with their live status
//   #/sessions/<id>    hand-off graph, timeline, state with causality, transcript, chat
//   #/approvals        what waits for a person's sign-off
//   #/tickets          the human queue
//   #/chat[/<id>]      talk to the team, the reply streaming in

import { ApiError, get, getToken, onAuth, post, readEvents, setToken } from "./api.js";
import { badge, fill, fmtAgo, fmtMs, fmtTime, fmtValue, h, sessionLink } from "./dom.js";
import { graphSvg } from "./graph.js";

const POLL_MS = 2000;
const CHAT_SESSION_KEY = "baton.chat.session";

const viewEl = document.getElementById("view");
let current = null; // {stop()} of the view on screen
let me = null; // GET /me
let teamInfo = null; // GET /team

// ------------------------------------------------------------------------------- helpers

/** Run `fn` now and then every `ms` until stopped; `now()` runs it again at once. */
function poller(fn, ms = POLL_MS) {
  let stopped = false;
  let timer = null;
  let running = false;
  let again = false;
  const tick = async () => {
    if (stopped) return;
    running = true;
    try {
      await fn();
    } catch (err) {
      console.error(err);
    } finally {
      running = false;
    }
    if (stopped) return;
    if (again) {
      again = false;
      tick();
    } else {
      timer = setTimeout(tick, ms);
    }
  };
  tick();
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
    now() {
      if (stopped) return;
      if (running) {
        again = true;
        return;
      }
      clearTimeout(timer);
      tick();
    },
  };
}

function errorBox(err, testid = "error") {
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

/**
 * Keep `container`'s children in step with `items`: an item whose signature is unchanged
 * keeps its element (and whatever is typed into it); others are rendered again.
 */
function syncList(container, items, key, render, empty) {
  const old = new Map();
  for (const el of container.children) {
    if (el.dataset.key !== undefined) old.set(el.dataset.key, el);
  }
  const next = [];
  for (const item of items) {
    const k = String(key(item));
    const sig = JSON.stringify(item);
    let el = old.get(k);
    if (!el || el.dataset.sig !== sig) {
      el = render(item);
      el.dataset.key = k;
      el.dataset.sig = sig;
    }
    next.push(el);
  }
  if (!next.length && empty) next.push(h("p", { class: "empty", testid: "empty" }, empty));
  container.replaceChildren(...next);
}

function hasRole(role) {
  if (!me) return true; // unknown yet: let the server decide
  const roles = me.roles || [];
  if (role === "approver") return roles.some((r) => r.startsWith("approver:"));
  return roles.includes(role) || (role === "viewer" && roles.length > 0);
}

function approverRoles() {
  return ((me && me.roles) || []).filter((r) => r.startsWith("approver:")).map((r) => r.slice(9));
}

async function loadTeam() {
  if (teamInfo) return teamInfo;
  try {
    teamInfo = await get("/team");
  } catch {
    teamInfo = null;
  }
  return teamInfo;
}

function kv(obj, testid) {
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

function clip(text, n) {
  const t = String(text ?? "");
  return t.length > n ? `${t.slice(0, n - 1)}…` : t;
}

function timeEl(ts) {
  return h("time", { title: fmtTime(ts), dataset: { ts } }, fmtAgo(ts));
}

function pathChips(path) {
  const out = [];
  (path || []).forEach((agent, i) => {
    if (i) out.push(h("span", { class: "arrow" }, " → "));
    out.push(h("span", { class: `chip${agent === "human" ? " chip-human" : ""}` }, agent));
  });
  return h("span", { class: "path", testid: "path" }, out);
}

/** What a run summary says, as a line: status, output or error, where it waits. */
function runSummaryEl(summary, testid = "run-summary") {
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

// ------------------------------------------------------------------------------- header

const banner = document.getElementById("auth-banner");
let bannerStatus = 0;

function showAuthError(err) {
  if (!err) {
    if (bannerStatus === 401) {
      banner.hidden = true;
      bannerStatus = 0;
    }
    return;
  }
  bannerStatus = err.status;
  const text =
    err.status === 401
      ? `401 Unauthorized: ${err.detail}. Enter a valid token above.`
      : `403 Forbidden: ${err.detail}. Your token lacks the role for this.`;
  fill(
    banner,
    h("span", { testid: "auth-banner-text" }, text),
    h(
      "button",
      {
        type: "button",
        class: "link",
        onclick: () => {
          banner.hidden = true;
          bannerStatus = 0;
        },
      },
      "dismiss",
    ),
  );
  banner.dataset.status = String(err.status);
  banner.hidden = false;
}

async function loadMe() {
  const who = document.getElementById("whoami");
  try {
    me = await get("/me");
    const roles = (me.roles || []).join(", ");
    fill(who, me.auth ? `${me.name} (${roles})` : `${me.name}: open mode (${roles})`);
    who.dataset.user = me.name;
  } catch (err) {
    me = null;
    fill(who, err instanceof ApiError && err.status === 401 ? "not signed in" : "unknown user");
    who.dataset.user = "";
  }
}

function initHeader() {
  onAuth(showAuthError);
  const input = document.getElementById("token-input");
  const form = document.getElementById("token-form");
  input.value = getToken();
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    setToken(input.value.trim());
    banner.hidden = true;
    bannerStatus = 0;
    teamInfo = null;
    await loadMe();
    route();
  });
  document.getElementById("token-clear").addEventListener("click", async () => {
    input.value = "";
    setToken("");
    await loadMe();
    route();
  });
}

// ------------------------------------------------------------------------------- sessions

function sessionsView() {
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

// ------------------------------------------------------------------------------- session

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
          { class: "turn", testid: "timeline-turn", dataset: { agent: turn.agent } },
          h("td", { class: "mono muted" }, `+${fmtMs((turn.start - run.start) * 1000)}`),
          h("td", { colspan: 3 }, h("strong", {}, turn.agent), turn.reason ? ` took the baton: ${turn.reason}` : " took the baton"),
          h("td", { class: "num" }, `${turn.input_tokens} / ${turn.output_tokens}`),
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

function sessionView(id) {
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

// ------------------------------------------------------------------------------- chat

/**
 * A chat box: sends messages with POST /runs/stream and shows the reply as it streams in.
 * Keeps the session id for follow-ups (`fixed`: always that session).
 */
function chatBox({ sessionId = null, fixed = false, onResult = null, onSession = null } = {}) {
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

function chatView(id) {
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

// ------------------------------------------------------------------------------- approvals

const decisions = []; // what this page decided, newest first (kept while the page is open)

function approvalsView() {
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
    if (me && !hasRole("approver")) {
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

// ------------------------------------------------------------------------------- tickets

const ticketLog = [];

function ticketsView() {
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

// ------------------------------------------------------------------------------- router

const ROUTES = [
  [/^#?\/?$/, "sessions", () => sessionsView()],
  [/^#\/sessions\/(.+)$/, "sessions", (m) => sessionView(decodeURIComponent(m[1]))],
  [/^#\/approvals\/?$/, "approvals", () => approvalsView()],
  [/^#\/tickets\/?$/, "tickets", () => ticketsView()],
  [/^#\/chat(?:\/(.+))?$/, "chat", (m) => chatView(m[1] ? decodeURIComponent(m[1]) : null)],
];

function route() {
  if (current) current.stop();
  current = null;
  const hash = location.hash || "#/";
  for (const [re, nav, make] of ROUTES) {
    const m = re.exec(hash);
    if (!m) continue;
    for (const a of document.querySelectorAll("nav a")) {
      a.classList.toggle("active", a.dataset.nav === nav);
    }
    current = make(m);
    return;
  }
  fill(viewEl, h("p", { testid: "not-found" }, "No such page. ", h("a", { href: "#/" }, "Sessions")));
}

initHeader();
window.addEventListener("hashchange", route);
loadMe().then(route);
