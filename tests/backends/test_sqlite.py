"""Behaviour only the SQLite backend has: the file, WAL, sharing between stores, errors."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

from baton import Agent, ScriptedModel, Team
from baton.backends import SQLiteStore, open_store
from baton.backends.base import SessionRecord
from baton.backends.sqlite import SCHEMA_VERSION
from baton.core.errors import ConfigError, StoreError
from baton.core.events import RunStarted
from baton.core.messages import Message


def url(path: Path) -> str:
    """The store URL of a file path."""
    return f"sqlite:///{path}"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Path of a fresh database file."""
    return tmp_path / "baton.db"


async def test_wal_mode_and_schema_version(db: Path) -> None:
    store = SQLiteStore(url(db))
    try:
        raw = sqlite3.connect(db)
        try:
            assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
            tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master")}
        finally:
            raw.close()
        assert {"sessions", "messages", "events", "human_queue", "locks"} <= tables
        assert store.url == url(db)
        assert store.path == str(db)
    finally:
        await store.close()


async def test_two_stores_on_one_file_see_each_other(db: Path) -> None:
    a, b = SQLiteStore(url(db)), SQLiteStore(url(db))
    try:
        rec = SessionRecord("s_1", holder="billing", state={"order_id": "ORD-1"})
        msg = Message(role="user", content="hi")
        ev = RunStarted(trace_id="tr_1", session_id="s_1", run_id="run_1", message="hi")
        await a.commit_run(rec, [msg], [ev])
        got = await b.get_session("s_1")
        assert got is not None and got.state == {"order_id": "ORD-1"}
        assert await b.get_messages("s_1") == [msg]
        assert await b.get_events(trace_id="tr_1") == [ev]

        rec.holder = "tech_support"
        await b.commit_run(rec, [], [])
        again = await a.get_session("s_1")
        assert again is not None and again.holder == "tech_support"

        assert await a.claim_lock("s_1|billing|fp", 30) is True
        assert await b.claim_lock("s_1|billing|fp", 30) is False
        assert await b.claim_lock("s_1|tech|fp", 30) is True
        assert await a.claim_lock("s_1|tech|fp", 30) is False
    finally:
        await a.close()
        await b.close()


def test_concurrent_claims_from_many_connections_admit_one(db: Path) -> None:
    stores = [SQLiteStore(url(db)) for _ in range(8)]
    barrier = threading.Barrier(len(stores))
    results: list[bool] = []
    lock = threading.Lock()

    def claim(store: SQLiteStore) -> None:
        barrier.wait()
        ok = asyncio.run(store.claim_lock("hot-key", 30))
        with lock:
            results.append(ok)

    threads = [threading.Thread(target=claim, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in stores:
        asyncio.run(s.close())
    assert sorted(results) == [False] * 7 + [True]


async def test_expired_locks_are_pruned(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("baton.backends.sqlite._PRUNE_EVERY", 3)
    store = SQLiteStore(url(db))
    try:
        assert await store.claim_lock("old", 0.0)
        assert await store.claim_lock("live", 30)
        assert await store.claim_lock("third", 30)  # third claim prunes the expired "old"
        raw = sqlite3.connect(db)
        try:
            keys = {r[0] for r in raw.execute("SELECT key FROM locks")}
        finally:
            raw.close()
        assert keys == {"live", "third"}
    finally:
        await store.close()


async def test_commit_run_is_one_transaction(db: Path) -> None:
    store = SQLiteStore(url(db))
    try:
        rec = SessionRecord("s_1", holder="triage", state={"a": 1})
        msg = Message(role="user", content="hi")
        await store.commit_run(rec, [msg], [])
        rec.holder, rec.state = "billing", {"a": 2}
        ev = RunStarted(trace_id="tr_2", session_id="s_1", run_id="run_2", message="again")
        fresh = Message(role="user", content="again")
        with pytest.raises(StoreError, match="same id"):
            await store.commit_run(rec, [fresh, msg], [ev])  # msg's id is already stored
        got = await store.get_session("s_1")
        assert got is not None and (got.holder, got.state) == ("triage", {"a": 1})
        assert await store.get_messages("s_1") == [msg]
        assert await store.get_events(session_id="s_1") == []
        # the connection is usable after the rollback
        await store.commit_run(rec, [fresh], [ev])
        assert await store.get_messages("s_1") == [msg, fresh]
    finally:
        await store.close()


async def test_created_at_is_kept_from_the_first_commit(db: Path) -> None:
    store = SQLiteStore(url(db))
    try:
        await store.commit_run(SessionRecord("s_1", created_at=1.0, updated_at=1.0), [], [])
        await store.commit_run(SessionRecord("s_1", created_at=5.0, updated_at=6.0), [], [])
        got = await store.get_session("s_1")
        assert got is not None and (got.created_at, got.updated_at) == (1.0, 6.0)
    finally:
        await store.close()


def _team(store: str, model: ScriptedModel) -> Team:
    triage = Agent(
        name="triage",
        instructions="You are the front desk.",
        handoffs=("billing",),
    )
    billing = Agent(name="billing", instructions="You are the billing desk.")
    return Team([triage, billing], entry="triage", store=store, model=model)


async def test_new_team_on_the_same_file_continues_the_session(db: Path) -> None:
    order = "ORD-202607-99"
    first = ScriptedModel(
        {
            "triage": [
                ScriptedModel.call(
                    "transfer_to_billing",
                    reason="billing question",
                    objective="Answer the invoice question",
                    state={"order_id": order},
                )
            ],
            "billing": [ScriptedModel.say(f"The invoice for {order} is issued.")],
        }
    )
    team1 = _team(url(db), first)
    try:
        r1 = await team1.run(f"where is the invoice for {order}?", session_id="s_cont")
    finally:
        await team1.store.close()
    assert r1.status == "completed", r1.error
    assert r1.path == ["triage", "billing"]

    # a different process would build its own team: nothing is shared but the file
    second = ScriptedModel({"billing": [ScriptedModel.say("It was sent to your e-mail.")]})
    team2 = _team(url(db), second)
    try:
        r2 = await team2.run("and where can I download it?", session_id="s_cont")
        session = await team2.session("s_cont")
        messages = await team2.store.get_messages("s_cont")
    finally:
        await team2.store.close()
    assert r2.status == "completed", r2.error
    assert r2.path[0] == "billing"
    assert r2.output == "It was sent to your e-mail."
    assert [req.agent for req in second.requests] == ["billing"]
    system = second.requests[0].messages[0]
    assert system.role == "system"
    assert order in (system.content or "")
    assert session is not None
    assert session.holder == "billing"
    assert session.state["order_id"] == order
    assert [m.content for m in messages if m.role == "user"] == [
        f"where is the invoice for {order}?",
        "and where can I download it?",
    ]


async def test_open_store_resolves_relative_urls_and_creates_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_store("sqlite:///.baton/sub/baton.db")
    try:
        assert isinstance(store, SQLiteStore)
        assert store.path == str(tmp_path / ".baton" / "sub" / "baton.db")
        assert (tmp_path / ".baton" / "sub" / "baton.db").is_file()
    finally:
        await store.close()


async def test_memory_database_is_private_to_the_store() -> None:
    a, b = SQLiteStore("sqlite:///:memory:"), SQLiteStore("sqlite:///:memory:")
    try:
        await a.commit_run(SessionRecord("s_1", state={"x": 1}), [], [])
        got = await a.get_session("s_1")
        assert got is not None and got.state == {"x": 1}
        assert await b.get_session("s_1") is None
    finally:
        await a.close()
        await b.close()


@pytest.mark.parametrize(
    "bad", ["sqlite://relative.db", "sqlite:///", "sqlite:///dir/", "postgres:///x.db"]
)
def test_malformed_urls_raise_config_error(bad: str) -> None:
    with pytest.raises(ConfigError, match="sqlite:///"):
        SQLiteStore(bad)


def test_unusable_directory_raises_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where a directory should be")
    with pytest.raises(StoreError, match="check the path") as info:
        SQLiteStore(url(blocker / "sub" / "baton.db"))
    assert str(blocker) in str(info.value)


def test_directory_as_database_raises_store_error(tmp_path: Path) -> None:
    target = tmp_path / "adir"
    target.mkdir()
    with pytest.raises(StoreError, match=r"permissions|not a directory") as info:
        SQLiteStore(url(target))
    assert str(target) in str(info.value)


def test_file_that_is_not_a_database_raises_store_error(db: Path) -> None:
    db.write_bytes(b"this is not a SQLite database, just some text " * 100)
    with pytest.raises(StoreError, match="delete the file") as info:
        SQLiteStore(url(db))
    assert str(db) in str(info.value)


def test_newer_schema_version_is_refused(db: Path) -> None:
    raw = sqlite3.connect(db)
    raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    raw.close()
    with pytest.raises(StoreError, match="upgrade Baton"):
        SQLiteStore(url(db))


async def test_corrupt_rows_raise_store_error(db: Path) -> None:
    store = SQLiteStore(url(db))
    try:
        rec = SessionRecord("s_1", state={"a": 1})
        ev = RunStarted(trace_id="tr_1", session_id="s_1", run_id="run_1", message="hi")
        await store.commit_run(rec, [Message(role="user", content="hi")], [ev])
        raw = sqlite3.connect(db)
        with raw:
            raw.execute("UPDATE sessions SET state = '{not json'")
            raw.execute('UPDATE messages SET data = \'{"role": "robot"}\'')
            raw.execute('UPDATE events SET data = \'{"type": "unknown"}\'')
        raw.close()
        with pytest.raises(StoreError, match=r"table 'sessions'.*delete the file"):
            await store.get_session("s_1")
        with pytest.raises(StoreError, match="table 'messages'"):
            await store.get_messages("s_1")
        with pytest.raises(StoreError, match="table 'events'"):
            await store.get_events(session_id="s_1")
    finally:
        await store.close()


async def test_state_that_is_not_json_raises_store_error(db: Path) -> None:
    store = SQLiteStore(url(db))
    try:
        with pytest.raises(StoreError, match="JSON"):
            await store.commit_run(SessionRecord("s_1", state={"when": object()}), [], [])
        assert await store.get_session("s_1") is None
    finally:
        await store.close()


async def test_closed_store_raises_store_error(db: Path) -> None:
    store = SQLiteStore(url(db))
    await store.close()
    await store.close()  # harmless
    with pytest.raises(StoreError, match="closed"):
        await store.get_session("s_1")
