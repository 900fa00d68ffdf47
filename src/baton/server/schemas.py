"""Request and response models of the API server (they make its OpenAPI schema)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from baton.backends.base import HumanTicket
from baton.core.approval import ApprovalCard
from baton.core.events import EscalationCard
from baton.core.interrupt import InterruptCard
from baton.core.messages import Message
from baton.core.payload import HandoffPayload
from baton.core.text import VISIBLE_PATTERN
from baton.observe.causality import SlotWrite
from baton.observe.tree import RunNode
from baton.runtime.result import RunResult
from baton.server.ids import REQUEST_ID, SESSION_ID, USER_ID

MAX_MESSAGE_CHARS = 100_000
"""Longest user message `POST /runs` accepts."""

SessionStatus = Literal[
    "running", "awaiting_approval", "interrupted", "escalated", "cancelled", "idle"
]
TicketFilter = Literal["open", "claimed", "answered", "closed", "all"]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ------------------------------------------------------------------------------ errors
class ErrorOut(BaseModel):
    """Every 4xx/5xx answer: what is wrong and what to do."""

    detail: str = Field(description="What is wrong and what to do.")


class ValidationProblem(BaseModel):
    """One problem of an invalid request."""

    loc: list[str | int] = Field(description="Where: body, query or path, then the field.")
    msg: str
    type: str


class ValidationErrorOut(ErrorOut):
    """422 for an invalid request."""

    errors: list[ValidationProblem] = Field(default_factory=list)


# -------------------------------------------------------------------------------- runs
class RunIn(_Body):
    """One user message for the team."""

    message: str = Field(
        min_length=1,
        max_length=MAX_MESSAGE_CHARS,
        description="The user message (with at least one readable character).",
        # documented, not enforced here: `precheck` refuses a blank message in plain words
        json_schema_extra={"pattern": VISIBLE_PATTERN},
    )
    session_id: str | None = Field(
        default=None,
        pattern=SESSION_ID,
        description="Continue this session; a new one when omitted ([A-Za-z0-9._:-], 1 to 128).",
    )
    user_id: str | None = Field(
        default=None,
        pattern=USER_ID,
        description="The end user ([A-Za-z0-9._:@+-], 1 to 128); it must be the token's own "
        "`user_id` unless the token may act for users.",
    )
    request_id: str | None = Field(
        default=None,
        pattern=REQUEST_ID,
        description="Retry key: a request the session answered is not run again "
        "([A-Za-z0-9._:-], 1 to 128).",
    )


class Tokens(BaseModel):
    """Token counts."""

    input_tokens: int = 0
    output_tokens: int = 0


class RunSummary(BaseModel):
    """The outcome of a run (or of a decision that resumed one)."""

    session_id: str
    run_id: str
    trace_id: str
    status: Literal[
        "completed",
        "escalated",
        "awaiting_approval",
        "interrupted",
        "failed",
        "cancelled",
        "blocked",
    ] = Field(description="blocked: a guardrail stopped the run; `output` is its message.")
    output: str | None = None
    path: list[str] = Field(default_factory=list, description="Agents that held the baton.")
    holder: str | None = Field(default=None, description="Who holds the baton after the run.")
    approval: ApprovalCard | None = None
    interrupt: InterruptCard | None = None
    escalation: EscalationCard | None = None
    ticket_id: int | None = Field(
        default=None, description="The escalation's ticket in the human queue, if any."
    )
    error: str | None = None
    usage: dict[str, Tokens] = Field(default_factory=dict, description="Tokens per agent.")
    total_tokens: Tokens = Field(default_factory=Tokens)

    @classmethod
    def of(cls, result: RunResult, ticket_id: int | None = None) -> RunSummary:
        """The summary of a `RunResult`."""
        total = result.total_usage
        return cls(
            session_id=result.session_id,
            run_id=result.run_id,
            trace_id=result.trace_id,
            status=result.status,
            output=result.output,
            path=list(result.path),
            holder=result.holder,
            approval=result.approval,
            interrupt=result.interrupt,
            escalation=result.escalation,
            ticket_id=ticket_id,
            error=result.error,
            usage={
                agent: Tokens(input_tokens=u.input_tokens, output_tokens=u.output_tokens)
                for agent, u in result.usage.items()
            },
            total_tokens=Tokens(input_tokens=total.input_tokens, output_tokens=total.output_tokens),
        )


class QueuedOut(BaseModel):
    """A turn queued on the bus (202)."""

    request_id: str
    session_id: str
    status: Literal["queued"] = "queued"


class PendingOut(BaseModel):
    """No worker reported the session's request yet (202)."""

    request_id: str
    session_id: str
    status: Literal["pending"] = "pending"


class TurnOut(BaseModel):
    """What a worker reported for a queued request."""

    request_id: str
    session_id: str
    status: str
    output: str | None = None
    error: str | None = None
    run_id: str | None = None
    worker: str = ""
    finished_at: float


# ---------------------------------------------------------------------------- sessions
class SessionSummary(BaseModel):
    """A session with its live status."""

    session_id: str
    user_id: str | None = None
    holder: str | None = Field(default=None, description="The agent holding the baton.")
    status: SessionStatus
    approval_id: str | None = None
    interrupt_id: str | None = None
    ticket_ids: list[int] = Field(default_factory=list)
    created_at: float
    updated_at: float


class ToolCallOut(BaseModel):
    """A tool call a model asked for."""

    id: str
    name: str
    arguments: str = Field(description="The arguments as JSON text.")


class MessageOut(BaseModel):
    """One transcript entry, as stored (masked at rest)."""

    id: str
    role: str
    content: str | None = None
    agent: str | None = None
    tool_calls: list[ToolCallOut] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    run_id: str | None = None
    ts: float

    @classmethod
    def of(cls, m: Message) -> MessageOut:
        """From a stored message."""
        calls = (
            [ToolCallOut(id=c.id, name=c.name, arguments=c.arguments) for c in m.tool_calls]
            if m.tool_calls is not None
            else None
        )
        return cls(
            id=m.id,
            role=m.role,
            content=m.content,
            agent=m.agent,
            tool_calls=calls,
            tool_call_id=m.tool_call_id,
            name=m.name,
            run_id=m.run_id,
            ts=m.ts,
        )


class SlotOut(BaseModel):
    """A state slot, its current value and every write of it with its cause."""

    slot: str
    value: Any = Field(default=None, description="Current value (null: not in the state).")
    writes: list[SlotWrite] = Field(default_factory=list)


class TicketOut(BaseModel):
    """A ticket of the human queue."""

    id: int
    status: Literal["open", "claimed", "answered", "closed"]
    claimed_by: str | None = None
    answer: str | None = None
    note: str = ""
    updated_at: float
    session_id: str
    card: EscalationCard
    summary: str = Field(description="The hand-over card as text.")

    @classmethod
    def of(cls, t: HumanTicket) -> TicketOut:
        """From a stored ticket."""
        return cls(
            id=t.id,
            status=t.status,
            claimed_by=t.claimed_by,
            answer=t.answer,
            note=t.note,
            updated_at=t.updated_at,
            session_id=t.card.session_id,
            card=t.card,
            summary=t.card.render(),
        )


class SessionDetail(BaseModel):
    """A session: summary, transcript, state with causality, what it waits on."""

    session: SessionSummary
    messages: list[MessageOut]
    state: dict[str, Any]
    slots: list[SlotOut]
    incoming: HandoffPayload | None = None
    approval: ApprovalCard | None = None
    interrupt: InterruptCard | None = None
    tickets: list[TicketOut] = Field(default_factory=list)


class TraceOut(BaseModel):
    """The session's trace tree (`baton trace S -f json --view tree`)."""

    session_id: str
    runs: list[RunNode]


# ------------------------------------------------------------------------ decisions
class DecisionIn(_Body):
    """An approval decision."""

    session_id: str | None = Field(
        default=None, pattern=SESSION_ID, description="The card's session (found when omitted)."
    )
    role: str | None = Field(
        default=None, min_length=1, max_length=200, description="The role to decide in."
    )
    reason: str = Field(
        default="", max_length=10_000, description="Why (recorded; read by the agent)."
    )


class InterruptAnswerIn(_Body):
    """An answer to an interrupt."""

    value: Any = Field(description="What `interrupt(...)` returns on resume (any JSON).")
    session_id: str | None = Field(
        default=None, pattern=SESSION_ID, description="The card's session (found when omitted)."
    )


class TicketAnswerIn(_Body):
    """A person's answer to a ticket."""

    reply: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS, description="To the user.")
    hand_back_to: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="The agent that takes the baton; it stays with the person when omitted.",
    )


class TicketCloseIn(_Body):
    """Closing a ticket."""

    note: str = Field(default="", max_length=10_000)


# ---------------------------------------------------------------------------------- ops
class HealthOut(BaseModel):
    status: Literal["ok"] = "ok"


class ReadyOut(BaseModel):
    status: Literal["ready", "unavailable"]
    store: str = Field(description="The store's URL scheme.")
    detail: str | None = None


class MeOut(BaseModel):
    name: str
    roles: list[str]
    user_id: str | None = Field(
        default=None, description="The end user every run of this token serves, if bound."
    )
    auth: bool = Field(description="False in the open mode (no token file).")


class AgentOut(BaseModel):
    description: str = ""
    tools: list[str] = Field(default_factory=list)
    handoffs: list[str] = Field(default_factory=list)
    conductor_rounds: int | None = Field(
        default=None,
        description="A conductor's round budget: it decides in code and has no model. "
        "None for an agent with a model.",
    )


class TeamOut(BaseModel):
    entry: str
    fallback: str
    agents: dict[str, AgentOut]
    mermaid: str
