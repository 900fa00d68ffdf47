"""`RunResult`: what `Team.run` returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from baton.core.approval import ApprovalCard
from baton.core.data import Data
from baton.core.events import EscalationCard, Event, HandoffUsage
from baton.core.interrupt import InterruptCard
from baton.core.messages import Usage
from baton.core.payload import HandoffPayload

RunStatus = Literal[
    "completed", "escalated", "awaiting_approval", "interrupted", "failed", "cancelled", "blocked"
]


# A slotted dataclass, not a pydantic model: as a model it would re-validate (rebuild) every
# event of the run on construction; see `baton.core.data`.
@dataclass(slots=True, kw_only=True)
class RunResult(Data):
    """The outcome of one run (one user message)."""

    status: RunStatus
    """completed, escalated, awaiting_approval, interrupted, failed, cancelled or blocked (a
    guardrail's tripwire)."""
    output: str | None = None
    """Final text to the user (an agent with an `output_type` answers JSON text; a blocked
    run's is the guardrail's message)."""
    final: Any = None
    """The answer validated into the answering agent's `output_type` (e.g. a pydantic model
    instance); None when it has none or the run did not complete."""
    path: list[str] = field(default_factory=list)
    """Agents that held the baton."""
    handoffs: list[HandoffPayload] = field(default_factory=list)
    """Accepted hand-offs."""
    citations: list[dict[str, Any]] = field(default_factory=list)
    """What the run's citing tools cited (`Tool.cites`, e.g. a knowledge base's search), its
    workers' and stages' included: the kernel's record, not a model's."""
    usage: dict[str, Usage] = field(default_factory=dict)
    """Tokens per agent (summaries a source's model wrote count for that agent)."""
    usage_by_handoff: list[HandoffUsage] = field(default_factory=list)
    """Tokens per hand-off: the receiver's turn, its context policy and starting view size."""
    trace_id: str
    session_id: str
    run_id: str
    events: list[Event] = field(default_factory=list)
    """Every event of the run."""
    escalation: EscalationCard | None = None
    """Set when escalated."""
    approval: ApprovalCard | None = None
    """Set when awaiting_approval: what a person must decide (`team.approve`/`team.reject`)."""
    interrupt: InterruptCard | None = None
    """Set when interrupted: what `interrupt(value)` asked (answer it with `graph.resume(
    thread_id, value)` or `team.answer_interrupt`)."""
    holder: str | None = None
    """Agent holding the baton after the run."""
    state: dict[str, Any] = field(default_factory=dict)
    """Session slots after the run; secrets masked (`[REDACTED:password]`): a tool that
    needs one gets it from the kernel, not from here."""
    provenance: dict[str, str] = field(default_factory=dict)
    """Where each slot's value came from: `tool` or `kernel` (verified), `user` (the user's
    own words). Approval policies see the verified slots only."""
    error: str | None = None
    """What went wrong, when failed; why, when cancelled; which guardrail blocked what and
    why, when blocked."""

    @property
    def usage_by_policy(self) -> dict[str, Usage]:
        """Tokens of receivers' turns, summed per context policy."""
        out: dict[str, Usage] = {}
        for h in self.usage_by_handoff:
            out.setdefault(h.policy, Usage()).add(h.usage)
        return out

    @property
    def total_usage(self) -> Usage:
        """Tokens of all agents together."""
        total = Usage()
        for u in self.usage.values():
            total.add(u)
        return total
