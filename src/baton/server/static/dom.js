// DOM helpers (elements, formatting, keyed lists): every piece of data reaches the page as
// a text node or an attribute value, never as HTML.

const SVG_NS = "http://www.w3.org/2000/svg";

function apply(el, attrs) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "testid") el.setAttribute("data-testid", String(value));
    else if (key === "class") el.setAttribute("class", String(value));
    else if (key === "dataset") {
      for (const [k, v] of Object.entries(value)) {
        if (v !== null && v !== undefined) el.dataset[k] = String(v);
      }
    } else if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "value") el.value = value;
    else if (key === "checked" || key === "disabled" || key === "selected") el[key] = Boolean(value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(document.createTextNode(String(child)));
  }
}

/** An HTML element: h("div", {class: "card", testid: "x"}, "text", child, [more]). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  apply(el, attrs);
  append(el, children);
  return el;
}

/** An SVG element, same call shape as `h`. */
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  apply(el, attrs);
  append(el, children);
  return el;
}

/** Replace every child of `el` with `children`. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** `12:03:04`, or the date too when not today. */
export function fmtTime(ts) {
  if (ts === null || ts === undefined) return "";
  const d = new Date(ts * 1000);
  const today = new Date();
  const time = d.toLocaleTimeString([], { hour12: false });
  if (d.toDateString() === today.toDateString()) return time;
  return `${d.toLocaleDateString()} ${time}`;
}

/** `5 s ago`, `3 min ago`, ... */
export function fmtAgo(ts) {
  if (ts === null || ts === undefined) return "";
  const s = Math.max(0, Date.now() / 1000 - ts);
  if (s < 60) return `${Math.round(s)} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

/** `850 ms`, `1.25 s`. */
export function fmtMs(ms) {
  if (ms === null || ms === undefined) return "";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(2)} s`;
}

/** A JSON value as short display text (strings unquoted). */
export function fmtValue(value) {
  if (typeof value === "string") return value;
  try {
    return JSON.stringify(value);
  } catch {
    return String(value);
  }
}

/** A status badge: <span class="badge status-completed">completed</span>. */
export function badge(status, testid = "status-badge") {
  const safe = String(status || "unknown").replace(/[^a-z_]/gi, "_");
  return h("span", { class: `badge status-${safe}`, testid, dataset: { status } }, status || "unknown");
}

/** A link to a session page. */
export function sessionLink(id, text) {
  return h("a", { href: `#/sessions/${encodeURIComponent(id)}`, class: "mono" }, text || id);
}

/**
 * Keep `container`'s children in step with `items`: an item whose signature is unchanged
 * keeps its element (and whatever is typed into it); others are rendered again.
 */
export function syncList(container, items, key, render, empty) {
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

/** `text` cut to `n` characters, an ellipsis marking the cut. */
export function clip(text, n) {
  const t = String(text ?? "");
  return t.length > n ? `${t.slice(0, n - 1)}…` : t;
}
