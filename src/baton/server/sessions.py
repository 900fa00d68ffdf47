"""`GET /sessions`, `GET /sessions/{id}`, `/trace` and `/events` (server-sent events)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from baton.backends.base import Checkpoint, HumanTicket, SessionRecord
from baton.core.approval import ApprovalCard
from baton.core.events import Event
from baton.core.interrupt import InterruptCard
from baton.observe.causality import slot_history, written_slots
from baton.observe.tree import build_tree
from baton.runtime.plan import HUMAN
from baton.server import sse
from baton.server.context import Ctx, ServerContext, Viewer
from baton.server.errors import NotFound, responses
from baton.server.ids import SessionIdPath
from baton.server.schemas import (
    MessageOut,
    SessionDetail,
    SessionStatus,
    SessionSummary,
    SlotOut,
    TicketOut,
    TraceOut,
)

router = APIRouter(tags=["sessions"])

MAX_QUIET_S = 3600.0
"""Longest `quiet_s` of `GET /sessions/{id}/events`."""


# ------------------------------------------------------------------------------- status
def _summary(
    ctx: ServerContext,
    record: SessionRecord,
    cp: Checkpoint | None,
    tickets: Sequence[HumanTicket],
) -> SessionSummary:
    """A session with its live status (see docs/server.md for the statuses)."""
    sid = record.session_id
    waiting = [t.id for t in tickets if t.status in ("open", "claimed")]
    holder = record.holder
    approval_id = interrupt_id = None
    status: SessionStatus
    if cp is not None and cp.meta.get("agent"):
        holder = str(cp.meta["agent"])
    if cp is not None and cp.status == "awaiting_approval":
        status, approval_id = "awaiting_approval", (cp.meta.get("approval") or {}).get("id")
    elif cp is not None and cp.status == "interrupted":
        status, interrupt_id = "interrupted", (cp.meta.get("interrupt") or {}).get("id")
    elif ctx.hub.running(sid) or (cp is not None and cp.status == "running"):
        status = "running"
    elif waiting or record.holder == HUMAN:
        status = "escalated"
    elif cp is not None and cp.status == "cancelled":
        status = "cancelled"
    else:
        status = "idle"
    return SessionSummary(
        session_id=sid,
        user_id=record.user_id,
        holder=holder,
        status=status,
        approval_id=approval_id,
        interrupt_id=interrupt_id,
        ticket_ids=waiting,
        created_at=record.created_at,
        updated_at=max(record.updated_at, cp.updated_at if cp is not None else 0.0),
    )


def _pending_record(ctx: ServerContext, session_id: str, cp: Checkpoint | None) -> SessionRecord:
    """A session not committed yet (its first run goes on): what is known of it."""
    started = ctx.hub.started(session_id)
    at = cp.updated_at if cp is not None else (started[0] if started else 0.0)
    return SessionRecord(
        session_id,
        user_id=started[1] if started else None,
        created_at=at,
        updated_at=at,
    )


async def _open_tickets(ctx: ServerContext) -> dict[str, list[HumanTicket]]:
    store = ctx.team.store
    by_session: dict[str, list[HumanTicket]] = {}
    for status in ("open", "claimed"):
        for t in await store.list_human(status):
            by_session.setdefault(t.card.session_id, []).append(t)
    return by_session


@router.get(
    "/sessions",
    response_model=list[SessionSummary],
    summary="Sessions with their live status, most recently updated first",
    responses=responses(401, 403, 422),
)
async def list_sessions(
    ctx: Ctx,
    who: Viewer,
    limit: Annotated[int, Query(ge=1, le=1000, description="At most this many.")] = 100,
) -> list[SessionSummary]:
    store = ctx.team.store
    records = await store.list_sessions(limit=limit)
    cps = {cp.session_id: cp for cp in await store.list_checkpoints()}
    tickets = await _open_tickets(ctx)
    known = {r.session_id for r in records}
    # sessions whose first run goes on are not committed yet: listed from their checkpoint
    fresh = [sid for sid in cps if sid not in known]
    fresh += [sid for sid in ctx.hub.running_sessions() if sid not in known and sid not in cps]
    out = [
        _summary(ctx, _pending_record(ctx, sid, cps.get(sid)), cps.get(sid), []) for sid in fresh
    ]
    out += [_summary(ctx, r, cps.get(r.session_id), tickets.get(r.session_id, [])) for r in records]
    out.sort(key=lambda s: s.updated_at, reverse=True)
    return out[:limit]


async def _record(ctx: ServerContext, session_id: str) -> tuple[SessionRecord, Checkpoint | None]:
    """The session and its checkpoint; 404 when the store knows nothing of it."""
    store = ctx.team.store
    record = await store.get_session(session_id)
    cp = await store.get_checkpoint(session_id)
    if record is None:
        if cp is None and not ctx.hub.running(session_id):
            raise NotFound(
                f"no session {session_id!r} in the store; GET /sessions lists the sessions"
            )
        record = _pending_record(ctx, session_id, cp)
    return record, cp


def _slots(state: dict[str, Any], events: list[Event]) -> list[SlotOut]:
    names = list(state) + [s for s in written_slots(events) if s not in state]
    return [
        SlotOut(slot=name, value=state.get(name), writes=slot_history(events, name))
        for name in names
    ]


@router.get(
    "/sessions/{session_id}",
    response_model=SessionDetail,
    summary="A session: transcript, state slots with their causality, what it waits on",
    responses=responses(401, 403, 404, 422),
)
async def get_session(ctx: Ctx, who: Viewer, session_id: SessionIdPath) -> SessionDetail:
    store = ctx.team.store
    record, cp = await _record(ctx, session_id)
    tickets = [t for t in await store.list_human(None) if t.card.session_id == session_id]
    messages = await store.get_messages(session_id)
    events = await store.get_events(session_id=session_id)
    slots = await asyncio.to_thread(_slots, record.state, events)
    approval = interrupt = None
    if cp is not None and cp.status == "awaiting_approval" and "approval" in cp.meta:
        approval = ApprovalCard.model_validate(cp.meta["approval"])
    if cp is not None and cp.status == "interrupted" and "interrupt" in cp.meta:
        interrupt = InterruptCard.model_validate(cp.meta["interrupt"])
    return SessionDetail(
        session=_summary(ctx, record, cp, tickets),
        messages=[MessageOut.of(m) for m in messages],
        state=record.state,
        slots=slots,
        incoming=record.incoming,
        approval=approval,
        interrupt=interrupt,
        tickets=[TicketOut.of(t) for t in tickets],
    )


@router.get(
    "/sessions/{session_id}/trace",
    response_model=TraceOut,
    summary="The session's trace tree (runs, turns, steps)",
    responses=responses(401, 403, 404, 422),
)
async def get_trace(ctx: Ctx, who: Viewer, session_id: SessionIdPath) -> TraceOut:
    await _record(ctx, session_id)
    events = await ctx.team.store.get_events(session_id=session_id)
    runs = await asyncio.to_thread(build_tree, events)
    return TraceOut(session_id=session_id, runs=runs)


@router.get(
    "/sessions/{session_id}/events",
    summary="The session's events as server-sent events: stored ones, then new ones",
    response_class=StreamingResponse,
    responses={
        200: {
            "content": {sse.MEDIA_TYPE: {"schema": sse.EVENT_SCHEMA}},
            "description": "`id:`, `event: <type>`, `data: <event JSON>` per event; "
            "`event: end` last.",
        },
        **responses(401, 403, 404, 422),
    },
)
async def get_events(
    request: Request,
    ctx: Ctx,
    who: Viewer,
    session_id: SessionIdPath,
    after: Annotated[
        str | None, Query(max_length=200, description="Send only the events after this id.")
    ] = None,
    follow: Annotated[bool, Query(description="Go on with new events.")] = True,
    quiet_s: Annotated[
        float, Query(ge=1, le=MAX_QUIET_S, description="End after this long without events.")
    ] = 30.0,
    last_event_id: Annotated[str | None, Header(max_length=200, include_in_schema=False)] = None,
) -> StreamingResponse:
    await _record(ctx, session_id)
    return sse.stream(_follow(ctx, session_id, after or last_event_id, follow, quiet_s))


def _after(events: list[Event], after: str | None) -> list[Event]:
    if after is None:
        return events
    for i, e in enumerate(events):
        if e.id == after:
            return events[i + 1 :]
    return events


async def _follow(
    ctx: ServerContext, session_id: str, after: str | None, follow: bool, quiet_s: float
) -> AsyncIterator[bytes]:
    store = ctx.team.store
    loop = asyncio.get_running_loop()
    with ctx.hub.follow(session_id) as live:  # before the read: nothing falls in between
        stored = await store.get_events(session_id=session_id)
        sent: set[str] = {e.id for e in stored}
        last: str | None = after
        for event in _after(stored, after):
            last = event.id
            yield sse.event_message(event, with_id=True)
        if not follow:
            yield sse.message("end", _end(session_id, last, "not_following"))
            return
        quiet_at = loop.time() + quiet_s
        poll_at = loop.time() + ctx.poll_s
        ping_at = loop.time() + sse.PING_S
        while True:
            now = loop.time()
            if now >= quiet_at:
                yield sse.message("end", _end(session_id, last, "quiet"))
                return
            fresh: list[Event] = []
            try:
                wait = max(0.0, min(quiet_at, poll_at, ping_at) - now)
                event = await asyncio.wait_for(live.get(), wait)
                if event.type != "text_delta":
                    fresh.append(event)
            except asyncio.TimeoutError:
                pass
            if loop.time() >= poll_at:  # what runs of other processes committed
                poll_at = loop.time() + ctx.poll_s
                fresh += [e for e in await store.get_events(session_id=session_id)]
            for event in fresh:
                if event.id in sent:
                    continue
                sent.add(event.id)
                last = event.id
                quiet_at = loop.time() + quiet_s
                ping_at = loop.time() + sse.PING_S
                yield sse.event_message(event, with_id=True)
            if loop.time() >= ping_at:
                ping_at = loop.time() + sse.PING_S
                yield sse.PING


def _end(session_id: str, last: str | None, reason: str) -> dict[str, Any]:
    return {"session_id": session_id, "last_event_id": last, "reason": reason}
