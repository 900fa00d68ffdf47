"""Edges of pausing and resuming: what must never be lost, and what must say what to do."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from runtime_kit import handoff, of_type

from baton import (
    Agent,
    ApprovalPolicy,
    BatonError,
    ConfigError,
    Guards,
    MemoryStore,
    ModelRequest,
    RunReleased,
    ScriptedModel,
    StoreError,
    Team,
    tool,
)
from baton.core.errors import ApprovalError, NoRunToResume
from baton.models import Step

S = ScriptedModel


def desk(ledger: list[str], store: Any = None, gate: bool = True, **pay: Any) -> Team:
    """`clerk` looks an order up (slowly when asked) and pays refunds that need approval."""

    attempts: list[str] = []

    @tool
    async def lookup(order_id: str, slow: bool = False) -> str:
        """Look an order up (`slow`: the first attempt hangs until it is interrupted)."""
        attempts.append(order_id)
        if slow and len(attempts) == 1:
            await asyncio.sleep(30)
        return f"{order_id}: paid 20 EUR"

    @tool(requires_approval=gate, **pay)
    async def refund(order_id: str) -> str:
        """Refund an order."""
        ledger.append(order_id)
        return "refunded"

    def script(request: ModelRequest) -> Step:
        last = request.messages[-1]
        if last.role == "user":
            slow = "slow" in (last.content or "")
            return S.call("lookup", order_id="ORD-1", slow=slow)
        if last.role == "tool" and last.name == "lookup":
            return S.call("refund", order_id="ORD-1")
        return S.say(f"done: {last.content}")

    clerk = Agent(name="clerk", tools=[lookup, refund])
    return Team([clerk], entry="clerk", model=S(script), store=store)


@pytest.mark.usefixtures("dies_when_cancelled")
async def test_an_interrupted_run_that_then_pauses_is_never_dropped_by_a_new_message() -> None:
    ledger: list[str] = []
    team = desk(ledger)
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(team.run("refund ORD-1 slow", session_id="S"), 0.2)
    # the next message first finishes the interrupted run, which reaches the approval gate
    with pytest.raises(ApprovalError, match=r"waits for\s+approval"):
        await team.run("hello", session_id="S")
    [card] = await team.approvals()
    assert [cp.status for cp in await team.unfinished()] == ["awaiting_approval"]
    assert "hello" not in [m.content for m in await team.store.get_messages("S")]
    done = await team.approve("S", card.id, by="alice")
    assert done.status == "completed" and ledger == ["ORD-1"]


async def test_a_run_whose_agent_or_tool_is_gone_says_so_and_can_be_discarded() -> None:
    ledger: list[str] = []
    store = MemoryStore()
    paused = await desk(ledger, store).run("refund ORD-1", session_id="S")
    assert paused.approval is not None
    renamed = Team([Agent(name="other")], entry="other", model=S([S.say("hi")]), store=store)
    with pytest.raises(BatonError, match="no longer has") as info:
        await renamed.approve("S", paused.approval.id, by="alice")
    assert "agent 'clerk'" in str(info.value) and "discard" in str(info.value)
    dropped = await renamed.discard("S")
    assert dropped.run_id == paused.run_id
    assert await renamed.unfinished() == []
    assert (await renamed.run("hi", session_id="S")).status == "completed"
    with pytest.raises(NoRunToResume):
        await renamed.discard("S")


def shipper(tools: list[Any], store: Any) -> Team:
    """`clerk` ships ORD-1 with `ship` (when it still has it), then says what it read."""

    def respond(request: ModelRequest) -> Step:
        last = request.messages[-1]
        if last.role == "tool":
            return S.say(f"done: {last.content}")
        return S.call("ship", order_id="ORD-1")

    return Team([Agent(name="clerk", tools=tools)], entry="clerk", model=S(respond), store=store)


async def test_resuming_a_call_whose_tool_is_gone_is_refused_and_discard_frees_the_session(
    tmp_path: Path,
) -> None:
    """The team changed between the interruption and the resume: the interrupted call may have
    shipped the order, so it is not answered "unknown tool" as if it never ran."""
    store = f"sqlite:///{tmp_path / 'b.db'}"
    shipped: list[str] = []
    gate = asyncio.Event()

    @tool
    async def ship(order_id: str) -> str:
        """Ship an order."""
        shipped.append(order_id)
        await gate.wait()
        return "shipped"

    before = shipper([ship], store)
    task = asyncio.ensure_future(before.run("ship ORD-1", session_id="S"))
    for _ in range(200):
        if shipped:
            break
        await asyncio.sleep(0.01)
    assert await before.release("S")  # stopped mid-call, as by a crash
    with pytest.raises(RunReleased):
        await task
    await before.aclose()

    after = shipper([], store)  # the same agent, without the tool
    for attempt in (after.resume("S"), after.run("next message", session_id="S")):
        with pytest.raises(BatonError, match="no longer has") as info:
            await attempt
        message = str(info.value)
        assert "tool 'ship' of agent 'clerk'" in message and "may have run" in message
        assert "team.discard('S')" in message and "baton resume S --discard" in message
    [cp] = await after.unfinished()  # nothing was lost
    assert cp.session_id == "S"
    await after.discard("S")
    assert (await after.run("next message", session_id="S")).status == "completed"
    assert shipped == ["ORD-1"]
    await after.aclose()


async def test_a_workers_unanswered_call_whose_tool_is_gone_is_refused_too(tmp_path: Path) -> None:
    from baton import Supervisor

    store = f"sqlite:///{tmp_path / 'b.db'}"
    shipped: list[str] = []

    @tool
    async def ship(order_id: str) -> str:
        """Ship an order."""
        shipped.append(order_id)
        await asyncio.sleep(30)
        return "shipped"

    def respond(request: ModelRequest) -> Step:
        last = request.messages[-1]
        if request.agent == "lead":
            if last.role == "tool":
                return S.say("the warehouse says: " + (last.content or ""))
            return S.call("ask_warehouse", question="ship ORD-1")
        if last.role == "tool":
            return S.say("shipped")
        return S.call("ship", order_id="ORD-1")

    def desk(tools: list[Any]) -> Supervisor:
        worker = Agent(name="warehouse", description="Ships orders.", tools=tools)
        return Supervisor(Agent(name="lead"), workers=[worker], model=S(respond), store=store)

    before = desk([ship])
    task = asyncio.ensure_future(before.run("ship ORD-1", session_id="S"))
    for _ in range(200):
        if shipped:
            break
        await asyncio.sleep(0.01)
    assert await before.release("S")
    with pytest.raises(RunReleased):
        await task
    with pytest.raises(BatonError, match="tool 'ship' of agent 'warehouse'"):
        await desk([]).resume("S")


async def test_an_interrupted_call_resumes_when_its_tool_is_still_there(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'b.db'}"
    shipped: list[str] = []
    gate = asyncio.Event()

    @tool
    async def ship(order_id: str) -> str:
        """Ship an order."""
        shipped.append(order_id)
        if len(shipped) == 1:
            await gate.wait()
        return "shipped"

    team = shipper([ship], store)
    task = asyncio.ensure_future(team.run("ship ORD-1", session_id="S"))
    for _ in range(200):
        if shipped:
            break
        await asyncio.sleep(0.01)
    assert await team.release("S")
    with pytest.raises(RunReleased):
        await task
    result = await shipper([ship], store).resume("S")
    assert result.status == "completed" and result.output == "done: shipped"
    assert shipped == ["ORD-1", "ORD-1"]  # run again under the same idempotency key


async def test_a_damaged_checkpoint_names_the_session_and_the_way_out(tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    ledger: list[str] = []
    team = desk(ledger, f"sqlite:///{db}")
    paused = await team.run("refund ORD-1", session_id="S")
    assert paused.status == "awaiting_approval"
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE checkpoints SET data = '{\"session\": 7'")
    with pytest.raises(StoreError, match="cannot be read") as info:
        await team.resume("S")
    assert "'S'" in str(info.value) and "discard" in str(info.value)
    await team.discard("S")
    assert (await team.run("refund ORD-1 now", session_id="S")).status == "awaiting_approval"
    await team.aclose()


async def test_logs_of_an_approved_call_are_redacted_too(caplog: pytest.LogCaptureFixture) -> None:
    @tool(requires_approval=True)
    async def charge(card_number: str) -> str:
        """Charge a card."""
        logging.getLogger("baton").warning("charging %s", card_number)
        return "ok"

    card_no = "4111 1111 1111 1111"
    model = S([S.call("charge", card_number=card_no), S.say("charged")])
    team = Team([Agent(name="a", tools=[charge])], entry="a", model=model)
    paused = await team.run(f"charge {card_no}", session_id="S")
    assert paused.approval is not None
    with caplog.at_level(logging.INFO):
        await team.approve("S", paused.approval.id, by="alice")
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "charging [REDACTED" in logged and card_no not in logged


@pytest.mark.usefixtures("dies_when_cancelled")
async def test_a_decision_is_durable_before_its_call_runs() -> None:
    gate = asyncio.Event()
    ran: list[str] = []

    @tool(requires_approval=True)
    async def ship(order_id: str) -> str:
        """Ship an order."""
        ran.append(order_id)
        if len(ran) == 1:
            await gate.wait()  # the first attempt is interrupted here
        return "shipped"

    model = S(
        lambda rq: (
            S.say("ok") if rq.messages[-1].role == "tool" else S.call("ship", order_id="ORD-1")
        )
    )
    team = Team([Agent(name="a", tools=[ship])], entry="a", model=model)
    paused = await team.run("ship ORD-1", session_id="S")
    assert paused.approval is not None
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(team.approve("S", paused.approval.id, by="alice"), 0.2)
    [cp] = await team.unfinished()
    assert cp.status == "running"  # approved: no second decision needed
    done = await team.resume("S")
    assert done.status == "completed" and ran == ["ORD-1", "ORD-1"]
    assert [d.decision for d in of_type(done.events, "approval_decided")] == ["approved"]


def test_an_async_approval_policy_is_refused_when_defined() -> None:
    async def slow(args: Any, state: Any) -> bool:
        return True

    with pytest.raises(ConfigError, match="plain function"):
        ApprovalPolicy(when=slow)


async def test_a_broken_policy_pauses_and_says_why_and_policies_cannot_change_the_call() -> None:
    def broken(args: Any, state: Any) -> bool:
        raise KeyError("amount")

    ledger: list[str] = []
    paused = await desk(ledger, gate=broken).run("refund ORD-1", session_id="S")  # type: ignore[arg-type]
    assert paused.approval is not None
    assert "the approval policy failed (KeyError" in paused.approval.reason

    def meddling(args: Any, state: Any) -> bool:
        args["order_id"] = "ORD-999"  # a read-only view: this raises, so it pauses
        return False

    team = desk(ledger, gate=meddling)  # type: ignore[arg-type]
    paused = await team.run("refund ORD-1", session_id="S")
    assert paused.approval is not None and paused.approval.arguments == {"order_id": "ORD-1"}
    await team.approve("S", paused.approval.id, by="alice")
    assert ledger == ["ORD-1"]


async def test_a_hand_off_that_a_loop_guard_stops_asks_nobody_for_approval() -> None:
    model = S({"a": [handoff("b")], "b": [handoff("a")]})
    team = Team(
        [
            Agent(name="a", handoffs=["b"]),
            Agent(name="b", handoffs=["a"], approve_handoffs={"a": True}),
        ],
        entry="a",
        model=model,
        guards=Guards(max_visits=1, reroute_after_refusals=0),
    )
    result = await team.run("go", session_id="S")
    assert result.status == "escalated"
    assert of_type(result.events, "approval_requested") == []


async def test_two_teams_on_one_memory_store_take_turns_on_a_session() -> None:
    store = MemoryStore()
    started: list[str] = []

    def make(name: str) -> Team:
        @tool
        async def work(n: int) -> str:
            """Work."""
            started.append(name)
            await asyncio.sleep(0.05)
            started.append(name)
            return "ok"

        model = S(
            lambda rq: S.say("done") if rq.messages[-1].role == "tool" else S.call("work", n=1)
        )
        return Team([Agent(name="a", tools=[work])], entry="a", model=model, store=store)

    one, two = make("one"), make("two")
    results = await asyncio.gather(one.run("x", session_id="S"), two.run("y", session_id="S"))
    assert [r.status for r in results] == ["completed", "completed"]
    assert started in (["one", "one", "two", "two"], ["two", "two", "one", "one"])
    assert (await store.get_session("S")).version == 2  # type: ignore[union-attr]


async def test_the_escalated_event_keeps_the_card_it_was_emitted_with() -> None:
    model = S({"a": [handoff("b")], "b": [handoff("a")], "fb": [S.call("nope"), S.call("nope")]})
    team = Team(
        [
            Agent(name="a", handoffs=["b"]),
            Agent(name="b", handoffs=["a"]),
            Agent(name="fb", max_iterations=1),
        ],
        entry="a",
        model=model,
        fallback="fb",
        guards=Guards(max_visits=1, reroute_after_refusals=0),
    )
    result = await team.run("go", session_id="S")
    (escalated,) = of_type(result.events, "escalated")
    assert len(escalated.card.reasons) == 1
    assert result.escalation is not None and len(result.escalation.reasons) == 2
    [ticket] = await team.tickets.list()
    assert ticket.card.reasons == result.escalation.reasons


def test_two_threads_running_one_session_never_hang() -> None:
    """Each `run_sync` has its own event loop: the second run waits for the session (it never
    takes the first, live run for a crashed one); neither hangs, nothing is lost or doubled."""
    import threading
    import time

    from baton.core.errors import ConflictError

    @tool
    def slow(n: int) -> str:
        """Work a little."""
        time.sleep(0.2)
        return "ok"

    model = S(lambda rq: S.say("done") if rq.messages[-1].role == "tool" else S.call("slow", n=1))
    team = Team([Agent(name="a", tools=[slow])], entry="a", model=model)
    outcomes: list[str] = []

    def go() -> None:
        try:
            outcomes.append(team.run_sync("x", session_id="S").status)
        except ConflictError as exc:  # pragma: no cover - the failure this test looks for
            outcomes.append(f"conflict: {exc}")

    threads = [threading.Thread(target=go) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=10)
    assert not any(th.is_alive() for th in threads), "a run_sync hung"
    assert outcomes == ["completed", "completed"]  # the second waited for the first
    stored = asyncio.run(team.store.get_messages("S"))
    assert [m.role for m in stored].count("user") == 2
    assert len({m.id for m in stored}) == len(stored)
