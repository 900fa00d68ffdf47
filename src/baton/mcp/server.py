"""A team as an MCP server: `baton mcp serve module:team` (see docs/mcp-server.md).

Tools: `ask` runs one user message through the team (a session id the caller omits is
created and returned); `approvals_list`, `approve` and `reject` decide approval cards, and
exist only over HTTP with a token file (`--auth`): a decision needs an authenticated
approver, never the word of whatever model drives the MCP client. Resources: `baton://sessions`
(the sessions the caller may read), `baton://sessions/{id}` (one session: holder, status,
state, transcript, the card it waits on) and `baton://traces/{id}` (its trace tree), as JSON.

Everything an MCP client sends is user data: `ask` takes a message, a session id and an end
user id, and nothing else — an unknown argument is refused — so a client cannot set the
holder, an approval or a verified state slot. Identities and roles are the API server's
(`baton.server.auth`): the same token file, the same end-user binding of a token.

Needs the `mcp` extra (`pip install 'baton-relay[mcp]'`); importing `baton` never imports it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any, Literal

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent
from starlette.types import ASGIApp, Receive, Scope, Send

from baton.backends.base import Checkpoint, SessionRecord
from baton.core.approval import ApprovalCard
from baton.core.errors import BatonError
from baton.core.text import blank, clean_text
from baton.observe.tree import build_tree
from baton.runtime.result import RunResult
from baton.server.auth import (
    ACT_FOR_USERS,
    OPERATOR,
    VIEWER,
    AuthConfig,
    Principal,
)
from baton.server.ids import CARD_ID, SESSION_ID, USER_ID
from baton.server.schemas import MessageOut, RunSummary, TraceOut
from baton.topologies.team import Team

Transport = Literal["stdio", "http"]
"""How the server speaks MCP: over its stdin/stdout, or streamable HTTP."""

LOCAL_PRINCIPAL = Principal("local", frozenset({VIEWER, OPERATOR, ACT_FOR_USERS}))
"""Who calls without a token file (stdio, or HTTP on a loopback address): the person at this
machine, who may run for any end user and read every session, and decides no approval."""

SESSIONS_URI = "baton://sessions"
"""The resource that lists the sessions the caller may read."""

MAX_LISTED = 1000
"""The most recently updated sessions `baton://sessions` looks at."""


def session_uri(session_id: str) -> str:
    """The resource of one session."""
    return f"baton://sessions/{session_id}"


def trace_uri(session_id: str) -> str:
    """The resource of one session's trace tree."""
    return f"baton://traces/{session_id}"


def _check_id(value: str, pattern: str, what: str) -> str:
    if not re.fullmatch(pattern, value):
        raise ToolError(
            f"{what} {value!r} is not a valid id: use 1 to 128 of the characters "
            f"{'A-Z a-z 0-9 . _ : @ + -' if pattern == USER_ID else 'A-Z a-z 0-9 . _ : -'}"
        )
    return value


class _Caller:
    """Who a request acts as: the token's user over authenticated HTTP, else the local user.

    A server middleware resolves it once per request (from the HTTP request's bearer token)
    and keeps it in a context variable that the tools and resources read."""

    def __init__(self, auth: AuthConfig | None) -> None:
        self.auth = auth
        self._current: ContextVar[Principal | None] = ContextVar("baton_mcp_caller", default=None)

    def current(self) -> Principal:
        """The principal of the request being handled."""
        who = self._current.get()
        if who is None:
            raise ToolError("unauthenticated: send `Authorization: Bearer <token>`")
        return who

    def _resolve(self, ctx: ServerRequestContext[Any, Any]) -> Principal | None:
        if self.auth is None:
            return LOCAL_PRINCIPAL
        # the HTTP layer refused requests without a valid token already (BearerGate); this
        # reads the same header again to learn which user it was
        headers = getattr(ctx.request, "headers", None) or {}
        token = _bearer(headers.get("authorization"))
        return self.auth.authenticate(token) if token is not None else None

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        reset = self._current.set(self._resolve(ctx))
        try:
            return await call_next(ctx)
        finally:
            self._current.reset(reset)


def _bearer(header: str | None) -> str | None:
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def _may_read(who: Principal, record: SessionRecord | None) -> bool:
    """A token bound to one end user reads that user's sessions only; other readers read all
    (as `GET /sessions` of the API server)."""
    if not who.can_view():
        return False
    if who.user_id is not None and not who.acts_for_users():
        return record is not None and record.user_id == who.user_id
    return True


def _status(cp: Checkpoint | None) -> str:
    return "idle" if cp is None else cp.status


async def _ticket_of(team: Team, result: RunResult) -> int | None:
    """The human-queue ticket an escalated run opened, if any."""
    if result.status != "escalated" or result.escalation is None:
        return None
    for ticket in reversed(await team.store.list_human("open")):
        card = ticket.card
        if card.session_id == result.session_id and card.trace_id == result.trace_id:
            return ticket.id
    return None


class TeamTools:
    """The MCP tools and resources of one bound team."""

    def __init__(self, team: Team, auth: AuthConfig | None) -> None:
        self.team = team
        self.caller = _Caller(auth)
        self.authenticated = auth is not None

    async def _summary(self, result: RunResult) -> RunSummary:
        return RunSummary.of(result, await _ticket_of(self.team, result))

    # ------------------------------------------------------------------------------ tools
    async def ask(
        self,
        message: str,
        session_id: str | None = None,
        user_id: str | None = None,
    ) -> RunSummary:
        """Send one user message to the team and wait for its answer.

        Returns the run's status (completed, awaiting_approval, escalated, interrupted,
        failed, cancelled, blocked), its output, the session id (pass it again to continue
        the conversation; a new session is made when omitted) and the agents' path.
        """
        who = self.caller.current()
        if not who.can_operate():
            raise ToolError(
                f"user {who.name!r} may not run the team: `ask` needs the role operator"
            )
        text = clean_text(message)
        if blank(text):
            raise ToolError(
                "the message is empty (only white space, control or invisible characters); "
                "send the user's words"
            )
        if session_id is not None:
            _check_id(session_id, SESSION_ID, "session_id")
        if user_id is not None:
            _check_id(user_id, USER_ID, "user_id")
        try:
            run_user = who.run_user(user_id)
        except PermissionError as exc:
            raise ToolError(str(exc)) from None
        if session_id is not None:
            await self._check_session(who, session_id, run_user)
        try:
            result = await self.team.run(text, session_id=session_id, user_id=run_user)
        except BatonError as exc:
            raise ToolError(str(exc)) from None
        return await self._summary(result)

    async def _check_session(self, who: Principal, session_id: str, run_user: str | None) -> None:
        """Refuse a run in a session of another end user, or one that waits for a person."""
        store = self.team.store
        record = await store.get_session(session_id)
        owner = record.user_id if record is not None else None
        if owner and run_user and owner != run_user:
            raise ToolError(
                f"session {session_id!r} belongs to another user; user {run_user!r} may not "
                "run in it. Omit session_id to start a new session"
            )
        if owner and run_user is None and not who.acts_for_users():
            raise ToolError(
                f"session {session_id!r} belongs to an end user, and user {who.name!r} may not "
                "run for end users; omit session_id to start a new session"
            )
        cp = await store.get_checkpoint(session_id)
        if cp is not None and cp.status == "awaiting_approval":
            aid = (cp.meta.get("approval") or {}).get("id", "?")
            how = (
                "an approver decides it with the tool `approve` or `reject`"
                if self.authenticated
                else "decide it with `baton approvals` or on the dashboard"
            )
            raise ToolError(
                f"session {session_id!r} waits for approval {aid}; {how}, then send the message"
            )
        if cp is not None and cp.status == "interrupted":
            iid = (cp.meta.get("interrupt") or {}).get("id", "?")
            raise ToolError(
                f"session {session_id!r} waits for an answer to interrupt {iid}; answer it "
                f"through the API server (POST /interrupts/{iid}/answer), then send the message"
            )

    async def approvals_list(self) -> list[ApprovalCard]:
        """The approval cards waiting for a decision that this token's approver roles may
        decide, oldest first."""
        who = self._approver()
        mine = []
        for card in await self.team.approvals():
            try:
                who.approver_role_for(card.required_roles, None)
            except PermissionError:
                continue
            mine.append(card)
        return mine

    async def approve(
        self,
        approval_id: str,
        session_id: str | None = None,
        role: str | None = None,
    ) -> RunSummary:
        """Sign off the call a run waits for; the run resumes and its outcome comes back."""
        return await self._decide(approval_id, session_id, role, True, "")

    async def reject(
        self,
        approval_id: str,
        reason: str = "",
        session_id: str | None = None,
        role: str | None = None,
    ) -> RunSummary:
        """Refuse the call a run waits for; the agent reads the refusal and tells the user."""
        return await self._decide(approval_id, session_id, role, False, reason)

    def _approver(self) -> Principal:
        who = self.caller.current()
        if not who.approver_roles:
            raise ToolError(
                f"user {who.name!r} has no approver role; a token with approver:<role> "
                "lists and decides approvals"
            )
        return who

    async def _decide(
        self,
        approval_id: str,
        session_id: str | None,
        role: str | None,
        ok: bool,
        reason: str,
    ) -> RunSummary:
        who = self._approver()
        _check_id(approval_id, CARD_ID, "approval_id")
        card = next(
            (
                c
                for c in await self.team.approvals()
                if c.id == approval_id and session_id in (None, c.session_id)
            ),
            None,
        )
        if card is None:
            raise ToolError(
                f"no approval {approval_id!r} waits: it was decided meanwhile or the id is "
                "wrong; the tool approvals_list lists the waiting ones"
            )
        try:
            decider_role = who.approver_role_for(card.required_roles, role)
        except PermissionError as exc:
            raise ToolError(str(exc)) from None
        try:
            if ok:
                result = await self.team.approve(
                    card.session_id, card.id, by=who.name, role=decider_role, authenticated=True
                )
            else:
                result = await self.team.reject(
                    card.session_id,
                    card.id,
                    by=who.name,
                    reason=clean_text(reason),
                    role=decider_role,
                    authenticated=True,
                )
        except BatonError as exc:
            raise ToolError(str(exc)) from None
        return await self._summary(result)

    # -------------------------------------------------------------------------- resources
    async def sessions(self) -> str:
        """The sessions the caller may read (of the `MAX_LISTED` most recently updated), most
        recently updated first, as JSON."""
        who = self.caller.current()
        store = self.team.store
        cps = {cp.session_id: cp for cp in await store.list_checkpoints()}
        out = [
            {
                "session_id": r.session_id,
                "user_id": r.user_id,
                "holder": r.holder,
                "status": _status(cps.get(r.session_id)),
                "updated_at": r.updated_at,
                "uri": session_uri(r.session_id),
                "trace_uri": trace_uri(r.session_id),
            }
            for r in await store.list_sessions(limit=MAX_LISTED)
            if _may_read(who, r)
        ]
        out.sort(key=lambda s: float(s["updated_at"] or 0.0), reverse=True)
        return json.dumps(out, ensure_ascii=False)

    async def _readable(self, session_id: str) -> SessionRecord:
        who = self.caller.current()
        record = None
        if re.fullmatch(SESSION_ID, session_id):
            record = await self.team.store.get_session(session_id)
        if record is None or not _may_read(who, record):
            # one answer for "no such session" and "not yours": ids of others stay unknown
            raise ResourceNotFoundError(
                f"no session {session_id!r} that user {who.name!r} may read; "
                f"{SESSIONS_URI} lists the readable ones"
            )
        return record

    async def session(self, session_id: str) -> str:
        """One session as JSON: holder, status, state, transcript, the card it waits on."""
        record = await self._readable(session_id)
        store = self.team.store
        cp = await store.get_checkpoint(session_id)
        messages = await store.get_messages(session_id)
        waits = cp.meta if cp is not None else {}
        out = {
            "session_id": record.session_id,
            "user_id": record.user_id,
            "holder": str(waits.get("agent") or record.holder or "") or None,
            "status": _status(cp),
            "state": record.state,
            "messages": [MessageOut.of(m).model_dump(mode="json") for m in messages],
            "approval": waits.get("approval") if _status(cp) == "awaiting_approval" else None,
            "interrupt": waits.get("interrupt") if _status(cp) == "interrupted" else None,
            "trace_uri": trace_uri(session_id),
        }
        return json.dumps(out, ensure_ascii=False, default=str)

    async def trace(self, session_id: str) -> str:
        """One session's trace tree (runs, turns, steps) as JSON."""
        await self._readable(session_id)
        events = await self.team.store.get_events(session_id=session_id)
        return TraceOut(session_id=session_id, runs=build_tree(events)).model_dump_json()


def _strict(tool: Tool) -> Tool:
    """Refuse arguments the tool does not declare: what a client sends beyond them (a holder,
    an approval, a state slot) is never taken, and never silently dropped either."""
    tool.parameters["additionalProperties"] = False
    return tool


class _KnownArguments:
    """Middleware: a `tools/call` naming an argument its tool does not take is a tool error."""

    def __init__(self, tools: Mapping[str, Tool]) -> None:
        self.tools = tools

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        params = ctx.params
        if ctx.method == "tools/call" and isinstance(params, Mapping):
            tool = self.tools.get(str(params.get("name")))
            arguments = params.get("arguments") or {}
            if tool is not None and isinstance(arguments, Mapping):
                takes = tool.parameters.get("properties", {})
                unknown = sorted(str(k) for k in arguments if k not in takes)
                if unknown:
                    text = (
                        f"tool {tool.name!r} takes no argument {', '.join(unknown)}; it takes "
                        f"{', '.join(takes) or 'none'}"
                    )
                    return CallToolResult(
                        content=[TextContent(type="text", text=text)], is_error=True
                    )
        return await call_next(ctx)


def build_server(
    team: Team,
    *,
    auth: AuthConfig | None = None,
    name: str = "baton",
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "WARNING",
) -> MCPServer[Any]:
    """An MCP server over a bound `team`: `ask` and the session and trace resources; with
    `auth` (HTTP with a token file) also `approvals_list`, `approve` and `reject`. `log_level`:
    the SDK's logging (to stderr)."""
    tools = TeamTools(team, auth)
    agents = ", ".join(team.agents)
    fns: list[tuple[Callable[..., Any], str]] = [
        (
            tools.ask,
            f"Ask the Baton team (agents: {agents}) one user message; "
            "returns the run's status, output, session id and path.",
        ),
    ]
    if auth is not None:
        fns += [
            (tools.approvals_list, tools.approvals_list.__doc__ or ""),
            (tools.approve, tools.approve.__doc__ or ""),
            (tools.reject, tools.reject.__doc__ or ""),
        ]
    offered = [_strict(Tool.from_function(fn, description=doc)) for fn, doc in fns]
    server: MCPServer[Any] = MCPServer(
        name,
        instructions="A Baton team of agents. Call `ask` with the user's message; pass the "
        "returned session_id again to continue the conversation.",
        tools=offered,
        log_level=log_level,
        middleware=[tools.caller, _KnownArguments({t.name: t for t in offered})],
    )
    server.resource(
        SESSIONS_URI,
        name="sessions",
        description="The sessions you may read, most recently updated first.",
        mime_type="application/json",
    )(tools.sessions)
    server.resource(
        "baton://sessions/{session_id}",
        name="session",
        description="One session: holder, status, state, transcript, what it waits on.",
        mime_type="application/json",
    )(tools.session)
    server.resource(
        "baton://traces/{session_id}",
        name="trace",
        description="One session's trace tree: runs, turns, model and tool calls, hand-offs.",
        mime_type="application/json",
    )(tools.trace)
    return server


class BearerGate:
    """ASGI middleware: every HTTP request needs a token of the token file (401 otherwise)."""

    def __init__(self, app: ASGIApp, auth: AuthConfig) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            header = dict(scope.get("headers") or []).get(b"authorization")
            token = _bearer(header.decode("latin-1") if header is not None else None)
            if token is None or self.auth.authenticate(token) is None:
                body = json.dumps(
                    {
                        "error": "missing or unknown bearer token; send `Authorization: Bearer "
                        "<token>` with a token from the server's token file"
                    }
                ).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b"Bearer"),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def http_app(server: MCPServer[Any], *, auth: AuthConfig | None, host: str) -> ASGIApp:
    """The streamable-HTTP app of `server` at `/mcp`, behind the token check with `auth`."""
    app: ASGIApp = server.streamable_http_app(host=host)
    return BearerGate(app, auth) if auth is not None else app
