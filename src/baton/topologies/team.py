"""`Team`: the swarm topology — agents pass the baton to each other through typed hand-offs."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from baton.agents import Agent
from baton.backends import open_store
from baton.backends.base import Checkpoint, HumanTicket, SessionRecord, Store
from baton.bus import Bus, Envelope, TurnResult, open_bus
from baton.bus.headers import trace_headers
from baton.core.approval import ApprovalCard
from baton.core.errors import (
    ApprovalError,
    BatonError,
    ConfigError,
    SessionOwnerError,
    TicketError,
)
from baton.core.events import Event
from baton.core.ids import new_id
from baton.core.interrupt import InterruptCard
from baton.core.text import blank, clean_text
from baton.guardrails import Guardrail
from baton.models.base import Model
from baton.models.registry import resolve_model
from baton.observe.base import EventSink
from baton.observe.declared import BindsNames, DeclaredNames
from baton.routing.router import Router, routes_from_agents
from baton.runtime.blueprint import Blueprint, BringsBlueprint, agents_part
from baton.runtime.cancel import RELEASED
from baton.runtime.entities import Extractor
from baton.runtime.guards import Guards
from baton.runtime.kernel import Kind
from baton.runtime.plan import (
    DEFAULT_ESCALATION_MESSAGE,
    HUMAN,
    AgentPlan,
    KernelSettings,
    SwarmPolicy,
    compile_plans,
)
from baton.runtime.recall import MemoryHook
from baton.runtime.redact import Redactor
from baton.runtime.result import RunResult
from baton.runtime.resume import Hold, Resumer
from baton.runtime.rulebook import DEFAULT_MESSAGE as DEFAULT_GUARDRAIL_MESSAGE
from baton.runtime.rulebook import compile_guardrails
from baton.runtime.runner import Listener, Runner
from baton.runtime.sync import run_sync_guard
from baton.runtime.tickets import Tickets
from baton.runtime.toolsets import refresh_toolsets
from baton.tools import DEFAULT_MAX_RESULT_CHARS
from baton.topologies.mermaid import Flowchart, label

_DEFAULT: list[Redactor] = []

_Bound = TypeVar("_Bound", bound="Team")


class _BusSlot:
    """A binding's bus, opened on first use from what was given: a `Bus`, a URL, or None
    (an in-process `MemoryBus`). Two bindings that share a slot share one bus."""

    def __init__(self, spec: Bus | str | None) -> None:
        self.spec = spec
        self.opened: Bus | None = None

    def get(self) -> Bus:
        """The bus, opened now if it was not yet."""
        if self.opened is None:
            self.opened = open_bus(self.spec)
        return self.opened

    async def close(self) -> None:
        """Close the bus if it was ever opened (a bus never used holds no connection)."""
        if self.opened is not None:
            await self.opened.close()


def _default_redactor() -> Redactor:
    """One shared default `Redactor` (it compiles its patterns once and caches clean texts)."""
    if not _DEFAULT:
        _DEFAULT.append(Redactor())
    return _DEFAULT[0]


class Team:
    """A set of agents, one entry, guards, a fallback and a store.

    Exactly one agent holds the baton at any time. A second `run` on the same `session_id`
    continues with the agent that last held it and with the session's accumulated state.
    Configuration mistakes raise `ConfigError` here, when the team is built.

    A team is a declaration and one binding of it. The declaration is what every deployment
    of the team shares: the agents, entry, guards, fallback, policy, compiled plans,
    blueprint and the kernel settings that are not deployment (limits, redactor, extractors,
    summariser, guardrails). The binding is where it runs: the store, the bus and the sinks,
    with the runner's own state (runs live in this process, the resumer and its leases, the
    human queue's tickets). `Team(..., store=, bus=, sinks=)` declares and binds in one step;
    `team.bind(store=, bus=, sinks=)` deploys the same declaration elsewhere and leaves the
    team as it is.
    """

    def __init__(
        self,
        agents: Sequence[Agent],
        entry: str | Router,
        *,
        guards: Guards | None = None,
        fallback: str = HUMAN,
        store: Store | str | None = None,
        model: Model | str | None = None,
        sinks: Sequence[EventSink] = (),
        max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
        escalation_message: str = DEFAULT_ESCALATION_MESSAGE,
        summariser: Model | str | None = None,
        redact: Redactor | bool = True,
        extractors: Sequence[Extractor] | None = None,
        lease_s: float = 30.0,
        mask_at_rest: bool = True,
        bus: Bus | str | None = None,
        multi_intent: bool = False,
        guardrails: Sequence[Guardrail] = (),
        guardrail_message: str = DEFAULT_GUARDRAIL_MESSAGE,
        blueprint: Blueprint | None = None,
        memory: MemoryHook | None = None,
    ) -> None:
        self.agents: dict[str, Agent] = {}
        for a in agents:
            if not isinstance(a, Agent):
                raise ConfigError(f"Team agents must be Agent objects, got {type(a).__name__}")
            if a.name in self.agents:
                raise ConfigError(f"duplicate agent name {a.name!r}: every agent needs its own")
            if a.name == HUMAN:
                raise ConfigError(f"{HUMAN!r} is reserved for the human queue; rename the agent")
            self.agents[a.name] = a
        router = self._router(entry)
        if fallback != HUMAN and fallback not in self.agents:
            raise ConfigError(
                f"fallback {fallback!r} is neither 'human' nor an agent of the team "
                f"(agents: {', '.join(self.agents)})"
            )
        if multi_intent and router is None:
            raise ConfigError(
                "multi_intent=True needs a Router as the entry: it routes each need of a request"
            )
        if lease_s <= 0:
            raise ConfigError("lease_s must be positive (seconds a run holds its session)")
        # -- the declaration: shared by every binding of the team
        self.entry = entry
        self.guards = guards or Guards()
        self.fallback = fallback
        if memory is not None and not isinstance(memory, MemoryHook):
            raise ConfigError(
                f"memory must be a baton.memory.Memory (recall and after_run hooks), got "
                f"{type(memory).__name__}"
            )
        self.blueprint = (blueprint or Blueprint()) | agents_part(self.agents.values())
        if memory is not None:  # `remember` for every agent with a model that it serves
            modelled = [a for a in self.agents if a not in self.blueprint.conductors]
            self.blueprint = self.blueprint | memory.blueprint_part(modelled)
        self.memory = memory
        """The team's long-term memory (`baton.memory.Memory`), or None; the caller closes it."""
        """What the topology adds to its agents (generated calls, conductors, call kinds, the
        store capabilities it needs), with what agents bring themselves (a `RemoteAgent`'s
        conductor and call); a plain team of plain agents adds nothing."""
        self.default_model = model
        self.policy = SwarmPolicy(
            entry=None if router is not None else str(entry),
            router=router,
            fallback=fallback,
            escalation_message=escalation_message,
            multi_intent=multi_intent,
        )
        self._plans = compile_plans(
            self.agents,
            model,
            extra_entries=self.blueprint.entries,
            conductors=self.blueprint.conductors,
        )
        self._lease_s = lease_s
        redactor = (
            redact if isinstance(redact, Redactor) else (_default_redactor() if redact else None)
        )
        opened = open_store(store)
        settings = KernelSettings(
            store=opened,
            guards=self.guards,
            max_result_chars=max_result_chars,
            summariser=resolve_model(summariser) if summariser is not None else None,
            redactor=redactor,
            at_rest=redactor if mask_at_rest else None,
            extractors=list(extractors) if extractors is not None else None,
            guardrails=compile_guardrails(guardrails, self.agents, model, guardrail_message),
            memory=memory,
        )
        # -- the binding this constructor makes (`bind` makes others); the team closes its
        # store and bus, whoever made them (as it always has)
        self._deploy(settings, opened, _BusSlot(bus), list(sinks), owns=(True, True))

    def _router(self, entry: str | Router) -> Router | None:
        if isinstance(entry, Router):
            router = entry
            if router.fallback != HUMAN and router.fallback not in self.agents:
                raise ConfigError(
                    f"the router's fallback {router.fallback!r} is neither 'human' nor an agent "
                    f"of the team (agents: {', '.join(self.agents)})"
                )
            if not router.routes:
                router.bind(routes_from_agents(list(self.agents.values())))
            unknown = [r.name for r in router.routes if r.name not in self.agents]
            if unknown:
                raise ConfigError(f"the router has routes {unknown} that are not team agents")
            return router
        if not isinstance(entry, str):
            raise ConfigError("entry must be an agent name or a Router")
        if entry not in self.agents:
            raise ConfigError(
                f"entry {entry!r} is not in the team (agents: {', '.join(self.agents)})"
            )
        return None

    def _deploy(
        self,
        settings: KernelSettings,
        store: Store,
        bus: _BusSlot,
        sinks: list[EventSink],
        owns: tuple[bool, bool],
    ) -> None:
        """Make this object a binding of its declaration: `store`, `bus` and `sinks` with
        settings of their own (`settings`' declared values) and a runner, resumer and human
        queue of their own. `owns`: whether `aclose` closes the store, the bus."""
        self.blueprint.check_store(store)
        self.store: Store = store
        self.sinks: list[EventSink] = sinks
        self._settings = replace(settings, store=store, sinks=sinks)
        toolsets = any(a.toolsets for a in self.agents.values())
        self._runner = Runner(
            self._settings,
            self._plans,
            self.policy,
            self.blueprint.kinds,
            refresh_tools=self._refresh_toolsets if toolsets else None,
        )
        self._resumer = Resumer(self._runner, self._lease_s)
        self.tickets = Tickets(store, self._settings.at_rest)
        """The human queue: list, claim, answer and close escalation tickets."""
        self._bus_slot = bus
        self._owns_store, self._owns_bus = owns
        for sink in sinks:
            if isinstance(sink, BindsNames):
                sink.bind_names(self.declared_names)

    async def _refresh_toolsets(self) -> None:
        """List the agents' toolsets (MCP servers) and compile again the agents whose tools
        changed: before every run, so a run's tools stay the same while it goes on."""
        await refresh_toolsets(
            self._plans, self.agents, self.default_model, self.blueprint, self._settings.log
        )

    def bind(
        self: _Bound,
        store: Store | str | None = None,
        *,
        bus: Bus | str | None = None,
        sinks: Sequence[EventSink] | None = None,
    ) -> _Bound:
        """A deployment of this team's declaration (the same agents, plans, policy, guards
        and blueprint, and the same topology: a bound `Graph` still has `invoke`) on `store`,
        `bus` and `sinks`, with runs, leases and tickets of its own. The team is unchanged.

        `store`: a URL, which the binding opens, checks and closes on `aclose`; a `Store`
        object, which stays the caller's (the binding never closes it); None: the team's own
        store (the team closes it). `bus` likewise (None: the team's bus, opened on first
        use by whichever uses it first). `sinks`: the binding's sinks (`[]` for none); None:
        the team's sinks as they are now, in a list of the binding's own (`add_sink` on one
        does not reach the other). A store without a capability the topology needs raises
        `ConfigError` naming it and the stores that have it.
        """
        if sinks is not None:
            if isinstance(sinks, (str, bytes)) or not isinstance(sinks, Sequence):
                raise ConfigError(f"sinks must be a list of event sinks, got {sinks!r}")
            wrong = [type(s).__name__ for s in sinks if not isinstance(s, EventSink)]
            if wrong:
                raise ConfigError(
                    f"sinks must be event sinks (objects with emit(event)), got {wrong}"
                )
        if bus is not None and not isinstance(bus, (str, Bus)):
            raise ConfigError(f"bus must be a URL or a Bus object, got {type(bus).__name__}")
        bound = copy.copy(self)  # the declaration, shared; `_deploy` replaces the binding
        bound._deploy(
            self._settings,
            self.store if store is None else open_store(store),
            self._bus_slot if bus is None else _BusSlot(bus),
            list(self.sinks if sinks is None else sinks),
            owns=(isinstance(store, str), isinstance(bus, str)),
        )
        return bound

    def with_plans(
        self,
        change: Callable[[AgentPlan], AgentPlan],
        store: Store,
        kinds: Callable[[str, Kind], Kind] | None = None,
    ) -> Team:
        """A binding of this team on `store`, with no sinks, whose compiled agents are
        `change(plan)` and whose topology's call kinds are `kinds(name, kind)`; the
        declaration is unchanged. How a replay gives every agent a recorded model and
        recorded tools (`baton.replay`): the toolsets are not listed again in it, so its
        agents keep the tools `change` gave them."""
        bound = copy.copy(self)
        bound._plans = {name: change(plan) for name, plan in self._plans.items()}
        if kinds is not None:
            changed = {n: kinds(n, k) for n, k in self.blueprint.kinds.items()}
            bound.blueprint = replace(self.blueprint, kinds=changed)
        bound._deploy(self._settings, store, _BusSlot(None), [], owns=(False, True))
        bound._runner.refresh_tools = None
        return bound

    @property
    def _config(self) -> KernelSettings:
        """The kernel settings (kept under their old name for callers that tune them)."""
        return self._settings

    @property
    def bus(self) -> Bus:
        """Where `submit` queues turns for workers (`baton.worker.Worker`): the `bus` given to
        the team (`redis://...` for workers in other processes), else an in-process
        `MemoryBus`, opened on first use."""
        return self._bus_slot.get()

    def use_store(self, store: Store | str) -> None:
        """Switch this object to another store (a URL or a Store object) in place, for future
        runs; `aclose` then closes it. Kept for compatibility: `bind` is the way to run a
        team on another store, and leaves the team as it is."""
        opened = open_store(store)
        self.blueprint.check_store(opened)
        self.store = opened
        self._settings.store = self.store
        self.tickets = Tickets(self.store, self._settings.at_rest)
        self._owns_store = True

    async def aclose(self) -> None:
        """Close what this object owns and detach its names from its sinks (a Team is also
        an async context manager). A team made by `Team(...)` owns its store and bus; a
        binding owns only what it opened from a URL (see `bind`). The connections of its
        agents' toolsets (MCP servers) and of its remote agents (A2A) are closed too; they
        open again if used again."""
        for sink in self.sinks:
            if isinstance(sink, BindsNames):
                sink.unbind_names(self.declared_names)
        try:
            for toolset in {id(t): t for a in self.agents.values() for t in a.toolsets}.values():
                await toolset.aclose()  # its connection; it opens again if used again
            for agent in self.agents.values():
                if isinstance(agent, BringsBlueprint):  # a remote agent's connection, likewise
                    await agent.aclose()
            if self._owns_bus:
                await self._bus_slot.close()
        finally:
            if self._owns_store:
                await self.store.close()

    async def __aenter__(self: _Bound) -> _Bound:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def add_sink(self, sink: EventSink) -> None:
        """Send every future event to `sink` too (a sink that labels by name, such as
        `MetricsSink`, learns the team's declared names)."""
        self.sinks.append(sink)
        if isinstance(sink, BindsNames):
            sink.bind_names(self.declared_names)

    def remove_sink(self, sink: EventSink) -> None:
        """Stop sending events to `sink` (no error if it was not attached)."""
        if sink in self.sinks:
            self.sinks.remove(sink)
            if isinstance(sink, BindsNames):
                sink.unbind_names(self.declared_names)

    def declared_names(self) -> DeclaredNames:
        """The agents (with `human`) and the names they may call, as the team is now: the
        only values a metric label takes (anything else a model invents counts as `other`)."""
        plans = self._runner.plans.values()
        tools = {n for p in plans for n in (*p.table, *(p.received_table or ()))}
        return DeclaredNames(frozenset([*self._runner.plans, HUMAN]), frozenset(tools))

    # ------------------------------------------------------------------ runs
    async def run(
        self,
        message: str,
        session_id: str | None = None,
        user_id: str | None = None,
        *,
        request_id: str | None = None,
        trace_id: str | None = None,
    ) -> RunResult:
        """Run one user message; continue the session when `session_id` is known.

        An unfinished run of the session (a crashed process) is resumed first. A session
        whose run waits for approval raises `ApprovalError`: decide it first. Two processes
        on one session take turns (a lease in the store); a commit that loses a race raises
        `ConflictError` and writes nothing.

        `request_id` names the request (a bus message's id, a client's retry key): a request
        the session already answered is not run again — its recorded result comes back — and
        one whose run was interrupted by a crash is resumed, not started over. `trace_id` (32
        hex chars, a W3C trace id) makes the run part of a trace begun elsewhere (a client's,
        another worker's); a new trace by default.
        """
        return await self._run(
            message, session_id, user_id, None, request_id=request_id, trace_id=trace_id
        )

    async def submit(
        self,
        message: str,
        session_id: str | None = None,
        user_id: str | None = None,
        *,
        request_id: str | None = None,
    ) -> Envelope:
        """Queue one user message on the team's bus for a worker to run (`baton worker`);
        returns the envelope (its `id` is the request id, `session_id` the session's). The
        turn carries the caller's trace context. `await team.result(session_id)` waits for
        the answer. A request id submitted again is answered once (its recorded result)."""
        if not isinstance(message, str) or blank(message):
            raise ValueError(
                "message must be a non-empty string (not only white space, control or "
                "invisible characters)"
            )
        envelope = Envelope(
            session_id=session_id or new_id("s_"),
            message=clean_text(message),
            user_id=user_id,
            headers=trace_headers(),
            id=request_id if request_id is not None else new_id("req_"),
        )
        await self.bus.publish(envelope)
        return envelope

    async def result(
        self, session_id: str, *, request_id: str | None = None, wait_s: float = 30.0
    ) -> TurnResult:
        """The result of the session's last submitted turn (or of its request `request_id`:
        the same id in another session is another request), waiting up to `wait_s` seconds
        for a worker to report it. Raises `TimeoutError` when none did in time, `LookupError`
        when nothing was submitted for the session."""
        rid = request_id or await self.bus.last_request(session_id)
        if rid is None:
            raise LookupError(f"no turn was submitted for session {session_id!r} on this bus")
        found = await self.bus.get_result(session_id, rid, wait_s=wait_s)
        if found is None:
            raise TimeoutError(
                f"no worker reported request {rid} of session {session_id!r} within "
                f"{wait_s:g}s: is a worker running on {self.bus.url}? (baton worker ...)"
            )
        return found

    async def _run(
        self,
        message: str,
        session_id: str | None,
        user_id: str | None,
        listener: Listener | None,
        start: Any = None,
        request_id: str | None = None,
        trace_id: str | None = None,
    ) -> RunResult:
        if not isinstance(message, str) or blank(message):
            raise ValueError(
                "message must be a non-empty string (not only white space, control or "
                "invisible characters)"
            )
        sid = session_id or new_id("s_")
        message = clean_text(message)
        async with self._held(sid):
            session = await self.store.get_session(sid)
            if session is not None and session.user_id and user_id and user_id != session.user_id:
                # checked before anything runs (an interrupted run of the owner's included)
                raise SessionOwnerError(
                    f"session {sid!r} belongs to another user; user {user_id!r} may not run "
                    "in it. Start a new session for this user"
                )
            cp = await self.store.get_checkpoint(sid)  # read once, for both checks below
            if request_id is not None:
                done = await self._resumer.answered(sid, request_id, session, cp)
                if done is not None:
                    return done
            if await self._resumer.finish_crashed(sid, cp):  # it changed the session
                session = await self.store.get_session(sid)
            session = session or SessionRecord(sid, user_id=user_id)
            if start is None:
                start = await self._start(message, sid)
            return await self._runner.run(
                message, session, user_id, listener, start, request_id, trace_id
            )

    async def _start(self, message: str, session_id: str) -> Any:
        """What a run of this topology starts from besides its message (`RunState.start`),
        read while the session is held; a team needs nothing."""
        return None

    def _held(self, session_id: str, *, tools: bool = True) -> Hold:
        """What every entry point that runs the kernel does first: this team's redaction of
        the logs made meanwhile, and the session held (one runner at a time); `tools`: the
        agents' toolsets listed first (an entry that runs no agent needs none)."""
        return self._resumer.hold(session_id, self._settings.redactor, tools=tools)

    def run_sync(
        self, message: str, session_id: str | None = None, user_id: str | None = None
    ) -> RunResult:
        """`run` for scripts (not callable inside a running event loop)."""
        run_sync_guard()
        return asyncio.run(self.run(message, session_id=session_id, user_id=user_id))

    async def stream(
        self,
        message: str,
        session_id: str | None = None,
        user_id: str | None = None,
        *,
        request_id: str | None = None,
        trace_id: str | None = None,
    ) -> AsyncIterator[Event | RunResult]:
        """`run`, yielding each event as it happens (`text_delta` pieces of the reply from
        models that stream), then the `RunResult` last. Stopping early cancels the run.
        `request_id` is `run`'s retry key: a request the session already answered yields
        its recorded result alone. `trace_id`: as for `run`, a trace begun elsewhere."""
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        task = asyncio.ensure_future(
            self._run(
                message,
                session_id,
                user_id,
                queue.put_nowait,
                request_id=request_id,
                trace_id=trace_id,
            )
        )
        task.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (item := await queue.get()) is not None:
                yield item
            yield await task
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def cancel(
        self, session_id: str, *, reason: str = "cancelled by the caller (team.cancel)"
    ) -> RunResult | None:
        """Cancel the session's run, from any task or thread: a run going on in this process
        stops at its next await and returns status `cancelled` to its caller; a run that
        crashed or waits for approval is ended `cancelled`. What the run did is committed
        (a tool that was running may have taken effect, and the run says so), and
        `team.resume` may still continue it until the session's next message.

        Returns the run's result (`completed` etc. when it ended before the cancellation
        reached it), or None when the session has no run to cancel. A run going on in another
        process is not reached: it ends on its own, then nothing is left to cancel."""
        live = self._runner.live.get(session_id)
        if live is not None and live.task is not asyncio.current_task():
            live.stop(reason)
            return await asyncio.wrap_future(live.done())
        async with self._held(session_id, tools=False):
            return await self._resumer.cancel(session_id, reason)

    async def release(self, session_id: str) -> bool:
        """Stop the session's run going on in this process WITHOUT ending it (a worker shutting
        down): it stays unfinished at its last checkpoint, its lease given up, and its caller
        gets `RunReleased`; `team.resume` (or a `team.run` of the same `request_id`) continues
        it here or in another process. Work since that checkpoint (a model call in flight) is
        done again; a tool call that had started is treated as after a crash. Returns False
        when no run of the session is going on here."""
        live = self._runner.live.get(session_id)
        if live is None or live.task is asyncio.current_task():
            return False
        live.stop(RELEASED, release=True)
        with contextlib.suppress(Exception):
            await asyncio.wrap_future(live.done())
        return True

    async def resume(self, session_id: str) -> RunResult:
        """Continue the session's unfinished run from its last checkpoint (in any process).

        A run waiting for approval stays waiting (its result says so) unless its approval
        timed out, which escalates it. Raises `NoRunToResume` when nothing is unfinished."""
        async with self._held(session_id):
            return await self._resumer.resume(session_id)

    async def discard(self, session_id: str) -> Checkpoint:
        """Drop the session's unfinished run (crashed, or waiting for approval) without
        running more of it: what it committed stays, the rest is gone, and the session is
        free for new messages. Returns the discarded checkpoint."""
        async with self._held(session_id, tools=False):
            return await self._resumer.discard(session_id)

    async def unfinished(self) -> list[Checkpoint]:
        """Checkpoints of the runs that have not finished: crashed ones (`running`) and those
        waiting for a person (`awaiting_approval`, with the card in `meta["approval"]`)."""
        return await self.store.list_checkpoints()

    async def approvals(self) -> list[ApprovalCard]:
        """Every approval a run of this store waits for, oldest first."""
        return [
            ApprovalCard.model_validate(cp.meta["approval"])
            for cp in await self.store.list_checkpoints("awaiting_approval")
            if "approval" in cp.meta
        ]

    async def approve(
        self,
        session_id: str,
        approval_id: str,
        *,
        by: str,
        role: str | None = None,
        authenticated: bool = False,
    ) -> RunResult:
        """Sign off the call a run waits for and resume it exactly where it stopped. With
        `dual` cards the first sign-off returns `awaiting_approval` again. The decision is
        checked against the approval policy the team has now. `authenticated`: the caller
        verified that `by` is who decides (the API server does, from the bearer token); it is
        recorded with the decision, and False says `by` was taken on the caller's word."""
        async with self._held(session_id):
            return await self._resumer.decide(
                session_id, approval_id, True, by, role, "", authenticated
            )

    async def reject(
        self,
        session_id: str,
        approval_id: str,
        *,
        by: str,
        reason: str = "",
        role: str | None = None,
        authenticated: bool = False,
    ) -> RunResult:
        """Refuse the call; the agent reads the rejection as the call's result and tells the
        user. Nothing is executed. `authenticated` as for `approve`."""
        async with self._held(session_id):
            return await self._resumer.decide(
                session_id, approval_id, False, by, role, reason, authenticated
            )

    async def answer_interrupt(
        self, session_id: str, value: Any, *, interrupt_id: str | None = None
    ) -> RunResult:
        """Answer the interrupt the session's run waits for: the call that called
        `interrupt(...)` runs again and this time gets `value` back; nothing else the run did
        runs again. `interrupt_id` (optional) guards against answering a newer interrupt than
        the one that was read. Raises `InterruptError` when the session waits for none."""
        async with self._held(session_id):
            return await self._resumer.answer(session_id, value, interrupt_id)

    async def interrupts(self) -> list[InterruptCard]:
        """Every interrupt a run of this store waits an answer for, oldest first."""
        return [
            InterruptCard.model_validate(cp.meta["interrupt"])
            for cp in await self.store.list_checkpoints("interrupted")
            if "interrupt" in cp.meta
        ]

    async def expire_approvals(self) -> list[RunResult]:
        """Escalate every run whose approval waited longer than its timeout."""
        out = []
        for card in await self.approvals():
            if card.expired():
                # one session's trouble (a changed team, a damaged checkpoint) stops no other
                with contextlib.suppress(BatonError):
                    out.append(await self.resume(card.session_id))
        return out

    async def session(self, session_id: str) -> SessionRecord | None:
        """The stored session (holder, state), or None."""
        return await self.store.get_session(session_id)

    async def answer_ticket(
        self, ticket_id: int, *, by: str, reply: str, hand_back_to: str | None = None
    ) -> HumanTicket:
        """A person answers a ticket: the reply goes into the user's session, and the baton
        goes back to `hand_back_to` (an agent) or stays with the person (None)."""
        if hand_back_to is not None and hand_back_to not in self.agents:
            raise ConfigError(
                f"hand_back_to {hand_back_to!r} is not an agent of the team "
                f"(agents: {', '.join(self.agents)})"
            )
        sid = (await self.tickets.get(ticket_id)).card.session_id
        async with self._held(sid):
            try:  # the user's interrupted run first; never drop a run that waits for approval
                await self._resumer.finish_crashed(sid, await self.store.get_checkpoint(sid))
            except ApprovalError as exc:
                raise TicketError(f"ticket {ticket_id}: {exc}") from None
            ticket = await self.tickets.get(ticket_id)  # as it is now, not before the wait
            return await self.tickets.answer(ticket, by, reply, hand_back_to or HUMAN)

    def to_mermaid(self) -> str:
        """A Mermaid flowchart: the entry (or router), the agents, the hand-offs each may
        make, and where escalations go (`baton graph module:team` prints it)."""
        chart = self._chart()
        return chart.text()

    def _chart(self) -> Flowchart:
        """The team's flowchart (a topology built on a team adds its own edges)."""
        chart = Flowchart()
        chart.node("user", "circle")
        for agent in self.agents.values():  # tools under each name (a conductor: that)
            conducted = self.blueprint.conductors.get(agent.name)
            note = ", ".join(t.name for t in agent.tools)
            if conducted is not None:
                note = f"conductor, {conducted.rounds} rounds" + (f", {note}" if note else "")
            chart.node(agent.name, note=note)
        if isinstance(self.entry, str):
            chart.edge("user", self.entry)
        else:
            chart.node("router", "stadium")
            chart.edge("user", "router")
            for name in self.agents:
                chart.edge("router", name, "routes", dotted=True)
        for agent in self.agents.values():
            for target in agent.handoffs:
                chart.node(target, "round")  # only `human` is not declared yet
                chart.edge(agent.name, target, "hand-off")
        chart.node(self.fallback, "round")
        chart.lines.append(f"    %% guard trips escalate to {label(self.fallback)}")
        return chart

    def describe(self) -> dict[str, Any]:
        """A plain-dict summary of the team (agents, hand-off graph, entry, fallback); a
        conductor agent says so, with its round budget, and names no model; an agent with
        toolsets (MCP servers) names them."""
        conductors = self.blueprint.conductors
        agents: dict[str, Any] = {}
        for a in self.agents.values():
            agents[a.name] = {
                "description": a.description,
                "tools": [t.name for t in a.tools],
                "handoffs": list(a.handoffs),
            }
            if a.toolsets:  # their tools are known once listed (before the first run)
                agents[a.name]["toolsets"] = [t.name for t in a.toolsets]
            if a.name in conductors:
                agents[a.name]["conductor"] = {"rounds": conductors[a.name].rounds}
        return {
            "entry": self.entry if isinstance(self.entry, str) else "router",
            "fallback": self.fallback,
            "agents": agents,
        }
