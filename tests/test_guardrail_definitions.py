"""`Guardrail`, `Verdict`: validated when built; a team's rules are checked when it is built."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from pydantic import ValidationError

from baton import (
    Agent,
    ConfigError,
    Guardrail,
    GuardrailContext,
    ScriptedModel,
    Team,
    Verdict,
    tool,
)


def allow(text: str, ctx: GuardrailContext) -> Verdict:
    return Verdict.allow()


@tool
async def lookup(order_id: str) -> str:
    """Look an order up."""
    return order_id


def team(agents: list[Agent], **kw: Any) -> Team:
    return Team(agents, entry=agents[0].name, model=ScriptedModel([]), **kw)


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"name": "no spaces"}, "name 'no spaces' is not valid"),
        ({"name": ""}, "is not valid"),
        ({"stage": "middle"}, "stage must be 'input' or 'output'"),
        ({"on_error": "ignore"}, "on_error must be 'block' or 'allow'"),
        ({"timeout_s": 0}, "timeout_s must be a positive number"),
        ({"timeout_s": math.nan}, "timeout_s must be a positive number"),
        ({"timeout_s": True}, "timeout_s must be a positive number"),
        ({"message": "  "}, "message must be the text the user reads"),
        ({"check": "block everything"}, "check must be a function"),
        ({"check": lambda text: Verdict.allow()}, "must take two arguments, (text, context)"),
    ],
)
def test_invalid_settings_raise_config_error(kwargs: dict[str, Any], says: str) -> None:
    settings: dict[str, Any] = {"name": "screen", "stage": "input", "check": allow, **kwargs}
    with pytest.raises(ConfigError, match=re.escape(says)):
        Guardrail(**settings)


@pytest.mark.parametrize(
    ("agent", "says"),
    [
        (Agent(name="judge", tools=[lookup]), "has tools"),
        (Agent(name="judge", handoffs=["billing"]), "has hand-offs"),
        (Agent(name="judge", output_type=dict), "its answer is always a Verdict"),
        (
            Agent(name="judge", guardrails=[Guardrail("inner", "input", allow)]),
            "guardrails of its own",
        ),
    ],
)
def test_a_guard_agent_only_judges(agent: Agent, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        Guardrail("screen", "input", agent)


def test_a_guard_agent_with_verdict_as_output_type_is_accepted() -> None:
    rule = Guardrail("screen", "output", Agent(name="judge", output_type=Verdict))
    assert rule.agent is not None and rule.agent.name == "judge"


def test_verdicts_are_validated() -> None:
    assert Verdict.block("no").action == "block"
    assert Verdict.rewrite("masked", "pii").text == "masked"
    with pytest.raises(ValidationError, match="a rewrite needs the text"):
        Verdict.rewrite("  ")
    with pytest.raises(ValidationError, match="text is only for a rewrite"):
        Verdict(action="allow", text="hello")
    with pytest.raises(ValidationError):
        Verdict(action="maybe")  # type: ignore[arg-type]


def test_agent_guardrails_take_lists_of_rules() -> None:
    rule = Guardrail("screen", "input", allow)
    assert Agent(name="a", guardrails=[rule]).guardrails == (rule,)
    with pytest.raises(ValidationError, match="wrap 'screen' in"):
        Agent(name="a", guardrails=rule)
    with pytest.raises(ValidationError, match="is not a Guardrail"):
        Agent(name="a", guardrails=[allow])
    with pytest.raises(ValidationError, match="takes a dict"):
        Agent(name="a", handoffs=["b"], handoff_guardrails=[rule])


def test_two_different_rules_with_one_name_are_refused() -> None:
    def other(text: str, ctx: GuardrailContext) -> Verdict:
        return Verdict.allow()

    a = Agent(name="a", guardrails=[Guardrail("screen", "input", allow)])
    b = Agent(name="b", guardrails=[Guardrail("screen", "input", other)])
    with pytest.raises(ConfigError, match="two different guardrails are named 'screen'"):
        team([a, b])


def test_one_rule_on_several_agents_and_the_team_is_one_rule() -> None:
    rule = Guardrail("screen", "input", allow)
    t = team(
        [Agent(name="a", handoffs=["b"], guardrails=[rule]), Agent(name="b", guardrails=[rule])],
        guardrails=[rule],
    )
    book = t._settings.guardrails
    assert book is not None and list(book.rules) == ["screen"]


def test_a_guard_agent_that_is_a_team_member_is_refused() -> None:
    member = Agent(name="judge")
    with pytest.raises(ConfigError, match="guard agent 'judge' is also a member of the team"):
        team([Agent(name="a"), member], guardrails=[Guardrail("screen", "input", member)])


def test_two_guard_agents_with_one_name_are_refused() -> None:
    rules = [
        Guardrail("one", "input", Agent(name="judge", instructions="strict")),
        Guardrail("two", "output", Agent(name="judge", instructions="lenient")),
    ]
    with pytest.raises(ConfigError, match="two different guard agents are named 'judge'"):
        team([Agent(name="a")], guardrails=rules)


@pytest.mark.parametrize("target", ["c", "human"])
def test_an_edge_rule_needs_a_hand_off_to_an_agent(target: str) -> None:
    rule = Guardrail("screen", "output", allow)
    a = Agent(name="a", handoffs=["b", "human"], handoff_guardrails={target: [rule]})
    with pytest.raises(ConfigError, match=f"handoff_guardrails for '{target}'"):
        team([a, Agent(name="b")])


def test_team_settings_are_checked() -> None:
    rule = Guardrail("screen", "input", allow)
    with pytest.raises(ConfigError, match="takes a list of Guardrail objects"):
        team([Agent(name="a")], guardrails=rule)
    with pytest.raises(ConfigError, match="is not a Guardrail"):
        team([Agent(name="a")], guardrails=[allow])
    with pytest.raises(ConfigError, match="guardrail_message must be the text"):
        team([Agent(name="a")], guardrails=[rule], guardrail_message="")


def test_a_team_without_rules_compiles_none() -> None:
    assert team([Agent(name="a")])._settings.guardrails is None
