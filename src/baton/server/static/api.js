// The API client: bearer token from localStorage, JSON errors as ApiError, server-sent
// events read with fetch (EventSource can send neither a POST nor an Authorization header).
// In the open mode (no token file) the server renders this start's local token into the
// page; every request sends it back, which a page of another site cannot do.

const TOKEN_KEY = "baton.token";
const LOCAL_TOKEN_HEADER = "X-Baton-Local-Token";

function localToken() {
  const meta = document.querySelector('meta[name="baton-local-token"]');
  return (meta && meta.content) || "";
}
const authListeners = new Set();

export function getToken() {
  try {
    return localStorage.getItem(TOKEN_KEY) || "";
  } catch {
    return "";
  }
}

export function setToken(token) {
  try {
    if (token) localStorage.setItem(TOKEN_KEY, token);
    else localStorage.removeItem(TOKEN_KEY);
  } catch {
    /* storage disabled: the token lives for this page only */
  }
  memoryToken = token;
}

let memoryToken = null;

function token() {
  return memoryToken !== null ? memoryToken : getToken();
}

/** Called with an ApiError on every 401 or 403, and with null after a successful request. */
export function onAuth(listener) {
  authListeners.add(listener);
  return () => authListeners.delete(listener);
}

function notifyAuth(error) {
  for (const listener of authListeners) listener(error);
}

export class ApiError extends Error {
  constructor(status, detail, path) {
    super(`${status}: ${detail}`);
    this.status = status;
    this.detail = detail;
    this.path = path;
  }
}

function headers(json) {
  const out = {};
  if (json) out["Content-Type"] = "application/json";
  const t = token();
  if (t) out.Authorization = `Bearer ${t}`;
  const local = localToken();
  if (local) out[LOCAL_TOKEN_HEADER] = local;
  return out;
}

async function errorOf(res, path) {
  let detail = res.statusText || "request failed";
  try {
    const body = await res.json();
    if (body && typeof body.detail === "string") detail = body.detail;
    else if (body && body.detail !== undefined) detail = JSON.stringify(body.detail);
  } catch {
    /* not JSON */
  }
  const error = new ApiError(res.status, detail, path);
  if (res.status === 401 || res.status === 403) notifyAuth(error);
  return error;
}

/** Call the API: resolves with the JSON body, rejects with ApiError. */
export async function api(method, path, body, { signal } = {}) {
  let res;
  try {
    res = await fetch(path, {
      method,
      headers: headers(body !== undefined),
      body: body !== undefined ? JSON.stringify(body) : undefined,
      signal,
    });
  } catch (err) {
    if (err && err.name === "AbortError") throw err;
    throw new ApiError(0, `the server cannot be reached (${err && err.message})`, path);
  }
  if (!res.ok) throw await errorOf(res, path);
  if (res.status !== 401 && res.status !== 403) notifyAuth(null);
  const text = await res.text();
  return text ? JSON.parse(text) : null;
}

export const get = (path, opts) => api("GET", path, undefined, opts);
export const post = (path, body, opts) => api("POST", path, body === undefined ? {} : body, opts);

/**
 * Read a server-sent event stream: `onMessage(name, data, id)` for each message (keep-alive
 * comments skipped). Resolves when the stream ends; rejects with ApiError for an error answer.
 */
export async function readEvents(path, { method = "GET", body, signal, onMessage }) {
  let res;
  try {
    res = await fetch(path, {
      method,
      headers: { ...headers(body !== undefined), Accept: "text/event-stream" },
      body: body !== undefined ? JSON.stringify(body) : undefined,
      signal,
    });
  } catch (err) {
    if (err && err.name === "AbortError") throw err;
    throw new ApiError(0, `the server cannot be reached (${err && err.message})`, path);
  }
  if (!res.ok) throw await errorOf(res, path);
  notifyAuth(null);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value.replace(/\r\n?/g, "\n");
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      let name = "message";
      let data = "";
      let id = null;
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? "" : line.slice(colon + 1);
        if (val.startsWith(" ")) val = val.slice(1);
        if (field === "event") name = val;
        else if (field === "data") data += (data ? "\n" : "") + val;
        else if (field === "id") id = val;
      }
      if (!data) continue;
      let parsed;
      try {
        parsed = JSON.parse(data);
      } catch {
        parsed = data;
      }
      onMessage(name, parsed, id);
    }
  }
}
