"""State causality (seed 002): who wrote a session state slot, when, and from what.

Every write to a session's state is a `state_updated` event naming the hop, the agent, the
source (a tool call, a hand-off payload, the entity guard) and `cause`, the id of the event
the value came from. `slot_history` joins each write to its cause, so the question "where did
this `order_id` come from?" is answered from stored events alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from baton.core.events import Event, Handoff, StateUpdated, ToolCalled
from baton.observe.tree import run_numbers


class Cause(BaseModel):
    """The event a written value came from."""

    event_id: str = Field(description="Id of the causing event.")
    type: str = Field(description="Its type: tool_called, handoff, ... or `missing`.")
    tool: str | None = Field(default=None, description="Tool called (tool_called).")
    arguments: dict[str, Any] = Field(default_factory=dict, description="Its arguments.")
    ok: bool | None = Field(default=None, description="Whether the tool call succeeded.")
    source: str | None = Field(default=None, description="Agent handing over (handoff).")
    target: str | None = Field(default=None, description="Agent receiving the baton (handoff).")
    reason: str | None = Field(default=None, description="Why the baton passed (handoff).")

    def describe(self) -> str:
        """One line: `query_invoice(order_id='ORD-1')` or `hand-off triage -> billing: ...`."""
        if self.type == "tool_called":
            args = ", ".join(f"{k}={v!r}" for k, v in self.arguments.items())
            return f"tool call {self.tool}({args})" + ("" if self.ok else " (failed)")
        if self.type == "handoff":
            return f"hand-off {self.source} -> {self.target}: {self.reason}"
        if self.type == "missing":
            return f"event {self.event_id} (not among the stored events)"
        return f"{self.type} event {self.event_id}"


class SlotWrite(BaseModel):
    """One write of a slot, with what caused it."""

    slot: str = Field(description="The slot written.")
    value: Any = Field(description="The value written (redacted as stored).")
    run_id: str = Field(description="Run of the write.")
    run: int = Field(
        description="1-based index of that run in the session (a sub-run: of its top-level run)."
    )
    hop: int = Field(description="Hand-offs so far in that run.")
    agent: str | None = Field(description="Agent holding the baton.")
    source: str = Field(description="tool, handoff or entity_guard.")
    tool: str | None = Field(default=None, description="Tool whose call set it (source tool).")
    event_id: str = Field(description="Id of the `state_updated` event.")
    ts: float = Field(description="Epoch seconds.")
    cause: Cause | None = Field(default=None, description="The causing event, if recorded.")


def _cause(cause_id: str | None, by_id: dict[str, Event]) -> Cause | None:
    if cause_id is None:
        return None
    event = by_id.get(cause_id)
    if event is None:
        return Cause(event_id=cause_id, type="missing")
    if isinstance(event, ToolCalled):
        return Cause(
            event_id=event.id,
            type=event.type,
            tool=event.tool,
            arguments=dict(event.arguments),
            ok=event.ok,
        )
    if isinstance(event, Handoff):
        p = event.payload
        return Cause(
            event_id=event.id, type=event.type, source=p.source, target=p.target, reason=p.reason
        )
    return Cause(event_id=event.id, type=event.type)


def slot_history(events: Sequence[Event], slot: str) -> list[SlotWrite]:
    """Every write of `slot` in `events` (a session's stored events), oldest first."""
    by_id = {e.id: e for e in events}
    runs = run_numbers(events)  # a worker's write counts for the run that asked it
    out: list[SlotWrite] = []
    for e in events:
        if not isinstance(e, StateUpdated) or slot not in e.slots:
            continue
        out.append(
            SlotWrite(
                slot=slot,
                value=e.slots[slot],
                run_id=e.run_id,
                run=runs[e.run_id],
                hop=e.hop,
                agent=e.agent,
                source=e.source,
                tool=e.tool,
                event_id=e.id,
                ts=e.ts,
                cause=_cause(e.cause, by_id),
            )
        )
    return out


def written_slots(events: Sequence[Event]) -> list[str]:
    """Every slot some `state_updated` event wrote, in order of first write."""
    seen: dict[str, None] = {}
    for e in events:
        if isinstance(e, StateUpdated):
            seen.update(dict.fromkeys(e.slots))
    return list(seen)
