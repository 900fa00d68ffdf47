"""What every request handler reaches: the team, the bus, the live hub, the metrics, the
user — and the dependencies that check the user's roles."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from baton.bus.base import Bus
from baton.observe.metrics import MetricsSink
from baton.server.auth import OPEN_PRINCIPAL, AuthConfig, Principal
from baton.server.hosts import LocalAddress
from baton.server.live import LiveHub
from baton.server.openai_schemas import DEFAULT_MODEL_ID
from baton.topologies.team import Team


@dataclass
class ServerContext:
    """The server's parts, kept on `app.state.baton`."""

    team: Team
    auth: AuthConfig | None
    bus: Bus | None
    hub: LiveHub
    metrics: MetricsSink
    poll_s: float = 1.0
    """How often a followed session's store is read for events other processes committed."""
    local: LocalAddress | None = None
    """Open mode: the addresses the server answers to (None with a token file)."""
    local_token: str | None = None
    """Open mode: the token of this start that lets a request without a same-origin `Origin`
    change something (the dashboard reads it from its page; None with a token file)."""
    max_body_bytes: int = 1024 * 1024
    """The longest request body."""
    model_id: str = DEFAULT_MODEL_ID
    """The id the OpenAI-compatible endpoint serves the team as (`GET /v1/models`)."""
    started: int = 0
    """When the server started (epoch seconds): the served model's `created`."""
    link_secret: str | None = None
    """The secret of signed approval links (`baton.notify.links`); None: links are off."""


def context(request: Request) -> ServerContext:
    """The server context of the app serving `request`."""
    ctx: ServerContext = request.app.state.baton
    return ctx


Ctx = Annotated[ServerContext, Depends(context)]

_bearer = HTTPBearer(
    auto_error=False,
    description="A token from the server's token file (`baton serve --auth FILE`).",
)


def _unauthorized(detail: str, invalid: bool = False) -> HTTPException:
    challenge = 'Bearer error="invalid_token"' if invalid else "Bearer"
    return HTTPException(401, detail, headers={"WWW-Authenticate": challenge})


def bearer_user(auth: AuthConfig, token: str | None) -> Principal:
    """The user of a bearer `token` (None: no usable `Authorization` header); raises a 401
    `HTTPException` for a missing or unknown one."""
    if token is None or not token.strip():
        raise _unauthorized(
            "missing or malformed Authorization header; send `Authorization: Bearer <token>` "
            "with a token from the server's token file"
        )
    who = auth.authenticate(token.strip())
    if who is None:
        raise _unauthorized("unknown token; use a token from the server's token file", invalid=True)
    return who


async def principal(
    ctx: Ctx,
    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """The user of the request's bearer token (401 without a valid one); in the open mode
    (no token file) the local user with every role."""
    if ctx.auth is None:
        return OPEN_PRINCIPAL
    return bearer_user(ctx.auth, creds.credentials if creds is not None else None)


User = Annotated[Principal, Depends(principal)]


def _forbidden(who: Principal, needed: str) -> HTTPException:
    roles = ", ".join(sorted(who.roles)) or "none"
    return HTTPException(
        403, f"user {who.name!r} (roles: {roles}) needs the role {needed} for this step"
    )


async def viewer(who: User) -> Principal:
    """A user who may read (viewer, operator or approver)."""
    if not who.can_view():
        raise _forbidden(who, "viewer")
    return who


async def operator(who: User) -> Principal:
    """A user who may run and work the queues."""
    if not who.can_operate():
        raise _forbidden(who, "operator")
    return who


async def approver(who: User) -> Principal:
    """A user with at least one approver role (the card's roles are checked by the route)."""
    if not who.approver_roles:
        raise _forbidden(who, "approver:<role>")
    return who


Viewer = Annotated[Principal, Depends(viewer)]
Operator = Annotated[Principal, Depends(operator)]
Approver = Annotated[Principal, Depends(approver)]


def _query_names(dependant: Any) -> set[str]:
    """The query parameters an endpoint and its dependencies take."""
    names = {p.alias for p in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names


def known_query(request: Request) -> None:
    """Refuse query parameters the endpoint does not take (422): a misspelt `limit` must not
    silently fall back to the default."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute) or not route.include_in_schema:
        return  # the dashboard's page keeps its own query (deep links)
    if not request.query_params:
        return
    allowed = _query_names(route.dependant)
    unknown = [k for k in request.query_params if k not in allowed]
    if unknown:
        takes = ", ".join(sorted(allowed)) or "none"
        raise RequestValidationError(
            [
                {
                    "loc": ("query", name),
                    "msg": f"unknown query parameter (this endpoint takes: {takes})",
                    "type": "extra_forbidden",
                }
                for name in unknown
            ]
        )
