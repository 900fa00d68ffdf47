"""`SQLiteStore` runs its sqlite3 work in one worker thread per store: a write waiting for
another connection's lock never freezes the event loop, a cancelled caller never leaves half a
commit, and one store serves several event loops and threads."""

from __future__ import annotations

import asyncio
import gc
import sqlite3
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from baton import Agent, ScriptedModel, Team
from baton.backends import SQLiteStore
from baton.backends.base import SessionRecord
from baton.core.errors import ConflictError, StoreError
from baton.core.events import EscalationCard, RunStarted
from baton.core.messages import Message

LOCK_HELD_S = 1.5
"""How long another connection holds the write lock."""
MAX_GAP_S = 0.25
"""The longest a coroutine ticking every 10 ms may wait while the store waits for the lock."""


def url(path: Path) -> str:
    """The store URL of a file path."""
    return f"sqlite:///{path}"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Path of a fresh database file."""
    return tmp_path / "baton.db"


@pytest.fixture
async def writer(db: Path) -> AsyncIterator[sqlite3.Connection]:
    """Another connection to the file (another process, as far as SQLite can tell)."""
    await SQLiteStore(url(db)).close()  # creates the tables
    conn = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    try:
        yield conn
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        conn.close()


@pytest.fixture
async def loop_errors() -> AsyncIterator[list[dict[str, Any]]]:
    """What the event loop reports to its exception handler (e.g. a future whose exception
    nobody retrieved); checked empty after the test, once the garbage is collected."""
    errors: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _, context: errors.append(context))
    yield errors
    gc.collect()
    loop.set_exception_handler(None)
    assert errors == []


def a_run(sid: str, n: int, run_id: str = "run_1") -> tuple[list[Message], list[RunStarted]]:
    """The messages (user and assistant) and one event of a run numbered `n`."""
    messages = [
        Message(role="user", content=f"{sid} ask {n}", run_id=run_id),
        Message(role="assistant", content=f"{sid} answer {n}", agent="desk", run_id=run_id),
    ]
    event = RunStarted(trace_id=f"tr_{sid}_{n}", session_id=sid, run_id=run_id, message="hi")
    return messages, [event]


class Ticker:
    """A coroutine that sleeps 10 ms at a time and notes the longest gap between wake-ups."""

    def __init__(self) -> None:
        self.gaps: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            self.gaps.append(now - last)
            last = now

    async def start(self) -> None:
        """Start ticking (it has ticked a few times when this returns)."""
        self._task = asyncio.get_running_loop().create_task(self._tick())
        while len(self.gaps) < 3:
            await asyncio.sleep(0.01)

    async def stop(self) -> float:
        """Stop ticking; the longest gap seen."""
        assert self._task is not None
        self._task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self._task
        return max(self.gaps)


def worker_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("baton-sqlite")}


# ---------------------------------------------------------------- the loop goes on


async def test_a_commit_waiting_for_the_write_lock_does_not_freeze_the_loop(
    db: Path, writer: sqlite3.Connection, loop_errors: list[dict[str, Any]]
) -> None:
    store = SQLiteStore(url(db), busy_timeout_s=1.0)
    ticker = Ticker()
    try:
        rec = SessionRecord("s_1", holder="desk")
        messages, events = a_run("s_1", 1)
        writer.execute("BEGIN IMMEDIATE")  # held for LOCK_HELD_S
        asyncio.get_running_loop().call_later(LOCK_HELD_S, writer.execute, "ROLLBACK")
        await ticker.start()
        start = time.perf_counter()
        with pytest.raises(StoreError, match="busy_timeout_s") as caught:
            await store.commit_run(rec, messages, events)
        waited = time.perf_counter() - start
        await asyncio.sleep(LOCK_HELD_S - waited + 0.1)  # the lock is released meanwhile
        longest = await ticker.stop()

        assert "more than 1s" in str(caught.value)
        assert waited >= 0.9, waited  # the commit waited for the lock...
        assert longest < MAX_GAP_S, f"the loop stood still for {longest:.3f}s"  # ...not the loop
        assert len(ticker.gaps) >= 50
        assert not writer.in_transaction

        # nothing of the failed commit is stored, and the store works on
        assert rec.version == 0
        assert await store.get_session("s_1") is None
        await store.commit_run(rec, messages, events)
        assert rec.version == 1
        assert await store.get_messages("s_1") == messages
        assert await store.get_events(session_id="s_1") == events
        assert (await store.verify_audit()).ok
    finally:
        await store.close()


async def test_reads_go_on_while_another_connection_holds_the_write_lock(
    db: Path, writer: sqlite3.Connection
) -> None:
    store = SQLiteStore(url(db), busy_timeout_s=1.0)
    try:
        rec = SessionRecord("s_1", holder="desk")
        await store.commit_run(rec, *a_run("s_1", 1))
        writer.execute("BEGIN IMMEDIATE")
        start = time.perf_counter()
        got = await store.get_session("s_1")  # WAL: readers do not wait for the writer
        assert got is not None and got.version == 1
        assert time.perf_counter() - start < MAX_GAP_S
    finally:
        await store.close()


# ---------------------------------------------------------------- cancellation


@pytest.mark.parametrize("lock", ["released", "kept"])
async def test_a_commit_cancelled_while_waiting_for_the_lock_is_stored_whole_or_not_at_all(
    db: Path, writer: sqlite3.Connection, lock: str, loop_errors: list[dict[str, Any]]
) -> None:
    store = SQLiteStore(url(db), busy_timeout_s=1.0)
    try:
        rec = SessionRecord("s_1", holder="desk", state={"step": 1})
        messages, events = a_run("s_1", 1)
        writer.execute("BEGIN IMMEDIATE")
        task = asyncio.create_task(store.commit_run(rec, messages, events))
        await asyncio.sleep(0.2)
        assert not task.done()  # the commit waits for the lock, in the worker thread
        task.cancel()
        if lock == "released":  # the commit gets the lock after all, and completes
            asyncio.get_running_loop().call_later(0.1, writer.execute, "ROLLBACK")
        start = time.perf_counter()
        with pytest.raises(asyncio.CancelledError):
            await task
        # the cancellation reached the caller only once the transaction had ended
        assert time.perf_counter() - start >= 0.05
        if writer.in_transaction:
            writer.execute("ROLLBACK")

        got = await store.get_session("s_1")
        stored_messages = await store.get_messages("s_1")
        stored_events = await store.get_events(session_id="s_1")
        if lock == "released":
            assert rec.version == 1
            assert got is not None and (got.version, got.state) == (1, {"step": 1})
            assert (stored_messages, stored_events) == (messages, events)
        else:
            assert rec.version == 0
            assert (got, stored_messages, stored_events) == (None, [], [])

        # the store works on, from where the cancelled commit left it
        rec.state = {"step": 2}
        more, more_events = a_run("s_1", 2, run_id="run_2")
        await store.commit_run(rec, more, more_events)
        got = await store.get_session("s_1")
        assert got is not None and got.state == {"step": 2} and got.version == rec.version
        assert (await store.get_messages("s_1"))[-2:] == more
        assert (await store.verify_audit()).ok
    finally:
        await store.close()


async def test_commits_cancelled_while_queued_still_run_whole(
    db: Path, loop_errors: list[dict[str, Any]]
) -> None:
    store = SQLiteStore(url(db))
    try:
        await store.get_session("s_open")  # opened first: the commits below go straight in line
        tasks = []
        for i in range(20):
            rec = SessionRecord(f"s_{i}")
            tasks.append((rec, asyncio.create_task(store.commit_run(rec, *a_run(f"s_{i}", 1)))))
        await asyncio.sleep(0)  # every commit is queued for the worker thread
        for _, task in tasks:
            task.cancel()
        for rec, task in tasks:
            with pytest.raises(asyncio.CancelledError):
                await task
            got = await store.get_session(rec.session_id)
            stored = await store.get_messages(rec.session_id)
            assert rec.version == 1  # queued work runs: the store does not drop it
            assert got is not None and got.version == 1 and len(stored) == 2
        assert (await store.verify_audit()).ok
    finally:
        await store.close()


# ---------------------------------------------------------------- order and consistency


async def test_concurrent_coroutines_keep_order_and_consistency(db: Path) -> None:
    store = SQLiteStore(url(db))
    try:

        async def converse(sid: str, runs: int) -> SessionRecord:
            rec = SessionRecord(sid)
            for n in range(runs):
                rec.state = {"n": n}
                await store.commit_run(rec, *a_run(sid, n))
            return rec

        sessions = await asyncio.gather(*(converse(f"s_{i}", 15) for i in range(12)))
        for rec in sessions:
            assert rec.version == 15
            got = await store.get_session(rec.session_id)
            assert got is not None and (got.version, got.state) == (15, {"n": 14})
            contents = [m.content for m in await store.get_messages(rec.session_id)]
            expected = [f"{rec.session_id} {k} {n}" for n in range(15) for k in ("ask", "answer")]
            assert contents == expected

        # calls run in the order they were made: tickets are numbered in that order
        cards = [
            EscalationCard(session_id=f"s_{i}", trace_id=f"tr_{i}", path=["desk"], reasons=["r"])
            for i in range(30)
        ]
        tickets = await asyncio.gather(*(store.push_human(card) for card in cards))
        assert tickets == sorted(tickets)
        assert [t.card.session_id for t in await store.list_human()] == [
            f"s_{i}" for i in range(30)
        ]

        # compare-and-set holds: of five commits from the same version, one wins
        base = await store.get_session("s_0")
        assert base is not None
        copies = [SessionRecord("s_0", version=base.version, state={"who": i}) for i in range(5)]
        outcomes = await asyncio.gather(
            *(store.commit_run(c, [], []) for c in copies), return_exceptions=True
        )
        assert sum(o is None for o in outcomes) == 1
        assert sum(isinstance(o, ConflictError) for o in outcomes) == 4
        claims = await asyncio.gather(
            *(store.acquire_lease("hot", f"worker-{i}", 30) for i in range(10))
        )
        assert claims.count(True) == 1

        result = await store.verify_audit()
        assert result.ok, result
    finally:
        await store.close()


# ---------------------------------------------------------------- loops and threads


def test_one_store_serves_event_loops_in_several_threads(db: Path) -> None:
    store = SQLiteStore(url(db))
    before = worker_threads()
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def thread_body(name: str) -> None:
        async def work() -> None:
            for s in range(3):
                rec = SessionRecord(f"{name}_{s}")
                for n in range(10):
                    await store.commit_run(rec, *a_run(rec.session_id, n))
                    await asyncio.sleep(0)

        try:
            barrier.wait()
            asyncio.run(work())  # a new event loop each time, as run_sync does
            asyncio.run(read_back(name))
        except BaseException as exc:
            errors.append(exc)

    async def read_back(name: str) -> None:
        for s in range(3):
            got = await store.get_session(f"{name}_{s}")
            assert got is not None and got.version == 10

    threads = [threading.Thread(target=thread_body, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []

    mine = worker_threads() - before
    assert len(mine) == 1  # one worker thread for the store, whatever the loops and threads

    async def check() -> None:
        assert len(await store.list_sessions()) == 6
        assert (await store.verify_audit()).ok
        await store.close()

    asyncio.run(check())
    assert not any(t.is_alive() for t in mine)


def test_team_run_sync_from_two_threads_on_one_store(db: Path) -> None:
    store = SQLiteStore(url(db))
    model = ScriptedModel(lambda request: ScriptedModel.say(f"hello from {request.agent}"))
    team = Team([Agent(name="desk")], entry="desk", store=store, model=model)
    results: dict[str, list[str]] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def conversation(sid: str) -> None:
        try:
            barrier.wait()
            results[sid] = [team.run_sync(f"ask {i}", session_id=sid).status for i in range(5)]
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=conversation, args=(f"s_{i}",)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert results == {"s_0": ["completed"] * 5, "s_1": ["completed"] * 5}

    async def check() -> None:
        for sid in results:
            got = await store.get_session(sid)
            assert got is not None and got.version == 5
            users = [m.content for m in await store.get_messages(sid) if m.role == "user"]
            assert users == [f"ask {i}" for i in range(5)]
        assert (await store.verify_audit()).ok
        await store.close()

    asyncio.run(check())


# ---------------------------------------------------------------- closing


async def test_close_waits_for_queued_work_and_ends_the_thread(db: Path) -> None:
    store = SQLiteStore(url(db))
    before = worker_threads()
    recs = [SessionRecord(f"s_{i}") for i in range(10)]
    tasks = [asyncio.create_task(store.commit_run(r, *a_run(r.session_id, 1))) for r in recs]
    await asyncio.sleep(0)  # all queued
    mine = worker_threads() - before
    assert len(mine) == 1
    await store.close()
    await asyncio.gather(*tasks)  # every commit queued before close completed
    assert all(r.version == 1 for r in recs)
    assert not any(t.is_alive() for t in mine)

    with pytest.raises(StoreError, match="closed"):
        await store.get_session("s_0")
    with pytest.raises(StoreError, match="closed"):
        await store.commit_run(SessionRecord("s_new"), [], [])
    await store.close()  # harmless

    again = SQLiteStore(url(db))
    try:
        assert len(await again.list_sessions()) == 10
    finally:
        await again.close()


def test_a_store_closes_in_another_event_loop_than_it_was_used_in(db: Path) -> None:
    store = SQLiteStore(url(db))
    rec = SessionRecord("s_1")
    asyncio.run(store.commit_run(rec, *a_run("s_1", 1)))
    asyncio.run(store.commit_run(rec, *a_run("s_1", 2)))
    asyncio.run(store.close())
    with pytest.raises(StoreError, match="closed"):
        asyncio.run(store.get_session("s_1"))
