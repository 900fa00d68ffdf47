"""`PostgresStore.commit_run` in one statement (`baton.backends._postgres_commit`): one round
trip when the chain's tip is the one this store saw last; the locked transaction when another
writer moved it; never a forked chain, a lost or doubled row, or rows out of chain order."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest
from tests.backends.test_postgres import POSTGRES_URL, run_events

from baton.backends.base import Fence, KeptSnapshot, SessionRecord, Snapshot
from baton.backends.postgres import PostgresStore
from baton.core.errors import ConflictError
from baton.core.messages import Message
from baton.testing.kit import make_checkpoint

pytestmark = pytest.mark.services


def count_statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement asyncpg sends from now on (BEGIN and COMMIT included)."""
    sent: list[str] = []
    for name in ("execute", "fetch", "fetchrow", "fetchval", "executemany"):
        original = getattr(asyncpg.Connection, name)

        def wrap(original: Any = original) -> Any:
            async def counted(self: Any, query: str, *args: Any, **kw: Any) -> Any:
                sent.append(query.split(None, 1)[0].upper())
                return await original(self, query, *args, **kw)

            return counted

        monkeypatch.setattr(asyncpg.Connection, name, wrap())
    return sent


async def test_a_commit_after_the_first_is_one_statement(
    schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = PostgresStore(POSTGRES_URL, schema=schema)
    try:
        rec = SessionRecord("s_1")
        await store.commit_run(rec, [Message(role="user", content="一")], run_events("s_1", "r1"))
        sent = count_statements(monkeypatch)
        cp = make_checkpoint("s_1", "r2", 3)
        messages = [Message(role="user", content="二"), Message(role="assistant", content="三")]
        await store.commit_run(rec, messages, run_events("s_1", "r2", 3), checkpoint=cp)
        assert sent == ["WITH"] and rec.version == 2
        monkeypatch.undo()
        got = await store.get_checkpoint("s_1")
        assert got is not None and (got.run_id, got.seq) == ("r2", 3)
        assert [m.content for m in await store.get_messages("s_1")] == ["一", "二", "三"]
        assert len(await store.get_events(session_id="s_1")) == 5
        await store.commit_run(rec, [], [], run_id="r2")  # drops the run's checkpoint
        assert await store.get_checkpoint("s_1") is None
        assert (await store.verify_audit()).ok
    finally:
        monkeypatch.undo()
        await store.close()


async def test_a_stale_version_writes_nothing(schema: str) -> None:
    store = PostgresStore(POSTGRES_URL, schema=schema)
    try:
        rec = SessionRecord("s_1")
        await store.commit_run(rec, [], run_events("s_1", "r1"))
        stale = SessionRecord("s_1")  # version 0: the session is at 1
        stale.version = 0
        fresh = SessionRecord("s_2")
        await store.commit_run(fresh, [], run_events("s_2", "r0"))  # the tip is this store's
        with pytest.raises(ConflictError, match="version"):
            await store.commit_run(
                stale, [Message(role="user", content="x")], run_events("s_1", "r2")
            )
        assert stale.version == 0
        assert [m.content for m in await store.get_messages("s_1")] == []
        assert len(await store.get_events(session_id="s_1")) == 2
        assert (await store.verify_audit()).ok
    finally:
        await store.close()


async def test_two_stores_committing_at_once_keep_one_chain_in_order(schema: str) -> None:
    """Two processes' stores commit concurrently, each from the tip it saw last: the chain
    stays one (verified), every commit lands once, and messages and events are numbered in
    chain order."""
    a = PostgresStore(POSTGRES_URL, schema=schema)
    b = PostgresStore(POSTGRES_URL, schema=schema)
    try:
        sessions = {name: SessionRecord(name) for name in ("s_a", "s_b")}

        async def commits(store: PostgresStore, sid: str) -> None:
            rec = sessions[sid]
            for i in range(15):
                msg = [Message(role="user", content=f"{sid}:{i}")]
                await store.commit_run(rec, msg, run_events(sid, f"{sid}-r{i}"))

        await asyncio.gather(commits(a, "s_a"), commits(b, "s_b"))
        assert sessions["s_a"].version == sessions["s_b"].version == 15
        assert (await a.verify_audit()).ok
        conn = await asyncpg.connect(POSTGRES_URL)
        try:
            # each audit record names its event; events and messages numbered in chain order
            order = await conn.fetch(
                f'SELECT a.seq AS chain, e.seq AS row FROM "{schema}".audit a '
                f'JOIN "{schema}".events e ON e.id = a.event_id ORDER BY a.seq'
            )
            rows = [r["row"] for r in order]
            assert len(rows) == 60 and rows == sorted(rows)
        finally:
            await conn.close()
        for sid in sessions:
            got = [m.content for m in await a.get_messages(sid)]
            assert got == [f"{sid}:{i}" for i in range(15)]
    finally:
        await a.close()
        await b.close()


@pytest.mark.parametrize("after", [False, True], ids=["before-it-ran", "after-it-ran"])
async def test_a_one_statement_commit_whose_connection_dies_is_stored_exactly_once(
    schema: str, monkeypatch: pytest.MonkeyPatch, after: bool
) -> None:
    store = PostgresStore(POSTGRES_URL, schema=schema)
    fetchrow = asyncpg.Connection.fetchrow
    kills: list[str] = []

    async def dying(self: Any, query: str, *args: Any, **kw: Any) -> Any:
        fatal = query.startswith("WITH saved") and not kills
        if fatal and not after:
            kills.append(query)
            await self.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        result = await fetchrow(self, query, *args, **kw)
        if fatal and after:  # it ran and committed; its answer is lost with the connection
            kills.append(query)
            await self.execute("SELECT pg_terminate_backend(pg_backend_pid())")
            await fetchrow(self, "SELECT 1")  # raises: the connection is gone
        return result

    try:
        rec = SessionRecord("s_1")
        await store.commit_run(rec, [Message(role="user", content="一")], run_events("s_1", "r1"))
        monkeypatch.setattr(asyncpg.Connection, "fetchrow", dying)
        await store.commit_run(rec, [Message(role="user", content="二")], run_events("s_1", "r2"))
        monkeypatch.undo()
        assert len(kills) == 1 and rec.version == 2
        assert [m.content for m in await store.get_messages("s_1")] == ["一", "二"]
        assert len(await store.get_events(session_id="s_1")) == 4
        assert (await store.verify_audit()).ok
    finally:
        monkeypatch.undo()
        await store.close()


async def test_a_fenced_checkpoint_with_or_without_a_snapshot_is_one_statement(
    schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = PostgresStore(POSTGRES_URL, schema=schema)
    try:
        await store.get_session("s_1")  # connected and migrated
        fence = Fence("session|s_1", "worker-a", 30)
        sent = count_statements(monkeypatch)
        assert await store.put_checkpoint_fenced(make_checkpoint("s_1", "r1", 1), fence)
        assert sent == ["WITH"]
        shot = KeptSnapshot(Snapshot("s_1", "a", "r1", 1, None, {"n": 1}), keep_last=3)
        assert await store.put_checkpoint_fenced(make_checkpoint("s_1", "r1", 2), fence, [shot])
        assert sent == ["WITH", "WITH"]
        assert await store.acquire_lease("k", "worker-a", 30)
        await store.release_lease("k", "worker-a")
        assert sent == ["WITH", "WITH", "INSERT", "DELETE"]  # no BEGIN, no COMMIT
    finally:
        monkeypatch.undo()
        await store.close()


async def test_a_commit_after_another_process_committed_starts_again_from_the_new_tip(
    schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = PostgresStore(POSTGRES_URL, schema=schema)
    b = PostgresStore(POSTGRES_URL, schema=schema)
    try:
        rec = SessionRecord("s_a")
        await a.commit_run(rec, [], run_events("s_a", "r1"))
        await b.commit_run(SessionRecord("s_b"), [], run_events("s_b", "r1"))  # the tip moves
        sent = count_statements(monkeypatch)
        await a.commit_run(rec, [Message(role="user", content="再")], run_events("s_a", "r2"))
        # the statement from the old tip wrote nothing and said where the tip is: once more
        assert sent == ["WITH", "WITH"] and rec.version == 2
        monkeypatch.undo()
        assert (await a.verify_audit()).ok
        assert [m.content for m in await a.get_messages("s_a")] == ["再"]
    finally:
        monkeypatch.undo()
        await a.close()
        await b.close()
