"""A stored session made executable: each run's user message, what its agents' models answered
and what its tools returned, and the steps it took (`baton.replay.steps`).

Read from any store (`read_recording`) or from an exported fixture (`Recording.load`). The
fixture is JSON with a `format` number: a file of a newer format is refused with a clear
error, never half read. Everything a fixture holds has passed the team's default redactor, so
an exported incident carries no secret the store did not already mask.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from baton.backends.base import Store
from baton.core.errors import BatonError
from baton.core.events import Event
from baton.core.messages import Message
from baton.replay.steps import Step, steps_of

FORMAT = 1
"""The fixture format this Baton writes and reads."""


class RecordError(BatonError):
    """A recording that cannot be read or replayed: no such session, run or file, or a
    format this Baton does not know."""


class Call(BaseModel):
    """One tool call a model asked for, as recorded."""

    model_config = ConfigDict(extra="forbid")

    id: str
    name: str
    arguments: str = "{}"


class Response(BaseModel):
    """One model response of an agent: its text and tool calls, or the error it failed with."""

    model_config = ConfigDict(extra="forbid")

    agent: str
    model: str = "replay"
    """The name of the model that answered (the replay answers under the same name)."""
    text: str | None = None
    calls: list[Call] = Field(default_factory=list)
    error: str | None = None
    """The kernel's message for a call that failed (the replay fails it the same way)."""
    lane: str | None = None
    """The fingerprint of the last user message the model was shown (`ModelCalled.asked`):
    it tells apart the answers of one agent asked about two things at the same time."""


class ToolResult(BaseModel):
    """What one tool call returned (the text the agent was shown), or the error it raised."""

    model_config = ConfigDict(extra="forbid")

    agent: str
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    ok: bool = True
    content: str | None = None
    error: str | None = None
    truncated: bool = False
    chars: int = 0
    """Characters of the whole result before truncation."""


class RecordedRun(BaseModel):
    """One run: the user's message, the answers that drove it, the steps it took."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    message: str
    user_id: str | None = None
    status: str | None = None
    responses: list[Response] = Field(default_factory=list)
    results: list[ToolResult] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)


class Recording(BaseModel):
    """A session's runs, in order, and the state it ended in."""

    model_config = ConfigDict(extra="forbid")

    format: int = FORMAT
    session_id: str
    team: str | None = None
    """`module:attribute` of the team that recorded it, when known (a fixture's default)."""
    runs: list[RecordedRun]
    end_state: dict[str, Any] | None = None
    """The session's state slots after the last run (None: not known, e.g. cut by `upto`)."""
    end_holder: str | None = None
    """Who held the baton after the last run."""

    def upto(self, run_id: str | None) -> Recording:
        """The runs up to and including `run_id` (all for None); `RecordError` naming the
        session's runs when it has no such run."""
        if run_id is None:
            return self
        ids = [r.run_id for r in self.runs]
        if run_id not in ids:
            raise RecordError(
                f"session {self.session_id!r} has no run {run_id!r}; its runs: {', '.join(ids)}"
            )
        cut = self.runs[: ids.index(run_id) + 1]
        if len(cut) == len(self.runs):
            return self
        return self.model_copy(update={"runs": cut, "end_state": None, "end_holder": None})

    def dump(self, path: str | Path) -> Path:
        """Write the recording as a fixture file (JSON, secrets masked again)."""
        from baton.topologies.team import _default_redactor

        data = _default_redactor().redact_value(self.model_dump(mode="json"))
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        return out

    @classmethod
    def load(cls, path: str | Path) -> Recording:
        """A fixture written by `dump`; `RecordError` for a missing file, bad JSON or a
        format this Baton does not read."""
        p = Path(path)
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise RecordError(f"no replay fixture at {p}") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RecordError(f"{p} is not a replay fixture (JSON): {exc}") from None
        return cls.parse(data, str(p))

    @classmethod
    def parse(cls, data: Any, where: str = "recording") -> Recording:
        """A recording from its JSON data; refuses other formats by number."""
        if not isinstance(data, dict) or "runs" not in data:
            raise RecordError(f"{where} is not a replay fixture: no 'runs'")
        found = data.get("format")
        if found != FORMAT:
            raise RecordError(
                f"{where} has fixture format {found!r}; this Baton reads format {FORMAT}: "
                "export it again with `baton replay --export` from the store it came from"
            )
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise RecordError(f"{where} is not a valid replay fixture: {exc}") from None


async def read_recording(store: Store, session_id: str) -> Recording:
    """The session's runs from `store`, with their model responses, tool results and steps.
    `RecordError` when the store has no such session or no run of it."""
    session = await store.get_session(session_id)
    events = await store.get_events(session_id)
    if session is None and not events:
        raise RecordError(
            f"no session {session_id!r} in this store (`baton store sessions` lists them)"
        )
    messages = await store.get_messages(session_id)
    runs = _runs(events, messages)
    if not runs:
        raise RecordError(f"session {session_id!r} has no recorded run to replay")
    return Recording(
        session_id=session_id,
        runs=runs,
        end_state=dict(session.state) if session else {},
        end_holder=session.holder if session else None,
    )


def _runs(events: list[Event], messages: list[Message]) -> list[RecordedRun]:
    """One `RecordedRun` per top-level run; a sub-run's (a worker's) events and messages
    belong to the run that delegated it."""
    top: dict[str, str] = {}  # run id -> its top-level run id
    order: list[str] = []
    for e in events:
        if e.run_id in top:
            continue
        parent = e.parent_run_id
        root = top.get(parent, parent) if parent else e.run_id
        top[e.run_id] = root
        if root == e.run_id:
            order.append(root)
    by_run: dict[str, list[Event]] = {r: [] for r in order}
    for e in events:
        by_run[top[e.run_id]].append(e)
    said: dict[str, list[Message]] = {r: [] for r in order}
    for m in messages:
        root = top.get(m.run_id or "", m.run_id or "")
        if root in said:
            said[root].append(m)
    return [_run(r, by_run[r], said[r]) for r in order if _started(by_run[r])]


def _started(events: list[Event]) -> bool:
    return any(e.type == "run_started" and e.parent_run_id is None for e in events)


def _run(run_id: str, events: list[Event], messages: list[Message]) -> RecordedRun:
    start = next(e for e in events if e.type == "run_started" and e.parent_run_id is None)
    finished = [e for e in events if e.type == "run_finished" and e.run_id == run_id]
    results = {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}
    responses = _responses(events, messages)
    tool_results = []
    for e in events:
        if e.type == "tool_called" and e.agent is not None and e.reused is None:
            shown = results.get(e.call_id)
            tool_results.append(
                ToolResult(
                    agent=e.agent,
                    tool=e.tool,
                    arguments=dict(e.arguments),
                    ok=e.ok,
                    content=shown.content if shown is not None else None,
                    error=e.error,
                    truncated=e.truncated,
                    chars=e.result_chars,
                )
            )
    return RecordedRun(
        run_id=run_id,
        message=start.message,
        user_id=start.user_id,
        status=finished[-1].status if finished else _paused(events),
        responses=responses,
        results=tool_results,
        steps=steps_of(_in_lanes(events, run_id)),
    )


def _paused(events: list[Event]) -> str | None:
    """The status of a run that has not finished: paused for a person, or still going."""
    for e in reversed(events):
        if e.type == "approval_requested":
            return "awaiting_approval"
        if e.type == "interrupt_raised":
            return "interrupted"
    return None


def _in_lanes(events: list[Event], run_id: str) -> list[Event]:
    """The run's events, each sub-run's together after the run's own: sub-runs that ran at
    the same time (a supervisor's parallel asks) interleave differently on every run, while
    each one's own steps keep their order. Sub-runs go by their first agent, then by when
    they began."""
    lanes: dict[str, list[Event]] = {}
    for e in events:
        lanes.setdefault(e.run_id, []).append(e)
    own = lanes.pop(run_id, [])
    rest = sorted(lanes.values(), key=lambda lane: lane[0].agent or "")  # stable: by start
    return [*own, *(e for lane in rest for e in lane)]


def _responses(events: list[Event], messages: list[Message]) -> list[Response]:
    """Each model call of an agent's turn, in order: its text and tool calls as the event
    holds them. An event recorded before events kept the calls' arguments takes them from the
    agent's stored answer instead (the transcript holds a top-level agent's answers, not a
    worker's: a worker's old calls keep their names with empty arguments, and a replay shows
    where that matters)."""
    stored: dict[str, list[Message]] = {}
    for m in messages:
        if m.role == "assistant" and m.agent:
            stored.setdefault(m.agent, []).append(m)
    out: list[Response] = []
    for e in events:
        if e.type != "model_called" or e.agent is None or e.purpose != "turn":
            continue
        lane = e.asked
        if e.error is not None:
            out.append(Response(agent=e.agent, model=e.model, error=e.error, lane=lane))
            continue
        calls = [Call(id=c.id, name=c.name, arguments=c.arguments) for c in e.calls]
        if e.tool_calls and not e.calls:  # recorded by an older Baton
            calls = _older_calls(e.tool_calls, stored.get(e.agent, []))
        out.append(Response(agent=e.agent, model=e.model, text=e.text, calls=calls, lane=lane))
    return out


def _older_calls(names: tuple[str, ...], answers: list[Message]) -> list[Call]:
    for i, m in enumerate(answers):
        if tuple(c.name for c in m.tool_calls or ()) == names:
            del answers[: i + 1]
            return [Call(id=c.id, name=c.name, arguments=c.arguments) for c in m.tool_calls or ()]
    return [Call(id=f"call_{n}_{i}", name=n) for i, n in enumerate(names)]
