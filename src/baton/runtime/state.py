"""The run as data: `RunState` and `TurnState`, saved after every step and resumable anywhere.

Nothing the kernel needs to continue a run lives only in a coroutine's locals: the agent holding
the baton, the payload it received, its context policy and view, its scratch of the current
turn, the model calls made, the tool calls of the latest response with the results recorded so
far, the approval a call waits for. A checkpoint is a copy of this state (`snapshot`); a store
that persists it keeps `to_json()`, and `from_json` brings it back in any process.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, Literal, TypeVar

from pydantic import PlainSerializer, PlainValidator, TypeAdapter

from baton.backends.base import KeptSnapshot, SessionRecord, Store
from baton.core.approval import ApprovalCard
from baton.core.events import EscalationCard, Event, HandoffUsage
from baton.core.ids import id_factory, new_trace_id
from baton.core.interrupt import InterruptCard
from baton.core.jsontext import copy_json
from baton.core.messages import Message, ToolCall, Usage
from baton.core.payload import HandoffPayload
from baton.core.policies import ContextPolicy
from baton.runtime import checkpoint_format, turn_refs

_run_id = id_factory("run_")


def _save_sub(child: RunState | None) -> Any:
    """A sub-run as JSON data, without what it shares with its parent (`relink`)."""
    if child is None:
        return None
    return _adapter().dump_python(child, mode="json", exclude=_SHARED, context=_recorded(child))


def _load_sub(value: Any) -> RunState | None:
    if value is None or isinstance(value, RunState):
        return value
    data = dict(value)
    data["session"] = {"session_id": ""}  # replaced by `relink`
    child = _adapter().validate_python(data)
    _resolve_scratch(child)
    return child


def _recorded(run: RunState) -> dict[str, Any]:
    """The serialisation context of one run: its recorded messages (`turn_refs`)."""
    return turn_refs.context_of(run.messages)


Recorded = Annotated[
    list[Message],
    PlainSerializer(turn_refs.save_messages),
    PlainValidator(turn_refs.load_messages),
]
"""Messages of a turn saved as references to the run's recorded messages (formats 2 and 5)."""


def _resolve_scratch(run: RunState) -> None:
    """Replace the message ids and spans of a loaded turn's scratch and view by the run's
    messages."""
    t = run.turn
    if t is None:
        return
    t.scratch = turn_refs.resolved(t.scratch, run.messages)
    t.view = turn_refs.resolved(t.view, run.messages)


_SHARED = {
    "session",
    "events",
    "earlier",
    "listener",
    "ended",
    "parent",
    "committed_as_stored",
    "snapshots_due",
    "masked",
}


@dataclass(slots=True)
class Committed:
    """What a saved state names instead of repeating (format 3): the first `messages` of the
    run's messages and the first `events` of its events, which the run already committed to
    its session (a paused run commits what it did so far). `first_*` and `last_*` are their
    ids: a resumed run reads them back from the store (`restore_committed`) and checks it got
    exactly these."""

    messages: int = 0
    events: int = 0
    first_message: str | None = None
    last_message: str | None = None
    first_event: str | None = None
    last_event: str | None = None


@dataclass(slots=True)
class StepResult:
    """One completed step of a graph node (`ctx.call`): the step's name and its result."""

    step: str | None
    """The tool's name; None for a step recorded before steps were named (checkpoint format
    1): it is replayed by position alone."""
    result: Any


@dataclass(slots=True)
class PendingCall:
    """One call of the latest model response and, once it ran, its result."""

    call: ToolCall
    args: dict[str, Any] | None
    """Parsed arguments; None when they could not be parsed (`error` says why)."""
    error: str | None
    key: str
    """Idempotency key `<run_id>:<turn>:<step>`: the same on every attempt of this call."""
    content: str | None = None
    """What the model reads back; None while the call has not finished."""
    approved: bool = False
    """A person signed the call off (its approval gate is passed)."""
    rejection: str | None = None
    """Why a person refused the call (it is then answered with this, never run)."""
    sub: Annotated[RunState | None, PlainSerializer(_save_sub), PlainValidator(_load_sub)] = None
    """The sub-run a delegating call (`ask_<worker>`) started, until it answers: saved with
    the checkpoint, so a resumed run continues it instead of starting it again."""
    started: bool = False
    """Its tool was invoked (a run cancelled meanwhile tells the model that the call may have
    taken effect; a resumed run runs an unfinished call again under the same key)."""
    resumes: list[Any] = field(default_factory=list)
    """The answers a person gave to its `interrupt(...)` calls, in order (it runs again with
    them: `interrupt` returns them instead of stopping the run)."""
    memo: list[StepResult] = field(default_factory=list)
    """The results of a graph node's completed steps (`ctx.call`), in order, each with the
    step's name: when the node runs again (after an interrupt or a crash) they are returned,
    not run again, and a step that is not the one recorded at its place is an error."""
    kernel: bool = False
    """The kernel made this call, not a model (the hand-on to the user's next need,
    `baton.runtime.pending`): it is dispatched by kind, never by name, so no model can make
    one by writing its name."""
    masked: list[str] = field(default_factory=list)
    """Arguments whose secret values a checkpoint in a store without checkpoint keys did not
    keep (`baton.runtime.at_rest`): a call loaded with any is never run with the masked text;
    the model is told to ask the user again."""


@dataclass(slots=True)
class TurnState:
    """One agent's turn: who holds the baton, what it sees, and how far it got."""

    index: int
    """Turn number in the run (0 for the first)."""
    agent: str
    incoming: HandoffPayload | None
    """The payload it received, when it took the baton by hand-off."""
    since: str | None
    """Id of the first conversation message the holder answers."""
    reason: str
    """Why it holds the baton (routed, handed off, escalation, ...)."""
    policy: ContextPolicy | None = None
    """Its context policy when it received the baton by hand-off (`recent(3)`, ...)."""
    fallback: bool = False
    """The fallback agent's turn after an escalation: it may answer or use tools, not hand off."""
    started: bool = False
    """`agent_started` was emitted (a resumed turn does not start again)."""
    view: Recorded = field(default_factory=list)
    """The conversation part of its view (system message first), fixed for the turn; saved
    like `scratch`."""
    context_tokens: int = 0
    scratch: Recorded = field(default_factory=list)
    """Its own tool-call and tool messages of this turn (each also in `RunState.messages`)."""
    iteration: int = 0
    """Model calls made (re-asks not counted)."""
    usage: Usage = field(default_factory=Usage)
    """Tokens of this turn's model calls."""
    tools_called: int = 0
    """Tool calls executed (hand-offs not counted)."""
    steps: int = 0
    """Calls classified so far: the step part of the next idempotency key."""
    calls: list[PendingCall] = field(default_factory=list)
    """The calls of the latest response; the turn goes on once every one has content."""
    accepted: HandoffPayload | None = None
    """The first valid hand-off of the latest response."""
    halt: Literal["trip", "human", "fail"] | None = None
    """A guard trip, a human escalation or a failure decided among the latest response's
    calls."""
    halt_reason: str = ""
    accounted: bool = False
    """The turn's cost is recorded (`Runner.turn_done`)."""

    @property
    def delegating(self) -> bool:
        """A call of the latest response runs a sub-run."""
        return any([c.sub is not None for c in self.calls])

    def open_calls(self) -> list[PendingCall]:
        """Calls of the latest response still without a result."""
        return [c for c in self.calls if c.content is None]


@dataclass(slots=True)
class RunState:
    """Everything about one run (one user message) that a checkpoint keeps."""

    session: SessionRecord
    """The session as this run sees it (its state slots change as the run goes)."""
    message: str
    user_id: str | None
    user_msg_id: str = ""
    run_id: str = field(default_factory=_run_id)
    trace_id: str = field(default_factory=new_trace_id)
    started_at: float = field(default_factory=time.time)
    events: list[Event] = field(default_factory=list)
    earlier: list[Message] = field(default_factory=list)
    """The session's recent transcript when the run began. Never changed by the run, so a
    checkpoint shares it, and a persistent one leaves it out (it is reloaded on resume)."""
    messages: list[Message] = field(default_factory=list)
    """This run's messages, committed when it finishes."""
    path: list[str] = field(default_factory=list)
    handoffs: list[HandoffPayload] = field(default_factory=list)
    """Accepted hand-offs."""
    usage: dict[str, Usage] = field(default_factory=dict)
    model_calls: int = 0
    """Model calls begun in this run, re-asks included (`Guards.max_model_calls_per_run`)."""
    delegations: int = 0
    """Workers asked in this run (`Supervisor(max_delegations=...)`)."""
    citations: list[dict[str, Any]] = field(default_factory=list)
    """What citing tools returned in this run and its finished sub-runs, with those it was
    given (`baton.runtime.citations`): kernel-filled, carried by its hand-offs."""
    cited_in: list[dict[str, Any]] = field(default_factory=list)
    """The citations a pipeline stage was given by the stages before it, shown in its view."""
    cost: float = 0.0
    """What its model calls cost by `Guards.token_prices` (`Guards.max_cost_per_run`)."""
    handoff_usage: list[HandoffUsage] = field(default_factory=list)
    last_reply: str | None = None
    request_id: str | None = None
    """The id of the request the run answers (a bus message's): committed with the run in
    `SessionRecord.requests`, so the request delivered again is not run again."""
    start: Any = None
    """What a topology starts the run from besides the message (JSON: a graph's base state and
    the nodes to run), never changed by the run."""
    final: Any = None
    """The holder's answer validated into its `output_type`, as JSON data (`RunResult.final`
    rebuilds the typed value); None for a free-text answer."""
    refused: list[str] = field(default_factory=list)
    """Keys of the hand-off calls that handed the request straight back (a call retried
    after an interruption counts once)."""
    guardrails: list[str] = field(default_factory=list)
    """Names of the guardrails in force, in the order they joined: the team's, every holder's
    own and every crossed edge's (`baton.runtime.guardrails`); the list only grows."""
    screened: list[str] = field(default_factory=list)
    """The input guardrails in force that already let the user's message through."""
    turn: TurnState | None = None
    """The turn in progress (None before the first and after the last)."""
    turns: int = 0
    """Turns begun."""
    card: EscalationCard | None = None
    """The hand-over card, once the run escalated (the fallback's turn then may answer, never
    hand off)."""
    approval: ApprovalCard | None = None
    """The approval the run waits for."""
    interrupt: InterruptCard | None = None
    """The interrupt the run waits for an answer to (`interrupt(value)` in a node or tool)."""
    seq: int = 0
    """Checkpoints saved so far."""
    saved_messages: int = 0
    saved_events: int = 0
    """How many of `messages` and `events` are already committed (a paused run commits what
    it did so far; the rest follows when it finishes)."""
    committed: Committed | None = None
    """On a state loaded from a checkpoint that names its committed messages and events
    instead of repeating them: what `restore_committed` still has to read back from the
    store; None on a live run."""
    committed_as_stored: bool = False
    """The store keeps this run's committed messages exactly as the run holds them (no
    masking at rest, or a checkpoint masked alike): its checkpoints name them instead of
    repeating them (set by the kernel per checkpoint; never saved)."""
    sink_failed: bool = False
    """An event sink raised (logged once per run)."""
    listener: Callable[[Event], None] | None = None
    """Receives every event as it happens (`team.stream`); never saved."""
    masked: list[tuple[Message, Message]] = field(default_factory=list)
    """Each of the first messages and its copy as a masked checkpoint keeps it
    (`baton.runtime.at_rest`), made once; never saved."""
    snapshots_due: list[KeptSnapshot] = field(default_factory=list)
    """Graph snapshots that the run's next checkpoint saves in the same write (a boundary
    reached since the last one); never saved with the state."""
    ended: Any = None
    """The `RunResult`, once the run's final commit succeeded; never saved."""
    parent_run_id: str | None = None
    parent_call_id: str | None = None
    """Set on a sub-run: the run and the call that delegated it (its events carry both)."""
    parent: RunState | None = None
    """A sub-run's delegating run, in memory; never saved (`relink` restores it)."""

    @property
    def refusals(self) -> int:
        """Receivers that handed the request straight back in this run."""
        return len(self.refused)

    @property
    def hop(self) -> int:
        """Hand-offs so far in this run."""
        return len(self.handoffs)

    def base(self, agent: str | None) -> dict[str, Any]:
        """The fields every event of this run carries."""
        fields = {
            "trace_id": self.trace_id,
            "session_id": self.session.session_id,
            "run_id": self.run_id,
            "agent": agent,
            "hop": len(self.handoffs),
        }
        if self.parent_run_id is not None:
            fields["parent_run_id"] = self.parent_run_id
            fields["parent_call_id"] = self.parent_call_id
        return fields

    @property
    def root(self) -> RunState:
        """The top-level run (a sub-run's checkpoints and commits are its root's)."""
        r = self
        while r.parent is not None:
            r = r.parent
        return r

    def subrun(self, agent: str, question: str, call_id: str) -> RunState:
        """A bounded sub-run of `agent` for one delegating call: it shares the session, the
        event list and the listener of this run, and starts from `question` alone."""
        child = RunState(
            self.session,
            question,
            self.user_id,
            trace_id=self.trace_id,
            events=self.events,
            listener=self.listener,
            parent_run_id=self.run_id,
            parent_call_id=call_id,
            parent=self,
        )
        child.user_msg_id = child.record(
            Message(role="user", content=question, run_id=child.run_id)
        ).id
        return child

    def relink(self) -> None:
        """Point the sub-runs of the current turn at this run's session, events and listener
        (after a load or a copy: each was saved without them)."""
        t = self.turn
        if t is None:
            return
        for pc in t.calls:
            child = pc.sub
            if child is not None:
                child.session, child.events, child.listener = (
                    self.session,
                    self.events,
                    self.listener,
                )
                child.parent = self
                child.relink()

    def said_by_user(self) -> list[str]:
        """What the user wrote in the conversation as the run sees it (a sub-run's question
        is its delegating model's words, not the user's)."""
        child = self.parent is not None
        return [
            m.content
            for m in self.history
            if m.role == "user" and m.content and not (child and m.id == self.user_msg_id)
        ]

    @property
    def history(self) -> list[Message]:
        """The transcript as the run sees it: the earlier messages, then its own."""
        return [*self.earlier, *self.messages]

    def record(self, msg: Message) -> Message:
        """Append a message of this run."""
        self.messages.append(msg)
        return msg

    def snapshot(self) -> RunState:
        """A copy that later steps of this run never change (messages, events and payloads
        are not changed once recorded, so they are shared; every container is copied). Taken
        when a run pauses or is loaded to resume; a running step's checkpoint in process memory
        is the live state itself (see `Runner.checkpoint`)."""
        turn = self.turn
        out = replace(
            self,
            session=_session_copy(self.session),
            events=list(self.events),
            messages=list(self.messages),
            path=list(self.path),
            handoffs=list(self.handoffs),
            citations=list(self.citations),
            cited_in=list(self.cited_in),
            refused=list(self.refused),
            guardrails=list(self.guardrails),
            screened=list(self.screened),
            usage={k: replace(u) for k, u in self.usage.items()},
            handoff_usage=list(self.handoff_usage),
            turn=None if turn is None else _turn_copy(turn),
            card=None if self.card is None else self.card.model_copy(deep=True),
            approval=None if self.approval is None else self.approval.model_copy(deep=True),
            interrupt=None if self.interrupt is None else self.interrupt.model_copy(deep=True),
            listener=None,
            ended=None,
            snapshots_due=[],
            masked=list(self.masked),  # the same messages: their masked copies hold
        )
        if turn is not None and turn.delegating:
            out.relink()  # the copied sub-runs share the copy's session and events
        return out

    def to_json(self) -> str:
        """The state as JSON text (what a persistent store keeps), without `earlier`, and
        naming what the run already committed instead of repeating it (`Committed`): a
        checkpoint grows with what the run did since its last commit, not with all it did."""
        saved = self._uncommitted()
        body = _adapter().dump_json(
            saved,
            exclude={
                "listener",
                "earlier",
                "ended",
                "parent",
                "committed_as_stored",
                "snapshots_due",
                "masked",
            },
            context=_recorded(self),  # scratch and view name committed messages by id too
        )
        return checkpoint_format.stamp(body.decode())

    def _uncommitted(self) -> RunState:
        """This state with its committed messages (when the store keeps them as the run
        holds them) and events left out and named by a `Committed`."""
        if self.committed is not None:  # loaded and not restored: it names them already
            return self
        n_msg = self.saved_messages if self.committed_as_stored else 0
        n_ev = self.saved_events
        if not (n_msg or n_ev):
            return self
        msgs, evs = self.messages, self.events
        return replace(
            self,
            messages=msgs[n_msg:],
            events=evs[n_ev:],
            committed=Committed(
                messages=n_msg,
                events=n_ev,
                first_message=msgs[0].id if n_msg else None,
                last_message=msgs[n_msg - 1].id if n_msg else None,
                first_event=evs[0].id if n_ev else None,
                last_event=evs[n_ev - 1].id if n_ev else None,
            ),
        )

    @classmethod
    def from_json(cls, text: str) -> RunState:
        """A state saved by `to_json`, by this Baton or an older one (`checkpoint_format`);
        raises `NewerCheckpoint` for one a newer Baton wrote, `ValueError` for damaged text.
        A state that names committed records (`committed` is set) is complete once
        `restore_committed` has read them back."""
        found = checkpoint_format.format_of(text)
        if found == checkpoint_format.FORMAT:  # the usual case: `format` is ignored as extra
            state = _adapter().validate_json(text)
        else:
            state = _adapter().validate_python(checkpoint_format.upgraded(text, found))
        if state.committed is None:
            _resolve_scratch(state)
        state.relink()
        return state


async def restore_committed(store: Store, run: RunState) -> None:
    """Read back from `store` the committed messages and events a loaded state names
    (`RunState.committed`) and put them in front of its own; raises `ValueError` when the
    store no longer holds exactly those."""
    ref = run.committed
    if ref is None:
        return
    sid = run.session.session_id
    if ref.messages:
        found = await store.get_messages(sid, limit=ref.messages + _SLACK)
        if not any(m.id == ref.first_message for m in found):
            found = await store.get_messages(sid)
        own = [m for m in found if m.run_id == run.run_id]  # not a reply to a ticket meanwhile
        run.messages[:0] = _span(own, ref.first_message, ref.last_message, ref.messages, "messages")
    if ref.events:
        events = await store.get_events(sid, trace_id=run.trace_id)
        run.events[:0] = _span(events, ref.first_event, ref.last_event, ref.events, "events")
    run.committed = None
    _resolve_scratch(run)
    run.relink()


_SLACK = 50
"""Messages read beyond the committed count: others committed to the session meanwhile (a
person's reply to a ticket) do not cost a second read."""

_T = TypeVar("_T", Message, Event)


def _span(found: list[_T], first: str | None, last: str | None, count: int, what: str) -> list[_T]:
    """The `count` records of `found` from id `first` to id `last`."""
    start = next((i for i, x in enumerate(found) if x.id == first), None)
    span = found[start : start + count] if start is not None else []
    if len(span) != count or span[-1].id != last:
        raise ValueError(
            f"the checkpoint names {count} committed {what} ({first} to {last}) that the store "
            f"no longer holds (found {len(span)}); was the session's record deleted?"
        )
    return span


def _session_copy(session: SessionRecord) -> SessionRecord:
    out = replace(session)
    out.state = dict(session.state)
    # small: a few needs and a source per slot; never shared, the kernel writes it in place
    out.control = copy_json(session.control) if session.control else {}
    return out


def _turn_copy(turn: TurnState) -> TurnState:
    return replace(
        turn,
        view=list(turn.view),
        scratch=list(turn.scratch),
        usage=replace(turn.usage),
        calls=[_call_copy(c) for c in turn.calls],
    )


def _call_copy(pending: PendingCall) -> PendingCall:
    return replace(
        pending,
        resumes=list(pending.resumes),
        memo=list(pending.memo),
        sub=None if pending.sub is None else pending.sub.snapshot(),
    )


_ADAPTER: list[TypeAdapter[RunState]] = []


def _adapter() -> TypeAdapter[RunState]:
    """Built on first use: only persistent checkpoints need it."""
    if not _ADAPTER:
        _ADAPTER.append(TypeAdapter(RunState))
    return _ADAPTER[0]
