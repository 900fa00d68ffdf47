"""Pipeline: stages in order, retried with the failure fed back, timeouts, named failures."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from baton import Agent, ConfigError, ScriptedModel
from baton.models.base import ModelRequest
from baton.topologies.pipeline import Pipeline

S = ScriptedModel


class Ticket(BaseModel):
    text: str
    words: int


async def count_words(text: str) -> Ticket:
    """Count the words of a text."""
    return Ticket(text=text, words=len(text.split()))


def shout(ticket: Ticket) -> str:
    """The ticket in capitals."""
    return f"{ticket.text.upper()} ({ticket.words} words)"


async def test_function_and_agent_stages_run_in_order() -> None:
    seen: list[str] = []

    def respond(request: ModelRequest) -> Any:
        seen.append(request.messages[-1].content or "")
        return S.say("summary: " + (request.messages[-1].content or ""))

    pipe = Pipeline(
        [count_words, shout, Agent(name="summarise", instructions="Summarise.")],
        model=S(respond),
    )
    result = await pipe.run("refund my order please")
    assert result.status == "completed", result.error
    assert result.output == "summary: REFUND MY ORDER PLEASE (4 words)"
    assert seen == ["REFUND MY ORDER PLEASE (4 words)"]  # the agent saw only its input
    calls = [e.tool for e in result.events if e.type == "tool_called"]
    assert calls[:2] == ["count_words", "shout"]
    assert not [e for e in result.events if e.type == "model_called" and e.agent == "pipeline"]
    assert "pipeline" not in result.usage  # the conductor calls no model


async def test_a_failing_agent_stage_is_retried_with_the_reason() -> None:
    attempts: list[str] = []

    def respond(request: ModelRequest) -> Any:
        attempts.append(request.messages[-1].content or "")
        if len(attempts) == 1:
            return S.fail("the model is overloaded")
        return S.say("fixed")

    pipe = Pipeline([Agent(name="draft")], model=S(respond))
    result = await pipe.run("write it")
    assert result.status == "completed" and result.output == "fixed"
    assert attempts[0] == "write it"
    assert "Your previous attempt failed" in attempts[1] and "overloaded" in attempts[1]


async def test_a_stage_that_keeps_failing_fails_the_run_naming_it() -> None:
    def broken(text: str) -> str:
        """Always fails."""
        raise RuntimeError("the index is down")

    def tidy(text: str) -> str:
        """Strip the text."""
        return text.strip()

    pipe = Pipeline([tidy, broken], retries=2)
    result = await pipe.run("hello there")
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.startswith("stage 'broken' failed after 3 attempts")
    assert "the index is down" in result.error
    assert [e.tool for e in result.events if e.type == "tool_called"].count("broken") == 3


async def test_stage_timeouts_for_functions_and_agents() -> None:
    async def slow(text: str) -> str:
        """Never finishes in time."""
        await asyncio.sleep(30)
        return text

    pipe = Pipeline([slow], retries=0, timeouts={"slow": 0.05})
    result = await pipe.run("x")
    assert result.status == "failed" and "timed out" in (result.error or "")

    model = S(lambda r: S.slow(S.say("late"), 30))
    pipe2 = Pipeline([Agent(name="think")], retries=0, timeouts={"think": 0.05}, model=model)
    result2 = await pipe2.run("x")
    assert result2.status == "failed" and "did not answer within 0.05s" in (result2.error or "")


async def test_a_resumed_pipeline_never_reruns_a_finished_stage(
    tmp_path: Path, dies_when_cancelled: None
) -> None:
    ran: list[str] = []
    gate = asyncio.Event()

    def first(text: str) -> str:
        """First stage."""
        ran.append("first")
        return text + " +1"

    async def second(text: str) -> str:
        """Second stage (the process dies here the first time)."""
        ran.append("second")
        if ran.count("second") == 1:
            await gate.wait()
        return text + " +2"

    url = f"sqlite:///{tmp_path / 'p.db'}"
    pipe = Pipeline([first, second], store=url)
    task = asyncio.ensure_future(pipe.run("go", session_id="S"))
    for _ in range(300):
        if "second" in ran:
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    again = Pipeline([first, second], store=url)
    result = await again.resume("S")
    assert result.status == "completed" and result.output == "go +1 +2"
    assert ran == ["first", "second", "second"]  # first ran once
    await pipe.aclose()
    await again.aclose()


def test_configuration_mistakes_are_refused() -> None:
    with pytest.raises(ConfigError, match="at least one stage"):
        Pipeline([])

    def two(a: str, b: str) -> str:
        """Two inputs."""
        return a + b

    with pytest.raises(ConfigError, match="takes 2 arguments"):
        Pipeline([two])
    with pytest.raises(ConfigError, match="unknown stages"):
        Pipeline([count_words], timeouts={"nope": 1})


def test_the_mermaid_shows_the_stages_in_order() -> None:
    text = Pipeline([count_words, shout]).to_mermaid()
    assert 'n2["count_words"]' in text and 'n3["shout"]' in text
    assert "n1 --> n2" in text and "n2 --> n3" in text
