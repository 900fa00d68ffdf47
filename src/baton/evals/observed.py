"""What a case's runs showed, read from their events: the route, the tool calls, validity."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from baton.core.events import Event
from baton.evals.spec import HUMAN_ROUTE
from baton.runtime.result import RunResult

ANSWERED_ITSELF = "(answered itself)"
"""The route of a run whose entry agent answered without handing the baton to anyone."""
GUARD_ESCALATED = "(escalated by a guard)"
"""The route of a run a guard escalated before any hand-off."""

INVALID_ERRORS = ("unknown tool", "invalid arguments for")
"""Starts of tool errors that mean the model's call itself was malformed."""


@dataclass
class ToolCallRecord:
    """One tool call the kernel ran, as its `tool_called` event recorded it."""

    tool: str
    arguments: dict[str, Any]
    ok: bool
    error: str | None = None


@dataclass
class Observed:
    """Everything the checks read about one attempt of a case (all its turns together)."""

    route: str
    path: list[str]
    status: str
    output: str
    state: dict[str, Any]
    calls: list[ToolCallRecord]
    escalated: bool
    emitted: int = 0
    """Tool and hand-off calls the model emitted."""
    invalid: int = 0
    """Of those, the ones that did not parse, named no available tool, had invalid arguments
    or were refused hand-offs."""
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    turn_ms: list[float] = field(default_factory=list)


def first_route(events: Sequence[Event]) -> str:
    """The first agent given the baton after the entry: the first hand-off's target, the
    router's choice, `human` for an escalation the holder asked for (`transfer_to_human`)."""
    asked: Sequence[str] = ()
    for e in events:
        if e.type == "route_decided" and e.tier not in ("entry", "session"):
            started = any(x.type == "agent_started" for x in events)
            return e.target if started else HUMAN_ROUTE
        if e.type == "model_called":
            asked = e.tool_calls
        elif e.type == "handoff":
            return e.payload.target
        elif e.type == "escalated":
            return HUMAN_ROUTE if f"transfer_to_{HUMAN_ROUTE}" in asked else GUARD_ESCALATED
    return ANSWERED_ITSELF


def call_validity(events: Sequence[Event]) -> tuple[int, int]:
    """(emitted, invalid) tool and hand-off calls: a call is invalid when its response had to
    be asked again (it did not parse), it named no tool of the agent, its arguments failed the
    schema, or its hand-off was refused. Calls a guard stopped were well-formed: valid."""
    emitted = invalid = 0
    calls = [e for e in events if e.type == "model_called"]
    for i, mc in enumerate(calls):
        emitted += len(mc.tool_calls)
        if i + 1 < len(calls) and calls[i + 1].reask:
            invalid += max(1, len(mc.tool_calls))
    for e in events:
        if e.type == "handoff_refused":
            invalid += 1
        elif e.type == "tool_called" and not e.ok and e.error:
            err = e.error
            if (
                err.startswith(INVALID_ERRORS)
                or "not valid JSON" in err
                or "expected a JSON object" in err
            ):
                invalid += 1
    return emitted, invalid


def observe(results: Sequence[RunResult]) -> Observed:
    """The attempt as the checks see it: the first turn's route, every turn's calls and
    path, the last turn's status, answer and session state."""
    first, last = results[0], results[-1]
    events = [e for r in results for e in r.events]
    emitted = invalid = 0
    for r in results:
        e, i = call_validity(r.events)
        emitted, invalid = emitted + e, invalid + i
    model_calls = [e for e in events if e.type == "model_called"]
    return Observed(
        route=first_route(first.events),
        path=[a for r in results for a in r.path],
        status=last.status,
        output=last.output or "",
        state=dict(last.state),
        calls=[
            ToolCallRecord(e.tool, dict(e.arguments), e.ok, e.error)
            for e in events
            if e.type == "tool_called"
        ],
        escalated=any(e.type == "escalated" for e in events),
        emitted=emitted,
        invalid=invalid,
        model_calls=len(model_calls),
        input_tokens=sum(e.usage.input_tokens for e in model_calls),
        output_tokens=sum(e.usage.output_tokens for e in model_calls),
        turn_ms=[e.latency_ms for e in model_calls],
    )
