"""A RemoteAgent as a supervisor's worker: `ask_<worker>` runs its conductor in a sub-run,
which sends the question and its context, and the lead reads the answer (or the error)."""

from __future__ import annotations

import json

from remote_kit import serving

from baton import Agent
from baton.a2a import RemoteAgent
from baton.models.scripted import ScriptedModel
from baton.topologies.supervisor import Supervisor


def lead_model(question: str) -> ScriptedModel:
    return ScriptedModel(
        {
            "lead": [
                ScriptedModel.call("ask_tech", question=question, context="customer ORD-7"),
                ScriptedModel.say("The technician is on it."),
            ]
        }
    )


async def test_a_remote_worker_answers_the_lead() -> None:
    model = lead_model("Restart the router")
    async with serving() as remote:
        team = Supervisor(
            Agent(name="lead", model=model),
            workers=[RemoteAgent("tech", remote.url, description="Restarts routers")],
        )
        try:
            result = await team.run("my router ORD-7 is down", session_id="s1")
        finally:
            await team.aclose()
    assert result.status == "completed", result.error
    assert result.output == "The technician is on it."
    [seen] = remote.seen
    assert seen.incoming.text == "Restart the router\n\nContext: customer ORD-7"
    assert seen.incoming.payload is None  # asked, not handed the baton
    assert seen.incoming.trace_id == result.trace_id
    answers = [m for m in model.requests[1].messages if m.role == "tool"]
    assert json.loads(answers[-1].content or "") == {
        "worker": "tech",
        "answer": "Done: (no payload); state []",
    }
    worker = [e for e in result.events if e.type == "agent_started" and e.agent == "tech"]
    assert worker and worker[0].conductor and worker[0].parent_run_id == result.run_id


async def test_a_failing_remote_worker_is_an_error_the_lead_reads() -> None:
    model = lead_model("fail: restart the router")
    async with serving() as remote:
        team = Supervisor(
            Agent(name="lead", model=model), workers=[RemoteAgent("tech", remote.url)]
        )
        try:
            result = await team.run("my router ORD-7 is down", session_id="s1")
        finally:
            await team.aclose()
    assert result.status == "completed"  # the lead stays responsible and answers
    answers = [m for m in model.requests[1].messages if m.role == "tool"]
    error = json.loads(answers[-1].content or "")["error"]
    assert error.startswith("tech could not answer: remote agent 'tech' at")
    assert "the diagnostics database is down" in error


async def test_a_remote_worker_that_asks_pauses_the_whole_run() -> None:
    model = lead_model("ask me which router")
    async with serving() as remote:
        team = Supervisor(
            Agent(name="lead", model=model), workers=[RemoteAgent("tech", remote.url)]
        )
        try:
            paused = await team.run("my router ORD-7 is down", session_id="s1")
            done = await team.answer_interrupt("s1", "ORD-7")
        finally:
            await team.aclose()
    assert paused.status == "interrupted"
    assert paused.interrupt is not None and paused.interrupt.agent == "tech"
    assert done.status == "completed", done.error
    answers = [m for m in model.requests[1].messages if m.role == "tool"]
    assert json.loads(answers[-1].content or "")["answer"] == "Order ORD-7 restarted."
    assert [s.incoming.text for s in remote.seen] == [
        "ask me which router\n\nContext: customer ORD-7",
        "ORD-7",
    ]
