"""A session's events as a tree: runs -> agent turns -> model calls, tool calls, hand-offs,
task transitions.

`build_tree` turns stored events (in order) into plain pydantic nodes with timings and token
counts per step; the CLI renders them as a tree, a timeline, a JSON document or a Mermaid
diagram. Events carry their end time (`ts`) and, for calls, their latency, so a step starts
at `ts - latency`.

A sub-run (a supervisor's worker, a pipeline's stage) has no run of its own in the tree: its
events carry `parent_run_id` and `parent_call_id`, and it nests under the `ask_<worker>` call
that delegated it (`Step.subruns`), sub-runs of sub-runs likewise. A sub-run whose parent run
is not among the events stays a top-level run, with the status `parent missing`.

Details keep the raw text of users and models (one line, shortened, but control and bidi
characters untouched): a renderer for a terminal shows them through `baton.observe.terminal`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field, PrivateAttr, computed_field

from baton.core.events import (
    AgentStarted,
    Escalated,
    Event,
    GuardrailRewrote,
    GuardrailTripped,
    GuardTripped,
    Handoff,
    HandoffRefused,
    ModelCalled,
    RouteDecided,
    RunFinished,
    RunStarted,
    StateUpdated,
    TaskTransitioned,
    ToolCalled,
)
from baton.observe.console import total_usage
from baton.observe.terminal import one_line

StepKind = Literal[
    "route", "model_call", "tool_call", "handoff", "refusal", "guard", "escalation", "state", "task"
]

STEP_LABELS: dict[str, str] = {
    "route": "route",
    "model_call": "model call",
    "tool_call": "tool call",
    "handoff": "hand-off",
    "refusal": "refusal",
    "guard": "guard",
    "escalation": "escalation",
    "state": "state",
    "task": "task",
}
"""How each step kind is named on screen."""

ANSWERED = "answered"
"""Status of a sub-run whose delegating call succeeded."""
FAILED = "failed"
"""Status of a sub-run whose delegating call ended with an error (the run's `error`)."""
UNANSWERED = "unanswered"
"""Status of a sub-run whose delegating call has no `tool_called` event (the run paused or
stopped while the worker was at work)."""
PARENT_MISSING = "parent missing"
"""Status of a sub-run whose parent run is not among the events (partial data)."""


class Step(BaseModel):
    """One thing that happened in a turn (or before the first turn: the route)."""

    kind: StepKind = Field(description="What the step is.")
    detail: str = Field(description="One line on what it did.")
    agent: str | None = Field(default=None, description="Agent holding the baton.")
    hop: int = Field(
        default=0, description="Hand-offs so far in the run (a hand-off: its own number)."
    )
    event_id: str = Field(description="Id of the event behind the step.")
    start: float = Field(description="Epoch seconds.")
    end: float = Field(description="Epoch seconds.")
    latency_ms: float | None = Field(default=None, description="Measured duration, if any.")
    input_tokens: int | None = Field(default=None, description="Prompt tokens (model calls).")
    output_tokens: int | None = Field(default=None, description="Completion tokens.")
    keys: list[str] = Field(default_factory=list, description="State keys carried or written.")
    target: str | None = Field(default=None, description="Receiver (hand-off, escalation).")
    failed: bool = Field(default=False, description="An error, refusal or failed call.")
    call_id: str | None = Field(default=None, description="Id of the call (tool calls).")
    subruns: list[RunNode] = Field(
        default_factory=list,
        description="Sub-runs the call delegated (an `ask_<worker>` call: the worker's run).",
    )

    @property
    def label(self) -> str:
        """The step's name on screen, e.g. `model call`."""
        return STEP_LABELS[self.kind]


class Turn(BaseModel):
    """One agent's turn holding the baton."""

    agent: str = Field(description="The agent.")
    hop: int = Field(description="Hand-offs before the turn began.")
    reason: str = Field(default="", description="Why it took the baton.")
    conductor: bool = Field(
        default=False,
        description="The agent is a conductor: it decides in code and calls no model.",
    )
    start: float = Field(description="Epoch seconds.")
    end: float = Field(description="Epoch seconds (the next turn's start, or the run's end).")
    steps: list[Step] = Field(default_factory=list, description="Its steps, in order.")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def latency_ms(self) -> float:
        """Wall-clock length of the turn."""
        return (self.end - self.start) * 1000

    @computed_field  # type: ignore[prop-decorator]
    @property
    def input_tokens(self) -> int:
        """Prompt tokens of the turn's model calls."""
        return sum(s.input_tokens or 0 for s in self.steps)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def output_tokens(self) -> int:
        """Completion tokens of the turn's model calls."""
        return sum(s.output_tokens or 0 for s in self.steps)


class RunNode(BaseModel):
    """One run (one user message) of a session, or a sub-run nested under the call that
    delegated it."""

    run_id: str = Field(description="Run id.")
    trace_id: str = Field(description="Trace id.")
    index: int = Field(
        description="1-based position among the session's top-level runs (a sub-run: that of "
        "the top-level run it belongs to)."
    )
    message: str | None = Field(
        default=None, description="The user message (a sub-run: the question it was asked)."
    )
    user_id: str | None = Field(default=None, description="End user, if known.")
    status: str = Field(
        default="unfinished",
        description="completed, escalated, failed, ...; a sub-run: answered, failed, "
        "unanswered or parent missing.",
    )
    output: str | None = Field(default=None, description="Final reply (a sub-run: its answer).")
    error: str | None = Field(default=None, description="What went wrong, when failed.")
    path: list[str] = Field(default_factory=list, description="Agents that held the baton.")
    start: float = Field(description="Epoch seconds.")
    end: float = Field(description="Epoch seconds.")
    latency_ms: float = Field(description="Run latency as measured by the kernel.")
    input_tokens: int = Field(default=0, description="Prompt tokens of all agents.")
    output_tokens: int = Field(default=0, description="Completion tokens of all agents.")
    steps: list[Step] = Field(default_factory=list, description="Steps before the first turn.")
    turns: list[Turn] = Field(default_factory=list, description="Agent turns in order.")
    parent_run_id: str | None = Field(
        default=None, description="For a sub-run: the run whose call delegated it."
    )
    parent_call_id: str | None = Field(
        default=None, description="For a sub-run: the delegating call (`ask_<worker>`)."
    )
    _usage_counted: bool = PrivateAttr(default=False)
    """The tokens are the kernel's count, which covers the run's sub-runs already."""

    @property
    def is_subrun(self) -> bool:
        """The run was delegated by a call of another run."""
        return self.parent_run_id is not None

    def all_steps(self) -> list[Step]:
        """Run-level steps, then every turn's steps, in order (sub-runs' steps excluded)."""
        return [*self.steps, *(s for t in self.turns for s in t.steps)]

    def subruns(self) -> list[RunNode]:
        """The sub-runs nested directly under this run's calls, in order."""
        return [sub for s in self.all_steps() for sub in s.subruns]


Step.model_rebuild()


def walk(run: RunNode, depth: int = 0) -> Iterator[tuple[int, Turn | None, Step]]:
    """Every step of a run with its depth and turn (None: a run-level step), in order; each
    delegating call is followed by its sub-runs' steps, one level deeper."""
    for turn, steps in ((None, run.steps), *((t, t.steps) for t in run.turns)):
        for step in steps:
            yield depth, turn, step
            for sub in step.subruns:
                yield from walk(sub, depth + 1)


def _step(event: Event) -> Step | None:
    """The step an event stands for, or None for events that are no step."""
    base: dict[str, Any] = {
        "agent": event.agent,
        "hop": event.hop,
        "event_id": event.id,
        "end": event.ts,
    }
    if isinstance(event, RouteDecided):
        detail = f"to {event.target} ({event.tier})"
        return Step(
            kind="route",
            detail=detail,
            start=event.ts - event.latency_ms / 1000,
            latency_ms=event.latency_ms,
            target=event.target,
            **base,
        )
    if isinstance(event, ModelCalled):
        if event.error:
            detail = f"error: {one_line(event.error, 80)}"
        elif event.tool_calls:
            detail = "requests " + ", ".join(event.tool_calls)
        else:
            detail = "reply: " + one_line(event.text, 60)
        if event.reask:
            detail = "(re-ask) " + detail
        return Step(
            kind="model_call",
            detail=detail,
            start=event.ts - event.latency_ms / 1000,
            latency_ms=event.latency_ms,
            input_tokens=event.usage.input_tokens,
            output_tokens=event.usage.output_tokens,
            failed=event.error is not None,
            **base,
        )
    if isinstance(event, ToolCalled):
        detail = event.tool + (" ok" if event.ok else f" error: {one_line(event.error, 80)}")
        if event.truncated:
            detail += " (result truncated)"
        return Step(
            kind="tool_call",
            detail=detail,
            start=event.ts - event.latency_ms / 1000,
            latency_ms=event.latency_ms,
            keys=list(event.arguments),
            failed=not event.ok,
            call_id=event.call_id,
            **base,
        )
    if isinstance(event, Handoff):
        p = event.payload
        detail = f"{p.source} -> {p.target}: {one_line(p.reason, 80)}"
        if p.priority != "normal":
            detail += f" [{p.priority}]"
        base["hop"] = p.hop  # the hand-off's own number (1 for the run's first)
        return Step(
            kind="handoff",
            detail=detail,
            start=event.ts,
            keys=list(p.state),
            target=p.target,
            **base,
        )
    if isinstance(event, StateUpdated):
        by = f"tool {event.tool}" if event.tool else event.source
        detail = f"{', '.join(event.slots)} set by {by}"
        return Step(kind="state", detail=detail, start=event.ts, keys=list(event.slots), **base)
    if isinstance(event, HandoffRefused):
        detail = f"-> {event.target}: {one_line(event.reason, 100)}"
        return Step(kind="refusal", detail=detail, start=event.ts, failed=True, **base)
    if isinstance(event, GuardTripped):
        detail = f"{event.guard}: {one_line(event.detail, 100)}"
        return Step(kind="guard", detail=detail, start=event.ts, failed=True, **base)
    if isinstance(event, GuardrailTripped):
        what = "message" if event.stage == "input" else "reply"
        detail = f"guardrail {event.guardrail} blocked the {what}: {one_line(event.reason, 100)}"
        return Step(kind="guard", detail=detail, start=event.ts, failed=True, **base)
    if isinstance(event, GuardrailRewrote):
        detail = f"guardrail {event.guardrail} rewrote the reply"
        if event.reason:
            detail += f": {one_line(event.reason, 100)}"
        return Step(kind="guard", detail=detail, start=event.ts, **base)
    if isinstance(event, Escalated):
        detail = f"to {event.to}: {one_line('; '.join(event.card.reasons), 100)}"
        return Step(
            kind="escalation",
            detail=detail,
            start=event.ts,
            keys=list(event.card.state),
            target=event.to,
            **base,
        )
    if isinstance(event, TaskTransitioned):
        failed = event.to_status == "failed"
        return Step(kind="task", detail=task_line(event), start=event.ts, failed=failed, **base)
    return None


def task_line(event: TaskTransitioned) -> str:
    """One line for a task's step: `t2 reviewing -> retry (attempt 1): <reason>`."""
    notes = [f"attempt {event.attempt}"] if event.attempt else []
    if event.final and event.to_status == "failed":
        notes.append("final")
    detail = f"{event.task_id} {event.from_status} -> {event.to_status}"
    if notes:
        detail += f" ({', '.join(notes)})"
    if event.reason:
        detail += f": {one_line(event.reason, 100)}"
    return detail


def group_runs(events: Sequence[Event]) -> list[list[Event]]:
    """The events split by run (sub-runs too), runs in the order they first appear."""
    runs: dict[str, list[Event]] = {}
    for e in events:
        runs.setdefault(e.run_id, []).append(e)
    return list(runs.values())


def _nesting(groups: Sequence[Sequence[Event]]) -> tuple[list[str], dict[str, str]]:
    """The top-level runs' ids in order of appearance, and the parent of each nested sub-run.

    A sub-run nests under its parent run when that run is among the groups; otherwise (partial
    data) it stays top-level. A loop of parents (forged data) is cut at its first run."""
    parent_of: dict[str, str | None] = {}
    for g in groups:
        parent_of[g[0].run_id] = next((e.parent_run_id for e in g if e.parent_run_id), None)
    children: dict[str, list[str]] = {}
    for rid, parent in parent_of.items():
        if parent is not None and parent != rid and parent in parent_of:
            children.setdefault(parent, []).append(rid)
    nested: dict[str, str] = {}
    seen: set[str] = set()
    natural = [r for r, p in parent_of.items() if p is None or p == r or p not in parent_of]
    for root in [*natural, *parent_of]:  # then whatever a loop kept unreachable
        if root in seen:
            continue
        seen.add(root)
        stack = [root]
        while stack:
            rid = stack.pop()
            for child in children.get(rid, []):
                if child not in seen:
                    seen.add(child)
                    nested[child] = rid
                    stack.append(child)
    return [r for r in parent_of if r not in nested], nested


def run_numbers(events: Sequence[Event]) -> dict[str, int]:
    """Every run id of the events (sub-runs too) -> the 1-based number of its top-level run,
    as `build_tree` numbers them."""
    roots, nested = _nesting(group_runs(events))
    numbers = {rid: i for i, rid in enumerate(roots, 1)}
    for rid in nested:
        top = rid
        while top in nested:
            top = nested[top]
        numbers[rid] = numbers[top]
    return numbers


def build_run(events: Sequence[Event], index: int = 1) -> RunNode:
    """The tree of one run's events (in order)."""
    first, last = events[0], events[-1]
    started = next((e for e in events if isinstance(e, RunStarted)), None)
    finished = next((e for e in reversed(events) if isinstance(e, RunFinished)), None)
    start = started.ts if started is not None else min(e.ts for e in events)
    end = max(e.ts for e in events)
    node = RunNode(
        run_id=first.run_id,
        trace_id=first.trace_id,
        index=index,
        message=started.message if started is not None else None,
        user_id=started.user_id if started is not None else None,
        start=start,
        end=end,
        latency_ms=finished.latency_ms if finished is not None else (end - start) * 1000,
        parent_run_id=next((e.parent_run_id for e in events if e.parent_run_id), None),
    )
    if node.parent_run_id is not None:
        node.parent_call_id = next((e.parent_call_id for e in events if e.parent_call_id), None)
    turn: Turn | None = None
    reply: str | None = None
    for e in events:
        if isinstance(e, AgentStarted) and e.agent:
            if turn is not None:
                turn.end = e.ts
            turn = Turn(
                agent=e.agent,
                hop=e.hop,
                reason=e.reason,
                conductor=e.conductor,
                start=e.ts,
                end=last.ts,
            )
            node.turns.append(turn)
            continue
        if isinstance(e, ModelCalled):
            reply = e.text if not e.tool_calls and e.error is None else None
        step = _step(e)
        if step is not None:
            (turn.steps if turn is not None else node.steps).append(step)
    for s in node.all_steps():
        node.input_tokens += s.input_tokens or 0
        node.output_tokens += s.output_tokens or 0
    if finished is not None:
        node.status, node.output, node.error = finished.status, finished.output, finished.error
        node.path = list(finished.path)
        if finished.usage:  # the kernel's own count also covers calls that left no event
            usage = total_usage(finished.usage)
            node.input_tokens, node.output_tokens = usage.input_tokens, usage.output_tokens
            node._usage_counted = True
    else:
        for t in node.turns:
            if not node.path or node.path[-1] != t.agent:
                node.path.append(t.agent)
        if node.is_subrun:  # a worker's answer is its last model call's reply
            node.output = reply
    return node


def build_tree(events: Sequence[Event]) -> list[RunNode]:
    """One `RunNode` per top-level run of a session's events (in stored order), each sub-run
    nested under the step of the call that delegated it."""
    groups = group_runs(events)
    roots, nested = _nesting(groups)
    nodes = {g[0].run_id: build_run(g) for g in groups}
    calls: dict[tuple[str, str | None], ToolCalled] = {
        (e.run_id, e.call_id): e for e in events if isinstance(e, ToolCalled)
    }
    steps: dict[tuple[str, str | None], Step] = {}
    for node in nodes.values():
        for s in node.all_steps():
            if s.kind == "tool_call" and s.call_id is not None:
                steps[(node.run_id, s.call_id)] = s
    for rid, parent_id in nested.items():
        child, parent = nodes[rid], nodes[parent_id]
        key = (parent_id, child.parent_call_id)
        step = steps.get(key)
        if step is None:
            step = steps[key] = _pending_call(parent, child)
        step.subruns.append(child)
        call = calls.get(key)
        if call is None:
            child.status = UNANSWERED
            continue
        child.status, child.error = (ANSWERED, None) if call.ok else (FAILED, call.error)
        question = call.arguments.get("question")
        if isinstance(question, str):
            child.message = question
    runs = [nodes[rid] for rid in roots]
    for i, run in enumerate(runs, 1):
        if run.is_subrun:
            run.status = PARENT_MISSING
        _finish_nested(run, i)
    return runs


def _pending_call(parent: RunNode, child: RunNode) -> Step:
    """A step for a delegating call that left no `tool_called` event, placed in the parent's
    turn that was holding the baton when the sub-run began."""
    turn = next((t for t in reversed(parent.turns) if t.start <= child.start), None)
    if turn is None and parent.turns:
        turn = parent.turns[0]
    worker = child.turns[0].agent if child.turns else "worker"
    step = Step(
        kind="tool_call",
        detail=f"ask_{worker}: no result recorded",
        agent=turn.agent if turn is not None else None,
        hop=turn.hop if turn is not None else 0,
        event_id="",
        start=child.start,
        end=child.end,
        call_id=child.parent_call_id,
    )
    steps = turn.steps if turn is not None else parent.steps
    at = next((i for i, s in enumerate(steps) if s.end > step.end), len(steps))
    steps.insert(at, step)
    return step


def _finish_nested(run: RunNode, index: int) -> None:
    """Number a run's sub-runs after their top-level run and add their tokens to the runs
    that delegated them (unless the kernel's count has them already), deepest first."""
    run.index = index
    for sub in run.subruns():
        _finish_nested(sub, index)
        if not run._usage_counted:
            run.input_tokens += sub.input_tokens
            run.output_tokens += sub.output_tokens
