"""Who calls `baton a2a serve`: the bearer token of the API server's token file, checked at
the door (`TokenGate`), and the Baton principal each A2A request acts as (`CallContextBuilder`,
`principal_of`). Without a token file every caller is the local user."""

from __future__ import annotations

import json
from collections.abc import Sequence

from a2a.auth.user import User
from a2a.server.agent_execution import RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.routes import DefaultServerCallContextBuilder
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from baton.server.auth import ACT_FOR_USERS, OPERATOR, VIEWER, AuthConfig, Principal

LOCAL_PRINCIPAL = Principal("local", frozenset({VIEWER, OPERATOR, ACT_FOR_USERS}))
"""Who calls without a token file (a server on a loopback address): the person at this
machine, who may run the team and decides no approval."""

NOBODY = Principal("nobody")
"""Who a request acts as when no `CallContextBuilder` said (a server assembled otherwise): no
role, so it runs nothing."""


class Caller(User):
    """The A2A SDK's user for a Baton principal (the SDK keeps each user's tasks apart)."""

    def __init__(self, principal: Principal) -> None:
        self.principal = principal

    @property
    def is_authenticated(self) -> bool:
        """Known: the local user, or a token's user the gate let in."""
        return True

    @property
    def user_name(self) -> str:
        """The principal's name: the SDK's task owner."""
        return self.principal.name


class CallContextBuilder(DefaultServerCallContextBuilder):
    """Who a request acts as: the token's user (`--auth`), else the local user."""

    def __init__(self, auth: AuthConfig | None) -> None:
        self.auth = auth

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        who = LOCAL_PRINCIPAL
        if self.auth is not None:
            token = _bearer(request.headers.get("authorization"))
            found = self.auth.authenticate(token) if token is not None else None
            if found is None:  # the gate refused it already; never run as someone else
                raise PermissionError("unauthenticated A2A request")
            who = found
        context.user = Caller(who)
        return context


def _bearer(header: str | None) -> str | None:
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def principal_of(context: RequestContext) -> Principal:
    """The Baton principal an A2A request acts as (`NOBODY` when no `CallContextBuilder`
    built its context: fail closed)."""
    user = context.call_context.user
    return user.principal if isinstance(user, Caller) else NOBODY


class TokenGate:
    """ASGI middleware: every request but the Agent Card's needs a token of the token file
    (401 otherwise: the card is how a client learns that it needs one) whose user has the role
    operator (403 otherwise: a caller that may not run the team sets up no task, no push
    notification, nothing)."""

    def __init__(self, app: ASGIApp, auth: AuthConfig, public: Sequence[str]) -> None:
        self.app = app
        self.auth = auth
        self.public = frozenset(public)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("path") not in self.public:
            header = dict(scope.get("headers") or []).get(b"authorization")
            token = _bearer(header.decode("latin-1") if header is not None else None)
            who = self.auth.authenticate(token) if token is not None else None
            if who is None:
                await _refuse(
                    send,
                    401,
                    "missing or unknown bearer token; send `Authorization: Bearer <token>` "
                    "with a token from the server's token file",
                )
                return
            if not who.can_operate():
                await _refuse(
                    send,
                    403,
                    f"user {who.name!r} may not use this agent: A2A calls run the team, which "
                    "needs the role operator",
                )
                return
        await self.app(scope, receive, send)


async def _refuse(send: Send, status: int, error: str) -> None:
    headers = [(b"content-type", b"application/json")]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps({"error": error}).encode()})
