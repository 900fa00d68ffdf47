"""The steps of a run, as a replay compares them: each stored event less what differs on
every run (ids, times, latencies, token counts, model names), so two runs that did the same
thing have equal steps, and the first unequal step is where they parted.

What a step keeps: the agent and hop, and the event's own fields — the route and its tier,
each model call's tool names and text, each tool call's name, arguments and outcome, each
hand-off's payload (reason, objective, state, path), guard and guardrail decisions, state
slots written and by whom, approvals asked and decided, and how the run finished.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from baton.core.events import EVENT_ADAPTER, Event

VOLATILE = frozenset(
    {
        "id",
        "ts",
        "trace_id",
        "session_id",
        "run_id",
        "parent_run_id",
        "parent_call_id",
        "latency_ms",
        "usage",
        "handoff_usage",
        "cause",
        "call_id",
        "created_at",
        "model",
        "approval_id",
        "interrupt_id",
        "task_id",
        "checkpoint",
        "context_tokens",
        "history_ref",
        "score",
        "verdicts",
        "expires_at",
        "requested_at",
        "decided_at",
        "seq",
        "asked",
        "conflicts",
    }
)
"""Keys that differ on every run of the same conversation (at any depth)."""

SKIPPED = frozenset({"text_delta"})
"""Event types that are never stored, so never compared."""

WORDING = {"model_called": ("text",), "run_finished": ("output",), "escalated": ("card",)}
"""What a live model may word differently without the run taking another way (`live=True`)."""


class Step(BaseModel):
    """One step of a run: an event's type, agent, hop and lasting fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str
    agent: str | None = None
    hop: int = 0
    data: dict[str, Any] = Field(default_factory=dict)

    def label(self) -> str:
        """`type agent` for a table row."""
        return f"{self.type} {self.agent or ''}".strip()

    def same_as(self, other: Step, live: bool = False) -> bool:
        """Equal steps (with `live`, a model's wording may differ)."""
        if (self.type, self.agent, self.hop) != (other.type, other.agent, other.hop):
            return False
        skip = WORDING.get(self.type, ()) if live else ()
        if (
            self.type == "model_called"
            and self.data.get("tool_calls")
            and not self.data.get("calls")
        ):
            skip = (*skip, "calls")  # recorded before events kept the calls' arguments
        if not skip:
            return self.data == other.data
        return _without(self.data, skip) == _without(other.data, skip)


def _without(data: dict[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    drop = set(keys)
    return {k: v for k, v in data.items() if k not in drop}


def _lasting(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _lasting(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_lasting(v) for v in value]
    return value


def step_of(event: Event) -> Step:
    """The step an event records."""
    data = EVENT_ADAPTER.dump_python(event, mode="json")
    kind = data.pop("type")
    agent = data.pop("agent", None)
    hop = data.pop("hop", 0)
    return Step(type=kind, agent=agent, hop=hop, data=_lasting(data))


def steps_of(events: Iterable[Event]) -> list[Step]:
    """The steps of a run's events, in order; the results of calls that ran together (one
    response's calls, a supervisor's parallel asks) in a fixed order, since they finish in
    any order on any run."""
    out: list[Step] = []
    block: list[Step] = []
    for e in events:
        if e.type in SKIPPED:
            continue
        step = step_of(e)
        if step.type == "tool_called" and (not block or block[0].agent == step.agent):
            block.append(step)
            continue
        out += sorted(block, key=_call_order)
        block = [step] if step.type == "tool_called" else []
        if not block:
            out.append(step)
    return out + sorted(block, key=_call_order)


def _call_order(step: Step) -> str:
    return json.dumps(step.data, sort_keys=True, default=str)
