"""Behaviour only the SQLite backend has: the file, WAL, sharing between stores, errors."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from baton import Agent, ScriptedModel, Team
from baton.backends import SQLiteStore, open_store
from baton.backends.base import Checkpoint, SessionRecord
from baton.backends.sqlite import _MIGRATIONS, SCHEMA_VERSION
from baton.core.errors import ConfigError, ConflictError, StoreError
from baton.core.events import EscalationCard, RunStarted
from baton.core.messages import Message
from baton.core.tasks import SubTask, Task


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
        assert {
            "sessions",
            "messages",
            "events",
            "human_queue",
            "checkpoints",
            "leases",
            "tasks",
        } <= tables
        assert "locks" not in tables  # dropped by schema 10: nothing claims locks in the store
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

        assert await a.acquire_lease("s_1", "worker-a", 30) is True
        assert await b.acquire_lease("s_1", "worker-b", 30) is False
        assert await b.acquire_lease("s_2", "worker-b", 30) is True
        assert await a.acquire_lease("s_2", "worker-a", 30) is False
    finally:
        await a.close()
        await b.close()


def test_concurrent_leases_from_many_connections_admit_one(db: Path) -> None:
    stores = [SQLiteStore(url(db)) for _ in range(8)]
    barrier = threading.Barrier(len(stores))
    results: list[bool] = []
    lock = threading.Lock()

    def claim(store: SQLiteStore) -> None:
        barrier.wait()
        ok = asyncio.run(store.acquire_lease("hot-key", f"worker-{id(store)}", 30))
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
        again = SessionRecord("s_1", created_at=5.0, updated_at=6.0, version=1)
        await store.commit_run(again, [], [])
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


# ---------------------------------------------------------------- resumable runs


def test_file_store_is_shared_and_memory_database_is_not(db: Path) -> None:
    assert SQLiteStore.shared is True
    store, private = SQLiteStore(url(db)), SQLiteStore("sqlite:///:memory:")
    try:
        assert store.shared is True
        assert private.shared is False
    finally:
        asyncio.run(store.close())
        asyncio.run(private.close())


class JsonState:
    """A run state: the SQLite store keeps `to_json()` and never this object."""

    def to_json(self) -> str:
        return json.dumps({"step": 7, "note": "发票"}, ensure_ascii=False)


async def test_checkpoint_is_stored_as_json(db: Path) -> None:
    store = SQLiteStore(url(db))
    try:
        cp = Checkpoint("s_1", "run_1", 1, state=JsonState(), meta={"agent": "billing"})
        await store.put_checkpoint(cp)
        raw = sqlite3.connect(db)
        try:
            data, meta = raw.execute("SELECT data, meta FROM checkpoints").fetchone()
        finally:
            raw.close()
        assert json.loads(data) == {"step": 7, "note": "发票"}
        assert json.loads(meta) == {"agent": "billing"}
        got = await store.get_checkpoint("s_1")
        assert got is not None and got.state is None and got.data == data
        # a checkpoint read back (data, no state) saves again as it is
        got.seq = 2
        await store.put_checkpoint(got)
        again = await store.get_checkpoint("s_1")
        assert again is not None and (again.seq, again.data) == (2, data)
    finally:
        await store.close()


async def test_checkpoint_that_cannot_be_saved_raises_store_error(db: Path) -> None:
    store = SQLiteStore(url(db))
    try:
        with pytest.raises(StoreError, match="neither state nor data"):
            await store.put_checkpoint(Checkpoint("s_1", "run_1", 1))
        with pytest.raises(StoreError, match="meta cannot be saved as JSON"):
            await store.put_checkpoint(
                Checkpoint("s_1", "run_1", 1, data="{}", meta={"when": object()})
            )
        assert await store.get_checkpoint("s_1") is None
        await store.put_checkpoint(Checkpoint("s_1", "run_1", 1, data="{}"))
        raw = sqlite3.connect(db)
        with raw:
            raw.execute("UPDATE checkpoints SET meta = '[1, 2]'")
        raw.close()
        with pytest.raises(StoreError, match="table 'checkpoints'"):
            await store.get_checkpoint("s_1")
    finally:
        await store.close()


async def test_two_connections_see_each_other_s_checkpoints_leases_and_tickets(db: Path) -> None:
    a, b = SQLiteStore(url(db)), SQLiteStore(url(db))
    try:
        await a.put_checkpoint(Checkpoint("s_1", "run_1", 3, data='{"x": 1}'))
        with pytest.raises(ConflictError):
            await b.put_checkpoint(Checkpoint("s_1", "run_1", 3, data='{"x": 2}'))
        assert await a.acquire_lease("s_1", "proc-a", 30)
        assert not await b.acquire_lease("s_1", "proc-b", 30)
        ticket_id = await a.push_human(
            EscalationCard(session_id="s_1", trace_id="tr_1", path=["triage"], reasons=["x"])
        )
        ticket = await b.get_human(ticket_id)
        assert ticket is not None
        ticket.status, ticket.claimed_by = "claimed", "bob"
        await b.update_human(ticket, expect="open")
        got = await a.get_human(ticket_id)
        assert got is not None and (got.status, got.claimed_by) == ("claimed", "bob")
    finally:
        await a.close()
        await b.close()


async def test_expired_leases_are_pruned(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("baton.backends.sqlite._PRUNE_EVERY", 3)
    store = SQLiteStore(url(db))
    try:
        assert await store.acquire_lease("old", "a", 0.0)
        assert await store.acquire_lease("live", "a", 30)
        assert await store.acquire_lease("third", "a", 30)  # third acquisition prunes "old"
        raw = sqlite3.connect(db)
        try:
            keys = {r[0] for r in raw.execute("SELECT key FROM leases")}
        finally:
            raw.close()
        assert keys == {"live", "third"}
    finally:
        await store.close()


def test_version_2_file_migrates_and_keeps_its_data(db: Path) -> None:
    raw = sqlite3.connect(db)
    with raw:
        for version in (1, 2):  # the released steps, as a version-2 Baton ran them
            for step in _MIGRATIONS[version]:
                if isinstance(step, str):
                    raw.execute(step)
                else:
                    step(raw)
        raw.execute("PRAGMA user_version = 2")
        raw.execute(
            "INSERT INTO sessions (id, user_id, holder, holder_since, incoming, state, "
            "created_at, updated_at) VALUES ('s_old', 'u1', 'billing', 'msg_1', NULL, "
            """'{"order_id": "ORD-1"}', 10.0, 20.0)"""
        )
        msg = Message(role="user", content="旧消息", run_id="run_0")
        raw.execute(
            "INSERT INTO messages (id, session_id, run_id, role, agent, data, ts) "
            "VALUES (?, 's_old', 'run_0', 'user', NULL, ?, ?)",
            (msg.id, msg.model_dump_json(), msg.ts),
        )
        card = EscalationCard(session_id="s_old", trace_id="tr_0", path=["a"], reasons=["r"])
        raw.execute(
            "INSERT INTO human_queue (session_id, trace_id, card, status, created_at) "
            "VALUES ('s_old', 'tr_0', ?, 'open', 30.0)",
            (card.model_dump_json(),),
        )
    raw.close()

    async def reopen() -> None:
        store = SQLiteStore(url(db))
        try:
            got = await store.get_session("s_old")
            assert got is not None
            assert (got.holder, got.state, got.version) == ("billing", {"order_id": "ORD-1"}, 0)
            assert (got.created_at, got.updated_at) == (10.0, 20.0)
            assert await store.get_messages("s_old") == [msg]
            [ticket] = await store.list_human()
            assert (ticket.card, ticket.claimed_by, ticket.answer) == (card, None, None)
            assert (ticket.note, ticket.updated_at) == ("", 30.0)
            # the old session commits from version 0, and the new tables work
            await store.put_checkpoint(Checkpoint("s_old", "run_1", 1, data="{}"))
            await store.commit_run(got, [], [], run_id="run_1")
            assert got.version == 1
            assert await store.get_checkpoint("s_old") is None
            assert await store.acquire_lease("s_old", "me", 30)
            await store.put_task("s_old", "run_1", make_task(), 0)
            assert [t.task_id for t in await store.list_tasks(session_id="s_old")] == ["t1"]
        finally:
            await store.close()

    asyncio.run(reopen())
    raw = sqlite3.connect(db)
    try:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        raw.close()
    asyncio.run(reopen_again(db))


def test_version_9_file_drops_its_lock_table_and_keeps_its_data(db: Path) -> None:
    raw = sqlite3.connect(db)
    with raw:
        for version in range(1, 10):  # the released steps, as a version-9 Baton ran them
            for step in _MIGRATIONS[version]:
                if isinstance(step, str):
                    raw.execute(step)
                else:
                    step(raw)
        raw.execute("PRAGMA user_version = 9")
        raw.execute("INSERT INTO locks (key, expires_at) VALUES ('s_old|billing|fp', 1e12)")
        raw.execute("INSERT INTO leases (key, owner, expires_at) VALUES ('s_old', 'p', 1e12)")
    raw.close()

    async def reopen() -> None:
        store = SQLiteStore(url(db))
        try:
            assert not await store.acquire_lease("s_old", "another", 30)  # the lease stays
            await store.commit_run(SessionRecord("s_new"), [], [])
        finally:
            await store.close()

    asyncio.run(reopen())
    raw = sqlite3.connect(db)
    try:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master")}
        assert "locks" not in tables and "locks_expiry" not in tables
    finally:
        raw.close()


async def reopen_again(db: Path) -> None:
    """A migrated file opens again without migrating twice."""
    store = SQLiteStore(url(db))
    try:
        got = await store.get_session("s_old")
        assert got is not None and got.version == 1
    finally:
        await store.close()


# ---------------------------------------------------------------- tasks


def make_task(task_id: str = "t1") -> Task:
    """A new task with Chinese text in it."""
    sub = SubTask(task_id=task_id, description="整理关键事件列表", agent_role="executor")
    return Task.from_subtask(sub)


def version_4_file(path: Path) -> None:
    """A file as Baton wrote it at schema version 4 (before tasks), with one session."""
    raw = sqlite3.connect(path, isolation_level=None)
    for version in (1, 2, 3, 4):
        for step in _MIGRATIONS[version]:
            raw.execute(step) if isinstance(step, str) else step(raw)
    raw.execute("PRAGMA user_version = 4")
    raw.execute(
        "INSERT INTO sessions (id, user_id, holder, holder_since, incoming, state, created_at, "
        "updated_at, version) VALUES ('s_old', 'u1', 'billing', NULL, NULL, '{}', 1.0, 2.0, 1)"
    )
    raw.close()


async def test_a_version_4_file_read_only_has_no_tasks_and_migrates_when_opened(db: Path) -> None:
    version_4_file(db)
    ro = SQLiteStore(url(db), read_only=True)
    try:
        assert await ro.get_task("run_1", "t1") is None
        assert await ro.list_tasks() == []
        with pytest.raises(StoreError, match="predates tasks"):
            await ro.put_task("s_old", "run_1", make_task(), 0)
        got = await ro.get_session("s_old")
        assert got is not None and got.version == 1
    finally:
        await ro.close()
    raw = sqlite3.connect(db)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == 4  # nothing migrated
    raw.close()

    store = SQLiteStore(url(db))
    try:
        await store.put_task("s_old", "run_1", make_task(), 0)
        got = await store.get_session("s_old")
        assert got is not None and (got.holder, got.version) == ("billing", 1)
    finally:
        await store.close()
    ro = SQLiteStore(url(db), read_only=True)
    try:  # the migrated file, read-only, shows its tasks and writes none
        [stored] = await ro.list_tasks(session_id="s_old")
        assert stored.description == "整理关键事件列表" and stored.version == 1
        stored.transition("queued")
        with pytest.raises(StoreError, match="read-only"):
            await ro.put_task("s_old", "run_1", stored, 1)
    finally:
        await ro.close()


async def test_two_stores_on_one_file_share_the_task_versions(db: Path) -> None:
    a, b = SQLiteStore(url(db)), SQLiteStore(url(db))
    try:
        await a.put_task("s_1", "run_1", make_task(), 0)
        mine, theirs = await a.get_task("run_1", "t1"), await b.get_task("run_1", "t1")
        assert mine is not None and theirs is not None
        mine.transition("queued")
        theirs.transition("cancelled")
        results = await asyncio.gather(
            a.put_task("s_1", "run_1", mine, 1),
            b.put_task("s_1", "run_1", theirs, 1),
            return_exceptions=True,
        )
        assert sorted(type(r).__name__ for r in results) == ["ConflictError", "NoneType"]
        winner = mine if results[0] is None else theirs
        got = await b.get_task("run_1", "t1")
        assert got is not None and (got.status, got.version) == (winner.status, 2)
    finally:
        await a.close()
        await b.close()


async def test_a_corrupt_task_row_raises_store_error(db: Path) -> None:
    store = SQLiteStore(url(db))
    try:
        await store.put_task("s_1", "run_1", make_task(), 0)
        raw = sqlite3.connect(db)
        with raw:  # a row the state machine cannot reach: final while pending
            raw.execute("UPDATE tasks SET data = json_set(data, '$.final', json('true'))")
        raw.close()
        with pytest.raises(
            StoreError, match=r"(?s)row 'run_1/t1' of table 'tasks'.*final while 'pending'"
        ):
            await store.get_task("run_1", "t1")
    finally:
        await store.close()


# A process that reads one session (or does nothing first), says "ready", waits for "go" on
# stdin, then commits a run (or acquires a lease) and says how it went.
_RACER = """
import asyncio, sys
from baton.backends.base import SessionRecord
from baton.backends.sqlite import SQLiteStore
from baton.core.errors import ConflictError
from baton.core.messages import Message

async def main(url, mode, name):
    store = SQLiteStore(url, busy_timeout_s=30)
    try:
        rec = await store.get_session("s_race") or SessionRecord("s_race")
        print("ready", rec.version, flush=True)
        sys.stdin.readline()
        if mode == "lease":
            won = await store.acquire_lease("s_race", name, 30)
            print("won" if won else "lost", flush=True)
            return
        rec.holder = name
        msgs = [Message(role="user", content=name + " asks"),
                Message(role="assistant", content=name + " answers", agent=name)]
        try:
            await store.commit_run(rec, msgs, [])
        except ConflictError as exc:
            print("conflict", exc.key, flush=True)
        else:
            print("committed", rec.version, flush=True)
    finally:
        await store.close()

asyncio.run(main(*sys.argv[1:]))
"""


def race(db: Path, mode: str, names: list[str]) -> dict[str, str]:
    """Run one racer process per name on `db`; release them together once all have read."""
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-c", _RACER, url(db), mode, name],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in names
    }
    try:
        for proc in procs.values():
            assert proc.stdout is not None and proc.stdin is not None
            line = proc.stdout.readline()
            assert line.startswith("ready"), line + proc.communicate(timeout=60)[1]
        for proc in procs.values():
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        out: dict[str, str] = {}
        for name, proc in procs.items():
            stdout, stderr = proc.communicate(timeout=60)
            assert proc.returncode == 0, stderr
            out[name] = stdout.strip()
        return out
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.parametrize("existing", [False, True], ids=["new-session", "stored-session"])
def test_two_processes_committing_one_version_one_wins(db: Path, existing: bool) -> None:
    before: list[Message] = []
    if existing:
        before = [Message(role="user", content="earlier")]

        async def seed() -> None:
            store = SQLiteStore(url(db))
            try:
                await store.commit_run(SessionRecord("s_race", holder="triage"), before, [])
            finally:
                await store.close()

        asyncio.run(seed())
    else:
        asyncio.run(SQLiteStore(url(db)).close())  # create the file before the race
    read = 1 if existing else 0
    out = race(db, "commit", ["alpha", "beta"])
    assert sorted(out.values()) == [f"committed {read + 1}", "conflict s_race"], out
    [winner] = [name for name, result in out.items() if result.startswith("committed")]

    async def check() -> None:
        store = SQLiteStore(url(db))
        try:
            got = await store.get_session("s_race")
            assert got is not None and (got.holder, got.version) == (winner, read + 1)
            contents = [m.content for m in await store.get_messages("s_race")]
            assert contents == [m.content for m in before] + [
                f"{winner} asks",
                f"{winner} answers",
            ]
        finally:
            await store.close()

    asyncio.run(check())


def test_two_processes_racing_for_one_lease_one_wins(db: Path) -> None:
    asyncio.run(SQLiteStore(url(db)).close())
    out = race(db, "lease", ["alpha", "beta"])
    assert sorted(out.values()) == ["lost", "won"], out
