"""Sync tools run on Baton's own daemon threads: a hung one cannot hold up the caller.

`asyncio.run` (behind `team.run_sync` and `baton run`) waits for the default executor's threads
at shutdown, so a sync tool run with `asyncio.to_thread` that hangs past its timeout kept the
caller waiting for as long as it hung. The wall-time bounds below are correctness bounds (the
tool sleeps 5 s or more, the limit is 0.5 s), not benchmarks.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from runtime_kit import of_type

from baton import Agent, ScriptedModel, Team, ToolContext, tool, tool_context, tool_exec
from baton.tool_exec import ToolThreads

S = ScriptedModel


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at teardown: frees the 'hung' tools so no thread outlives its test for long."""
    event = threading.Event()
    yield event
    event.set()


@pytest.fixture
def small_pool(monkeypatch: pytest.MonkeyPatch) -> ToolThreads:
    """A two-thread pool in place of the process-wide one."""
    pool = ToolThreads(max_workers=2)
    monkeypatch.setattr(tool_exec, "_POOL", pool)
    return pool


def _wait_until(check: Any, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return bool(check())


# ---------------------------------------------------------------- the caller is freed


def test_a_hung_sync_tool_does_not_hold_up_run_sync(release: threading.Event) -> None:
    started = threading.Event()

    @tool(timeout_s=0.5)
    def slow_lookup(order_id: str) -> str:
        """Hangs (5 s)."""
        started.set()
        release.wait(5)
        return "late"

    model = S([S.call("slow_lookup", order_id="ORD-1"), S.say("The system is slow.")])
    team = Team([Agent(name="solo", tools=[slow_lookup])], entry="solo", model=model)

    t0 = time.perf_counter()
    result = team.run_sync("look up ORD-1", session_id="S1")
    elapsed = time.perf_counter() - t0

    assert elapsed < 2, f"run_sync waited {elapsed:.1f}s for a tool past its 0.5s limit"
    assert started.is_set()
    assert result.status == "completed"
    assert result.output == "The system is slow."
    (called,) = of_type(result.events, "tool_called")
    assert called.ok is False and "slow_lookup timed out after 0.5s" in called.error
    assert [t.guard for t in of_type(result.events, "guard_tripped")] == ["tool_timeout"]


def test_the_process_exits_promptly_after_a_hung_sync_tool(tmp_path: Path) -> None:
    script = tmp_path / "hung.py"
    script.write_text(
        textwrap.dedent(
            """
            import json, time
            from baton import Agent, ScriptedModel as S, Team, tool

            @tool(timeout_s=0.5)
            def stuck() -> str:
                \"\"\"Hangs for a minute.\"\"\"
                time.sleep(60)
                return "late"

            if __name__ == "__main__":
                team = Team([Agent(name="solo", tools=[stuck])], entry="solo",
                            model=S([S.call("stuck"), S.say("Sorry.")]))
                t0 = time.perf_counter()
                result = team.run_sync("go", session_id="S1")
                called = [e for e in result.events if e.type == "tool_called"]
                print(json.dumps({"status": result.status, "error": called[0].error,
                                  "run_s": time.perf_counter() - t0}))
            """
        )
    )
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=30)
    wall = time.perf_counter() - t0

    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "completed"
    assert "stuck timed out after 0.5s" in out["error"]
    assert out["run_s"] < 2
    assert wall < 10, f"the process took {wall:.1f}s to exit (its tool hangs for 60s)"


# ---------------------------------------------------------------- context in the thread


def test_tool_context_works_in_a_sync_tool() -> None:
    seen: list[tuple[ToolContext | None, ToolContext, str]] = []

    @tool(records=())
    def whoami(order_id: str, ctx: ToolContext) -> str:
        """Reports its context."""
        seen.append((tool_context(), ctx, threading.current_thread().name))
        return "ok"

    model = S([S.call("whoami", order_id="ORD-1"), S.say("Done.")])
    team = Team([Agent(name="solo", tools=[whoami])], entry="solo", model=model)

    result = team.run_sync("check ORD-1", session_id="S1", user_id="u1")

    assert result.status == "completed"
    ((from_var, param, thread),) = seen
    assert from_var is not None and from_var == param
    assert (from_var.session_id, from_var.user_id, from_var.agent) == ("S1", "u1", "solo")
    assert from_var.idempotency_key.startswith(result.run_id + ":")
    assert thread == "baton-tool"  # Baton's pool, not the event loop's default executor
    assert tool_context() is None  # reset outside the call


async def test_other_context_variables_reach_the_thread_too() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")
    var.set("req-7")

    @tool
    def read_var() -> str:
        """Reads a context variable."""
        return var.get()

    out = await read_var.invoke({}, 100)
    assert out.content == "req-7"


# ---------------------------------------------------------------- hung tools do not exhaust it


def test_many_hung_tools_do_not_exhaust_the_pool(
    small_pool: ToolThreads, release: threading.Event
) -> None:
    @tool(timeout_s=0.1)
    def hang(n: int) -> str:
        """Hangs."""
        release.wait(30)
        return "late"

    @tool
    def quick() -> str:
        """Answers at once."""
        return "fast"

    def team(*steps: Any) -> Team:
        model = S([*steps, S.say("Done.")])
        return Team([Agent(name="solo", tools=[hang, quick])], entry="solo", model=model)

    t0 = time.perf_counter()
    for i in range(10):  # ten runs, each left with a hung thread
        result = team(S.call("hang", n=i)).run_sync("go", session_id=f"S{i}")
        assert [e.ok for e in of_type(result.events, "tool_called")] == [False]
    result = team(S.call("quick")).run_sync("go", session_id="fresh")
    elapsed = time.perf_counter() - t0

    (called,) = of_type(result.events, "tool_called")
    assert called.ok is True and called.tool == "quick"
    assert called.latency_ms < 500  # the fresh tool found a free thread at once
    assert elapsed < 10
    stats = small_pool.stats()
    assert stats["abandoned_total"] == 10
    assert stats["abandoned_running"] == 10
    assert stats["workers"] <= 2  # the bound holds: abandoned threads are not pool threads

    release.set()  # the hung calls return: their threads leave, nothing is delivered
    assert _wait_until(lambda: small_pool.stats()["abandoned_running"] == 0)


# ---------------------------------------------------------------- the pool itself


async def test_results_exceptions_and_queueing() -> None:
    pool = ToolThreads(max_workers=1)
    assert await pool.run(lambda a, b: a + b, 2, 3) == 5
    with pytest.raises(ZeroDivisionError):
        await pool.run(lambda: 1 / 0)

    gate = threading.Event()
    ran: list[str] = []

    def job(name: str) -> str:
        gate.wait(5)
        ran.append(name)
        return name

    first = asyncio.ensure_future(pool.run(job, "first"))
    queued = asyncio.ensure_future(pool.run(job, "queued"))
    third = asyncio.ensure_future(pool.run(job, "third"))
    await asyncio.sleep(0.05)
    queued.cancel()  # still waiting for a thread: it never runs
    with pytest.raises(asyncio.CancelledError):
        await queued
    gate.set()
    assert await first == "first" and await third == "third"
    assert ran == ["first", "third"]
    assert _wait_until(lambda: pool.stats()["idle"] == 1)
    assert pool.stats() == {
        "workers": 1,
        "idle": 1,
        "queued": 0,
        "abandoned_running": 0,
        "abandoned_total": 0,
    }


async def test_an_abandoned_thread_is_replaced_and_its_result_dropped() -> None:
    pool = ToolThreads(max_workers=1)
    gate = threading.Event()
    try:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(pool.run(gate.wait, 30), 0.05)
        assert pool.stats()["abandoned_running"] == 1
        assert await asyncio.wait_for(pool.run(lambda: "next"), 2) == "next"
    finally:
        gate.set()
    assert _wait_until(lambda: pool.stats()["abandoned_running"] == 0)
    assert pool.stats()["workers"] == 1


async def test_abandoned_threads_are_bounded_too() -> None:
    pool = ToolThreads(max_workers=2, max_abandoned=1)
    gate = threading.Event()
    try:
        for _ in range(3):
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(pool.run(gate.wait, 30), 0.05)
        stats = pool.stats()
        assert stats["abandoned_running"] == 3
        assert stats["workers"] == 0  # the third was not replaced: 2 + 1 threads at most
        waiting = asyncio.ensure_future(pool.run(lambda: "served"))
        await asyncio.sleep(0.05)
        assert not waiting.done() and pool.stats()["queued"] == 1
    finally:
        gate.set()
    assert await asyncio.wait_for(waiting, 5) == "served"  # a returning thread rejoined
    assert _wait_until(lambda: pool.stats()["abandoned_running"] == 0)
    assert pool.stats()["workers"] <= 2


def test_a_result_arriving_after_the_loop_closed_is_dropped_quietly() -> None:
    pool = ToolThreads(max_workers=1)
    gate = threading.Event()

    async def start() -> None:
        task = asyncio.ensure_future(pool.run(gate.wait, 5))
        await asyncio.sleep(0.05)
        assert not task.done()

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(start())
    finally:
        loop.close()
    gate.set()  # the worker finds the loop closed and carries on
    assert _wait_until(lambda: pool.stats()["idle"] == 1)
    assert asyncio.run(pool.run(lambda: "alive")) == "alive"


# ---------------------------------------------------------------- opt-in process isolation


@tool(isolation="process", timeout_s=3)
def stuck_in_process(pid_file: str) -> str:
    """Writes its pid, then hangs."""
    Path(pid_file).write_text(str(os.getpid()))
    time.sleep(60)
    return "late"


@tool(isolation="process")
def echo_in_process(order_id: str, ctx: ToolContext) -> dict[str, Any]:
    """Answers from its own process."""
    current = tool_context()
    return {
        "order_id": order_id,
        "pid": os.getpid(),
        "same_context": current == ctx,
        "session": current.session_id if current else None,
    }


@tool(isolation="process")
def fails_in_process() -> str:
    """Raises in its process."""
    raise KeyError("ORD-9")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_process_tool_is_killed_on_timeout(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    model = S([S.call("stuck_in_process", pid_file=str(pid_file)), S.say("Sorry.")])
    team = Team([Agent(name="solo", tools=[stuck_in_process])], entry="solo", model=model)

    t0 = time.perf_counter()
    result = team.run_sync("go", session_id="S1")
    elapsed = time.perf_counter() - t0

    assert elapsed < 6
    (called,) = of_type(result.events, "tool_called")
    assert called.ok is False and "stuck_in_process timed out after 3" in called.error
    assert pid_file.exists(), "the child did not start within the 3s limit"
    pid = int(pid_file.read_text())
    assert pid != os.getpid()
    assert _wait_until(lambda: not _alive(pid), 5), "the tool's process was not killed"


def test_a_process_tool_answers_with_its_context() -> None:
    model = S(
        [
            S.call("echo_in_process", order_id="ORD-1"),
            S.call("fails_in_process"),
            S.say("Done."),
        ]
    )
    team = Team(
        [Agent(name="solo", tools=[echo_in_process, fails_in_process])],
        entry="solo",
        model=model,
    )

    result = team.run_sync("ORD-1", session_id="S1")

    assert result.status == "completed"
    ok, failed = of_type(result.events, "tool_called")
    assert ok.ok is True
    assert failed.ok is False
    assert failed.error == "fails_in_process failed in its process: KeyError: 'ORD-9'"
    assert echo_in_process.timeout_error(1).count("process was stopped") == 1


async def test_a_process_tool_returns_its_value() -> None:
    context = ToolContext(
        idempotency_key="r:0:0", run_id="r", session_id="S9", agent="solo", call_id="c"
    )
    out = await echo_in_process.invoke({"order_id": "ORD-2"}, 1500, context)
    assert out.ok is True, out.error
    value = json.loads(out.content)
    assert value["order_id"] == "ORD-2" and value["session"] == "S9"
    assert value["same_context"] is True
    assert value["pid"] != os.getpid()
