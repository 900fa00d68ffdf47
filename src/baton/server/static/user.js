// Who is signed in (GET /me) and the team (GET /team), shared by the header and the views.

import { get } from "./api.js";

let me = null; // GET /me, null while unknown
let teamInfo = null; // GET /team, fetched once

/** Ask GET /me again: resolves with the user; on an error forgets the user and rejects. */
export async function loadMe() {
  try {
    me = await get("/me");
  } catch (err) {
    me = null;
    throw err;
  }
  return me;
}

/** The user GET /me last answered, or null when unknown. */
export function currentUser() {
  return me;
}

/** Whether the user has `role` ("approver": any approver role); true while unknown. */
export function hasRole(role) {
  if (!me) return true; // unknown yet: let the server decide
  const roles = me.roles || [];
  if (role === "approver") return roles.some((r) => r.startsWith("approver:"));
  return roles.includes(role) || (role === "viewer" && roles.length > 0);
}

/** The approver roles the user has, without the `approver:` prefix. */
export function approverRoles() {
  return ((me && me.roles) || []).filter((r) => r.startsWith("approver:")).map((r) => r.slice(9));
}

/** GET /team, asked once (null when it fails, asked again next time). */
export async function loadTeam() {
  if (teamInfo) return teamInfo;
  try {
    teamInfo = await get("/team");
  } catch {
    teamInfo = null;
  }
  return teamInfo;
}

/** Forget the team (a new token may see another one). */
export function forgetTeam() {
  teamInfo = null;
}
