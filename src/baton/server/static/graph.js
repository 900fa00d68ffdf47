// The hand-off graph of a session, drawn as inline SVG from its trace tree
// (GET /sessions/{id}/trace): agents as nodes, left to right in the order they first held
// the baton; hand-offs as arrows labelled with their reasons; refused hand-offs dashed;
// escalations to the fallback; guard trips in red with the guard's name.

import { s } from "./dom.js";

function* allSteps(run) {
  for (const step of run.steps || []) {
    yield [null, step];
    for (const sub of step.subruns || []) yield* allSteps(sub);
  }
  for (const turn of run.turns || []) {
    yield [turn, null];
    for (const step of turn.steps || []) {
      yield [turn, step];
      for (const sub of step.subruns || []) yield* allSteps(sub);
    }
  }
}

/** The reason of a hand-off step: its detail is `source -> target: reason [priority]`. */
export function handoffReason(step) {
  const detail = step.detail || "";
  const prefix = `${step.agent} -> ${step.target}: `;
  if (detail.startsWith(prefix)) return detail.slice(prefix.length);
  const at = detail.indexOf(": ");
  return at >= 0 ? detail.slice(at + 2) : detail;
}

/** Nodes, edges and guard trips of a trace's runs. */
export function graphModel(runs) {
  const nodes = [];
  const byName = new Map();
  const edges = new Map();
  const visit = (name) => {
    if (!name) return null;
    let node = byName.get(name);
    if (!node) {
      node = { name, index: nodes.length, turns: 0, guards: [], human: name === "human" };
      byName.set(name, node);
      nodes.push(node);
    }
    return node;
  };
  const edge = (from, to, kind, reason) => {
    if (!from || !to) return;
    visit(from);
    visit(to);
    const key = `${kind}\u0000${from}\u0000${to}`;
    let e = edges.get(key);
    if (!e) {
      e = { from, to, kind, reasons: [], count: 0 };
      edges.set(key, e);
    }
    e.count += 1;
    if (reason && !e.reasons.includes(reason)) e.reasons.push(reason);
  };
  for (const run of runs || []) {
    let holder = null;
    for (const [turn, step] of allSteps(run)) {
      if (step === null) {
        visit(turn.agent).turns += 1;
        holder = turn.agent;
        continue;
      }
      const agent = step.agent || holder;
      if (step.kind === "handoff") {
        edge(agent, step.target, "handoff", handoffReason(step));
      } else if (step.kind === "refusal") {
        const m = /^-> (\S+): ([\s\S]*)$/.exec(step.detail || "");
        if (m) edge(agent, m[1], "refusal", m[2]);
      } else if (step.kind === "escalation") {
        const m = /^to \S+: ([\s\S]*)$/.exec(step.detail || "");
        // "billing asked for a human: <reason>": the arrow already says who asked
        const reason = (m ? m[1] : step.detail || "").replace(/^\S+ asked for a human: /, "");
        edge(agent, step.target, "escalation", reason);
      } else if (step.kind === "guard") {
        const node = visit(agent || "run");
        const at = (step.detail || "").indexOf(":");
        const guard = at > 0 ? step.detail.slice(0, at) : step.detail;
        node.guards.push({ guard, detail: step.detail });
      } else if (step.kind === "route") {
        visit(step.target);
      }
    }
  }
  return { nodes, edges: [...edges.values()] };
}

const NODE_W = 132;
const NODE_H = 44;
const GAP = 190;
const MARGIN = 24;
const LABEL_CHARS = 30;

function clip(text, n) {
  return text.length > n ? `${text.slice(0, n - 1)}…` : text;
}

/** The graph as an <svg> element (empty state included). */
export function graphSvg(runs) {
  const { nodes, edges } = graphModel(runs);
  if (!nodes.length) {
    return s(
      "svg",
      { class: "graph", testid: "handoff-graph", viewBox: "0 0 320 60", width: 320, height: 60 },
      s("text", { x: 10, y: 34, class: "graph-empty" }, "No agent has held the baton yet."),
    );
  }
  const x = (node) => MARGIN + node.index * (NODE_W + GAP);
  const byName = new Map(nodes.map((n) => [n.name, n]));

  // Geometry first, around a middle line at y = 0: forward arrows bend above it, backward
  // ones below; longer spans and further edges between the same pair bend more.
  const lanes = new Map();
  const shapes = [];
  let top = -NODE_H / 2 - 8;
  let bottom = NODE_H / 2 + 8;
  for (const e of edges) {
    const a = byName.get(e.from);
    const b = byName.get(e.to);
    const forward = a.index < b.index;
    const key = `${Math.min(a.index, b.index)}:${Math.max(a.index, b.index)}:${forward || a === b}`;
    const lane = lanes.get(key) || 0;
    lanes.set(key, lane + 1);
    let d;
    let lx;
    let ly;
    if (a === b) {
      const cx = x(a) + NODE_W / 2;
      const y0 = -NODE_H / 2;
      const lift = 60 + lane * 22;
      d = `M${cx - 20},${y0} C${cx - 44},${y0 - lift} ${cx + 44},${y0 - lift} ${cx + 20},${y0}`;
      lx = cx;
      ly = y0 - lift * 0.75 - 6;
    } else {
      const span = Math.abs(b.index - a.index);
      const x1 = forward ? x(a) + NODE_W : x(a);
      const x2 = forward ? x(b) : x(b) + NODE_W;
      const bend = (span === 1 ? 0 : 40 * span) + lane * 30 + (forward ? 0 : 30);
      const sign = forward ? -1 : 1;
      const y1 = sign * 8;
      d = `M${x1},${y1} Q${(x1 + x2) / 2},${y1 + sign * bend * 2} ${x2},${y1}`;
      lx = (x1 + x2) / 2;
      ly = y1 + sign * bend + (forward ? -7 : 17);
    }
    top = Math.min(top, ly - 16);
    bottom = Math.max(bottom, ly + 8);
    shapes.push({ e, d, lx, ly });
  }
  if (nodes.some((n) => n.guards.length)) bottom = Math.max(bottom, NODE_H / 2 + 24);

  const width = MARGIN * 2 + nodes.length * NODE_W + (nodes.length - 1) * GAP;
  const height = Math.ceil(bottom - top) + 16;
  const svg = s("svg", {
    class: "graph",
    testid: "handoff-graph",
    viewBox: `0 ${Math.floor(top - 8)} ${width} ${height}`,
    width,
    height,
    role: "img",
    "aria-label": "hand-off graph",
  });
  const defs = s("defs");
  for (const kind of ["handoff", "refusal", "escalation"]) {
    defs.appendChild(
      s(
        "marker",
        {
          id: `arrow-${kind}`,
          viewBox: "0 0 10 10",
          refX: 9,
          refY: 5,
          markerWidth: 7,
          markerHeight: 7,
          orient: "auto-start-reverse",
        },
        s("path", { d: "M0,0 L10,5 L0,10 z", class: `arrow-${kind}` }),
      ),
    );
  }
  svg.appendChild(defs);

  for (const { e, d, lx, ly } of shapes) {
    const label = e.reasons.length ? e.reasons.join(" · ") : e.kind;
    const counted = e.count > 1 ? `${label} (×${e.count})` : label;
    const what = { handoff: "hand-off", refusal: "refused hand-off", escalation: "escalation" }[e.kind];
    svg.appendChild(
      s(
        "g",
        {
          class: `edge edge-${e.kind}`,
          testid: "graph-edge",
          dataset: { from: e.from, to: e.to, kind: e.kind, reason: e.reasons.join(" · "), count: e.count },
        },
        s("title", {}, `${what} ${e.from} → ${e.to}: ${counted}`),
        s("path", { d, class: `edge-line edge-${e.kind}-line`, "marker-end": `url(#arrow-${e.kind})` }),
        s(
          "text",
          { x: lx, y: ly, class: "edge-label", "text-anchor": "middle", testid: "graph-edge-label" },
          clip(counted, LABEL_CHARS),
        ),
      ),
    );
  }

  for (const node of nodes) {
    const tripped = node.guards.length > 0;
    const group = s("g", {
      class: `node${tripped ? " node-tripped" : ""}${node.human ? " node-human" : ""}`,
      testid: "graph-node",
      dataset: { agent: node.name, tripped: tripped ? "true" : "false" },
      transform: `translate(${x(node)},${-NODE_H / 2})`,
    });
    group.appendChild(
      s("title", {}, node.name + (tripped ? `\n${node.guards.map((g) => g.detail).join("\n")}` : "")),
    );
    group.appendChild(s("rect", { width: NODE_W, height: NODE_H, rx: 8, ry: 8 }));
    group.appendChild(
      s(
        "text",
        { x: NODE_W / 2, y: NODE_H / 2 + 5, "text-anchor": "middle", class: "node-label" },
        clip(node.name, 18),
      ),
    );
    if (tripped) {
      const names = [...new Set(node.guards.map((g) => g.guard))];
      group.appendChild(
        s(
          "text",
          {
            x: NODE_W / 2,
            y: NODE_H + 16,
            "text-anchor": "middle",
            class: "guard-label",
            testid: "graph-guard",
          },
          `⚠ ${clip(names.join(", "), 28)}`,
        ),
      );
    }
    svg.appendChild(group);
  }
  return svg;
}
