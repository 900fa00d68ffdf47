"""`Worker` on the in-process bus: turns submitted with `team.submit` are run once, in order per
session, within the concurrency; store failures are retried in place; a request that cannot
run is answered with an error; a graceful shutdown releases unfinished turns to another
worker, which finishes them without repeating a tool call."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from tests.bus.conftest import Buses
from tests.bus.test_bus_conformance import session_on
from tests.runtime.runtime_kit import handoff

from baton import Agent, MemoryStore, ScriptedModel, Team, tool
from baton.bus import MemoryBus
from baton.bus.base import Envelope
from baton.bus.headers import trace_headers, trace_id_of
from baton.core.errors import ModelUnreachable, StoreError
from baton.models import ModelRequest, Step
from baton.worker import Worker

PAID: list[str] = []


@tool
async def record_payment(amount: int) -> dict:
    """Record a payment."""
    PAID.append(str(amount))
    return {"recorded": amount}


def policy(request: ModelRequest) -> Step:
    if request.agent == "triage":
        return handoff("billing")
    if request.messages[-1].role == "tool":
        return ScriptedModel.say(f"recorded ({request.messages[-1].content})")
    return ScriptedModel.call("record_payment", amount=len(request.messages))


def desk(store: Any = None, bus: Any = None, latency_s: float = 0.0) -> Team:
    model = ScriptedModel(policy, latency_s=latency_s)
    triage = Agent(name="triage", instructions="Route.", handoffs=["billing"])
    billing = Agent(name="billing", instructions="Bill.", tools=[record_payment])
    return Team(
        [triage, billing],
        entry="triage",
        model=model,
        store=store or MemoryStore(),
        bus=bus or MemoryBus(claim_idle_s=0.3),
        lease_s=1.0,
    )


@pytest.fixture(autouse=True)
def _clear() -> None:
    PAID.clear()


async def started(worker: Worker) -> asyncio.Task[Any]:
    task = asyncio.create_task(worker.run())
    await asyncio.sleep(0)
    return task


async def test_submitted_turns_are_answered_once_and_in_order_per_session() -> None:
    team = desk()
    worker = Worker(team, block_s=0.05)
    task = await started(worker)
    sent = [await team.submit(f"pay please {i}", session_id=f"s{i % 5}") for i in range(20)]
    results = [await team.result(e.session_id, request_id=e.id, wait_s=10) for e in sent]
    assert [r.status for r in results] == ["completed"] * 20
    assert all(r.worker == worker.name for r in results)
    assert len(PAID) == 20
    # per session, the turns ran in the order submitted: each run saw the ones before it
    for i in range(5):
        users = [m.content for m in await team.store.get_messages(f"s{i}") if m.role == "user"]
        assert users == [f"pay please {j}" for j in range(i, 20, 5)]
    assert (await team.result("s4")).request_id == sent[-1].id  # the session's last turn
    worker.stop()
    stats = await task
    assert stats.answered == 20 and stats.retried == 0 and stats.dead == 0


async def test_a_worker_serves_a_binding_on_its_store_through_the_teams_bus(
    tmp_path: Any,
) -> None:
    team = desk()
    served = team.bind(store=f"sqlite:///{tmp_path}/w.db")  # bus=None: the team's own bus
    worker = Worker(served, block_s=0.05)
    assert worker.bus is team.bus
    task = await started(worker)
    sent = await team.submit("pay please", session_id="w1")
    result = await team.result("w1", request_id=sent.id, wait_s=10)
    worker.stop()
    await task
    assert result.status == "completed" and len(PAID) == 1
    assert [m.content for m in await served.store.get_messages("w1") if m.role == "user"] == [
        "pay please"
    ]
    assert await team.store.get_messages("w1") == []  # the team's own store never saw it
    await served.aclose()


async def test_a_request_delivered_again_is_answered_from_the_record() -> None:
    team = desk()
    envelope = Envelope(session_id="s1", message="pay please", headers=trace_headers())
    await team.bus.publish(envelope)
    worker = Worker(team, block_s=0.05)
    task = await started(worker)
    first = await team.result("s1", wait_s=10)
    await team.bus.publish(envelope)  # the same request again (a client's retry)
    await asyncio.sleep(0.3)
    second = await team.result("s1", wait_s=10)
    worker.stop()
    await task
    assert first.status == second.status == "completed"
    assert first.run_id == second.run_id and first.output == second.output
    assert len(PAID) == 1
    users = [m for m in await team.store.get_messages("s1") if m.role == "user"]
    assert len(users) == 1


async def test_the_run_joins_the_trace_of_the_submitter() -> None:
    team = desk()
    worker = Worker(team, block_s=0.05)
    task = await started(worker)
    envelope = await team.submit("pay please", session_id="s1")
    result = await team.result("s1", wait_s=10)
    worker.stop()
    await task
    trace_id = trace_id_of(envelope.headers)
    assert trace_id is not None
    events = [e for e in await team.store.get_events("s1") if e.run_id == result.run_id]
    assert {e.trace_id for e in events} == {trace_id}


async def test_concurrency_bounds_the_turns_in_flight() -> None:
    team = desk(latency_s=0.05)
    running, peak = 0, 0
    inner = team.run

    async def counted(*a: Any, **kw: Any) -> Any:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        try:
            return await inner(*a, **kw)
        finally:
            running -= 1

    team.run = counted  # type: ignore[method-assign]
    worker = Worker(team, concurrency=3, block_s=0.05)
    task = await started(worker)
    sent = [await team.submit("pay", session_id=f"s{i}") for i in range(12)]
    for e in sent:
        assert (await team.result(e.session_id, wait_s=10)).status == "completed"
    worker.stop()
    await task
    assert peak == 3


class FlakyStore(MemoryStore):
    """A store whose first `fail` commits raise, as a dropped connection would."""

    def __init__(self, fail: int) -> None:
        super().__init__()
        self.fail = fail

    async def commit_run(self, *a: Any, **kw: Any) -> Any:
        if self.fail > 0:
            self.fail -= 1
            raise StoreError("connection to the store was lost")
        return await super().commit_run(*a, **kw)


async def test_a_failing_store_is_retried_in_place_and_nothing_is_repeated(
    caplog: pytest.LogCaptureFixture,
) -> None:
    team = desk(store=FlakyStore(fail=2))
    worker = Worker(team, block_s=0.05)
    task = await started(worker)
    with caplog.at_level(logging.WARNING, logger="baton.worker"):
        await team.submit("pay please", session_id="s1")
        result = await team.result("s1", wait_s=20)
    worker.stop()
    stats = await task
    assert result.status == "completed"
    assert len(PAID) == 1  # the resumed run did not pay again
    assert stats.store_retries == 2 and stats.retried == 0
    assert "connection to the store was lost" in caplog.text
    assert "trying again" in caplog.text


async def test_a_store_that_stays_down_sends_the_turn_to_the_dead_letter_queue() -> None:
    bus = MemoryBus(claim_idle_s=0.05, max_deliveries=2)
    team = desk(store=FlakyStore(fail=10**6), bus=bus)
    worker = Worker(team, block_s=0.02, retry_s=0.1)
    task = await started(worker)
    await team.submit("pay please", session_id="s1")
    for _ in range(200):
        if await bus.dead_letters():
            break
        await asyncio.sleep(0.05)
    worker.stop()
    stats = await task
    dead = await bus.dead_letters()
    assert len(dead) == 1 and "connection to the store was lost" in dead[0].error
    assert stats.dead == 1
    assert await bus.pending() == 0


async def test_a_request_that_cannot_run_is_answered_with_an_error() -> None:
    team = desk()
    worker = Worker(team, block_s=0.05)
    task = await started(worker)
    await team.submit("pay please", session_id="s1", user_id="alice")
    assert (await team.result("s1", wait_s=10)).status == "completed"
    await team.submit("pay please", session_id="s1", user_id="mallory")
    refused = await team.result("s1", wait_s=10)
    worker.stop()
    stats = await task
    assert refused.status == "error" and "belongs to another user" in (refused.error or "")
    assert stats.errors == 1 and stats.retried == 0 and await team.bus.pending() == 0


async def test_shutdown_releases_unfinished_turns_and_another_worker_finishes_them() -> None:
    store, bus = MemoryStore(), MemoryBus(claim_idle_s=5.0)
    team = desk(store=store, bus=bus, latency_s=0.4)
    first = Worker(team, name="first", drain_s=0.1, block_s=0.05)
    task = await started(first)
    await team.submit("pay please", session_id="s1")
    for _ in range(100):  # until the tool has run (the run is past its side effect)
        if PAID:
            break
        await asyncio.sleep(0.02)
    assert PAID
    first.stop()
    stats = await task
    assert stats.released == 1 and stats.answered == 0
    cp = await store.get_checkpoint("s1")
    assert cp is not None and cp.status == "running"  # unfinished, not cancelled
    # a second worker (another process in production) takes the partition over at once:
    # the first gave it up, no claim_idle_s to wait
    second = Worker(desk(store=store, bus=bus), name="second", block_s=0.05)
    task2 = await started(second)
    result = await team.result("s1", wait_s=10)
    second.stop()
    await task2
    assert result.status == "completed" and result.worker == "second"
    assert len(PAID) == 1  # resumed after the tool call: not repeated


# ------------------------------------------------------------------ requests are per session
ANSWERED: list[str] = []
"""The user messages the echo desk's model answered (one per run)."""


def echo(request: ModelRequest) -> Step:
    asked = [m.content for m in request.messages if m.role == "user"][-1]
    ANSWERED.append(str(asked))
    return ScriptedModel.say(f"answer to {asked}")


def echo_desk(bus: Any) -> Team:
    return Team([Agent(name="desk")], entry="desk", model=ScriptedModel(echo), bus=bus)


async def test_the_same_request_id_in_two_sessions_is_run_and_answered_in_each(
    buses: Buses,
) -> None:
    ANSWERED.clear()
    bus = buses.new(partitions=2, claim_idle_s=1.0)
    team = echo_desk(bus)
    worker = Worker(team, block_s=0.05)
    task = await started(worker)
    # one partition, so that one worker sees both; then two, one after the other
    sessions = [session_on(0, 2, "a"), session_on(0, 2, "b"), session_on(1, 2, "c")]
    first = await team.submit("pay 1", session_id=sessions[0], request_id="req-7")
    assert (await team.result(sessions[0], request_id="req-7", wait_s=10)).output == (
        "answer to pay 1"
    )
    await team.submit("pay 2", session_id=sessions[1], request_id="req-7")
    await team.submit("pay 3", session_id=sessions[2], request_id="req-7")
    results = [await team.result(sid, request_id="req-7", wait_s=10) for sid in sessions]
    assert [r.output for r in results] == ["answer to pay 1", "answer to pay 2", "answer to pay 3"]
    assert [r.session_id for r in results] == sessions
    assert len({r.run_id for r in results}) == 3
    await team.bus.publish(first)  # a retry in the first session is still answered once
    await asyncio.sleep(0.3)
    worker.stop()
    stats = await task
    assert ANSWERED == ["pay 1", "pay 2", "pay 3"]
    assert stats.answered == 3 and await bus.pending() == 0


async def test_copies_of_a_request_in_flight_run_once_and_are_all_settled(buses: Buses) -> None:
    ANSWERED.clear()
    bus = buses.new(partitions=1, claim_idle_s=30.0)  # no redelivery settles them for us
    team = echo_desk(bus)
    envelope = Envelope(session_id="s1", message="pay once", id="req-dup")
    for _ in range(3):  # a client that retried twice before any worker ran
        await bus.publish(envelope)
    assert await bus.pending() == 3
    worker = Worker(team, block_s=0.05)
    task = await started(worker)
    result = await team.result("s1", request_id="req-dup", wait_s=10)
    for _ in range(100):
        if await bus.pending() == 0:
            break
        await asyncio.sleep(0.02)
    worker.stop()
    stats = await task
    assert result.output == "answer to pay once" and ANSWERED == ["pay once"]
    assert await bus.pending() == 0 and stats.answered == 1


async def test_a_model_that_cannot_be_reached_is_retried_in_place_and_nothing_is_repeated(
    caplog: pytest.LogCaptureFixture,
) -> None:
    down = {"left": 2}

    def flaky(request: ModelRequest) -> Step:
        if request.agent == "billing" and request.messages[-1].role == "tool" and down["left"]:
            down["left"] -= 1  # the server went away after the payment was recorded
            raise ModelUnreachable("connection refused (127.0.0.1:8080)")
        return policy(request)

    flaky_team = Team(  # the desk, with a model whose server drops twice
        list(desk().agents.values()),
        entry="triage",
        model=ScriptedModel(flaky),
        store=MemoryStore(),
        bus=MemoryBus(claim_idle_s=0.3),
        lease_s=1.0,
    )
    worker = Worker(flaky_team, block_s=0.05)
    task = await started(worker)
    with caplog.at_level(logging.WARNING, logger="baton.worker"):
        await flaky_team.submit("pay please", session_id="s1")
        result = await flaky_team.result("s1", wait_s=20)
    worker.stop()
    stats = await task
    assert result.status == "completed"
    assert len(PAID) == 1  # resumed from its checkpoint: the payment was not made again
    assert stats.model_retries == 2 and stats.store_retries == 0 and stats.errors == 0
    assert "connection refused" in caplog.text and "trying again" in caplog.text
