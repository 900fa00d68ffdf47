// The Baton dashboard's entry point: the header (token form, who is signed in, the banner
// for 401 and 403 answers) and the hash router that mounts one view at a time. Plain ES
// modules, no build step; each view is a module in views/ whose mount function fills the
// <main> element and returns {stop()}.
//   #/               views/sessions.js   sessions with their live status
//   #/sessions/<id>  views/session.js    hand-off graph, timeline, state with causality,
//                                        transcript, chat
//   #/approvals      views/approvals.js  what waits for a person's sign-off
//   #/tickets        views/tickets.js    the human queue
//   #/chat[/<id>]    views/chat.js       talk to the team, the reply streaming in

import { ApiError, getToken, onAuth, setToken } from "./api.js";
import { fill, h } from "./dom.js";
import { forgetTeam, loadMe } from "./user.js";
import { mountApprovals } from "./views/approvals.js";
import { mountChat } from "./views/chat.js";
import { mountSession } from "./views/session.js";
import { mountSessions } from "./views/sessions.js";
import { mountTickets } from "./views/tickets.js";

const viewEl = document.getElementById("view");
let current = null; // {stop()} of the view on screen

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

/** Ask who is signed in and show it next to the token form. */
async function showMe() {
  const who = document.getElementById("whoami");
  try {
    const me = await loadMe();
    const roles = (me.roles || []).join(", ");
    fill(who, me.auth ? `${me.name} (${roles})` : `${me.name}: open mode (${roles})`);
    who.dataset.user = me.name;
  } catch (err) {
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
    forgetTeam();
    await showMe();
    route();
  });
  document.getElementById("token-clear").addEventListener("click", async () => {
    input.value = "";
    setToken("");
    await showMe();
    route();
  });
}

// ------------------------------------------------------------------------------- router

// [pattern of location.hash, the nav link to highlight, mount the view from the match]
const ROUTES = [
  [/^#?\/?$/, "sessions", () => mountSessions(viewEl)],
  [/^#\/sessions\/(.+)$/, "sessions", (m) => mountSession(viewEl, decodeURIComponent(m[1]))],
  [/^#\/approvals\/?$/, "approvals", () => mountApprovals(viewEl)],
  [/^#\/tickets\/?$/, "tickets", () => mountTickets(viewEl)],
  [/^#\/chat(?:\/(.+))?$/, "chat", (m) => mountChat(viewEl, m[1] ? decodeURIComponent(m[1]) : null)],
];

/** Stop the view on screen and mount the one location.hash names. */
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
showMe().then(route);
