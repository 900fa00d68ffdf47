"""A remote agent that fails, refuses, escalates, hangs or is not there: the run goes on to an
escalation whose reason names the agent and its URL, and never crashes."""

from __future__ import annotations

import asyncio
import json

import pytest
from remote_kit import free_port, serving

from baton import Agent, Team
from baton.a2a import RemoteAgent
from baton.core.errors import ConfigError
from baton.models.scripted import ScriptedModel
from baton.runtime.result import RunResult
from baton.tools import tool


def desk(url: str, **remote: object) -> Team:
    step = ScriptedModel.call(
        "transfer_to_tech", reason="router trouble", objective="restart the router"
    )
    return Team(
        [
            Agent(name="triage", handoffs=["tech"], model=ScriptedModel({"triage": [step]})),
            RemoteAgent("tech", url, description="Diagnoses and restarts routers", **remote),
        ],
        entry="triage",
    )


async def run_once(team: Team, message: str) -> RunResult:
    try:
        return await team.run(message, session_id="s1")
    finally:
        await team.aclose()


def reason(result: RunResult) -> str:
    assert result.status == "escalated", (result.status, result.error)
    assert result.escalation is not None
    return "; ".join(result.escalation.reasons)


def call_error(result: RunResult) -> str | None:
    [called] = [e for e in result.events if e.type == "tool_called" and e.tool == "a2a_tech"]
    assert not called.ok
    return called.error


async def test_a_failed_task_escalates_naming_the_remote() -> None:
    async with serving() as remote:
        result = await run_once(desk(remote.url), "fail: router ORD-7 is down")
    why = reason(result)
    assert "'tech'" in why and remote.url in why
    assert "(task failed): the diagnostics database is down" in why
    assert call_error(result) == why


async def test_a_rejected_task_escalates() -> None:
    async with serving() as remote:
        result = await run_once(desk(remote.url), "refuse: router ORD-7 is down")
    assert "did not complete the request (task rejected): not something I do" in reason(result)


async def test_a_remote_baton_team_that_escalated_escalates_here() -> None:
    async with serving() as remote:
        result = await run_once(desk(remote.url), "escalate: router ORD-7 is down")
    why = reason(result)
    assert "escalated the request" in why and "A colleague will call you." in why


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_hanging_remote_times_out_and_its_task_is_cancelled(streaming: bool) -> None:
    """Streaming, the task's id comes with the first event; blocking, the client finds the
    task its message began."""
    async with serving(streaming=streaming) as remote:
        result = await run_once(desk(remote.url, timeout_s=0.5), "hang: router ORD-7 is down")
        assert remote.hanging.is_set()
        cancelled = list(remote.cancelled)
    why = reason(result)
    assert "did not answer within 0.5s" in why and "timeout_s" in why and remote.url in why
    assert cancelled == [remote.seen[0].task_id]  # the remote was told to stop


async def test_a_server_that_is_down_gives_a_clear_error() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    result = await run_once(desk(url), "router ORD-7 is down")
    why = reason(result)
    assert "could not read the Agent Card of remote agent 'tech'" in why
    assert f"{url}/.well-known/agent-card.json" in why
    assert "Check that the agent runs" in why


async def test_a_server_that_went_down_after_its_card_was_read() -> None:
    async with serving() as remote:
        team = desk(remote.url)
        first = await team.run("router ORD-7 is down", session_id="s1")
    try:  # the server is gone; the team's connection (and card) are still there
        second = await team.run("and now?", session_id="s1")
    finally:
        await team.aclose()
    assert first.status == "completed"
    why = reason(second)
    assert f"remote agent 'tech' at {remote.url} failed to answer" in why


async def test_cancelling_the_run_cancels_the_remote_task() -> None:
    async with serving() as remote:
        team = desk(remote.url)
        task = asyncio.ensure_future(team.run("hang: router ORD-7 is down", session_id="s1"))
        await remote.hanging.wait()
        result = await team.cancel("s1")
        await task
        await team.aclose()
        cancelled = list(remote.cancelled)
    assert result is not None and result.status == "cancelled"
    assert cancelled == [remote.seen[0].task_id]


def test_what_a_remote_agent_cannot_have() -> None:
    @tool
    def lookup(order_id: str) -> str:
        """Look an order up."""
        return order_id

    with pytest.raises(ConfigError, match="its tools, handoffs are the remote's own"):
        RemoteAgent("tech", "http://127.0.0.1:9", tools=[lookup], handoffs=["billing"])
    with pytest.raises(ConfigError, match="must be an http"):
        RemoteAgent("tech", "ftp://example.com")


async def test_no_model_can_make_the_remote_call() -> None:
    """`a2a_tech` is the remote agent's own call: another agent's model writing it gets
    'unknown tool', and nothing is sent."""
    model = ScriptedModel(
        {"triage": [ScriptedModel.call("a2a_tech"), ScriptedModel.say("could not")]}
    )
    async with serving() as remote:
        team = Team(
            [
                Agent(name="triage", handoffs=["tech"], model=model),
                RemoteAgent("tech", remote.url),
            ],
            entry="triage",
        )
        result = await run_once(team, "router ORD-7 is down")
    assert result.status == "completed" and result.path == ["triage"]
    assert not remote.seen
    [called] = [e for e in result.events if e.type == "tool_called"]
    assert called.error is not None and called.error.startswith("unknown tool 'a2a_tech'")
    assert json.loads(model.requests[0].tools[0].model_dump_json())["name"] != "a2a_tech"


async def test_a_remote_agent_takes_escalations_as_the_fallback() -> None:
    @tool
    def look() -> str:
        """Look around."""
        return "nothing"

    model = ScriptedModel({"triage": [ScriptedModel.call("look")]})
    async with serving() as remote:
        team = Team(
            [
                Agent(name="triage", tools=[look], max_iterations=1, model=model),
                RemoteAgent("tech", remote.url),
            ],
            entry="triage",
            fallback="tech",
        )
        result = await run_once(team, "router ORD-7 is down")
    assert result.status == "escalated" and result.path == ["triage", "tech"]
    assert result.output is not None and result.output.startswith("Done: Take over")
    [seen] = remote.seen
    assert seen.incoming.payload is not None and seen.incoming.payload.source == "triage"
