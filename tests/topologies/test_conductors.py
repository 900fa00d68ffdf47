"""Conductors (`baton.runtime.conduct`): declared as what they are, with no model and a round
budget of their own, and shown as conductors (never as a model) in traces and summaries."""

from __future__ import annotations

from typing import Any

import pytest

from baton import Agent, ConfigError, ScriptedModel, Team, tool
from baton.core.errors import ModelError
from baton.observe.tree import build_tree
from baton.runtime import compile_plans
from baton.runtime.blueprint import Blueprint
from baton.runtime.conduct import Conducted, call
from baton.runtime.kernel import Kernel
from baton.runtime.model_call import Reply
from baton.runtime.state import RunState, TurnState
from baton.topologies.debate import Debate
from baton.topologies.pipeline import Pipeline

S = ScriptedModel


@tool
async def ping() -> str:
    """Answer pong."""
    return "pong"


async def forever(kernel: Kernel, run: RunState, turn: TurnState) -> Reply:
    """A conductor that never answers: it calls `ping` at every round."""
    return None, [call("ping")]


def looping(rounds: int) -> Team:
    lead = Agent(name="lead", tools=[ping], max_iterations=2)  # a model's budget: unused here
    blueprint = Blueprint(conductors={"lead": Conducted(forever, rounds)})
    return Team([lead], entry="lead", blueprint=blueprint)


async def test_a_conductors_round_budget_trips_by_its_own_name() -> None:
    team = looping(5)
    result = await team.run("go")
    assert result.status == "escalated"
    pings = [e for e in result.events if e.type == "tool_called" and e.tool == "ping"]
    assert len(pings) == 5  # its own budget, not the agent's max_iterations (2)
    [trip] = [e for e in result.events if e.type == "guard_tripped"]
    assert trip.guard == "max_rounds" and trip.agent == "lead"
    assert trip.detail == (
        "max_rounds: the conductor lead used its round budget (5 rounds) without answering"
    )
    assert "max_iterations" not in trip.detail
    assert not [e for e in result.events if e.type == "model_called"]


def test_a_conductor_has_no_model_to_ask() -> None:
    lead = Agent(name="lead", tools=[ping])
    plans = compile_plans({"lead": lead}, conductors={"lead": Conducted(forever, 3)})
    plan = plans["lead"]
    assert plan.model is None and plan.conductor is not None and plan.conductor.rounds == 3
    with pytest.raises(ModelError, match="agent lead is a conductor"):
        plan.asked_model  # noqa: B018 - the property raises


def test_a_conductor_with_a_model_or_no_rounds_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"agent 'lead' is a conductor: .* remove its model"):
        Team(
            [Agent(name="lead", model=S([]))],
            entry="lead",
            blueprint=Blueprint(conductors={"lead": Conducted(forever, 3)}),
        )
    with pytest.raises(ConfigError, match="round budget of at least 1, got 0"):
        Conducted(forever, 0)


def test_describe_and_mermaid_show_the_conductor_and_no_model() -> None:
    pipe = Pipeline([Agent(name="draft"), Agent(name="review")], model=S([]), retries=1)
    described = pipe.describe()["agents"]
    assert described["pipeline"]["conductor"] == {"rounds": 2 * 2 + 1}
    assert "model" not in described["pipeline"]
    assert "conductor" not in described["draft"]
    assert pipe.agents["pipeline"].model is None
    debate = Debate([Agent(name="a"), Agent(name="b")], model=S([]), rounds=3)
    assert debate.describe()["agents"]["debate"]["conductor"] == {"rounds": 3 + 2}
    assert "conductor, up to 3 rounds" in debate.to_mermaid()
    assert '"lead<br/>conductor, 4 rounds, ping"' in looping(4).to_mermaid()


async def test_traces_show_a_conductors_turn_as_a_conductors() -> None:
    pipe = Pipeline([Agent(name="draft")], model=S(lambda request: S.say("drafted")))
    result = await pipe.run("write it")
    assert result.status == "completed", result.error
    started = {e.agent: e.conductor for e in result.events if e.type == "agent_started"}
    assert started == {"pipeline": True, "draft": False}
    [run] = build_tree(result.events)
    [turn] = run.turns
    assert turn.agent == "pipeline" and turn.conductor
    [worker] = [sub for step in turn.steps for sub in step.subruns]
    assert [t.conductor for t in worker.turns] == [False]


async def test_the_teams_model_is_never_asked_for_a_conductor() -> None:
    """Its plan has no model: the conductor decides every step, whatever the team's model."""
    seen: list[Any] = []

    def respond(request: Any) -> Any:
        seen.append(request.agent)
        return S.say("asked")

    lead = Agent(name="lead", tools=[ping])
    team = Team(
        [lead],
        entry="lead",
        model=S(respond),
        blueprint=Blueprint(conductors={"lead": Conducted(forever, 2)}),
    )
    result = await team.run("go")
    assert result.status == "escalated" and seen == []
