"""`POST /runs`, `POST /runs/stream` and `GET /runs/{request_id}`."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse, StreamingResponse

from baton.bus.base import Envelope
from baton.bus.headers import trace_headers
from baton.core.events import Event
from baton.core.ids import new_id
from baton.core.text import blank, clean_text
from baton.runtime.result import RunResult
from baton.server import sse
from baton.server.auth import Principal
from baton.server.context import Ctx, Operator, ServerContext, Viewer
from baton.server.errors import Conflict, Forbidden, NotFound, responses, status_of
from baton.server.ids import SESSION_ID, RequestIdPath
from baton.server.schemas import PendingOut, QueuedOut, RunIn, RunSummary, TurnOut

log = logging.getLogger("baton.server")

router = APIRouter(tags=["runs"])

MAX_WAIT_S = 30.0
"""Longest `wait_s` of `GET /runs/{request_id}`."""


async def precheck(ctx: ServerContext, body: RunIn, who: Principal) -> tuple[str, str | None]:
    """The message, cleaned, and the end user the run serves; refuses a run the caller or
    the kernel would refuse, before anything starts (a streamed run's refusal then is a plain
    4xx answer, not an event)."""
    message = clean_text(body.message)
    if blank(message):
        raise ValueError("the message is empty (only white space, control or invisible characters)")
    try:
        user_id = who.run_user(body.user_id)
    except PermissionError as exc:
        raise Forbidden(str(exc)) from None
    if body.session_id is None:
        return message, user_id
    store = ctx.team.store
    session = await store.get_session(body.session_id)
    owner = session.user_id if session is not None else None
    if owner and user_id and owner != user_id:
        raise Forbidden(
            f"session {body.session_id!r} belongs to another user; user "
            f"{user_id!r} may not run in it. Start a new session for this user"
        )
    if owner and user_id is None and not who.acts_for_users():
        raise Forbidden(
            f"session {body.session_id!r} belongs to an end user, and user {who.name!r} may "
            "not run for end users: use a token bound to that user (user_id in the token "
            "file) or one with the role act_for_users"
        )
    cp = await store.get_checkpoint(body.session_id)
    if cp is not None and cp.status == "awaiting_approval":
        card = cp.meta.get("approval") or {}
        aid = card.get("id", "?")
        raise Conflict(
            f"session {body.session_id!r} waits for approval {aid}; decide it first "
            f"(POST /approvals/{aid}/approve or /reject), then send the message"
        )
    if cp is not None and cp.status == "interrupted":
        card = cp.meta.get("interrupt") or {}
        iid = card.get("id", "?")
        raise Conflict(
            f"session {body.session_id!r} waits for an answer to interrupt {iid}; answer it "
            f"first (POST /interrupts/{iid}/answer), then send the message"
        )
    return message, user_id


async def ticket_of(ctx: ServerContext, result: RunResult) -> int | None:
    """The human-queue ticket an escalated run opened, if any."""
    if result.status != "escalated" or result.escalation is None:
        return None
    for ticket in reversed(await ctx.team.store.list_human("open")):
        card = ticket.card
        if card.session_id == result.session_id and card.trace_id == result.trace_id:
            return ticket.id
    return None


async def summary(ctx: ServerContext, result: RunResult) -> RunSummary:
    """The answer of a finished (or paused) run."""
    return RunSummary.of(result, await ticket_of(ctx, result))


@router.post(
    "/runs",
    response_model=RunSummary,
    summary="Run one user message (or queue it on the bus)",
    responses={
        202: {"model": QueuedOut, "description": "Queued on the bus for a worker."},
        **responses(401, 403, 409, 422, 503),
    },
)
async def post_run(body: RunIn, ctx: Ctx, who: Operator) -> RunSummary | JSONResponse:
    """Without a bus: run now, 200 with the run's summary. With a bus: 202, queued."""
    message, user_id = await precheck(ctx, body, who)
    if ctx.bus is not None:
        envelope = Envelope(
            session_id=body.session_id or new_id("s_"),
            message=message,
            user_id=user_id,
            headers=trace_headers(),
            id=body.request_id or new_id("req_"),
        )
        await ctx.bus.publish(envelope)
        queued = QueuedOut(request_id=envelope.id, session_id=envelope.session_id)
        return JSONResponse(status_code=202, content=queued.model_dump())
    result = await ctx.team.run(
        message, session_id=body.session_id, user_id=user_id, request_id=body.request_id
    )
    return await summary(ctx, result)


@router.post(
    "/runs/stream",
    summary="Run one user message, streaming its events (server-sent events)",
    response_class=StreamingResponse,
    responses={
        200: {
            "content": {sse.MEDIA_TYPE: {"schema": sse.EVENT_SCHEMA}},
            "description": "`event: <type>` / `data: <event JSON>` per event, `text_delta` "
            "pieces of the reply, then `event: result` with the run summary.",
        },
        **responses(401, 403, 409, 422, 503),
    },
)
async def post_run_stream(body: RunIn, ctx: Ctx, who: Operator) -> StreamingResponse:
    """The run happens now, in this process; each event is sent as it happens. A request the
    session already answered (`request_id`) is not run again: its recorded result is the
    one `result` event."""
    message, user_id = await precheck(ctx, body, who)
    items = ctx.team.stream(
        message, session_id=body.session_id, user_id=user_id, request_id=body.request_id
    )
    return sse.stream(_run_events(ctx, items))


async def _run_events(
    ctx: ServerContext, items: AsyncIterator[Event | RunResult]
) -> AsyncIterator[bytes]:
    try:
        async with contextlib.aclosing(sse.paced(items)) as paced:
            async for item in paced:
                if item is None:
                    yield sse.PING
                elif isinstance(item, RunResult):
                    out = await summary(ctx, item)
                    yield sse.message("result", out.model_dump(mode="json"))
                else:
                    yield sse.event_message(item)
    except Exception as exc:
        code, detail = failure(exc)
        yield sse.message("error", {"status": code, "detail": detail})


def failure(exc: Exception) -> tuple[int, str]:
    """The status and the message a streamed run that failed with `exc` reports (an
    unexpected error is logged with its traceback)."""
    code = status_of(exc)
    if code >= 500 and code != 503:
        log.exception("a streamed run failed")
        return code, f"internal error: {type(exc).__name__}: {exc}"
    return code, str(exc)


@router.get(
    "/runs/{request_id}",
    response_model=TurnOut,
    summary="The result of a queued request (bus mode)",
    responses={
        202: {"model": PendingOut, "description": "No worker reported it yet."},
        **responses(401, 403, 404, 422, 503),
    },
)
async def get_run(
    ctx: Ctx,
    who: Viewer,
    request_id: RequestIdPath,
    session_id: Annotated[
        str,
        Query(
            pattern=SESSION_ID,
            description="The session the request was queued in (a request id names a request "
            "within its session only).",
        ),
    ],
    wait_s: Annotated[float, Query(ge=0, le=MAX_WAIT_S, description="Seconds to wait.")] = 0.0,
) -> TurnOut | JSONResponse:
    """200 with the worker's report for the session's request, or 202 while none came."""
    if ctx.bus is None:
        raise NotFound(
            "this server has no bus: POST /runs answers with the run's result at once "
            "(start the server with --bus URL to queue runs for workers)"
        )
    found = await ctx.bus.get_result(session_id, request_id, wait_s=wait_s)
    if found is None:
        pending = PendingOut(request_id=request_id, session_id=session_id)
        return JSONResponse(status_code=202, content=pending.model_dump())
    return TurnOut(
        request_id=found.request_id,
        session_id=found.session_id,
        status=found.status,
        output=found.output,
        error=found.error,
        run_id=found.run_id,
        worker=found.worker,
        finished_at=found.finished_at,
    )
