"""What is particular to the Redis store (the shared suites run on it through the `store`
fixture): the audit chain under concurrent writers, dropped connections, compare-and-set
across store objects, an unreachable server, the key prefix, cancellation and event loops."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from tests.services import REDIS, require_service

import baton.backends.redis_store as redis_store
from baton.backends import open_store, write_with_retry
from baton.backends.base import SessionRecord
from baton.backends.redis_store import RedisStore
from baton.core.errors import ConfigError, ConflictError, StoreError
from baton.core.events import EscalationCard, Event, RunStarted, ToolCalled
from baton.core.messages import Message

pytestmark = pytest.mark.services

REDIS_URL = f"redis://{REDIS[0]}:{REDIS[1]}/0"


def fresh_prefix() -> str:
    return f"t_{uuid.uuid4().hex[:12]}:"


@pytest.fixture
async def raw() -> AsyncIterator[Any]:
    """A plain client, to look at (and tamper with) what the store wrote."""
    require_service("Redis", REDIS)
    client = aioredis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
async def prefix(raw: Any) -> AsyncIterator[str]:
    """A key prefix of one test's own, whose keys are deleted after it."""
    p = fresh_prefix()
    try:
        yield p
    finally:
        keys = [k async for k in raw.scan_iter(match=p + "*", count=1000)]
        if keys:
            await raw.delete(*keys)


async def keys_under(raw: Any, prefix: str) -> set[str]:
    return {k async for k in raw.scan_iter(match=prefix + "*", count=1000)}


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


async def test_the_audit_chain_is_whole_after_concurrent_commits_from_two_stores(
    prefix: str, raw: Any
) -> None:
    a, b = RedisStore(REDIS_URL, prefix=prefix), RedisStore(REDIS_URL, prefix=prefix)
    sessions, turns = 12, 3

    async def converse(store: RedisStore, i: int) -> None:
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
        # two events per event commit (the last carrying the messages), one record otherwise
        assert result.checked == len(records) == sessions * (2 + 1 + 2)
        assert result.events == sessions * 4 and result.messages == sessions * turns * 2
        assert [r.session_id for r in await a.audit_records("s_3")] == ["s_3"] * 5
        assert [r.seq for r in await a.audit_records(limit=2)] == [len(records) - 1, len(records)]
        assert await b.get_events() == [e for e in await a.get_events()]

        # a record edited in Redis is named, with its position
        key = f"{prefix}audit"
        original = await raw.hget(key, "7")
        forged = json.loads(original)
        forged["trace_id"] = "tr_forged"
        await raw.hset(key, "7", json.dumps(forged, ensure_ascii=False))
        bad = await b.verify_audit()
        assert not bad.ok and (bad.tamper, bad.first_bad_seq) == ("edited", 7)
        await raw.hset(key, "7", "not json at all")
        bad = await a.verify_audit()
        assert not bad.ok and (bad.tamper, bad.first_bad_seq) == ("edited", 7)
        await raw.hset(key, "7", original)
        assert (await a.verify_audit()).ok

        # so is an event whose JSON was changed, and one that was deleted
        event = json.loads(await raw.hget(f"{prefix}ev", "3"))
        event["agent"] = "forger"
        await raw.hset(f"{prefix}ev", "3", json.dumps(event, ensure_ascii=False))
        bad = await a.verify_audit()
        assert not bad.ok and (bad.table, bad.row, bad.tamper) == ("events", 3, "edited")
        await raw.hdel(f"{prefix}ev", "3")
        bad = await a.verify_audit()
        assert not bad.ok and (bad.table, bad.tamper) == ("events", "deleted")
    finally:
        await a.close()
        await b.close()


async def test_a_keyed_chain_verifies_only_with_its_key(prefix: str) -> None:
    keyed = RedisStore(REDIS_URL, prefix=prefix, audit_key="evidence-key")
    plain = RedisStore(REDIS_URL, prefix=prefix)
    try:
        await keyed.commit_run(SessionRecord("s_k"), [], run_events("s_k", "run_1"))
        assert (await keyed.verify_audit()).keyed == 2
        result = await plain.verify_audit()
        assert not result.ok and "audit key" in (result.problem or "")
    finally:
        await keyed.close()
        await plain.close()


async def kill_connections(raw: Any, name: str) -> int:
    """Kill the server side of every connection named `name` (CLIENT KILL ID), leaving other
    clients of the server alone."""
    killed = 0
    for client in await raw.client_list():
        if client.get("name") == name:
            killed += await raw.client_kill_filter(_id=client["id"])
    return killed


async def test_killed_connections_are_replaced_on_the_next_call(prefix: str, raw: Any) -> None:
    name = f"baton-{uuid.uuid4().hex[:8]}"
    store = RedisStore(f"{REDIS_URL}?client_name={name}", prefix=prefix)
    rec = SessionRecord("s_1")
    try:
        await store.commit_run(rec, [Message(role="user", content="一")], [])
        assert await kill_connections(raw, name) >= 1
        await store.commit_run(rec, [Message(role="user", content="二")], [])  # reconnects
        got = await store.get_session("s_1")
        assert got is not None and got.version == rec.version == 2

        # connections killed while calls are in flight: each call succeeds or says why
        for round_ in range(5):
            reads = [store.get_messages("s_1") for _ in range(20)]
            results = await asyncio.gather(
                *reads, kill_connections(raw, name), return_exceptions=True
            )
            for r in results[:-1]:
                if isinstance(r, BaseException):
                    assert isinstance(r, StoreError) and "Redis at" in str(r), r
                else:
                    assert [m.content for m in r] == ["一", "二"]
            await store.commit_run(rec, [], [])  # the next call works
            assert rec.version == 3 + round_

        # the client's pool disconnected under it: the next call connects again
        await store._client().redis.connection_pool.disconnect()
        assert [m.content for m in await store.get_messages("s_1")] == ["一", "二"]
    finally:
        await store.close()


N_WRITERS, INCREMENTS = 8, 25


async def test_concurrent_writers_on_two_stores_lose_no_increment(prefix: str) -> None:
    a, b = RedisStore(REDIS_URL, prefix=prefix), RedisStore(REDIS_URL, prefix=prefix)

    async def writer(store: RedisStore, i: int) -> int:
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
        met = await asyncio.gather(*(writer(a if i % 2 else b, i) for i in range(N_WRITERS)))
        total = N_WRITERS * INCREMENTS
        entry = await b.read_entry("计数板", "count")
        assert entry is not None
        assert (entry.value, entry.version, entry.seq) == (total, total, total)
        assert sum(met) > 0  # the writers did collide
        assert [e.seq for e in await a.board_changes("计数板")] == [total]
    finally:
        await a.close()
        await b.close()


async def test_an_unreachable_server_gives_a_clear_store_error() -> None:
    store = RedisStore("redis://127.0.0.1:1/0", prefix=fresh_prefix())  # connects to nothing
    try:
        with pytest.raises(StoreError) as info:
            await store.get_session("s_1")
        message = str(info.value)
        assert "Redis at 127.0.0.1:1 is unreachable" in message
        assert "during get_session" in message and "start it or fix the store URL" in message
        assert not isinstance(info.value, ConflictError)
        rec = SessionRecord("s_1")
        with pytest.raises(StoreError, match=r"unreachable .* during commit_run"):
            await store.commit_run(rec, [Message(role="user", content="hi")], [])
        assert rec.version == 0
    finally:
        await store.close()
    with pytest.raises(StoreError, match="closed"):
        await store.get_session("s_1")


async def test_a_unix_socket_url_with_a_prefix_reaches_the_socket() -> None:
    store = RedisStore("unix:///nowhere/redis.sock?prefix=p1&db=0")
    try:
        assert store.prefix == "p1"
        with pytest.raises(StoreError, match=r"/nowhere/redis\.sock"):  # the socket, not a URL
            await store.get_session("s_1")
    finally:
        await store.close()


async def test_drop_removes_only_its_own_prefix(raw: Any) -> None:
    base = fresh_prefix()[:-1]
    # unescaped, the first prefix would be a glob pattern matching the second one's keys
    mine, theirs = (
        RedisStore(REDIS_URL, prefix=f"{base}[x]*:"),
        RedisStore(REDIS_URL, prefix=f"{base}x:"),
    )
    try:
        for store in (mine, theirs):
            await store.commit_run(SessionRecord("s_1"), [], run_events("s_1", "run_1"))
            await store.write_entry("b", "k", "值", 0)
            assert await store.acquire_lease("k", "worker-a", 30)
        before = await keys_under(raw, f"{base}x:")
        assert before and await keys_under(raw, f"{base}[[]x]")
        await mine.drop()
        assert await mine.get_session("s_1") is None
        assert await mine.read_board("b") == {}
        assert not [k async for k in raw.scan_iter(match=f"{base}[[]x]*", count=1000)]
        assert await keys_under(raw, f"{base}x:") == before
        got = await theirs.get_session("s_1")
        assert got is not None and got.version == 1
        await mine.commit_run(SessionRecord("s_1"), [], run_events("s_1", "run_2"))
        assert (await mine.verify_audit()).ok  # a dropped store starts a new chain
    finally:
        await mine.drop()
        await theirs.drop()
        await mine.close()
        await theirs.close()


async def test_a_cancelled_commit_completes_and_its_record_knows(prefix: str) -> None:
    store = RedisStore(REDIS_URL, prefix=prefix)
    try:
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


async def test_a_retried_write_is_applied_once(
    prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write sent again under its token (what the client does when a reply is lost on a
    dropped connection) returns the first result instead of writing again."""
    store = RedisStore(REDIS_URL, prefix=prefix)
    try:
        monkeypatch.setattr(redis_store, "_token", lambda: "same-token")
        card = EscalationCard(session_id="s_1", trace_id="t", path=["triage"], reasons=["max_hops"])
        first = await store.push_human(card)
        assert await store.push_human(card) == first
        assert [t.id for t in await store.list_human()] == [first]
        monkeypatch.setattr(redis_store, "_token", lambda: "another-token")
        entry = await store.write_entry("b", "k", 1, 0)
        again = await store.write_entry("b", "k", 1, 0)  # not a conflict: the same write
        assert (again.version, again.seq) == (entry.version, entry.seq) == (1, 1)
    finally:
        await store.close()


def test_a_store_serves_one_event_loop_after_another() -> None:
    require_service("Redis", REDIS)
    store = RedisStore(REDIS_URL, prefix=fresh_prefix())
    rec = SessionRecord("s_l")
    try:
        asyncio.run(store.commit_run(rec, [], []))  # as `team.run_sync` does, a loop per call
        asyncio.run(store.commit_run(rec, [], []))
        got = asyncio.run(store.get_session("s_l"))
        assert got is not None and got.version == 2
    finally:
        asyncio.run(store.drop())
        asyncio.run(store.close())


async def test_lone_surrogates_are_refused_and_nothing_is_written(prefix: str) -> None:
    store = RedisStore(REDIS_URL, prefix=prefix)
    try:
        rec = SessionRecord("s_u", state={"备注": "坏\ud800文本"})
        with pytest.raises(StoreError, match="lone surrogate"):
            await store.commit_run(rec, [], [])
        assert rec.version == 0 and await store.get_session("s_u") is None
        rec.state = {"备注": "好文本"}
        await store.commit_run(rec, [], [])
        got = await store.get_session("s_u")
        assert got is not None and got.state == {"备注": "好文本"}
    finally:
        await store.close()


async def test_open_store_and_the_prefix_in_the_url(prefix: str) -> None:
    store = open_store(f"{REDIS_URL}?prefix={prefix}")
    try:
        assert isinstance(store, RedisStore) and store.prefix == prefix and store.shared
        await store.commit_run(SessionRecord("s_1"), [], [])
        same = RedisStore(REDIS_URL, prefix=prefix)
        assert await same.get_session("s_1") is not None
        await same.close()
    finally:
        await store.close()
    with pytest.raises(ConfigError, match="give it in one place"):
        RedisStore(f"{REDIS_URL}?prefix=a:", prefix="b:")
    with pytest.raises(ConfigError, match="non-empty key prefix"):
        RedisStore(REDIS_URL, prefix="")
    with pytest.raises(ConfigError, match="bad Redis URL"):
        RedisStore("http://127.0.0.1:6379")
    assert "secret" not in repr(RedisStore("redis://:secret@127.0.0.1:6379/0"))
