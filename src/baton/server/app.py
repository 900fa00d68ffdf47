"""`create_app(team)`: the FastAPI application of `baton serve`."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import time
from collections.abc import AsyncIterator

from fastapi import Depends, FastAPI
from fastapi.staticfiles import StaticFiles
from prometheus_client import Counter
from starlette.middleware.body_limit import RequestBodyLimitMiddleware

from baton import __version__
from baton.bus import Bus, open_bus
from baton.core.errors import ConfigError
from baton.observe.metrics import MetricsSink
from baton.server import desk, errors, links, openai_api, ops, runs, sessions
from baton.server.auth import AuthConfig
from baton.server.context import ServerContext, known_query
from baton.server.guard import RequestGuard
from baton.server.hosts import LocalAddress
from baton.server.live import LiveHub
from baton.server.openai_schemas import DEFAULT_MODEL_ID, MODEL_ID
from baton.topologies.team import Team

DESCRIPTION = """Operate a Baton team: run messages (live, as server-sent events), see each
session's holder, trace and state causality, decide approvals, answer interrupts and work the
human queue. Authenticate with `Authorization: Bearer <token>`. See docs/server.md."""

MAX_BODY_BYTES = 1024 * 1024
"""The default limit of a request body (1 MiB)."""


def create_app(
    team: Team,
    *,
    auth: AuthConfig | None = None,
    bus: Bus | str | None = None,
    close_team: bool = False,
    poll_s: float = 1.0,
    host: str | None = None,
    port: int | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    model_id: str = DEFAULT_MODEL_ID,
    link_secret: str | None = None,
) -> FastAPI:
    """The API server (and dashboard) of `team`, served by a binding of it (`Team.bind`) on
    the team's store with the server's live and metrics sinks added; `team` is not changed.

    `auth`: the accepted tokens, None for the open mode (every request acts as the local user
    with every role; it answers only to a loopback `Host`, and a state-changing request needs
    the dashboard's own `Origin` or the local token, `app.state.local_token`). `bus`: a `Bus`
    or a bus URL; `POST /runs` then queues turns for workers instead of running them here.
    `close_team`: close the team (and a bus opened from a URL) when the app shuts down.
    `poll_s`: how often a followed session's store is read for events of other processes.
    `host`, `port`: where the server listens (the open mode then answers to exactly that
    address; None: any loopback name, any port). `max_body_bytes`: the longest request body.
    `model_id`: the id the OpenAI-compatible endpoint (`/v1/chat/completions`, `/v1/models`)
    serves the team as.
    `link_secret` (else `$BATON_APPROVAL_LINK_SECRET`): the secret that signs the approve and
    reject links of notification cards (`baton.notify.links`); None turns the links off.
    """
    if poll_s <= 0:
        raise ValueError("poll_s must be positive (seconds between store reads)")
    if isinstance(max_body_bytes, bool) or not isinstance(max_body_bytes, int):
        raise ConfigError(f"max_body_bytes must be a whole number of bytes, got {max_body_bytes!r}")
    if max_body_bytes < 1:
        raise ConfigError(f"max_body_bytes must be at least 1, got {max_body_bytes}")
    if not isinstance(model_id, str) or not re.fullmatch(MODEL_ID, model_id):
        raise ConfigError(
            f"model_id must be 1 to 128 of the characters A-Z a-z 0-9 . _ : -, got {model_id!r}"
        )
    local = LocalAddress.of(host, port) if auth is None else None
    local_token = secrets.token_urlsafe(32) if auth is None else None
    opened = isinstance(bus, str)
    the_bus = open_bus(bus) if isinstance(bus, str) else bus
    hub = LiveHub()
    sink = MetricsSink()
    served = team.bind(sinks=[*team.sinks, hub, sink])  # the team itself gets no sinks
    ctx = ServerContext(
        team=served,
        auth=auth,
        bus=the_bus,
        hub=hub,
        metrics=sink,
        poll_s=poll_s,
        local=local,
        local_token=local_token,
        max_body_bytes=max_body_bytes,
        model_id=model_id,
        started=int(time.time()),
        link_secret=link_secret or os.environ.get("BATON_APPROVAL_LINK_SECRET") or None,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await served.aclose()  # its store and bus are the team's: only its sinks let go
            if opened and the_bus is not None:
                await the_bus.close()
            if close_team:
                await team.aclose()

    app = FastAPI(
        title="Baton",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        dependencies=[Depends(known_query)],
    )
    app.state.baton = ctx
    app.state.local_token = local_token
    errors.install(app)
    for module in (runs, sessions, desk, links, ops):
        # everywhere: a body over the limit, a Host the open mode does not answer to, an
        # unknown query parameter (the OpenAI-compatible routes say so in OpenAI's shape)
        app.include_router(module.router, responses=errors.responses(413, 421, 422))
    app.include_router(openai_api.router)
    openai_api.document(app)
    if ops.STATIC_DIR.is_dir():
        app.mount("/static", StaticFiles(directory=ops.STATIC_DIR), name="static")
    requests = Counter(
        "baton_http_requests",
        "HTTP requests by method, route and status.",
        ["method", "route", "status"],
        registry=sink.registry,
    )
    # outermost last: every answer is counted, the guard refuses before any body is read, and
    # a body of unknown length is cut at the limit while the endpoint reads it
    app.add_middleware(RequestBodyLimitMiddleware, max_body_size=max_body_bytes)
    app.add_middleware(
        RequestGuard,
        auth=auth,
        local=local,
        local_token=local_token,
        max_body_bytes=max_body_bytes,
    )
    app.add_middleware(ops.RequestCounter, counter=requests)
    return app
