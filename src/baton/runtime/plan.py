"""What the kernel needs to run agents: compiled agents and the kernel's own settings.

`compile_plans` turns `Agent`s into `AgentPlan`s once, when a topology is built: the model is
resolved, every name the agent's model may call gets an entry in the agent's call table (a
tool, a hand-off, a built-in such as `fetch_history`), and configuration mistakes raise
`ConfigError` there, never mid-run.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Literal

from baton.agents import Agent
from baton.backends.base import Store
from baton.core.errors import ConfigError, ModelError
from baton.core.messages import ToolSpec
from baton.handoff import (
    FETCH_HISTORY,
    TRANSFER_BACK,
    fetch_history_spec,
    handoff_spec,
    handoff_target,
    handoff_tool_name,
    human_spec,
    transfer_back_spec,
)
from baton.models.base import Model
from baton.models.registry import resolve_model
from baton.observe.base import EventSink
from baton.routing.router import Router
from baton.runtime.compress import FETCH_RESULT, fetch_result_spec
from baton.runtime.guards import Guards
from baton.runtime.output import OutputSpec, compile_output
from baton.tools import Tool

if TYPE_CHECKING:
    from baton.runtime.conduct import Conducted
    from baton.runtime.entities import Extractor
    from baton.runtime.recall import MemoryHook
    from baton.runtime.redact import Redactor
    from baton.runtime.rulebook import Rulebook

HUMAN = "human"
"""The `fallback` value (and hand-off target) that sends escalations to the human queue."""

DEFAULT_ESCALATION_MESSAGE = (
    "I'm passing your request to a human colleague, together with everything we have so far, "
    "so you won't need to repeat yourself."
)

EntryKind = Literal["tool", "handoff", "back", "history", "result"]

_MOVES = frozenset({"handoff", "back", "hand_on"})
"""Entry kinds that pass the baton (a fallback's turn makes none)."""


@dataclass(frozen=True, slots=True)
class CallEntry:
    """What a name in an agent's call table does: run `tool`, hand off to `target`, or a
    built-in (`back`: return the baton to who handed it over; `history`: `fetch_history`;
    `result`: `fetch_result`, the full text of a compressed tool result)."""

    kind: str
    """tool, handoff, back, history, or a kind a topology registers with the runner."""
    tool: Tool | None = None
    target: str | None = None


@dataclass(frozen=True)
class AgentPlan:
    """An agent compiled for the kernel: its model (or its conductor), call table and the
    specs its model sees."""

    agent: Agent
    model: Model | None
    """The model asked for each step; None for a conductor, which has none."""
    tools: dict[str, Tool]
    specs: list[ToolSpec]
    handoff_targets: frozenset[str]
    received_specs: list[ToolSpec] | None = None
    """Specs when the agent received the baton by hand-off (adds `transfer_back` and
    `fetch_history` where enabled); None means the same as `specs`."""
    table: Mapping[str, CallEntry] = field(default_factory=dict)
    """Name -> entry for every call the agent may make in any turn."""
    received_table: Mapping[str, CallEntry] | None = None
    """The table when it received the baton by hand-off; None means the same as `table`."""
    output: OutputSpec | None = None
    """Its `output_type` compiled (schema, validator, prompt note); None for free text."""
    conductor: Conducted | None = None
    """Decides the agent's steps in code, within its own round budget, instead of a model
    (`baton.runtime.conduct`); None for an agent with a model."""

    @property
    def asked_model(self) -> Model:
        """The model the kernel asks for the agent's steps; a conductor has none, and asking
        for it raises `ModelError`."""
        if self.model is None:
            raise ModelError(
                f"agent {self.agent.name} is a conductor: it decides in code, never asks a model"
            )
        return self.model

    def specs_for(self, received: bool, earlier: bool = False) -> list[ToolSpec]:
        """The tool specs the model sees this turn (`earlier`: the session has turns before
        the loaded window, which `fetch_history` reaches)."""
        if received and self.received_specs is not None:
            return self.received_specs
        if earlier and not received:
            return self._earlier[0]
        return self.specs

    def table_for(self, received: bool, earlier: bool = False) -> Mapping[str, CallEntry]:
        """The call table of a turn (received by hand-off or not; `earlier`: as `specs_for`)."""
        if received and self.received_table is not None:
            return self.received_table
        if earlier and not received:
            return self._earlier[1]
        return self.table

    @cached_property
    def _earlier(self) -> tuple[list[ToolSpec], Mapping[str, CallEntry]]:
        """Specs and table of a turn not received by hand-off in a session with turns before
        the window: `fetch_history` added where the agent offers it."""
        if not self.agent.history_tool or FETCH_HISTORY in self.table or self.conductor:
            return self.specs, self.table
        return [*self.specs, fetch_history_spec()], {
            **self.table,
            FETCH_HISTORY: CallEntry("history"),
        }

    def entry_for(self, name: str, received: bool, earlier: bool = False) -> CallEntry | None:
        """What a call named `name` does this turn. A `transfer_to_<x>` the agent was not
        given still counts as a hand-off attempt, so `may_hand_to` refuses it by name."""
        entry = self.table_for(received, earlier).get(name)
        if entry is None:
            target = handoff_target(name)
            if target is not None:
                return CallEntry("handoff", target=target)
        return entry

    def may_hand_to(self, target: str) -> bool:
        """The one place that decides whether this agent may pass the baton to `target`."""
        return target in self.handoff_targets

    @cached_property
    def fallback(self) -> AgentPlan:
        """The plan of a fallback agent's turn after an escalation: tools only (a
        conductor keeps its conductor and the calls generated for it, a remote agent its
        call: it has no other way to answer)."""
        conducted = self.conductor
        table = {
            n: e
            for n, e in self.table.items()
            if e.kind == "tool" or (conducted is not None and e.kind not in _MOVES)
        }
        # a hand-off attempt is refused by name (`may_hand_to`: no targets), not unknown
        return AgentPlan(
            agent=self.agent,
            model=self.model,
            tools=self.tools,
            specs=[s for s in self.specs if s.name in self.tools],
            handoff_targets=frozenset(),
            table=table,
            output=self.output,
            conductor=conducted,
        )

    @property
    def callable_names(self) -> set[str]:
        """Names of everything the agent may call (its tools and hand-offs)."""
        return {s.name for s in self.received_specs or self.specs}


@dataclass(frozen=True, slots=True)
class Extra:
    """A call a topology generates for an agent (`ask_<worker>`, `post_to_board`, a graph's
    node functions): its name, its entry, and the spec its model sees."""

    name: str
    entry: CallEntry
    spec: ToolSpec | None = None
    """None: the agent's model is not shown it (a conductor's own calls)."""
    what: str = "a generated tool"
    """What it is, for the error when it clashes with a name the agent already has."""


def compile_plans(
    agents: Mapping[str, Agent],
    default_model: Model | str | None = None,
    *,
    extra_entries: Mapping[str, Sequence[Extra]] | None = None,
    conductors: Mapping[str, Conducted] | None = None,
) -> dict[str, AgentPlan]:
    """Compile every agent of a topology (raises `ConfigError` on the first mistake).

    `extra_entries`: agent -> the calls the topology generates for it, each checked here,
    in one place, against every name the agent already has (its tools, hand-offs, built-ins
    and the other generated calls). `conductors`: agent -> the conductor that decides its
    steps, and its round budget (`baton.runtime.conduct`); such an agent has no model."""
    for name in [*(extra_entries or {}), *(conductors or {})]:
        if name not in agents:
            raise ConfigError(f"the topology names {name!r}, which is not one of its agents")
    return {
        a.name: compile_plan(
            a,
            agents,
            default_model,
            (extra_entries or {}).get(a.name, ()),
            (conductors or {}).get(a.name),
        )
        for a in agents.values()
    }


def compile_plan(
    agent: Agent,
    agents: Mapping[str, Agent],
    default_model: Model | str | None = None,
    extras: Sequence[Extra] = (),
    conducted: Conducted | None = None,
) -> AgentPlan:
    """Compile one agent of `agents` (`compile_plans` does each; a team compiles an agent
    again when the tools its toolsets list change)."""
    if conducted is not None and agent.model is not None:
        raise ConfigError(
            f"agent {agent.name!r} is a conductor: it decides in code and has no model; "
            "remove its model"
        )
    plan = _compile(agent, agents, default_model, conducted)
    return _with_extras(plan, extras) if extras else plan


def _with_extras(plan: AgentPlan, extras: Sequence[Extra]) -> AgentPlan:
    taken = set(plan.table) | set(plan.received_table or ())
    for x in extras:
        if x.name in taken:
            raise ConfigError(
                f"agent {plan.agent.name!r} has a tool named {x.name!r}, which clashes with "
                f"{x.what}; rename the tool"
            )
        taken.add(x.name)
    specs = [x.spec for x in extras if x.spec is not None]
    entries = {x.name: x.entry for x in extras}
    return replace(
        plan,
        specs=[*plan.specs, *specs],
        table={**plan.table, **entries},
        received_specs=None if plan.received_specs is None else [*plan.received_specs, *specs],
        received_table=None if plan.received_table is None else {**plan.received_table, **entries},
    )


def _compile(
    agent: Agent,
    agents: Mapping[str, Agent],
    default_model: Model | str | None,
    conducted: Conducted | None = None,
) -> AgentPlan:
    _check(agent, agents)
    model = (
        None
        if conducted is not None  # a conductor decides in code: no model is resolved
        else resolve_model(agent.model if agent.model is not None else default_model)
    )
    specs = [t.spec for t in agent.tools]
    specs += [human_spec() if t == HUMAN else handoff_spec(agents[t]) for t in agent.handoffs]
    table: dict[str, CallEntry] = {t.name: CallEntry("tool", tool=t) for t in agent.tools}
    for target in agent.handoffs:
        table[handoff_tool_name(target)] = CallEntry("handoff", target=target)
    extra: list[ToolSpec] = []
    received = dict(table)
    if agent.transfer_back:  # offered after a hand-off; refused with a reason otherwise
        extra.append(transfer_back_spec())
        table[TRANSFER_BACK] = received[TRANSFER_BACK] = CallEntry("back")
    if agent.history_tool:
        extra.append(fetch_history_spec())
        received[FETCH_HISTORY] = CallEntry("history")
    if any([agent.compression_for(t) is not None for t in agent.tools]):
        specs.append(fetch_result_spec())  # a compressed result names the way to its full text
        table[FETCH_RESULT] = received[FETCH_RESULT] = CallEntry("result")
    output = None
    if agent.output_type is not None:
        output = compile_output(agent.output_type, bool(getattr(model, "native_output", False)))
    for t in agent.tools:
        lacking = agent.missing_scopes(t)
        if lacking:
            logging.getLogger("baton").warning(
                "agent %r lacks scopes %s that tool %r needs: every call will be refused "
                "(grant them with Agent(scopes=[...]))",
                agent.name,
                list(lacking),
                t.name,
            )
    return AgentPlan(
        agent=agent,
        model=model,
        tools={t.name: t for t in agent.tools},
        specs=specs,
        handoff_targets=frozenset(agent.handoffs),
        received_specs=[*specs, *extra] if extra else None,
        table=table,
        received_table=received if extra else None,
        output=output,
        conductor=conducted,
    )


def _check(agent: Agent, agents: Mapping[str, Agent]) -> None:
    for target in agent.handoffs:
        if target == HUMAN:
            continue  # `transfer_to_human`: escalation to the human queue
        if target not in agents:
            raise ConfigError(
                f"agent {agent.name!r} hands off to {target!r}, which is not in the team "
                f"(agents: {', '.join(agents)})"
            )
        if target == agent.name:
            raise ConfigError(f"agent {agent.name!r} lists itself in handoffs; remove it")
    tool_names = {t.name for t in agent.tools}
    for builtin in (TRANSFER_BACK, FETCH_HISTORY, FETCH_RESULT):
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
    for target in agent.approve_handoffs:
        if target not in agent.handoffs:
            raise ConfigError(
                f"agent {agent.name!r} sets approve_handoffs for {target!r}, which is not in "
                f"its handoffs ({', '.join(agent.handoffs) or 'none'})"
            )
    for target in agent.handoffs:
        if handoff_tool_name(target) in tool_names:
            raise ConfigError(
                f"agent {agent.name!r} has a tool named {handoff_tool_name(target)!r}, "
                "which clashes with the generated hand-off tool; rename the tool"
            )


@dataclass
class KernelSettings:
    """Settings every run of a topology shares (nothing topology-specific)."""

    store: Store
    guards: Guards = field(default_factory=Guards)
    sinks: list[EventSink] = field(default_factory=list)
    max_result_chars: int = 1500
    summariser: Model | None = None
    """Writes `summary`-policy summaries; None uses the handing-over agent's model."""
    redactor: Redactor | None = None
    """Redacts sensitive keys and values in payloads and events; None turns redaction off."""
    at_rest: Redactor | None = None
    """Masks the stored transcript and session slots (`baton.runtime.at_rest`); None keeps
    them in clear."""
    extractors: list[Extractor] | None = None
    """Entity extractors of the entity guard (`Guards.entity_guard`); None: the defaults."""
    guardrails: Rulebook | None = None
    """The team's guardrails, compiled (`baton.runtime.guardrails`); None: it has none."""
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("baton"))
    """Where the kernel logs (a topology's own logger, with its redaction filter)."""
    memory: MemoryHook | None = None
    """The team's long-term memory (`baton.runtime.recall`); None: the kernel asks nothing."""


@dataclass
class SwarmPolicy:
    """The swarm's choices the kernel asks about: who takes a new request, who takes over
    when a guard trips, and what the user is told when a person will answer."""

    entry: str | None
    """The entry agent; None when a router picks the first holder."""
    router: Router | None = None
    fallback: str = HUMAN
    escalation_message: str = DEFAULT_ESCALATION_MESSAGE
    multi_intent: bool = False
    """The router splits a request with several needs (`baton.routing.intents`): the first
    need's agent takes it, the others are handed on after it answers (`baton.runtime.pending`)."""
