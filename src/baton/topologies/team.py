"""`Team`: the swarm topology — agents pass the baton to each other through typed hand-offs."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from baton.agents import Agent
from baton.backends import open_store
from baton.backends.base import SessionRecord, Store
from baton.core.errors import ConfigError
from baton.core.ids import new_id
from baton.handoff import (
    FETCH_HISTORY,
    TRANSFER_BACK,
    fetch_history_spec,
    handoff_spec,
    handoff_tool_name,
    human_spec,
    transfer_back_spec,
)
from baton.models.base import Model
from baton.models.registry import resolve_model
from baton.observe.base import EventSink
from baton.routing.router import Router, routes_from_agents
from baton.runtime.entities import Extractor
from baton.runtime.guards import Guards
from baton.runtime.plan import DEFAULT_ESCALATION_MESSAGE, HUMAN, AgentPlan, KernelConfig
from baton.runtime.redact import Redactor, install_log_redaction
from baton.runtime.result import RunResult
from baton.runtime.runner import Runner, run_sync_guard
from baton.tools import DEFAULT_MAX_RESULT_CHARS


def _redactor(redact: Redactor | bool) -> Redactor | None:
    found = redact if isinstance(redact, Redactor) else (_default_redactor() if redact else None)
    if found is not None:
        install_log_redaction(found)
    return found


_DEFAULT: list[Redactor] = []


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
        router: Router | None = None
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
        elif not isinstance(entry, str):
            raise ConfigError("entry must be an agent name or a Router")
        elif entry not in self.agents:
            raise ConfigError(
                f"entry {entry!r} is not in the team (agents: {', '.join(self.agents)})"
            )
        if fallback != HUMAN and fallback not in self.agents:
            raise ConfigError(
                f"fallback {fallback!r} is neither 'human' nor an agent of the team "
                f"(agents: {', '.join(self.agents)})"
            )
        self.entry = entry
        self.guards = guards or Guards()
        self.fallback = fallback
        self.store: Store = open_store(store)
        self.default_model = model
        self.sinks: list[EventSink] = list(sinks)
        plans = {a.name: self._plan(a) for a in self.agents.values()}
        self._config = KernelConfig(
            plans=plans,
            entry=None if router is not None else str(entry),
            router=router,
            store=self.store,
            guards=self.guards,
            fallback=fallback,
            sinks=self.sinks,
            max_result_chars=max_result_chars,
            escalation_message=escalation_message,
            summariser=resolve_model(summariser) if summariser is not None else None,
            redactor=_redactor(redact),
            extractors=list(extractors) if extractors is not None else None,
        )
        self._runner = Runner(self._config)
        # per-session lock + number of runs using it, so one session never runs twice at once
        self._session_locks: dict[str, asyncio.Lock] = {}
        self._session_users: dict[str, int] = {}
        """Runs waiting for or holding each session's lock (two dicts, not one of tuples: one
        object less per run in flight for the garbage collector)."""

    def _plan(self, agent: Agent) -> AgentPlan:
        for target in agent.handoffs:
            if target == HUMAN:
                continue  # `transfer_to_human`: escalation to the human queue
            if target not in self.agents:
                raise ConfigError(
                    f"agent {agent.name!r} hands off to {target!r}, which is not in the team "
                    f"(agents: {', '.join(self.agents)})"
                )
            if target == agent.name:
                raise ConfigError(f"agent {agent.name!r} lists itself in handoffs; remove it")
        tool_names = {t.name for t in agent.tools}
        for builtin in (TRANSFER_BACK, FETCH_HISTORY):
            if builtin in tool_names:
                raise ConfigError(
                    f"agent {agent.name!r} has a tool named {builtin!r}, which clashes with the "
                    "built-in tool of that name; rename the tool"
                )
        for target in agent.handoff_context:
            if target not in agent.handoffs:
                raise ConfigError(
                    f"agent {agent.name!r} sets handoff_context for {target!r}, which is not in "
                    f"its handoffs ({', '.join(agent.handoffs) or 'none'})"
                )
        for target in agent.handoffs:
            if handoff_tool_name(target) in tool_names:
                raise ConfigError(
                    f"agent {agent.name!r} has a tool named {handoff_tool_name(target)!r}, "
                    "which clashes with the generated hand-off tool; rename the tool"
                )
        spec = agent.model if agent.model is not None else self.default_model
        model = resolve_model(spec)
        specs = [t.spec for t in agent.tools]
        specs += [
            human_spec() if t == HUMAN else handoff_spec(self.agents[t]) for t in agent.handoffs
        ]
        extra = [transfer_back_spec()] if agent.transfer_back else []
        if agent.history_tool:
            extra.append(fetch_history_spec())
        return AgentPlan(
            agent=agent,
            model=model,
            tools={t.name: t for t in agent.tools},
            specs=specs,
            handoff_targets=frozenset(agent.handoffs),
            received_specs=[*specs, *extra] if extra else None,
        )

    def use_store(self, store: Store | str) -> None:
        """Switch the team to another store (a URL or a Store object) for future runs."""
        self.store = open_store(store)
        self._config.store = self.store

    async def aclose(self) -> None:
        """Close the store's connections (a Team is also an async context manager)."""
        await self.store.close()

    async def __aenter__(self) -> Team:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def add_sink(self, sink: EventSink) -> None:
        """Send every future event to `sink` too."""
        self.sinks.append(sink)

    def remove_sink(self, sink: EventSink) -> None:
        """Stop sending events to `sink` (no error if it was not attached)."""
        if sink in self.sinks:
            self.sinks.remove(sink)

    async def run(
        self, message: str, session_id: str | None = None, user_id: str | None = None
    ) -> RunResult:
        """Run one user message; continue the session when `session_id` is known."""
        if not isinstance(message, str) or not message.strip():
            raise ValueError("message must be a non-empty string")
        sid = session_id or new_id("s_")
        users = self._session_users
        lock = self._session_locks.get(sid)
        if lock is None:
            lock = self._session_locks[sid] = asyncio.Lock()
        users[sid] = users.get(sid, 0) + 1
        try:
            async with lock:
                session = await self.store.get_session(sid) or SessionRecord(sid, user_id=user_id)
                return await self._runner.run(message, session, user_id)
        finally:
            left = users[sid] - 1
            if left:
                users[sid] = left
            else:
                del users[sid], self._session_locks[sid]

    def run_sync(
        self, message: str, session_id: str | None = None, user_id: str | None = None
    ) -> RunResult:
        """`run` for scripts (not callable inside a running event loop)."""
        run_sync_guard()
        return asyncio.run(self.run(message, session_id=session_id, user_id=user_id))

    async def session(self, session_id: str) -> SessionRecord | None:
        """The stored session (holder, state), or None."""
        return await self.store.get_session(session_id)

    def describe(self) -> dict[str, Any]:
        """A plain-dict summary of the team (agents, hand-off graph, entry, fallback)."""
        return {
            "entry": self.entry if isinstance(self.entry, str) else "router",
            "fallback": self.fallback,
            "agents": {
                a.name: {
                    "description": a.description,
                    "tools": [t.name for t in a.tools],
                    "handoffs": list(a.handoffs),
                }
                for a in self.agents.values()
            },
        }
