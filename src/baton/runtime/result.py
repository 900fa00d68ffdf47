"""`RunResult`: what `Team.run` returns."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from baton.core.events import EscalationCard, Event
from baton.core.messages import Usage
from baton.core.payload import HandoffPayload

RunStatus = Literal["completed", "escalated", "awaiting_approval", "failed"]


class RunResult(BaseModel):
    """The outcome of one run (one user message)."""

    status: RunStatus = Field(description="completed, escalated, awaiting_approval or failed.")
    output: str | None = Field(default=None, description="Final text to the user.")
    path: list[str] = Field(default_factory=list, description="Agents that held the baton.")
    handoffs: list[HandoffPayload] = Field(default_factory=list, description="Accepted hand-offs.")
    usage: dict[str, Usage] = Field(default_factory=dict, description="Tokens per agent.")
    trace_id: str
    session_id: str
    run_id: str
    events: list[Event] = Field(default_factory=list, description="Every event of the run.")
    escalation: EscalationCard | None = Field(default=None, description="Set when escalated.")
    holder: str | None = Field(default=None, description="Agent holding the baton after the run.")
    state: dict[str, Any] = Field(default_factory=dict, description="Session slots after the run.")
    error: str | None = Field(default=None, description="What went wrong, when failed.")

    @property
    def total_usage(self) -> Usage:
        """Tokens of all agents together."""
        total = Usage()
        for u in self.usage.values():
            total.add(u)
        return total
