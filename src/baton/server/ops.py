"""Operations: `/health`, `/ready`, `/metrics`, `/me`, `/team`, and the dashboard's files."""

from __future__ import annotations

import asyncio
import html
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Response
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse
from prometheus_client import Counter
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from baton.server.context import Ctx, User, Viewer
from baton.server.errors import responses
from baton.server.schemas import AgentOut, HealthOut, MeOut, ReadyOut, TeamOut

router = APIRouter(tags=["operations"])

STATIC_DIR = Path(__file__).resolve().parent / "static"
"""The dashboard's files (`index.html` at `GET /`, the folder at `/static`)."""

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
"""The Prometheus text format `MetricsSink.render` writes."""

READY_TIMEOUT_S = 5.0
"""How long `GET /ready` waits for the store."""

LOCAL_TOKEN_META = '<meta name="baton-local-token" content="">'
"""The dashboard page's slot for the open mode's local token (its fetches send it back)."""

PAGE_HEADERS = {
    "Cache-Control": "no-store",  # the page holds this start's local token
    "Content-Security-Policy": "frame-ancestors 'none'",  # no page of another site frames it
    "X-Frame-Options": "DENY",
}
"""Headers of the dashboard's page."""

_PLACEHOLDER = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Baton</title></head>
<body><h1>Baton API server</h1>
<p>The dashboard is not installed here. The API is described at <a href="/docs">/docs</a>
(<a href="/openapi.json">openapi.json</a>).</p></body></html>
"""


@router.get("/health", response_model=HealthOut, summary="Liveness")
async def health() -> HealthOut:
    return HealthOut()


@router.get(
    "/ready",
    response_model=ReadyOut,
    summary="Readiness: the store answers",
    responses={503: {"model": ReadyOut, "description": "The store cannot be reached."}},
)
async def ready(ctx: Ctx) -> ReadyOut | JSONResponse:
    store = ctx.team.store
    scheme = store.url.split(":", 1)[0] or "unknown"
    try:
        await asyncio.wait_for(store.list_sessions(limit=1), READY_TIMEOUT_S)
    except Exception as exc:
        detail = str(exc) or f"no answer within {READY_TIMEOUT_S:g} s ({type(exc).__name__})"
        out = ReadyOut(status="unavailable", store=scheme, detail=detail)
        return JSONResponse(status_code=503, content=out.model_dump())
    return ReadyOut(status="ready", store=scheme)


@router.get(
    "/me",
    response_model=MeOut,
    summary="The user of the token and their roles",
    responses=responses(401),
)
async def me(ctx: Ctx, who: User) -> MeOut:
    return MeOut(
        name=who.name, roles=sorted(who.roles), user_id=who.user_id, auth=ctx.auth is not None
    )


@router.get(
    "/team",
    response_model=TeamOut,
    summary="The team: agents, their tools and hand-offs, a Mermaid chart",
    responses=responses(401, 403),
)
async def team(ctx: Ctx, who: Viewer) -> TeamOut:
    described: dict[str, Any] = ctx.team.describe()
    agents = {
        name: AgentOut(
            description=str(info.get("description") or ""),
            tools=[str(t) for t in info.get("tools", [])],
            handoffs=[str(h) for h in info.get("handoffs", [])],
            conductor_rounds=(info.get("conductor") or {}).get("rounds"),
        )
        for name, info in (described.get("agents") or {}).items()
    }
    return TeamOut(
        entry=str(described.get("entry", "")),
        fallback=str(described.get("fallback", "")),
        agents=agents,
        mermaid=ctx.team.to_mermaid(),
    )


@router.get(
    "/metrics",
    response_class=Response,
    summary="Prometheus metrics of this process's runs and requests",
    responses={
        200: {"content": {PROMETHEUS_TEXT: {"schema": {"type": "string"}}}},
        **responses(401, 403),
    },
)
async def metrics(ctx: Ctx, who: Viewer) -> PlainTextResponse:
    return PlainTextResponse(ctx.metrics.render(), media_type=PROMETHEUS_TEXT)


@router.get("/", include_in_schema=False)
async def index(ctx: Ctx) -> Any:
    page = STATIC_DIR / "index.html"
    if not page.is_file():
        return HTMLResponse(_PLACEHOLDER, headers=PAGE_HEADERS)
    text = await asyncio.to_thread(page.read_text, encoding="utf-8")
    if ctx.local_token is not None:
        token = html.escape(ctx.local_token, quote=True)
        text = text.replace(LOCAL_TOKEN_META, LOCAL_TOKEN_META.replace('""', f'"{token}"'))
    return HTMLResponse(text, headers=PAGE_HEADERS)


class RequestCounter:
    """ASGI middleware: `baton_http_requests_total{method,route,status}` (the route's path
    template, so ids do not make new series)."""

    def __init__(self, app: ASGIApp, counter: Counter) -> None:
        self.app = app
        self.counter = counter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", None)
            if path is None:
                path = "/static" if scope.get("path", "").startswith("/static/") else "unmatched"
            self.counter.labels(scope.get("method", ""), path, str(status)).inc()
