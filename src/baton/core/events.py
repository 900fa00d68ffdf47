"""Typed events: the spine everything else (traces, metrics, audit, stores) consumes."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter

from baton.core.ids import new_id, now
from baton.core.messages import Usage
from baton.core.payload import HandoffPayload


class EventBase(BaseModel):
    """Fields every event carries."""

    id: str = Field(default_factory=lambda: new_id("ev_"), description="Event id.")
    ts: float = Field(default_factory=now, description="Epoch seconds.")
    trace_id: str = Field(description="Trace of the run.")
    session_id: str = Field(description="Session of the run.")
    run_id: str = Field(description="Run (one user message) the event belongs to.")
    agent: str | None = Field(default=None, description="Agent holding the baton, if any.")
    hop: int = Field(default=0, description="Hand-offs so far in this run.")


class RunStarted(EventBase):
    """A user message arrived and a run began."""

    type: Literal["run_started"] = "run_started"
    message: str
    user_id: str | None = None


class RouteDecided(EventBase):
    """The run's first holder was chosen (by the session, the entry agent or a router)."""

    type: Literal["route_decided"] = "route_decided"
    target: str
    tier: str = Field(description="session, entry, rules, semantic, llm or fallback.")
    score: float | None = None
    candidates: list[str] = Field(default_factory=list)
    latency_ms: float = 0.0


class AgentStarted(EventBase):
    """An agent took the baton and started its turn."""

    type: Literal["agent_started"] = "agent_started"
    reason: str = ""


class ModelCalled(EventBase):
    """One model call finished."""

    type: Literal["model_called"] = "model_called"
    model: str
    usage: Usage
    latency_ms: float
    tool_calls: list[str] = Field(default_factory=list, description="Names of tools requested.")
    text: str | None = None
    reask: bool = Field(default=False, description="True for the re-ask after a parse error.")
    error: str | None = None


class ToolCalled(EventBase):
    """One tool call finished (successfully or with an error result)."""

    type: Literal["tool_called"] = "tool_called"
    tool: str
    call_id: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    ok: bool
    error: str | None = None
    latency_ms: float = 0.0
    result_chars: int = 0
    truncated: bool = False


class Handoff(EventBase):
    """The baton passed from `payload.source` to `payload.target`."""

    type: Literal["handoff"] = "handoff"
    payload: HandoffPayload


class HandoffRefused(EventBase):
    """A hand-off was refused (not permitted, invalid payload, or not the first)."""

    type: Literal["handoff_refused"] = "handoff_refused"
    target: str
    reason: str


class GuardTripped(EventBase):
    """A guard stopped something: loops, limits, timeouts, duplicates."""

    type: Literal["guard_tripped"] = "guard_tripped"
    guard: str = Field(description="max_hops, max_visits, ping_pong, duplicate_handoff, ...")
    detail: str


class EscalationCard(BaseModel):
    """What a human or fallback agent needs to take over."""

    session_id: str
    trace_id: str
    user_id: str | None = None
    path: list[str]
    reasons: list[str]
    state: dict[str, Any] = Field(default_factory=dict)
    last_user_message: str = ""
    last_reply: str | None = Field(default=None, description="Last thing the user was told.")
    created_at: float = Field(default_factory=now)

    def render(self, include_state: bool = True) -> str:
        """The card as text, for a fallback agent's instructions or a console."""
        import json

        lines = [
            "ESCALATION",
            f"Path: {' -> '.join(self.path)}",
            f"Reasons: {'; '.join(self.reasons)}",
        ]
        if include_state:
            lines.append(f"State: {json.dumps(self.state, ensure_ascii=False, default=str)}")
        lines.append(f"User said: {self.last_user_message}")
        lines.append(f"Last reply to the user: {self.last_reply or '(none)'}")
        return "\n".join(lines)


class Escalated(EventBase):
    """The run was escalated to the fallback (an agent or the human queue)."""

    type: Literal["escalated"] = "escalated"
    to: str = Field(description="Fallback agent name, or 'human'.")
    card: EscalationCard


class RunFinished(EventBase):
    """The run ended."""

    type: Literal["run_finished"] = "run_finished"
    status: str
    output: str | None = None
    path: list[str] = Field(default_factory=list)
    usage: dict[str, Usage] = Field(default_factory=dict)
    latency_ms: float = 0.0
    error: str | None = None


Event = Annotated[
    RunStarted
    | RouteDecided
    | AgentStarted
    | ModelCalled
    | ToolCalled
    | Handoff
    | HandoffRefused
    | GuardTripped
    | Escalated
    | RunFinished,
    Field(discriminator="type"),
]
"""Any Baton event; discriminated by its `type` field."""

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)


def event_from_json(data: str | bytes) -> Event:
    """Parse one event from its JSON form (as written by sinks and stores)."""
    return EVENT_ADAPTER.validate_json(data)


def event_from_dict(data: dict[str, Any]) -> Event:
    """Parse one event from a dict."""
    return EVENT_ADAPTER.validate_python(data)
