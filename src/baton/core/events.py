"""Typed events: the spine everything else (traces, metrics, audit, stores) consumes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from baton.core.approval import ApprovalCard
from baton.core.data import Data
from baton.core.ids import id_factory, now
from baton.core.interrupt import InterruptCard
from baton.core.messages import ToolCall, Usage
from baton.core.payload import HandoffPayload
from baton.core.tasks import TaskStatus

# Events are slotted dataclasses, not pydantic models: a run emits about ten and stores keep
# them, so construction cost and GC-tracked objects per event matter (see `baton.core.data`).
# `EscalationCard` stays a model: it is rare, and validation of what it carries is the point.


_event_id = id_factory("ev_")


@dataclass(slots=True, kw_only=True)
class EventBase(Data):
    """Fields every event carries."""

    id: str = field(default_factory=_event_id)
    """Event id."""
    ts: float = field(default_factory=time.time)  # `now`, without a call frame of its own
    """Epoch seconds."""
    trace_id: str
    """Trace of the run."""
    session_id: str
    """Session of the run."""
    run_id: str
    """Run (one user message) the event belongs to."""
    agent: str | None = None
    """Agent holding the baton, if any."""
    hop: int = 0
    """Hand-offs so far in this run."""
    parent_run_id: str | None = None
    """For an event of a sub-run (a supervisor's worker): the run that delegated it."""
    parent_call_id: str | None = None
    """For an event of a sub-run: the delegating call (`ask_<worker>`) of that run."""


@dataclass(slots=True, kw_only=True)
class RunStarted(EventBase):
    """A user message arrived and a run began."""

    type: Literal["run_started"] = "run_started"
    message: str
    user_id: str | None = None


@dataclass(slots=True, kw_only=True)
class RouteDecided(EventBase):
    """The run's first holder was chosen (by the session, the entry agent or a router)."""

    type: Literal["route_decided"] = "route_decided"
    target: str
    tier: str
    """session, entry, rules, semantic, llm or fallback."""
    score: float | None = None
    candidates: tuple[str, ...] = ()
    latency_ms: float = 0.0
    verdicts: tuple[str, ...] = ()
    """Each tier's verdict in order, e.g. `semantic: billing 0.83` (router teams only)."""


@dataclass(slots=True, kw_only=True)
class AgentStarted(EventBase):
    """An agent took the baton and started its turn."""

    type: Literal["agent_started"] = "agent_started"
    reason: str = ""
    policy: str | None = None
    """Context policy of a turn that began with a hand-off (structured, recent(n), ...)."""
    context_tokens: int = 0
    """Size of the view the turn starts from (instructions, payload, conversation), in tokens
    (`baton.models.base.estimate_tokens`: one estimate for every model, so policies compare)."""
    conductor: bool = False
    """The agent is a conductor (`baton.runtime.conduct`): its steps are decided in code, within
    its round budget; it has no model and makes no model calls."""


@dataclass(slots=True, kw_only=True)
class HandoffUsage(Data):
    """Tokens a hand-off cost: the receiver's turn after it, under the policy it was given."""

    hop: int
    source: str
    target: str
    policy: str
    context_tokens: int
    """Estimated size of the receiver's starting view."""
    usage: Usage
    """Tokens of the receiver's model calls in that turn, as its model counted them."""


@dataclass(slots=True, kw_only=True)
class ModelCalled(EventBase):
    """One model call finished."""

    type: Literal["model_called"] = "model_called"
    model: str
    usage: Usage
    latency_ms: float
    tool_calls: tuple[str, ...] = ()
    """Names of tools requested."""
    text: str | None = None
    reask: bool = False
    """True for the re-ask after a parse error."""
    error: str | None = None
    calls: tuple[ToolCall, ...] = ()
    """The tool calls requested, with their ids and arguments as the model wrote them (what a
    replay answers with, `baton.replay`); empty in events recorded before they were kept."""
    asked: str | None = None
    """A fingerprint of the last user message the model was shown (`request_lane`): the
    same in every call of one turn, so a replay tells apart the calls of one agent working
    on two things at once (a supervisor's parallel asks, two tasks of a plan)."""
    purpose: Literal["turn", "compress", "summary", "notes"] = "turn"
    """What the call was for: a step of the agent's turn, or a summariser's work on its
    behalf (compressing a tool result, summarising a hand-off, rolling conversation notes)."""


@dataclass(slots=True, kw_only=True)
class ToolCalled(EventBase):
    """One tool call finished (successfully or with an error result)."""

    type: Literal["tool_called"] = "tool_called"
    tool: str
    call_id: str
    arguments: dict[str, Any] = field(default_factory=dict)
    ok: bool
    error: str | None = None
    latency_ms: float = 0.0
    result_chars: int = 0
    truncated: bool = False
    reused: str | None = None
    """The id of the identical earlier call of the turn whose result answered this one (it
    did not run again, `baton.runtime.reuse`)."""


@dataclass(slots=True, kw_only=True)
class StateUpdated(EventBase):
    """Business slots were written to the session's state (state causality, seed 002).

    `cause` is the id of the event that produced the values: the `tool_called` event of the
    tool whose arguments set them, or the `handoff` event whose payload carried them.
    """

    type: Literal["state_updated"] = "state_updated"
    slots: dict[str, Any]
    """Slot -> new value (redacted like every other event)."""
    source: str
    """tool, handoff or entity_guard."""
    tool: str | None = None
    """The tool whose call set the slots (source `tool`)."""
    cause: str | None = None
    """Id of the event the values came from."""


@dataclass(slots=True, kw_only=True)
class Handoff(EventBase):
    """The baton passed from `payload.source` to `payload.target`."""

    type: Literal["handoff"] = "handoff"
    payload: HandoffPayload


@dataclass(slots=True, kw_only=True)
class HandoffRefused(EventBase):
    """A hand-off was refused (not permitted, invalid payload, or not the first)."""

    type: Literal["handoff_refused"] = "handoff_refused"
    target: str
    reason: str


@dataclass(slots=True, kw_only=True)
class GuardTripped(EventBase):
    """A guard stopped something: loops, limits, timeouts, duplicates."""

    type: Literal["guard_tripped"] = "guard_tripped"
    guard: str
    """max_hops, max_visits, ping_pong, duplicate_handoff, ..."""
    detail: str


@dataclass(slots=True, kw_only=True)
class GuardrailTripped(EventBase):
    """A guardrail blocked the run: the user's message (stage `input`) or the reply (`output`).
    `agent` is the holder whose message or reply it was."""

    type: Literal["guardrail_tripped"] = "guardrail_tripped"
    guardrail: str
    """The rule's name."""
    stage: str
    """input or output."""
    reason: str
    """The verdict's reason, or why the check could not give one."""
    failed: bool = False
    """The check itself failed (raised, timed out, gave no verdict) and the rule fails closed."""


@dataclass(slots=True, kw_only=True)
class GuardrailRewrote(EventBase):
    """An output guardrail rewrote the reply: the user reads the rewritten text."""

    type: Literal["guardrail_rewrote"] = "guardrail_rewrote"
    guardrail: str
    """The rule's name."""
    reason: str = ""


class EscalationCard(BaseModel):
    """What a human or fallback agent needs to take over."""

    model_config = ConfigDict(defer_build=True)  # built on first use, not at `import baton`

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


@dataclass(slots=True, kw_only=True)
class Escalated(EventBase):
    """The run was escalated to the fallback (an agent or the human queue)."""

    type: Literal["escalated"] = "escalated"
    to: str
    """Fallback agent name, or 'human'."""
    card: EscalationCard


@dataclass(slots=True, kw_only=True)
class RunFinished(EventBase):
    """The run ended."""

    type: Literal["run_finished"] = "run_finished"
    status: str
    output: str | None = None
    path: list[str] = field(default_factory=list)
    usage: dict[str, Usage] = field(default_factory=dict)
    latency_ms: float = 0.0
    error: str | None = None
    handoff_usage: list[HandoffUsage] = field(default_factory=list)
    """Tokens per hand-off (the receiver's turn)."""


@dataclass(slots=True, kw_only=True)
class ToolRefused(EventBase):
    """A tool call was refused before it ran: the agent lacks a scope the tool needs."""

    type: Literal["tool_refused"] = "tool_refused"
    tool: str
    call_id: str
    reason: str
    missing_scopes: tuple[str, ...] = ()


@dataclass(slots=True, kw_only=True)
class ApprovalRequested(EventBase):
    """A tool call or hand-off needs a person's sign-off; the run pauses."""

    type: Literal["approval_requested"] = "approval_requested"
    card: ApprovalCard


@dataclass(slots=True, kw_only=True)
class ApprovalDecided(EventBase):
    """A person approved or rejected a waiting call (or it timed out)."""

    type: Literal["approval_decided"] = "approval_decided"
    approval_id: str
    decision: Literal["approved", "rejected", "pending", "expired"]
    """`pending`: one of two sign-offs given."""
    by: str | None = None
    role: str | None = None
    reason: str = ""
    authenticated: bool = False
    """Who decided was verified by the channel (the API server's token), not only named."""


@dataclass(slots=True, kw_only=True)
class RunResumed(EventBase):
    """A paused or interrupted run continued from its last checkpoint."""

    type: Literal["run_resumed"] = "run_resumed"
    checkpoint: int
    """Sequence number of the checkpoint it continued from."""
    reason: str = ""


@dataclass(slots=True, kw_only=True)
class TaskTransitioned(EventBase):
    """A task of a plan moved through its state machine (`baton.core.tasks`)."""

    type: Literal["task_transitioned"] = "task_transitioned"
    task_id: str
    from_status: TaskStatus
    to_status: TaskStatus
    reason: str = ""
    attempt: int = 0
    """The task's executor runs so far (0 before its first)."""
    final: bool = False
    """True for the step into the task's terminal state."""


@dataclass(slots=True, kw_only=True)
class InterruptRaised(EventBase):
    """A node or tool called `interrupt(value)`: the run stops until a person answers."""

    type: Literal["interrupt_raised"] = "interrupt_raised"
    card: InterruptCard


@dataclass(slots=True, kw_only=True)
class InterruptResumed(EventBase):
    """A person answered an interrupt: its call runs again with the answer."""

    type: Literal["interrupt_resumed"] = "interrupt_resumed"
    interrupt_id: str
    name: str
    """The tool or node that asked."""


@dataclass(slots=True, kw_only=True)
class BoardWritten(EventBase):
    """An agent wrote an entry of a blackboard (`post_to_board`); `agent` is the writer."""

    type: Literal["board_written"] = "board_written"
    board: str
    key: str
    mode: Literal["set", "append", "merge"] = "set"
    version: int
    """The entry's version after this write."""
    seq: int
    """The board-wide number of this write (`Blackboard.board_changes`)."""
    conflicts: int = 0
    """Writes of other writers it met between reading and writing: each made it read the
    entry again and re-apply its change (board contention)."""
    call_id: str | None = None


@dataclass(slots=True, kw_only=True)
class MemoryForgotten(EventBase):
    """Everything a team's long-term memory kept about a user was deleted
    (`baton.memory.Memory.forget`); stored, so a store's audit trail chains it."""

    type: Literal["memory_forgotten"] = "memory_forgotten"
    user_id: str
    """The user whose memories were deleted."""
    deleted: int
    """How many memories were deleted."""
    by: str | None = None
    """Who asked for it (an operator, the user themself), as the caller named them."""
    where: str = ""
    """The memory it was deleted from (its folder or server URL)."""


@dataclass(slots=True, kw_only=True)
class TextDelta(EventBase):
    """A piece of a streaming model's reply (only for `team.stream`; never stored)."""

    type: Literal["text_delta"] = "text_delta"
    text: str


Event = Annotated[
    RunStarted
    | RouteDecided
    | AgentStarted
    | ModelCalled
    | ToolCalled
    | StateUpdated
    | Handoff
    | HandoffRefused
    | GuardTripped
    | GuardrailTripped
    | GuardrailRewrote
    | Escalated
    | RunFinished
    | ToolRefused
    | ApprovalRequested
    | ApprovalDecided
    | RunResumed
    | TaskTransitioned
    | InterruptRaised
    | InterruptResumed
    | BoardWritten
    | MemoryForgotten
    | TextDelta,
    Field(discriminator="type"),
]
"""Any Baton event; discriminated by its `type` field."""

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event, config=ConfigDict(defer_build=True))
"""Validates and serialises any event; built on first use, so `import baton` stays fast."""


def event_from_json(data: str | bytes) -> Event:
    """Parse one event from its JSON form (as written by sinks and stores)."""
    return EVENT_ADAPTER.validate_json(data)


def event_from_dict(data: dict[str, Any]) -> Event:
    """Parse one event from a dict."""
    return EVENT_ADAPTER.validate_python(data)
