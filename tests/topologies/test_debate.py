"""Debate: rounds of answers and critiques, convergence, a judge or a majority, a budget."""

from __future__ import annotations

from typing import Any

import pytest

from baton import Agent, ConfigError, ScriptedModel
from baton.models.base import ModelRequest
from baton.topologies.debate import Debate

S = ScriptedModel


def model(answers: dict[str, list[str]], asked: list[tuple[str, str]]) -> ScriptedModel:
    """Each debater gives its next scripted answer; the judge names the best one."""

    def respond(request: ModelRequest) -> Any:
        text = request.messages[-1].content or ""
        asked.append((request.agent, text))
        if request.agent == "judge":
            return S.say("judged: 42")
        return S.say(answers[request.agent].pop(0))

    return S(respond)


async def test_rounds_then_the_judge_decides() -> None:
    asked: list[tuple[str, str]] = []
    m = model({"a": ["41", "42"], "b": ["43", "42 or 43"]}, asked)
    debate = Debate([Agent(name="a"), Agent(name="b")], judge=Agent(name="judge"), model=m)
    result = await debate.run("What is 6 x 7?")
    assert result.status == "completed" and result.output == "judged: 42"
    first = [text for who, text in asked[:2]]
    assert first == ["What is 6 x 7?", "What is 6 x 7?"]  # round one: the question alone
    second_a = next(text for who, text in asked[2:4] if who == "a")
    assert "Your previous answer: 41" in second_a and "- b: 43" in second_a
    judge_q = asked[-1][1]
    assert "- a: 42" in judge_q and "- b: 42 or 43" in judge_q
    assert {"a", "b", "judge"} <= set(result.usage)


async def test_converged_answers_stop_early_and_the_majority_decides() -> None:
    asked: list[tuple[str, str]] = []
    m = model({"a": ["Paris."], "b": ["paris"], "c": ["Lyon"]}, asked)
    three = Debate([Agent(name="a"), Agent(name="b"), Agent(name="c")], rounds=1, model=m)
    result = await three.run("Capital of France?")
    assert result.output == "Paris."  # two of three

    asked.clear()
    m2 = model({"a": ["Paris", "x"], "b": ["paris.", "y"]}, asked)
    same = Debate([Agent(name="a"), Agent(name="b")], rounds=3, model=m2)
    result2 = await same.run("Capital of France?")
    assert result2.output == "Paris" and len(asked) == 2  # converged after round one


async def test_the_token_budget_ends_the_rounds() -> None:
    asked: list[tuple[str, str]] = []
    m = model({"a": ["1", "2", "3"], "b": ["4", "5", "6"]}, asked)
    debate = Debate([Agent(name="a"), Agent(name="b")], rounds=3, max_tokens=1, model=m)
    result = await debate.run("go")
    assert result.status == "completed" and len(asked) == 2  # one round, then over budget


def test_configuration_mistakes_are_refused() -> None:
    with pytest.raises(ConfigError, match="two debaters"):
        Debate([Agent(name="a")])
    with pytest.raises(ConfigError, match="rounds"):
        Debate([Agent(name="a"), Agent(name="b")], rounds=0)


def test_the_mermaid_shows_debaters_and_the_decider() -> None:
    debate = Debate([Agent(name="a"), Agent(name="b")], judge=Agent(name="j"), model=S([]))
    text = debate.to_mermaid()
    assert '"a"' in text and '"b"' in text and 'n5("j")' in text
