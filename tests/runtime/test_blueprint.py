"""Blueprints (`baton.runtime.blueprint`): a topology's generated calls, conductors, call kinds
and store needs are declared up front and checked once, when the team is built."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from baton import (
    END,
    START,
    Agent,
    ConfigError,
    Graph,
    MemoryStore,
    ScriptedModel,
    Supervisor,
    Team,
    tool,
)
from baton.core.messages import ToolSpec
from baton.runtime.blueprint import SNAPSHOTS, Blueprint
from baton.runtime.kernel import Call, Kernel, Kind
from baton.runtime.plan import CallEntry, Extra

S = ScriptedModel


class State(BaseModel):
    n: int = 0


class NoSnapshots(MemoryStore):
    """A store without the Snapshots capability."""

    put_snapshot = None  # type: ignore[assignment]


def test_a_missing_capability_names_it_and_every_store_that_has_it() -> None:
    g = Graph(State).add_node("a", lambda s: {}).add_edge(START, "a").add_edge("a", END)
    with pytest.raises(ConfigError) as info:
        g.compile(store=NoSnapshots())
    text = str(info.value)
    assert "a graph needs a store with the Snapshots capability" in text
    for shipped in ("MemoryStore()", "SQLite", "PostgreSQL", "Redis"):
        assert shipped in text
    graph = g.compile()
    with pytest.raises(ConfigError, match="Snapshots capability"):
        graph.use_store(NoSnapshots())
    assert isinstance(graph.store, MemoryStore) and not isinstance(graph.store, NoSnapshots)


def test_a_generated_call_that_clashes_with_a_tool_is_refused_naming_both() -> None:
    @tool
    def ask_billing(question: str) -> str:
        """A tool the lead already has."""
        return question

    lead = Agent(name="lead", tools=[ask_billing])
    with pytest.raises(ConfigError) as info:
        Supervisor(lead, [Agent(name="billing")], model=S([]))
    assert "agent 'lead' has a tool named 'ask_billing'" in str(info.value)
    assert "the generated tool for asking that worker" in str(info.value)


def test_blueprints_combine_and_refuse_contradictions() -> None:
    async def one(*args: Any) -> Any:
        return "1", None

    async def two(*args: Any) -> Any:
        return "2", None

    a = Blueprint(kinds={"x": Kind(one)}, needs=(SNAPSHOTS,))
    b = Blueprint(kinds={"x": Kind(one)}, needs=(SNAPSHOTS,), topology="graph")
    both = a | b
    assert both.kinds == {"x": Kind(one)} and both.needs == (SNAPSHOTS,)
    assert both.topology == "graph"
    with pytest.raises(ConfigError, match="call kind 'x' is declared twice"):
        a | Blueprint(kinds={"x": Kind(two)})
    with pytest.raises(ConfigError, match="two conductors"):
        Blueprint(conductors={"a": object()}) | Blueprint(conductors={"a": object()})  # type: ignore[dict-item]


def test_a_topology_may_not_replace_a_kernel_kind_or_name_a_stranger() -> None:
    async def mine(*args: Any) -> Any:
        return "mine", None

    with pytest.raises(ConfigError, match=r"call kinds \['tool'\] are the kernel's own"):
        Team(
            [Agent(name="a")],
            entry="a",
            model=S([]),
            blueprint=Blueprint(kinds={"tool": Kind(mine)}),
        )
    spec = ToolSpec(name="x", description="x", parameters={})
    stranger = Blueprint(entries={"nobody": (Extra("x", CallEntry("tool"), spec),)})
    with pytest.raises(ConfigError, match="names 'nobody', which is not one of its agents"):
        Team([Agent(name="a")], entry="a", model=S([]), blueprint=stranger)


async def test_a_declared_kind_answers_its_calls_and_runs_them_together() -> None:
    seen: list[str] = []

    async def lookup(kernel: Kernel, call: Call) -> Any:
        seen.append(call.pending.call.id)
        return '{"found": true}', None

    def respond(request: Any) -> Any:
        if request.messages[-1].role == "tool":
            return S.say("found both")
        return S.calls(S.call("find"), S.call("find"))

    spec = ToolSpec(name="find", description="Find something.", parameters={})
    blueprint = Blueprint(
        entries={"desk": (Extra("find", CallEntry("finder"), spec),)},
        kinds={"finder": Kind(lookup, parallel=2)},
    )
    team = Team([Agent(name="desk")], entry="desk", model=S(respond), blueprint=blueprint)
    result = await team.run("find two things")
    assert result.status == "completed" and result.output == "found both"
    assert len(seen) == 2
    assert team._runner.parallel == {"finder": 2}
