"""`MemoryStore`: everything in process memory. The default for `Team(...)` without a store."""

from __future__ import annotations

import copy
import time
from typing import Any

from baton.backends.base import HumanTicket, SessionRecord
from baton.core.events import EscalationCard, Event
from baton.core.messages import Message


def _copy_state(state: dict[str, Any]) -> dict[str, Any]:
    """A copy that shares nothing mutable with `state` (fast path for flat slots)."""
    if all(isinstance(v, (str, int, float, bool, type(None))) for v in state.values()):
        return dict(state)
    return copy.deepcopy(state)


def _snapshot(rec: SessionRecord) -> SessionRecord:
    """A copy of `rec` with its own state (`dataclasses.replace` without its per-call
    inspection of the fields: stores take one per run)."""
    out = object.__new__(type(rec))
    out.__dict__.update(rec.__dict__)
    out.state = _copy_state(rec.state)
    return out


_MIN_PRUNE = 10_000
"""Expired hand-off locks are dropped once the table holds more than this many."""


class MemoryStore:
    """A dict-backed store; state is copied in and out so callers never alias it."""

    url = "memory://"

    def __init__(self) -> None:
        self._sessions: dict[str, SessionRecord] = {}
        self._messages: dict[str, list[Message]] = {}
        self._events: list[Event] = []
        self._locks: dict[str, float] = {}
        self._prune_at = _MIN_PRUNE
        self._human: list[HumanTicket] = []

    async def get_session(self, session_id: str) -> SessionRecord | None:
        rec = self._sessions.get(session_id)
        return None if rec is None else _snapshot(rec)

    async def commit_run(
        self, session: SessionRecord, messages: list[Message], events: list[Event]
    ) -> None:
        self._sessions[session.session_id] = _snapshot(session)
        if messages:
            self._messages.setdefault(session.session_id, []).extend(messages)
        self._events.extend(events)

    async def get_messages(self, session_id: str, limit: int | None = None) -> list[Message]:
        msgs = self._messages.get(session_id, [])
        if limit is None:
            return list(msgs)
        return msgs[-limit:] if limit > 0 else []  # a slice is already a copy

    async def get_events(
        self, session_id: str | None = None, trace_id: str | None = None
    ) -> list[Event]:
        return [
            e
            for e in self._events
            if (session_id is None or e.session_id == session_id)
            and (trace_id is None or e.trace_id == trace_id)
        ]

    async def list_sessions(self, limit: int = 100) -> list[SessionRecord]:
        recs = sorted(self._sessions.values(), key=lambda r: r.updated_at, reverse=True)
        return [_snapshot(r) for r in recs[:limit]]

    async def claim_lock(self, key: str, window_s: float) -> bool:
        t = time.monotonic()
        expires = self._locks.get(key)
        if expires is not None and expires > t:
            return False
        self._locks[key] = t + window_s
        if len(self._locks) > self._prune_at:  # keep memory bounded under long runs
            self._locks = {k: v for k, v in self._locks.items() if v > t}
            # When most locks are still live, pruning again at the next claim would scan them
            # all on every hand-off; wait until the table has doubled instead.
            self._prune_at = max(_MIN_PRUNE, 2 * len(self._locks))
        return True

    async def push_human(self, card: EscalationCard) -> int:
        ticket = HumanTicket(id=len(self._human) + 1, card=card)
        self._human.append(ticket)
        return ticket.id

    async def list_human(self, status: str | None = "open") -> list[HumanTicket]:
        return [t for t in self._human if status is None or t.status == status]

    async def close(self) -> None:
        return None
