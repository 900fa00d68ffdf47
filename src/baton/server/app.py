"""`create_app(team)`: the FastAPI application of `baton serve`."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from fastapi import Depends, FastAPI
from fastapi.staticfiles import StaticFiles
from prometheus_client import Counter

from baton import __version__
from baton.bus import Bus, open_bus
from baton.observe.metrics import MetricsSink
from baton.server import desk, errors, ops, runs, sessions
from baton.server.auth import AuthConfig
from baton.server.context import ServerContext, known_query
from baton.server.live import LiveHub
from baton.topologies.team import Team

DESCRIPTION = """Operate a Baton team: run messages (live, as server-sent events), see each
session's holder, trace and state causality, decide approvals, answer interrupts and work the
human queue. Authenticate with `Authorization: Bearer <token>`. See docs/server.md."""


def create_app(
    team: Team,
    *,
    auth: AuthConfig | None = None,
    bus: Bus | str | None = None,
    close_team: bool = False,
    poll_s: float = 1.0,
) -> FastAPI:
    """The API server (and dashboard) of `team`.

    `auth`: the accepted tokens, None for the open mode (every request acts as the local user
    with every role: bind such a server to a loopback address only). `bus`: a `Bus` or a bus
    URL; `POST /runs` then queues turns for workers instead of running them here.
    `close_team`: close the team (and a bus opened from a URL) when the app shuts down.
    `poll_s`: how often a followed session's store is read for events of other processes.
    """
    if poll_s <= 0:
        raise ValueError("poll_s must be positive (seconds between store reads)")
    opened = isinstance(bus, str)
    the_bus = open_bus(bus) if isinstance(bus, str) else bus
    hub = LiveHub()
    sink = MetricsSink()
    team.add_sink(hub)
    team.add_sink(sink)
    ctx = ServerContext(team=team, auth=auth, bus=the_bus, hub=hub, metrics=sink, poll_s=poll_s)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            team.remove_sink(hub)
            team.remove_sink(sink)
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
        responses=errors.responses(422),  # unknown query parameters, everywhere
    )
    app.state.baton = ctx
    errors.install(app)
    for module in (runs, sessions, desk, ops):
        app.include_router(module.router)
    if ops.STATIC_DIR.is_dir():
        app.mount("/static", StaticFiles(directory=ops.STATIC_DIR), name="static")
    requests = Counter(
        "baton_http_requests",
        "HTTP requests by method, route and status.",
        ["method", "route", "status"],
        registry=sink.registry,
    )
    app.add_middleware(ops.RequestCounter, counter=requests)
    return app
