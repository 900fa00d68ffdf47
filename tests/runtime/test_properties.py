"""Property: whatever the team graph, guards and model behaviour, a run ends well-formed.

Hypothesis draws a team (2-6 agents, random permitted hand-off edges, a random entry), random
guards, per-agent `max_iterations`, and a list of model "moves". A callable `ScriptedModel`
replays the moves: answer, call a real tool (that works or raises), hand off to a permitted or a
non-permitted agent, call an unknown tool, emit malformed JSON, emit two hand-offs at once, send
a payload without an objective, or fail like a provider outage.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from baton import Agent, Guards, ModelRequest, RunResult, ScriptedModel, Team, tool
from baton.handoff import HANDOFF_PREFIX
from baton.models import Step

S = ScriptedModel

MOVES = (
    "answer",
    "tool",
    "broken_tool",
    "permitted",
    "any_agent",
    "unknown_tool",
    "malformed",
    "two_handoffs",
    "invalid_payload",
    "provider_error",
)
# hand-offs are what the guards are about: draw them far more often than the rest (and first:
# hypothesis favours the first element of `sampled_from`)
WEIGHTED_MOVES = (*(["permitted"] * 8), "any_agent", "two_handoffs", *MOVES, "any_agent")


@tool
def lookup(key: str) -> dict[str, str]:
    """Look something up."""
    return {"key": key, "value": "42"}


@tool
async def broken(key: str) -> str:
    """Always fails."""
    raise RuntimeError(f"backend down for {key}")


@dataclass(frozen=True)
class Move:
    kind: str
    pick: int  # which agent to target (index, taken modulo the candidates)
    pick2: int


@dataclass
class Scenario:
    names: list[str]
    edges: dict[str, list[str]]
    entry: str
    guards: Guards
    iterations: dict[str, int]
    moves: list[Move]


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    n = draw(st.integers(min_value=2, max_value=6))
    names = [f"agent{i}" for i in range(n)]
    edges = {}
    for a in names:
        others = [b for b in names if b != a]
        keep = draw(st.lists(st.booleans(), min_size=len(others), max_size=len(others)))
        edges[a] = [b for b, k in zip(others, keep, strict=True) if k]
    guards = Guards(
        # 0-6; not `integers`, which would make max_hops=0 (no hand-off at all) a quarter of runs
        max_hops=draw(st.sampled_from((2, 0, 1, 3, 4, 5, 6))),
        max_visits=draw(st.integers(min_value=1, max_value=3)),
        lock_window_s=draw(st.sampled_from([0.0, 30.0])),
    )
    move = st.builds(
        Move,
        kind=st.sampled_from(WEIGHTED_MOVES),
        pick=st.integers(min_value=0, max_value=7),
        pick2=st.integers(min_value=0, max_value=7),
    )
    return Scenario(
        names=names,
        edges=edges,
        entry=draw(st.sampled_from(names)),
        guards=guards,
        iterations={a: draw(st.integers(min_value=1, max_value=4)) for a in names},
        moves=draw(st.lists(move, min_size=1, max_size=40)),
    )


def _transfer(target: str, objective: str = "help the user") -> Step:
    return S.call(f"{HANDOFF_PREFIX}{target}", reason="it belongs there", objective=objective)


def _policy(sc: Scenario) -> Any:
    moves = list(sc.moves)

    def step(request: ModelRequest) -> Step:
        if not moves:
            return S.say("final answer")
        m = moves.pop(0)
        me = request.agent
        permitted = sc.edges.get(me, [])
        everyone = [*sc.names, "nobody"]
        if m.kind == "answer":
            return S.say(f"answer {m.pick}")
        if m.kind == "tool":
            return S.call("lookup", key=f"k{m.pick}")
        if m.kind == "broken_tool":
            return S.call("broken", key=f"k{m.pick}")
        if m.kind == "permitted" and permitted:
            return _transfer(permitted[m.pick % len(permitted)])
        if m.kind in ("permitted", "any_agent"):
            return _transfer(everyone[m.pick % len(everyone)])
        if m.kind == "unknown_tool":
            return S.call("no_such_tool", x=m.pick)
        if m.kind == "malformed":
            return S.raw_call(
                f"{HANDOFF_PREFIX}{everyone[m.pick % len(everyone)]}",
                "reason: because, objective" if m.pick2 % 2 else "{'reason': 'x',",
            )
        if m.kind == "two_handoffs":
            return S.calls(
                _transfer(everyone[m.pick % len(everyone)], objective="first"),
                _transfer(everyone[m.pick2 % len(everyone)], objective="second"),
            )
        if m.kind == "provider_error":
            return S.fail("provider outage")
        return S.call(f"{HANDOFF_PREFIX}{everyone[m.pick % len(everyone)]}", reason="no objective")

    return step


def _run(sc: Scenario) -> tuple[RunResult, Team]:
    agents = [
        Agent(
            name=a,
            handoffs=sc.edges[a],
            tools=[lookup, broken],
            max_iterations=sc.iterations[a],
        )
        for a in sc.names
    ]
    team = Team(
        agents,
        entry=sc.entry,
        guards=sc.guards,
        fallback="human",
        model=S(_policy(sc)),
    )
    return asyncio.run(team.run("help me please", session_id="S")), team


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(scenarios())
def test_every_run_ends_well_formed(sc: Scenario) -> None:
    result, team = _run(sc)  # never raises
    event(f"status={result.status}")
    event(f"hand-offs={len(result.handoffs)}")

    assert isinstance(result, RunResult)
    assert result.status in {"completed", "escalated", "failed"}

    started = [e for e in result.events if e.type == "agent_started"]
    assert len(started) <= sc.guards.max_hops + 1

    handoffs = [e for e in result.events if e.type == "handoff"]
    assert len(result.path) == len(handoffs) + 1
    assert len(result.handoffs) == len(handoffs)
    assert result.path[0] == sc.entry
    for src, dst in pairwise(result.path):
        assert dst in sc.edges[src], f"{src} -> {dst} is not a permitted edge"
    for i, ev in enumerate(handoffs):
        assert (ev.payload.source, ev.payload.target) == (result.path[i], result.path[i + 1])
        assert ev.payload.hop == i + 1
        assert ev.payload.path == result.path[: i + 1]

    for agent in set(result.path):
        assert result.path.count(agent) <= sc.guards.max_visits
    assert len(handoffs) <= sc.guards.max_hops

    assert result.events[0].type == "run_started"
    assert result.events[-1].type == "run_finished"
    assert result.events[-1].status == result.status
    if result.status == "escalated":
        assert result.escalation is not None
        assert result.escalation.path == result.path
        tickets = asyncio.run(team.store.list_human())
        assert [t.card for t in tickets] == [result.escalation]
    elif result.status == "failed":
        assert result.error
    else:
        assert result.output is not None
