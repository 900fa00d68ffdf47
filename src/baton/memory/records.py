"""What a memory is: its text, scope, kind, provenance and times; and how it ranks.

Pure data, no vector engine: `baton.memory.store` keeps these in Qdrant.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Kind = Literal["fact", "lesson", "preference"]
"""A fact about the user, a lesson an agent learned, or what the user prefers."""

Who = Literal["user", "agent", "tool", "summariser"]
"""Whose words a memory keeps: the user's, an agent's (a `remember` call), a tool's result,
or the summariser's notes at the end of a run."""

KINDS: tuple[Kind, ...] = ("fact", "lesson", "preference")


class Provenance(BaseModel):
    """Where a memory came from: the session, run and message or call, and whose words."""

    model_config = ConfigDict(frozen=True)

    who: Who
    session_id: str | None = None
    run_id: str | None = None
    ref: str | None = None
    """The message or tool call id it was taken from."""
    agent: str | None = None
    """The agent that wrote it (a `remember` call), if any."""


class MemoryRecord(BaseModel):
    """One memory, scoped to a user and/or an agent."""

    model_config = ConfigDict(frozen=True)

    id: str
    text: str = Field(min_length=1)
    """What is remembered, redacted before it was stored."""
    kind: Kind
    user_id: str | None = None
    """The user it is about; None: an agent's memory for every user (written by the
    application, never by a run)."""
    agent: str | None = None
    """The agent it is for; None: every agent of the team (for this user)."""
    provenance: Provenance
    created_at: float
    expires_at: float | None = None
    """When it is no longer recalled (epoch seconds); None: never expires."""
    last_used: float
    """When it was last recalled (its creation until then)."""
    uses: int = 0
    """How many times it was recalled."""


class Recalled(BaseModel):
    """A memory recalled for a query, with how it ranked."""

    model_config = ConfigDict(frozen=True)

    record: MemoryRecord
    similarity: float
    """Cosine similarity of the memory's text to the query."""
    score: float
    """The similarity after decay: what the ranking orders by."""


def decay(record: MemoryRecord, now: float, half_life_s: float) -> float:
    """The weight of a memory idle since its last use (or creation): 1 when fresh, one half
    after `half_life_s`, and so on; recalling it makes it fresh again."""
    idle = max(0.0, now - max(record.created_at, record.last_used))
    return math.pow(0.5, idle / half_life_s)


def rank(similarity: float, record: MemoryRecord, now: float, half_life_s: float) -> float:
    """The ranking score: similarity, weighed by decay."""
    return similarity * decay(record, now, half_life_s)
