"""What a step may use of the kernel: the `Kernel` protocol, and the call kinds it dispatches.

Steps (call handlers, hand-off steps, conductors, delegation, guardrails, escalation) take a
`Kernel`, never the `Runner` itself: this protocol lists exactly what they may use, so a new
topology's step cannot reach into the loops, and the runner can change inside without
touching them. `Runner` satisfies it; a sub-run step (a supervisor's `ask`) takes `SubRuns`,
the one extension that may start and play a turn. Step modules import this module, never
`baton.runtime.runner`.

A call kind (`Kind`) is declared up front, when the runner is built: its handler and, for a
kind whose calls in one response may run together, how many at a time. A handler takes the
kernel and one `Call`: the call with the run, plan and turn it was made in.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, cast

if TYPE_CHECKING:
    from baton.core.events import Event
    from baton.core.payload import HandoffPayload
    from baton.core.policies import ContextPolicy
    from baton.runtime.calls import Handled, Shown
    from baton.runtime.control import SlotSource
    from baton.runtime.entities import EntityMemo
    from baton.runtime.outcomes import TurnOutcome
    from baton.runtime.plan import AgentPlan, CallEntry, KernelSettings, SwarmPolicy
    from baton.runtime.state import PendingCall, RunState, TurnState


class Call(NamedTuple):
    """One call a handler answers, with the run, plan and turn it was made in.

    Frozen and slotted; a named tuple because one is built for every call the kernel answers,
    and a named tuple is built three times faster than a frozen dataclass (see
    docs/benchmarks.md)."""

    run: RunState
    """The run (a worker's sub-run, for a call made inside one)."""
    plan: AgentPlan
    """The compiled plan of the agent that made the call (its fallback plan when it stands in)."""
    turn: TurnState
    """The turn the call was made in."""
    pending: PendingCall
    """The call itself: the model's tool call, its parsed arguments, its idempotency key and
    what it did so far (a pause, a sub-run, recorded results)."""
    entry: CallEntry
    """What the name is in the agent's call table: its kind, and its tool or target."""
    shown: Shown
    """What the holder was shown this turn (read only when an id needs checking)."""


Handler = Callable[["Kernel", Call], Awaitable["Handled"]]
"""Answers one call of a kind: `handler(kernel, call)`; returns the content the model reads
and the call's effect on the turn, or a pause."""


@dataclass(frozen=True, slots=True)
class Kind:
    """A call kind: what answers its calls, and whether they run together."""

    handler: Handler
    parallel: int | None = None
    """How many of its calls in one response run at once; None: in order with the others."""
    runs_code: bool = False
    """Its calls run the user's own functions (a graph's function nodes), as a tool's do: a
    replay answers them from the record instead (`baton.replay`)."""


class Kernel(Protocol):
    """What a step may use: record (emit, trip, set_state, checkpoint), read the settings,
    the compiled plans and the swarm's policy, and look up a receiver's context policy."""

    cfg: KernelSettings
    """Store, guards, sinks, redactor, extractors, summariser, limits, log."""
    plans: Mapping[str, AgentPlan]
    policy: SwarmPolicy
    kinds: Mapping[str, Kind]
    parallel: Mapping[str, int]
    """The kinds whose calls run together -> how many at a time (derived from `kinds`)."""
    entity_memo: EntityMemo

    def emit(self, run: RunState, event: Event, redacted: bool = False) -> None: ...

    def trip(self, run: RunState, agent: str, guard: str, detail: str) -> None: ...

    def set_state(
        self,
        run: RunState,
        slots: dict[str, Any],
        agent: str,
        source: str,
        cause: str | None,
        tool: str | None = None,
        origin: SlotSource | dict[str, SlotSource] | None = None,
    ) -> None: ...

    async def checkpoint(self, run: RunState) -> None: ...

    def policy_for(self, incoming: HandoffPayload, receiver: str) -> ContextPolicy: ...

    def answers(self, run: RunState, text: str) -> str: ...


class SubRuns(Kernel, Protocol):
    """A kernel that plays a bounded sub-run's turn (delegation: `ask_<worker>`)."""

    async def turn(self, run: RunState) -> TurnOutcome: ...

    def new_turn(
        self,
        run: RunState,
        agent: str,
        incoming: HandoffPayload | None,
        since: str | None,
        reason: str,
    ) -> TurnState: ...


def sub_runs(kernel: Kernel) -> SubRuns:
    """`kernel` as one that plays sub-runs (the runner is one); a call kind that delegates
    takes a `Kernel` like every handler and asks for this explicitly."""
    if not (
        callable(getattr(kernel, "turn", None)) and callable(getattr(kernel, "new_turn", None))
    ):
        raise TypeError(f"{type(kernel).__name__} cannot play sub-runs (no turn/new_turn)")
    return cast("SubRuns", kernel)
