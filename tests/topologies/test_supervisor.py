"""Supervisor: workers as tools of a lead, in bounded sub-runs, in parallel, resumable."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from baton import Agent, ConfigError, ScriptedModel, Supervisor, tool
from baton.models.base import ModelRequest

S = ScriptedModel
SID = "S"


def kb_worker(name: str, ran: list[str], gate: asyncio.Event | None = None) -> Agent:
    @tool(name=f"search_{name}")
    async def search(query: str) -> str:
        """Search the knowledge base."""
        ran.append(f"{name}:start")
        if gate is not None:
            await gate.wait()
        ran.append(f"{name}:done")
        return f"{name} says: refunds take 5 days"

    return Agent(name=name, description=f"the {name} knowledge base", tools=[search])


def desk_model(requests: list[ModelRequest]) -> ScriptedModel:
    """lead: ask both workers at once, then answer from what they said; a worker: search,
    then answer with the result."""

    def respond(request: ModelRequest) -> Any:
        requests.append(request)
        last = request.messages[-1]
        if request.agent == "lead":
            if last.role == "tool":
                answers = [m for m in request.messages if m.role == "tool"]
                if len(answers) >= 2:
                    return S.say("Refunds take 5 days (both sources agree).")
                return S.say("waiting")  # pragma: no cover - both answers arrive together
            return S.calls(
                S.call("ask_policies", question="How long do refunds take?"),
                S.call("ask_faq", question="How long do refunds take?", context="order ORD-1"),
            )
        if last.role == "tool":
            return S.say(last.content or "")
        return S.call(f"search_{request.agent}", query="refund time")

    return S(respond)


def make(ran: list[str], requests: list[ModelRequest], **kw: Any) -> Supervisor:
    lead = Agent(name="lead", instructions="Answer using your workers.")
    workers = [kb_worker("policies", ran, kw.pop("gate", None)), kb_worker("faq", ran)]
    return Supervisor(lead, workers=workers, model=desk_model(requests), **kw)


async def test_workers_answer_in_parallel_sub_runs_with_their_own_view() -> None:
    ran: list[str] = []
    requests: list[ModelRequest] = []
    sup = make(ran, requests)
    result = await sup.run("How long do refunds take for ORD-1?", session_id=SID)

    assert result.status == "completed"
    assert result.output == "Refunds take 5 days (both sources agree)."
    assert result.path == ["lead"]
    # a worker saw its instructions and the question, never the user's words or the others
    worker_first = [q for q in requests if q.agent != "lead" and q.messages[-1].role == "user"]
    assert {q.agent for q in worker_first} == {"policies", "faq"}
    for q in worker_first:
        seen = "\n".join(m.content or "" for m in q.messages)
        assert "ORD-1?" not in seen and "How long do refunds take?" in seen
        assert [m.role for m in q.messages] == ["system", "user"]
    faq_q = next(q for q in worker_first if q.agent == "faq")
    assert "Context: order ORD-1" in (faq_q.messages[-1].content or "")
    # the lead read both answers as its calls' results
    lead_last = [q for q in requests if q.agent == "lead"][-1]
    answers = [json.loads(m.content or "{}") for m in lead_last.messages if m.role == "tool"]
    assert sorted(a["worker"] for a in answers) == ["faq", "policies"]
    # the workers' events carry their parent run and call; usage is per worker
    subs = [e for e in result.events if e.parent_run_id is not None]
    assert subs and {e.parent_run_id for e in subs} == {result.run_id}
    calls = {
        c.id for q in requests if q.agent == "lead" for m in q.messages for c in m.tool_calls or ()
    }
    assert {e.parent_call_id for e in subs} <= calls
    assert {"lead", "policies", "faq"} <= set(result.usage)
    # the transcript holds the conversation and the lead's calls, not the workers' scratch
    stored = await sup.store.get_messages(SID)
    assert [m.agent for m in stored if m.role == "assistant"] == ["lead", "lead"]


async def test_parallel_workers_really_overlap() -> None:
    ran: list[str] = []
    gate = asyncio.Event()
    sup = make(ran, [], gate=gate)
    task = asyncio.ensure_future(sup.run("refunds?", session_id=SID))
    for _ in range(200):  # the faq worker finishes while policies still waits at the gate
        if "faq:done" in ran and "policies:start" in ran:
            break
        await asyncio.sleep(0.01)
    assert ran.index("policies:start") < ran.index("faq:done")
    gate.set()
    assert (await task).status == "completed"


async def test_max_parallel_one_runs_workers_one_after_the_other() -> None:
    ran: list[str] = []
    sup = make(ran, [], max_parallel=1)
    assert (await sup.run("refunds?", session_id=SID)).status == "completed"
    assert ran in (
        ["policies:start", "policies:done", "faq:start", "faq:done"],
        ["faq:start", "faq:done", "policies:start", "policies:done"],
    )


async def test_max_delegations_stops_a_lead_that_keeps_asking() -> None:
    def respond(request: ModelRequest) -> Any:
        if request.agent == "lead":
            return S.call("ask_faq", question="again?")
        return S.say("same answer")

    sup = Supervisor(
        Agent(name="lead", max_iterations=10),
        workers=[Agent(name="faq")],
        model=S(respond),
        max_delegations=2,
    )
    result = await sup.run("loop", session_id=SID)
    assert result.status == "escalated"
    trips = [e for e in result.events if e.type == "guard_tripped"]
    assert [t.guard for t in trips] == ["max_delegations"]


def test_configuration_mistakes_are_refused() -> None:
    with pytest.raises(ConfigError, match="at least one worker"):
        Supervisor(Agent(name="lead"), workers=[])
    with pytest.raises(ConfigError, match="handoffs"):
        Supervisor(Agent(name="lead"), workers=[Agent(name="w", handoffs=["x"]), Agent(name="x")])


async def test_a_killed_run_never_reruns_a_worker_that_answered(
    tmp_path: Path, dies_when_cancelled: None
) -> None:
    ran: list[str] = []
    gate = asyncio.Event()
    url = f"sqlite:///{tmp_path / 'b.db'}"
    sup = make(ran, [], gate=gate, store=url)
    task = asyncio.ensure_future(sup.run("refunds?", session_id=SID))
    for _ in range(300):
        if "faq:done" in ran:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)  # the faq answer's checkpoint
    task.cancel()  # the process dies while policies still works
    with pytest.raises(asyncio.CancelledError):
        await task
    [cp] = await sup.unfinished()
    assert cp.status == "running"

    again: list[str] = []
    fresh = make(again, [], store=url)  # another process
    result = await fresh.resume(SID)
    assert result.status == "completed"
    assert again == ["policies:start", "policies:done"]  # faq is not asked again
    counts = Counter(e.type for e in await fresh.store.get_events(SID))
    assert counts["run_finished"] == 1
    await sup.aclose()
    await fresh.aclose()


async def test_a_workers_call_that_needs_approval_pauses_the_whole_run() -> None:
    paid: list[str] = []

    @tool(requires_approval=True)
    async def refund(order_id: str) -> str:
        """Refund an order."""
        paid.append(order_id)
        return "refunded"

    def respond(request: ModelRequest) -> Any:
        last = request.messages[-1]
        if request.agent == "lead":
            if last.role == "tool":
                return S.say(f"Done: {json.loads(last.content or '{}').get('answer')}")
            return S.call("ask_billing", question="refund ORD-7", context="order ORD-7")
        if last.role == "tool":
            return S.say("refunded ORD-7")
        return S.call("refund", order_id="ORD-7")

    sup = Supervisor(
        Agent(name="lead"),
        workers=[Agent(name="billing", tools=[refund])],
        model=S(respond),
    )
    paused = await sup.run("please refund ORD-7", session_id=SID)
    assert paused.status == "awaiting_approval"
    assert paused.approval is not None and paused.approval.agent == "billing"
    assert [c.id for c in await sup.approvals()] == [paused.approval.id]
    assert paid == []
    done = await sup.approve(SID, paused.approval.id, by="alice")
    assert done.status == "completed" and done.output == "Done: refunded ORD-7"
    assert paid == ["ORD-7"]
