"""The `Store` protocol: sessions, transcripts, events, locks and the human queue."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from baton.core.events import EscalationCard, Event
from baton.core.ids import now
from baton.core.messages import Message
from baton.core.payload import HandoffPayload


@dataclass
class SessionRecord:
    """What a store keeps per session between runs."""

    session_id: str
    user_id: str | None = None
    holder: str | None = None
    """Agent that held the baton when the last run ended; the next run starts there."""
    holder_since: str | None = None
    """Id of the user message of the run in which the holder took the baton."""
    incoming: HandoffPayload | None = None
    """The payload with which the holder received the baton, if it did by hand-off."""
    state: dict[str, Any] = field(default_factory=dict)
    """Accumulated business slots (order_id, server_id, ...)."""
    created_at: float = field(default_factory=now)
    updated_at: float = field(default_factory=now)


@dataclass
class HumanTicket:
    """An escalation waiting in the human queue."""

    id: int
    card: EscalationCard
    status: str = "open"


@runtime_checkable
class Store(Protocol):
    """Persistence the kernel needs. Implementations: memory, SQLite (more in later releases)."""

    url: str

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """The session, or None if it does not exist."""
        ...

    async def commit_run(
        self, session: SessionRecord, messages: list[Message], events: list[Event]
    ) -> None:
        """Atomically save the session and append the run's messages and events."""
        ...

    async def get_messages(self, session_id: str, limit: int | None = None) -> list[Message]:
        """The session's transcript, oldest first (the last `limit` messages if given)."""
        ...

    async def get_events(
        self, session_id: str | None = None, trace_id: str | None = None
    ) -> list[Event]:
        """Stored events of a session and/or trace, in order."""
        ...

    async def list_sessions(self, limit: int = 100) -> list[SessionRecord]:
        """Most recently updated sessions first."""
        ...

    async def claim_lock(self, key: str, window_s: float) -> bool:
        """Claim `key` for `window_s` seconds; False if a live claim already exists."""
        ...

    async def push_human(self, card: EscalationCard) -> int:
        """Put an escalation card in the human queue; returns its ticket id."""
        ...

    async def list_human(self, status: str | None = "open") -> list[HumanTicket]:
        """Tickets in the human queue, oldest first."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...
