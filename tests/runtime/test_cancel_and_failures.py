"""No failure erases a run: cancellation (`team.cancel`, `task.cancel()`, from another thread,
of a run waiting for approval), `SystemExit` in a tool, a bug inside the kernel and a locked
database at commit each end in a recorded state, keep what already ran, and never advise a
retry that would repeat a side effect."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from runtime_kit import of_type

from baton import Agent, Guards, ScriptedModel, Team, tool
from baton.backends.sqlite import SQLiteStore
from baton.core.errors import StoreError
from baton.core.messages import ToolSpec
from baton.models.base import ModelRequest
from baton.runtime.blueprint import Blueprint
from baton.runtime.cancel import CALLER
from baton.runtime.kernel import Kind
from baton.runtime.plan import CallEntry, Extra

S = ScriptedModel
SID = "S"


def shipping_desk(ran: list[str], gate: asyncio.Event | None = None, **team: Any) -> Team:
    """One agent that ships an order (the tool waits at `gate` the first time), then says so."""

    @tool
    async def ship(order_id: str) -> str:
        """Ship an order."""
        ran.append(order_id)
        if gate is not None and len(ran) == 1:
            await gate.wait()
        return "shipped"

    def respond(request: ModelRequest) -> Any:
        if request.messages[-1].role == "tool":
            return S.say(f"done: {request.messages[-1].content}")
        return S.call("ship", order_id="ORD-1")

    return Team([Agent(name="clerk", tools=[ship])], entry="clerk", model=S(respond), **team)


async def until(predicate: Any) -> None:
    for _ in range(500):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("timed out waiting")


async def test_team_cancel_stops_a_live_run_and_both_callers_get_the_result() -> None:
    ran: list[str] = []
    team = shipping_desk(ran, asyncio.Event())
    task = asyncio.ensure_future(team.run("ship ORD-1", session_id=SID))
    await until(lambda: ran)  # the tool is running

    cancelled = await team.cancel(SID, reason="the customer hung up")
    result = await task  # the run's own caller gets a result, not an exception

    assert cancelled is not None
    assert (result.status, result.error) == ("cancelled", "the customer hung up")
    assert cancelled.run_id == result.run_id
    [finished] = of_type(await team.store.get_events(SID), "run_finished")
    assert (finished.status, finished.error) == ("cancelled", "the customer hung up")
    messages = await team.store.get_messages(SID)
    assert [m.role for m in messages] == ["user", "assistant", "tool"]
    assert "may have taken effect" in (messages[-1].content or "")
    [cp] = await team.unfinished()
    assert cp.status == "cancelled"

    resumed = await team.resume(SID)  # still resumable until the next message
    assert resumed.status == "completed" and "may have taken effect" in (resumed.output or "")
    assert ran == ["ORD-1"]  # never repeated
    assert await team.unfinished() == []


async def test_the_callers_own_cancellation_is_recorded_then_raised() -> None:
    ran: list[str] = []
    team = shipping_desk(ran, asyncio.Event())
    task = asyncio.ensure_future(team.run("ship ORD-1", session_id=SID))
    await until(lambda: ran)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [finished] = of_type(await team.store.get_events(SID), "run_finished")
    assert (finished.status, finished.error) == ("cancelled", CALLER)
    session = await team.session(SID)
    assert session is not None and session.holder == "clerk"


def test_cancel_from_another_thread_stops_run_sync(tmp_path: Path) -> None:
    ran: list[str] = []
    started = threading.Event()

    @tool
    async def ship(order_id: str) -> str:
        """Ship an order."""
        ran.append(order_id)
        started.set()
        await asyncio.sleep(30)
        return "shipped"

    model = S([S.call("ship", order_id="ORD-1"), S.say("shipped")])
    team = Team(
        [Agent(name="clerk", tools=[ship])],
        entry="clerk",
        model=model,
        store=f"sqlite:///{tmp_path / 'b.db'}",
    )
    out: list[Any] = []
    worker = threading.Thread(
        target=lambda: out.append(team.run_sync("ship ORD-1", session_id=SID))
    )
    worker.start()
    assert started.wait(10)
    cancelled = asyncio.run(team.cancel(SID))
    worker.join(10)
    assert not worker.is_alive()
    assert cancelled is not None and cancelled.status == "cancelled"
    assert out[0].status == "cancelled"
    assert out[0].error == "cancelled by the caller (team.cancel)"


async def test_cancelling_a_run_that_waits_for_approval_runs_nothing() -> None:
    ran: list[str] = []

    @tool(requires_approval=True)
    async def refund(order_id: str) -> str:
        """Refund an order."""
        ran.append(order_id)
        return "refunded"

    team = Team(
        [Agent(name="clerk", tools=[refund])],
        entry="clerk",
        model=S([S.call("refund", order_id="ORD-1"), S.say("ok")]),
    )
    paused = await team.run("refund ORD-1", session_id=SID)
    assert paused.status == "awaiting_approval"
    result = await team.cancel(SID)
    assert result is not None and result.status == "cancelled"
    assert await team.approvals() == []
    tool_msg = [m for m in await team.store.get_messages(SID) if m.role == "tool"]
    assert [m.content for m in tool_msg] == [
        '{"ok": false, "error": "not executed: the run was cancelled before this call ran"}'
    ]
    assert ran == []
    assert await team.cancel(SID) is None  # nothing left to cancel
    assert (await team.run("thanks", session_id=SID)).status == "completed"
    assert ran == []


async def test_cancel_with_no_run_returns_none() -> None:
    team = shipping_desk([])
    assert await team.cancel("nobody") is None


@pytest.mark.parametrize("kind", ["async", "thread"])
async def test_system_exit_in_a_tool_fails_the_run_and_keeps_what_ran(kind: str) -> None:
    ledger: list[str] = []

    @tool
    def note(text: str) -> str:
        """Write a note."""
        ledger.append(text)
        return "noted"

    if kind == "async":

        @tool
        async def quit_now() -> str:
            """Exit."""
            raise SystemExit(3)

    else:

        @tool
        def quit_now() -> str:
            """Exit."""
            raise SystemExit(3)

    model = S([S.call("note", text="hello"), S.call("quit_now"), S.say("never")])
    team = Team([Agent(name="a", tools=[note, quit_now])], entry="a", model=model)
    result = await team.run("go", session_id=SID)

    assert result.status == "failed"
    assert result.error is not None and "SystemExit(3)" in result.error
    assert ledger == ["hello"]
    stored = await team.store.get_messages(SID)
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant", "tool"]
    [finished] = of_type(await team.store.get_events(SID), "run_finished")
    assert finished.status == "failed"
    assert await team.unfinished() == []


def raising_cancel_tool(kind: str, ran: list[str]) -> Any:
    """`ship`, which raises `CancelledError` although nobody cancels its call: itself (async or
    in a thread), or by awaiting a future that someone else cancels (a client giving up)."""
    if kind == "thread":

        @tool
        def ship(order_id: str) -> str:
            """Ship an order."""
            ran.append(order_id)
            raise asyncio.CancelledError("the carrier's client gave up")

        return ship

    @tool
    async def ship(order_id: str) -> str:  # type: ignore[no-redef]
        """Ship an order."""
        ran.append(order_id)
        if kind == "async":
            raise asyncio.CancelledError("the carrier's client gave up")
        pending = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(pending.cancel)  # another party cancels it
        return str(await pending)

    return ship


@pytest.mark.parametrize("kind", ["async", "thread", "awaited-future"])
async def test_a_tool_that_raises_cancelled_error_itself_is_a_failed_call(kind: str) -> None:
    ran: list[str] = []

    def respond(request: ModelRequest) -> Any:
        if request.messages[-1].role == "tool":
            return S.say(f"done: {request.messages[-1].content}")
        return S.call("ship", order_id="ORD-1")

    tools = [raising_cancel_tool(kind, ran)]
    team = Team([Agent(name="clerk", tools=tools)], entry="clerk", model=S(respond))

    result = await team.run("ship ORD-1", session_id=SID)  # returns: never raises

    assert result.status == "completed" and ran == ["ORD-1"]
    [called] = of_type(result.events, "tool_called")
    assert not called.ok and "raised CancelledError" in (called.error or "")
    assert "not cancelled" in (result.output or "")  # what the model read
    if kind != "awaited-future":
        assert "the carrier's client gave up" in (result.output or "")
    assert await team.unfinished() == []


async def test_a_cancellation_of_the_run_during_a_tool_that_raises_its_own_still_cancels() -> None:
    """A tool that turns the run's cancellation into a CancelledError of its own (clean-up
    that raises anew) does not make it a failed call: the run is cancelled, as asked."""
    ran: list[str] = []
    gate = asyncio.Event()

    @tool
    async def ship(order_id: str) -> str:
        """Ship an order."""
        ran.append(order_id)
        try:
            await gate.wait()
        except asyncio.CancelledError:
            raise asyncio.CancelledError("cleaned up") from None
        return "shipped"

    model = S([S.call("ship", order_id="ORD-1"), S.say("never")])
    team = Team([Agent(name="clerk", tools=[ship])], entry="clerk", model=model)
    task = asyncio.ensure_future(team.run("ship ORD-1", session_id=SID))
    await until(lambda: ran)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [finished] = of_type(await team.store.get_events(SID), "run_finished")
    assert (finished.status, finished.error) == ("cancelled", CALLER)

    team2 = shipping_desk([], asyncio.Event())  # team.cancel reaches it the same way
    live = asyncio.ensure_future(team2.run("ship ORD-1", session_id=SID))
    await asyncio.sleep(0.05)
    assert (await team2.cancel(SID, reason="hung up")) is not None
    assert (await live).status == "cancelled"


async def test_a_tool_timeout_is_still_a_timeout_and_a_timeout_around_run_still_cancels() -> None:
    @tool
    async def ship(order_id: str) -> str:
        """Ship an order."""
        await asyncio.sleep(30)
        return "shipped"

    model = S([S.call("ship", order_id="ORD-1"), S.say("it timed out")])
    team = Team(
        [Agent(name="clerk", tools=[ship])],
        entry="clerk",
        model=model,
        guards=Guards(tool_timeout_s=0.05),
    )
    result = await team.run("ship ORD-1", session_id=SID)
    assert result.status == "completed"
    [called] = of_type(result.events, "tool_called")
    assert "timed out after 0.05s" in (called.error or "")
    assert "CancelledError" not in (called.error or "")

    slow = Team(
        [Agent(name="clerk", tools=[ship])],
        entry="clerk",
        model=S([S.call("ship", order_id="ORD-1"), S.say("never")]),
    )
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(slow.run("ship ORD-1", session_id=SID), 0.1)
    [finished] = of_type(await slow.store.get_events(SID), "run_finished")
    assert finished.status == "cancelled"


async def test_a_bug_inside_the_kernel_fails_the_run_recorded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def broken(*args: Any) -> Any:
        raise RuntimeError("a plug-in bug")

    def respond(request: ModelRequest) -> Any:
        return S.say("done") if request.messages[-1].role == "tool" else S.call("plug_in")

    spec = ToolSpec(name="plug_in", description="A topology's own call.", parameters={})
    plugged = Blueprint(
        entries={"clerk": (Extra("plug_in", CallEntry("plug"), spec),)},
        kinds={"plug": Kind(broken)},
    )
    team = Team([Agent(name="clerk")], entry="clerk", model=S(respond), blueprint=plugged)
    result = await team.run("ship ORD-1", session_id=SID)
    assert result.status == "failed"
    assert result.error == "internal error: RuntimeError: a plug-in bug"
    stored = await team.store.get_messages(SID)
    assert [m.role for m in stored] == ["user", "assistant", "tool"]  # the call is answered
    assert "run_finished" in [e.type for e in await team.store.get_events(SID)]
    assert "failed unexpectedly" in caplog.text


async def test_a_locked_database_at_commit_keeps_the_run_resumable(tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    ran: list[str] = []
    blocker: list[sqlite3.Connection] = []

    @tool
    async def ship(order_id: str) -> str:
        """Ship an order."""
        ran.append(order_id)
        return "shipped"

    def respond(request: ModelRequest) -> Any:
        if request.messages[-1].role != "tool":
            return S.call("ship", order_id="ORD-1")
        if not blocker:  # another process takes the write lock before the final commit
            conn = sqlite3.connect(db, isolation_level=None)
            conn.execute("BEGIN IMMEDIATE")
            blocker.append(conn)
        return S.say("shipped")

    store = SQLiteStore(f"sqlite:///{db}", busy_timeout_s=0.2)
    team = Team([Agent(name="clerk", tools=[ship])], entry="clerk", model=S(respond), store=store)
    with pytest.raises(StoreError) as info:
        await team.run("ship ORD-1", session_id=SID)
    text = str(info.value)
    assert "busy_timeout" in text or "0.2s" in text
    assert "team.resume('S')" in text and "Do not send the message again" in text

    blocker[0].execute("ROLLBACK")
    blocker[0].close()
    [cp] = await team.unfinished()
    assert cp.status == "running"
    result = await team.resume(SID)
    assert result.status == "completed" and ran == ["ORD-1"]  # the tool did not run again
    assert [m.role for m in await team.store.get_messages(SID)].count("user") == 1
    await team.aclose()
