"""What is particular to the PostgreSQL store (the shared suites run on it through the `store`
fixture): the schema in the URL, migrations (concurrent, newer than the code), killed
connections, NUL and lone surrogates, compare-and-set and the audit chain across store
objects, an unreachable server, cancellation and event loops."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from tests.services import POSTGRES, require_service

from baton.backends import open_store, write_with_retry
from baton.backends.base import Checkpoint, Fence, KeptSnapshot, SessionRecord, Snapshot
from baton.backends.postgres import SCHEMA_VERSION, PostgresStore
from baton.core.errors import ConfigError, ConflictError, StoreError
from baton.core.events import EscalationCard, Event, RunStarted, ToolCalled
from baton.core.messages import Message
from baton.testing.kit import make_checkpoint

pytestmark = pytest.mark.services

POSTGRES_URL = f"postgresql://postgres@{POSTGRES[0]}:{POSTGRES[1]}/test"


def fresh_schema() -> str:
    return f"t_{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def raw() -> AsyncIterator[Any]:
    """A plain connection, to look at (and tamper with) what the store wrote."""
    require_service("PostgreSQL", POSTGRES)
    conn = await asyncpg.connect(POSTGRES_URL)
    try:
        yield conn
    finally:
        await conn.close()


async def schema_exists(raw: Any, name: str) -> bool:
    return bool(await raw.fetchval("SELECT 1 FROM pg_namespace WHERE nspname = $1", name))


def run_events(sid: str, run: str, n: int = 2) -> list[Event]:
    base: dict[str, Any] = {"trace_id": f"tr_{run}", "session_id": sid, "run_id": run}
    out: list[Event] = [RunStarted(**base, message="发票 ORD-202607-99 在哪里？")]
    for i in range(1, n):
        out.append(
            ToolCalled(
                **base,
                agent="billing",
                tool="query_invoice",
                call_id=f"c{i}",
                arguments={"order_id": f"ORD-{i}"},
                ok=True,
            )
        )
    return out


# ---------------------------------------------------------------- URL and schema


def test_the_schema_comes_from_the_url_or_the_argument() -> None:
    store = PostgresStore(f"{POSTGRES_URL}?schema=team_a&sslmode=disable")
    assert store.schema == "team_a" and store.shared
    assert store._dsn == f"{POSTGRES_URL}?sslmode=disable"  # Baton's parameter is not sent
    assert PostgresStore(POSTGRES_URL).schema == "baton"
    assert PostgresStore(POSTGRES_URL, schema="team_b").schema == "team_b"
    assert PostgresStore(f"{POSTGRES_URL}?schema=same", schema="same").schema == "same"
    with pytest.raises(ConfigError, match="give it in one place"):
        PostgresStore(f"{POSTGRES_URL}?schema=a", schema="b")
    for bad in ("", "1abc", "a-b", 'x"; DROP TABLE y; --', "a" * 64, "pg_mine"):
        with pytest.raises(ConfigError, match="schema"):
            PostgresStore(POSTGRES_URL, schema=bad)
    with pytest.raises(ConfigError, match="bad PostgreSQL URL"):
        PostgresStore("mysql://127.0.0.1/test")
    with pytest.raises(ConfigError, match="bad PostgreSQL URL"):
        PostgresStore("postgresql://127.0.0.1:port/test")
    with pytest.raises(ConfigError, match="pool_min"):
        PostgresStore(POSTGRES_URL, pool_min=5, pool_max=2)
    secret = PostgresStore("postgresql://li:s3cret@127.0.0.1:5432/test?password=s3cret")
    assert "s3cret" not in repr(secret) and "s3cret" not in secret.where
    assert "li:***@127.0.0.1:5432" in secret.where


async def test_open_store_returns_a_postgres_store(schema: str) -> None:
    for scheme in ("postgresql", "postgres"):
        store = open_store(f"{scheme}://postgres@{POSTGRES[0]}:{POSTGRES[1]}/test?schema={schema}")
        try:
            assert isinstance(store, PostgresStore) and store.schema == schema and store.shared
            rec = SessionRecord(f"s_{scheme}")
            await store.commit_run(rec, [], [])
            same = PostgresStore(POSTGRES_URL, schema=schema)
            got = await same.get_session(f"s_{scheme}")
            await same.close()
            assert got is not None and got.version == 1
        finally:
            await store.close()


# ---------------------------------------------------------------- migrations


async def test_stores_starting_together_migrate_once(schema: str, raw: Any) -> None:
    stores = [PostgresStore(POSTGRES_URL, schema=schema) for _ in range(6)]
    try:
        found = await asyncio.gather(*(s.get_session("s_none") for s in stores))
        assert found == [None] * len(stores)
        rows = await raw.fetch(f'SELECT version FROM "{schema}".schema_version ORDER BY version')
        assert [r["version"] for r in rows] == list(range(1, SCHEMA_VERSION + 1))
        await stores[0].commit_run(SessionRecord("s_1"), [], [])
        again = PostgresStore(POSTGRES_URL, schema=schema)  # an up-to-date schema: no change
        got = await again.get_session("s_1")
        await again.close()
        assert got is not None and got.version == 1
        assert await raw.fetchval(f'SELECT count(*) FROM "{schema}".schema_version') == len(rows)
    finally:
        for s in stores:
            await s.close()


async def test_a_version_2_schema_drops_its_lock_table(schema: str, raw: Any) -> None:
    from baton.backends.postgres import _MIGRATIONS

    await raw.execute(f'CREATE SCHEMA "{schema}"')
    async with raw.transaction():
        await raw.execute(f'SET LOCAL search_path TO "{schema}"')
        await raw.execute(
            "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, "
            "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        for version in (1, 2):  # the released steps, as a version-2 Baton ran them
            for step in _MIGRATIONS[version]:
                await raw.execute(step)
            await raw.execute("INSERT INTO schema_version (version) VALUES ($1)", version)
        await raw.execute("INSERT INTO locks (key, expires_at) VALUES ('k', 1e12)")
        await raw.execute(
            "INSERT INTO sessions (id, state, created_at, updated_at, version) "
            "VALUES ('s_old', '{}', 1.0, 2.0, 1)"
        )
    store = PostgresStore(POSTGRES_URL, schema=schema)
    try:
        got = await store.get_session("s_old")
        assert got is not None and got.version == 1
    finally:
        await store.close()
    rows = await raw.fetch(f'SELECT version FROM "{schema}".schema_version ORDER BY version')
    assert [r["version"] for r in rows] == list(range(1, SCHEMA_VERSION + 1))
    found = await raw.fetchval(
        "SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = $1 AND tablename = 'locks'",
        schema,
    )
    assert found == 0


async def test_a_schema_newer_than_the_code_is_refused(schema: str, raw: Any) -> None:
    store = PostgresStore(POSTGRES_URL, schema=schema)
    try:
        await store.commit_run(SessionRecord("s_1"), [], [])
    finally:
        await store.close()
    await raw.execute(
        f'INSERT INTO "{schema}".schema_version (version) VALUES ($1)', SCHEMA_VERSION + 1
    )
    newer = PostgresStore(POSTGRES_URL, schema=schema)
    try:
        with pytest.raises(StoreError, match="newer than this Baton understands") as info:
            await newer.get_session("s_1")
        assert "upgrade Baton" in str(info.value) and schema in str(info.value)
        with pytest.raises(StoreError, match="upgrade Baton"):
            await newer.commit_run(SessionRecord("s_2"), [], [])
    finally:
        await newer.close()
    assert await raw.fetchval(f'SELECT count(*) FROM "{schema}".sessions') == 1


async def test_drop_removes_only_its_own_schema(raw: Any) -> None:
    mine = PostgresStore(POSTGRES_URL, schema=fresh_schema())
    theirs = PostgresStore(POSTGRES_URL, schema=fresh_schema())
    try:
        await mine.drop()  # never used: nothing to drop, no error
        for store in (mine, theirs):
            await store.commit_run(SessionRecord("s_1"), [], run_events("s_1", "run_1"))
            await store.write_entry("b", "k", "值", 0)
        await mine.drop()
        assert not await schema_exists(raw, mine.schema)
        assert await schema_exists(raw, theirs.schema)
        got = await theirs.get_session("s_1")
        assert got is not None and got.version == 1
        assert await mine.get_session("s_1") is None  # created afresh, empty
        await mine.commit_run(SessionRecord("s_1"), [], run_events("s_1", "run_2"))
        assert (await mine.verify_audit()).ok  # a dropped store starts a new chain
    finally:
        await mine.drop()
        await theirs.drop()
        await mine.close()
        await theirs.close()


# ---------------------------------------------------------------- connections


async def kill_connections(raw: Any, application_name: str) -> int:
    """Terminate the server side of every connection of `application_name`, leaving other
    clients of the server alone."""
    killed = await raw.fetch(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = 'test' AND application_name = $1 AND pid <> pg_backend_pid()",
        application_name,
    )
    return len(killed)


async def test_killed_connections_are_replaced_on_the_next_call(schema: str, raw: Any) -> None:
    name = f"baton-{uuid.uuid4().hex[:8]}"
    store = PostgresStore(f"{POSTGRES_URL}?application_name={name}", schema=schema, pool_max=4)
    rec = SessionRecord("s_1")
    try:
        await store.commit_run(rec, [Message(role="user", content="一")], [])
        assert await kill_connections(raw, name) >= 1
        try:
            await store.commit_run(rec, [Message(role="user", content="二")], [])
        except StoreError as exc:  # this one may meet the dead connection...
            assert "PostgreSQL at" in str(exc)
            await store.commit_run(rec, [Message(role="user", content="二")], [])
        got = await store.get_session("s_1")  # ...the next one works
        assert got is not None and got.version == rec.version == 2

        # killed again, then read: the first read may fail, the one after works
        assert await kill_connections(raw, name) >= 1
        try:
            await store.get_messages("s_1")
        except StoreError as exc:
            assert "PostgreSQL at" in str(exc)
        assert [m.content for m in await store.get_messages("s_1")] == ["一", "二"]

        # connections killed while calls are in flight: each call succeeds or says why
        for round_ in range(3):
            reads = [store.get_messages("s_1") for _ in range(12)]
            results = await asyncio.gather(
                *reads, kill_connections(raw, name), return_exceptions=True
            )
            for r in results[:-1]:
                if isinstance(r, BaseException):
                    assert isinstance(r, StoreError), r
                else:
                    assert isinstance(r, list) and [m.content for m in r] == ["一", "二"]
            for _ in range(2):  # at most one call meets a connection that died meanwhile
                try:
                    await store.commit_run(rec, [], [])
                    break
                except StoreError:
                    continue
            assert rec.version == 3 + round_
    finally:
        await store.close()


async def test_a_write_whose_connection_dies_before_commit_is_made_again_once(
    schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server side of the connection dies in the middle of a transaction (after its
    first statement): the server rolled it back, so the write is made again, once, on a
    fresh connection."""
    store = PostgresStore(POSTGRES_URL, schema=schema)
    fetchval = asyncpg.Connection.fetchval
    kills: list[str] = []

    async def dying(self: Any, query: str, *args: Any, **kw: Any) -> Any:
        result = await fetchval(self, query, *args, **kw)
        if query.startswith(("INSERT INTO board_seqs", "UPDATE sessions")) and not kills:
            kills.append(query)
            await self.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        return result

    try:
        rec = SessionRecord("s_1")
        await store.commit_run(rec, [Message(role="user", content="一")], [])
        monkeypatch.setattr(asyncpg.Connection, "fetchval", dying)
        entry = await store.write_entry("b", "k", "值", 0)
        assert len(kills) == 1 and (entry.version, entry.seq) == (1, 1)
        assert await store.board_changes("b") == [entry]  # written once

        # as a store's first commit, which knows no tip of the audit chain yet: the locked
        # way, a transaction (the one-statement way: test_postgres_commit.py)
        store._chain_tip = None
        kills.clear()
        await store.commit_run(rec, [Message(role="user", content="二")], run_events("s_1", "r"))
        assert len(kills) == 1 and rec.version == 2
        got = await store.get_session("s_1")
        assert got is not None and got.version == 2
        assert [m.content for m in await store.get_messages("s_1")] == ["一", "二"]
        assert len(await store.get_events(session_id="s_1")) == 2
        assert (await store.verify_audit()).ok
    finally:
        monkeypatch.undo()
        await store.close()


async def test_a_connection_lost_during_commit_is_reported_as_unsure(
    schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = PostgresStore(POSTGRES_URL, schema=schema)
    commit = asyncpg.transaction.Transaction.commit

    async def dying(self: Any) -> None:
        await self._connection.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        await commit(self)

    try:
        await store.get_session("s_1")  # connected and migrated
        monkeypatch.setattr(asyncpg.transaction.Transaction, "commit", dying)
        rec = SessionRecord("s_1")
        with pytest.raises(StoreError, match="may or may not be stored") as info:
            await store.commit_run(rec, [Message(role="user", content="hi")], [])
        assert "while commit_run was committing" in str(info.value)
        assert "Read it again" in str(info.value)
        assert rec.version == 0  # not known to be committed
        monkeypatch.undo()
        assert await store.get_session("s_1") is None  # (here, it was not)
        await store.commit_run(rec, [], [])
        assert rec.version == 1
    finally:
        monkeypatch.undo()
        await store.close()


@pytest.mark.parametrize("after", [False, True], ids=["before-it-ran", "after-it-ran"])
async def test_a_fenced_checkpoint_whose_connection_dies_is_stored_exactly_once(
    schema: str, monkeypatch: pytest.MonkeyPatch, after: bool
) -> None:
    """The fenced checkpoint is one statement without BEGIN/COMMIT: when its connection dies
    it is not known whether it ran. The store reads the checkpoint on a fresh connection: there
    (it ran) -> done; not there -> made once more. Either way stored once, lease renewed."""
    store = PostgresStore(POSTGRES_URL, schema=schema)
    fetchrow = asyncpg.Connection.fetchrow
    kills: list[str] = []

    async def dying(self: Any, query: str, *args: Any, **kw: Any) -> Any:
        fenced = "WITH lease AS" in query and not kills
        if fenced and not after:
            kills.append(query)
            await self.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        result = await fetchrow(self, query, *args, **kw)
        if fenced and after:  # it ran and committed; its answer is lost with the connection
            kills.append(query)
            await self.execute("SELECT pg_terminate_backend(pg_backend_pid())")
            await fetchrow(self, "SELECT 1")  # raises: the connection is gone
        return result

    try:
        await store.get_session("s_1")  # connected and migrated
        monkeypatch.setattr(asyncpg.Connection, "fetchrow", dying)
        fence = Fence("session|s_1", "worker-a", 30)
        assert await store.put_checkpoint_fenced(make_checkpoint("s_1", "run_1", 1), fence)
        assert len(kills) == 1
        monkeypatch.undo()
        got = await store.get_checkpoint("s_1")
        assert got is not None and (got.run_id, got.seq) == ("run_1", 1)
        assert not await store.acquire_lease("session|s_1", "worker-b", 30)  # renewed
        assert await store.put_checkpoint_fenced(make_checkpoint("s_1", "run_1", 2), fence)
    finally:
        monkeypatch.undo()
        await store.close()


async def test_a_fenced_snapshot_racing_another_writer_is_saved_again_under_the_lock(
    schema: str, raw: Any
) -> None:
    """The step's snapshot rides in the fenced checkpoint's statement without the thread's
    lock: a writer that takes the same seq meanwhile makes the statement fail on the unique
    (thread_id, seq) index, writing nothing, and the save is made again, locked."""
    store = PostgresStore(POSTGRES_URL, schema=schema)
    fence = Fence("session|s_1", "worker-a", 30)
    first = KeptSnapshot(Snapshot("s_1", "a", "run_1", 1, None, {"n": 1}))
    try:
        assert await store.put_checkpoint_fenced(make_checkpoint("s_1", "run_1", 1), fence, [first])
        other = await asyncpg.connect(POSTGRES_URL)
        tr = other.transaction()
        await tr.start()
        # another writer takes seq 2 of the thread and commits while the save waits on it
        await other.execute(
            f'INSERT INTO "{schema}".snapshots VALUES ($1, $2, 2, $3, 9, NULL, $4, 0)',
            "s_1",
            "elsewhere",
            "run_x",
            "{}",
        )
        second = KeptSnapshot(Snapshot("s_1", "b", "run_1", 2, "a", {"n": 2}))
        saving = asyncio.ensure_future(
            store.put_checkpoint_fenced(make_checkpoint("s_1", "run_1", 2), fence, [second])
        )
        await asyncio.sleep(0.3)
        assert not saving.done()  # waiting on the uncommitted seq 2
        await tr.commit()
        await other.close()
        assert await saving is True
        shots = {s.id: s.seq for s in await store.list_snapshots("s_1")}
        assert shots == {"a": 1, "elsewhere": 2, "b": 3}
        cp = await store.get_checkpoint("s_1")
        assert cp is not None and cp.seq == 2
    finally:
        await store.close()


async def test_an_unreachable_server_gives_a_clear_store_error() -> None:
    store = PostgresStore(
        "postgresql://li:s3cret@127.0.0.1:1/test", schema=fresh_schema(), connect_timeout_s=2
    )
    try:
        with pytest.raises(StoreError) as info:
            await store.get_session("s_1")
        message = str(info.value)
        assert "PostgreSQL at postgresql://li:***@127.0.0.1:1/test is unreachable" in message
        assert "during get_session" in message and "start it or fix the store URL" in message
        assert "s3cret" not in message
        assert not isinstance(info.value, ConflictError)
        rec = SessionRecord("s_1")
        with pytest.raises(StoreError, match=r"unreachable .* during commit_run"):
            await store.commit_run(rec, [Message(role="user", content="hi")], [])
        assert rec.version == 0
    finally:
        await store.close()
    with pytest.raises(StoreError, match="closed"):
        await store.get_session("s_1")


async def test_a_missing_database_is_named(raw: Any) -> None:
    store = PostgresStore(
        f"postgresql://postgres@{POSTGRES[0]}:{POSTGRES[1]}/no_such_db_{uuid.uuid4().hex[:6]}"
    )
    try:
        with pytest.raises(StoreError, match=r"does not exist .* create it"):
            await store.get_session("s_1")
    finally:
        await store.close()


def test_a_store_serves_one_event_loop_after_another() -> None:
    require_service("PostgreSQL", POSTGRES)
    store = PostgresStore(POSTGRES_URL, schema=fresh_schema())
    rec = SessionRecord("s_l")
    try:
        asyncio.run(store.commit_run(rec, [], []))  # as `team.run_sync` does, a loop per call
        asyncio.run(store.commit_run(rec, [], []))
        got = asyncio.run(store.get_session("s_l"))
        assert got is not None and got.version == 2
    finally:
        asyncio.run(store.drop())
        asyncio.run(store.close())


async def test_a_cancelled_commit_completes_and_its_record_knows(schema: str) -> None:
    store = PostgresStore(POSTGRES_URL, schema=schema)
    try:
        await store.get_session("s_c")  # connected and migrated: the commit is quick
        rec = SessionRecord("s_c")
        task = asyncio.ensure_future(
            store.commit_run(rec, [Message(role="user", content="取消")], run_events("s_c", "r"))
        )
        await asyncio.sleep(0)  # the commit is on its way
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        got = await store.get_session("s_c")
        assert got is not None and got.version == rec.version == 1
        assert (await store.verify_audit()).ok
    finally:
        await store.close()


# ---------------------------------------------------------------- text PostgreSQL cannot hold


async def test_lone_surrogates_are_refused_and_nothing_is_written(schema: str) -> None:
    store = PostgresStore(POSTGRES_URL, schema=schema)
    try:
        rec = SessionRecord("s_u", state={"备注": "坏\ud800文本"})
        with pytest.raises(StoreError, match=r"lone surrogate.*nothing was written"):
            await store.commit_run(rec, [Message(role="user", content="hi")], [])
        assert rec.version == 0 and await store.get_session("s_u") is None
        assert await store.get_messages("s_u") == []
        rec.state = {"备注": "好文本"}
        await store.commit_run(rec, [], [])
        got = await store.get_session("s_u")
        assert got is not None and got.state == {"备注": "好文本"}
        with pytest.raises(StoreError, match="lone surrogate"):
            await store.acquire_lease("s_\udc00", "worker", 30)
    finally:
        await store.close()


async def test_nul_in_json_round_trips_and_in_a_name_is_refused(schema: str) -> None:
    store = PostgresStore(POSTGRES_URL, schema=schema)
    try:
        # inside JSON (state, messages, board values) NUL is escaped: stored as it is
        rec = SessionRecord("s_n", state={"k\x00": "v\x00w"})
        await store.commit_run(rec, [Message(role="user", content="a\x00b")], [])
        got = await store.get_session("s_n")
        assert got is not None and got.state == {"k\x00": "v\x00w"}
        assert [m.content for m in await store.get_messages("s_n")] == ["a\x00b"]
        entry = await store.write_entry("b", "k", ["\x00"], 0)
        assert entry.value == ["\x00"] and (await store.read_entry("b", "k")) == entry

        # in a name or id it cannot be stored: refused, nothing written
        bad = SessionRecord("s_\x00")
        with pytest.raises(StoreError, match=r"NUL character .*nothing was written") as info:
            await store.commit_run(bad, [], [])
        assert not isinstance(info.value, ConflictError) and bad.version == 0
        with pytest.raises(StoreError, match="NUL character"):
            await store.write_entry("b", "k\x00", 1, 0)
        assert list(await store.read_board("b")) == ["k"]
        with pytest.raises(StoreError, match="NUL character"):
            await store.put_checkpoint(Checkpoint("s_n", "run\x00", 1, data="{}"))
        assert await store.get_checkpoint("s_n") is None
        with pytest.raises(StoreError, match="NUL character"):
            await store.get_session("s_\x00")
        assert [s.session_id for s in await store.list_sessions()] == ["s_n"]
    finally:
        await store.close()


# ---------------------------------------------------------------- several store objects

N_WRITERS, INCREMENTS = 8, 25


async def test_concurrent_writers_on_three_stores_lose_no_increment(schema: str) -> None:
    stores = [PostgresStore(POSTGRES_URL, schema=schema, pool_max=3) for _ in range(3)]

    async def writer(store: PostgresStore, i: int) -> int:
        met = 0
        for _ in range(INCREMENTS):
            _, conflicts = await write_with_retry(
                store,
                "计数板",
                "count",
                lambda v: (v or 0) + 1,
                writer=f"w{i}",
                attempts=1000,
                backoff_s=0.002,
            )
            met += conflicts
        return met

    try:
        met = await asyncio.gather(*(writer(stores[i % 3], i) for i in range(N_WRITERS)))
        total = N_WRITERS * INCREMENTS
        entry = await stores[0].read_entry("计数板", "count")
        assert entry is not None
        assert (entry.value, entry.version, entry.seq) == (total, total, total)
        assert sum(met) > 0  # the writers did collide
        assert [e.seq for e in await stores[1].board_changes("计数板")] == [total]
    finally:
        for s in stores:
            await s.close()


async def test_two_stores_committing_one_version_one_wins(schema: str) -> None:
    a, b = PostgresStore(POSTGRES_URL, schema=schema), PostgresStore(POSTGRES_URL, schema=schema)
    try:
        for round_ in range(10):
            sid = f"s_{round_}"
            if round_ % 2:  # an existing session: both read version 1
                await a.commit_run(SessionRecord(sid), [], [])
            first, second = await a.get_session(sid), await b.get_session(sid)
            x = first or SessionRecord(sid)
            y = second or SessionRecord(sid)
            x.holder, y.holder = "a", "b"
            results = await asyncio.gather(
                a.commit_run(x, [Message(role="user", content="a")], []),
                b.commit_run(y, [Message(role="user", content="b")], []),
                return_exceptions=True,
            )
            lost = [r for r in results if isinstance(r, BaseException)]
            assert len(lost) == 1 and isinstance(lost[0], ConflictError), results
            got = await a.get_session(sid)
            assert got is not None and got.holder in ("a", "b")
            assert [m.content for m in await b.get_messages(sid)] == [got.holder]
    finally:
        await a.close()
        await b.close()


async def test_the_audit_chain_is_whole_after_concurrent_commits_from_two_stores(
    schema: str, raw: Any
) -> None:
    a, b = PostgresStore(POSTGRES_URL, schema=schema), PostgresStore(POSTGRES_URL, schema=schema)
    sessions, turns = 12, 3

    async def converse(store: PostgresStore, i: int) -> None:
        sid = f"s_{i}"
        rec = SessionRecord(sid)
        for turn in range(turns):
            run = f"run_{i}_{turn}"
            msgs = [
                Message(role="user", content=f"第{turn}个问题", run_id=run),
                Message(role="assistant", content="好的。", agent="billing", run_id=run),
            ]
            events = [] if turn == 1 else run_events(sid, run)  # one commit: messages only
            await store.commit_run(rec, msgs, events, run_id=run)

    try:
        await asyncio.gather(*(converse(a if i % 2 else b, i) for i in range(sessions)))
        result = await a.verify_audit()
        assert result.ok, result.problem
        records = await b.audit_records()
        assert [r.seq for r in records] == list(range(1, len(records) + 1))
        assert result.checked == len(records) == sessions * (2 + 1 + 2)
        assert result.events == sessions * 4 and result.messages == sessions * turns * 2
        assert [r.session_id for r in await a.audit_records("s_3")] == ["s_3"] * 5
        assert [r.seq for r in await a.audit_records(limit=2)] == [len(records) - 1, len(records)]

        # the audit table refuses edits; an edited event or message row is named
        with pytest.raises(asyncpg.RaiseError, match="append-only"):
            await raw.execute(f'UPDATE "{schema}".audit SET trace_id = $1 WHERE seq = 7', "x")
        with pytest.raises(asyncpg.RaiseError, match="append-only"):
            await raw.execute(f'DELETE FROM "{schema}".audit WHERE seq = 7')
        await raw.execute(
            f"UPDATE \"{schema}\".events SET data = replace(data, 'billing', 'forger') "
            "WHERE seq = 2"
        )
        bad = await b.verify_audit()
        assert not bad.ok and (bad.table, bad.row, bad.tamper) == ("events", 2, "edited")
        await raw.execute(
            f"UPDATE \"{schema}\".events SET data = replace(data, 'forger', 'billing') "
            "WHERE seq = 2"
        )
        assert (await a.verify_audit()).ok
        await raw.execute(f'DELETE FROM "{schema}".messages WHERE seq = 5')
        bad = await a.verify_audit()
        assert not bad.ok and (bad.table, bad.tamper) == ("messages", "deleted")
    finally:
        await a.close()
        await b.close()


async def test_a_keyed_chain_verifies_only_with_its_key(schema: str) -> None:
    keyed = PostgresStore(POSTGRES_URL, schema=schema, audit_key="evidence-key")
    plain = PostgresStore(POSTGRES_URL, schema=schema)
    try:
        await keyed.commit_run(SessionRecord("s_k"), [], run_events("s_k", "run_1"))
        assert (await keyed.verify_audit()).keyed == 2
        result = await plain.verify_audit()
        assert not result.ok and "audit key" in (result.problem or "")
    finally:
        await keyed.close()
        await plain.close()


async def test_tickets_and_leases_are_shared_between_stores(schema: str) -> None:
    a, b = PostgresStore(POSTGRES_URL, schema=schema), PostgresStore(POSTGRES_URL, schema=schema)
    try:
        card = EscalationCard(session_id="s_1", trace_id="t", path=["triage"], reasons=["max_hops"])
        ticket_id = await a.push_human(card)
        ann, bob = await a.get_human(ticket_id), await b.get_human(ticket_id)
        assert ann is not None and bob is not None
        ann.status, ann.claimed_by = "claimed", "ann"
        bob.status, bob.claimed_by = "claimed", "bob"
        results = await asyncio.gather(
            a.update_human(ann, expect="open"),
            b.update_human(bob, expect="open"),
            return_exceptions=True,
        )
        assert sum(isinstance(r, ConflictError) for r in results) == 1
        assert await a.get_human(10**30) is None  # not a BIGINT: no such ticket
        leases = await asyncio.gather(
            *(s.acquire_lease("s_1", f"worker-{i}", 30) for i, s in enumerate([a, b] * 4))
        )
        assert sum(leases) == 1
    finally:
        await a.close()
        await b.close()
