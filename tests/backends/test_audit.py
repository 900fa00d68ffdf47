"""The hash-chained audit trail: sealing, verification, and tampering with the SQLite file
(its audit records, and the events and messages rows people read)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from baton import Agent, ScriptedModel, Team, tool
from baton.backends import SQLiteStore
from baton.backends.audit import (
    GENESIS,
    KEY_ENV,
    MESSAGES,
    AuditRecord,
    AuditTrail,
    VerifyResult,
    canonical_json,
    chain_hash,
    event_json,
    message_digest,
    parse_anchor,
    prepare,
    record_body,
    seal,
    verify,
)
from baton.backends.base import SessionRecord
from baton.backends.sqlite import _MIGRATIONS
from baton.core.errors import StoreError
from baton.core.events import Event, RunStarted, ToolCalled
from baton.core.messages import Message

S = ScriptedModel
KEY = b"evidence-key-2026"


@pytest.fixture(autouse=True)
def _no_audit_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests choose their audit key; a BATON_AUDIT_KEY in the caller's shell must not leak in."""
    monkeypatch.delenv(KEY_ENV, raising=False)


def make_events(n: int, session: str = "s_1") -> list[Event]:
    """`n` distinct events of one run, with Chinese text in some of them."""
    out: list[Event] = []
    for i in range(n):
        if i % 2:
            out.append(
                ToolCalled(
                    trace_id="t" * 32,
                    session_id=session,
                    run_id="run_1",
                    agent="billing",
                    tool="query_invoice",
                    call_id=f"c{i}",
                    arguments={"order_id": f"ORD-{i}"},
                    ok=True,
                    ts=1_700_000_000.0 + i / 7,
                )
            )
        else:
            out.append(
                RunStarted(
                    trace_id="t" * 32,
                    session_id=session,
                    run_id="run_1",
                    message=f"发票 {i}",
                    ts=1_700_000_000.0 + i / 7,
                )
            )
    return out


# ------------------------------------------------------------------------- pure functions
def test_seal_chains_records_from_genesis() -> None:
    records = seal(make_events(3))
    assert [r.seq for r in records] == [1, 2, 3]
    assert records[0].prev_hash == GENESIS
    assert records[1].prev_hash == records[0].hash
    assert all(r.intact() for r in records)
    assert json.loads(records[0].data)["message"] == "发票 0"
    assert "发票" in records[0].data  # UTF-8 kept, not \u-escaped
    result = verify(records)
    assert result.ok and result.checked == 3
    assert result.anchor == f"3:{records[-1].hash}"


def test_seal_continues_an_existing_chain() -> None:
    first = seal(make_events(2))
    more = seal(make_events(2, session="s_2"), first[-1].seq, first[-1].hash)
    assert [r.seq for r in more] == [3, 4]
    assert verify(first + more).ok


def test_an_empty_chain_is_intact() -> None:
    assert verify([]) == verify([])
    assert verify([]).ok and verify([]).checked == 0


def test_record_data_is_the_stored_event_json() -> None:
    event = make_events(2)[1]
    (record,) = seal([event])
    assert json.loads(record.data) == json.loads(event.model_dump_json())
    assert record.data == event_json(event)


def test_parse_anchor() -> None:
    digest = "ab" * 32
    assert parse_anchor(f"12:{digest}") == (12, digest)
    for bad in ("12", f"x:{digest}", "3:abc", f"0:{digest}", f"1:{'zz' * 32}"):
        with pytest.raises(ValueError, match="bad anchor"):
            parse_anchor(bad)


FIELDS = ["event_id", "type", "session_id", "trace_id", "ts", "data", "prev_hash", "hash"]


def edited(record: AuditRecord, field: str) -> AuditRecord:
    """`record` with one field changed (as a raw UPDATE would change it)."""
    value = getattr(record, field)
    if field == "ts":
        new: object = value + 1
    elif field == "data":
        new = value.replace('"run_1"', '"run_X"')
    elif field in ("hash", "prev_hash"):
        new = ("1" if value[0] != "1" else "2") + value[1:]
    else:
        new = value + "x"
    return record.model_copy(update={field: new})


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_any_single_tampering_is_detected_and_the_first_bad_record_named(
    data: st.DataObject,
) -> None:
    n = data.draw(st.integers(min_value=2, max_value=12), label="records")
    records = seal(make_events(n))
    ids = [r.event_id for r in records]
    kind = data.draw(st.sampled_from(["edit", "delete", "swap", "delete_renumber"]), label="kind")
    i = data.draw(st.integers(min_value=0, max_value=n - 1), label="at")
    tampered = list(records)
    if kind == "edit":
        field = data.draw(st.sampled_from(FIELDS), label="field")
        tampered[i] = edited(records[i], field)
        expected = ("edited", i + 1)
    elif kind == "delete":
        del tampered[i]
        expected = ("deleted", i + 1)
    elif kind == "delete_renumber":  # delete, then close the gap in the positions
        del tampered[i]
        tampered = [r.model_copy(update={"seq": k}) for k, r in enumerate(tampered, 1)]
        expected = ("deleted", i + 1)
    else:  # swap the contents of two positions
        j = data.draw(st.integers(min_value=0, max_value=n - 1).filter(lambda j: j != i), label="j")
        a, b = sorted((i, j))
        tampered[a] = records[b].model_copy(update={"seq": a + 1})
        tampered[b] = records[a].model_copy(update={"seq": b + 1})
        expected = ("reordered", a + 1)
    result = verify(tampered, event_ids=ids)
    assert not result.ok
    assert (result.tamper, result.first_bad_seq) == expected, result.problem
    assert result.problem


def test_cutting_the_end_needs_an_anchor_or_the_event_ids() -> None:
    records = seal(make_events(5))
    anchor = (5, records[-1].hash)
    cut = records[:3]
    assert verify(cut).ok  # a shorter chain is a valid chain on its own
    by_anchor = verify(cut, anchor=anchor)
    assert (by_anchor.ok, by_anchor.tamper, by_anchor.first_bad_seq) == (False, "deleted", 4)
    by_ids = verify(cut, event_ids=[r.event_id for r in records])
    assert (by_ids.ok, by_ids.tamper, by_ids.first_bad_seq) == (False, "deleted", 4)
    assert verify(records, anchor=(3, records[2].hash)).ok  # later appends are fine


def test_a_rewritten_chain_fails_its_anchor() -> None:
    records = seal(make_events(4))
    forged = seal(make_events(4, session="s_forged"))
    result = verify(forged, anchor=(4, records[-1].hash))
    assert not result.ok and result.first_bad_seq == 4


# ------------------------------------------------------------------------------- SQLite
@tool
def query_invoice(order_id: str) -> dict:
    """Look up an invoice.

    Args:
        order_id: Order number.
    """
    return {"order_id": order_id, "status": "ISSUED"}


def desk(url: str) -> Team:
    """A two-agent team on a SQLite store; one run makes about ten events."""
    model = S(
        {
            "triage": [
                S.call(
                    "transfer_to_billing",
                    reason="invoice",
                    objective="send the invoice",
                    state={"order_id": "ORD-202607-99"},
                )
            ],
            "billing": [S.call("query_invoice", order_id="ORD-202607-99"), S.say("Issued.")],
        },
        loop=True,
    )
    return Team(
        [Agent(name="triage", handoffs=["billing"]), Agent(name="billing", tools=[query_invoice])],
        entry="triage",
        model=model,
        store=url,
    )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A SQLite file holding two sessions' runs."""
    path = tmp_path / "baton.db"
    team = desk(f"sqlite:///{path}")
    team.run_sync("please check the invoice for ORD-202607-99", session_id="S1")
    team.run_sync("please check the invoice for ORD-202607-99", session_id="S2")
    team.run_sync("the same again for ORD-202607-99", session_id="S1")
    return path


def raw(path: Path) -> sqlite3.Connection:
    """A raw connection, as someone with the file in hand would open it (triggers dropped)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DROP TRIGGER audit_no_update")
    conn.execute("DROP TRIGGER audit_no_delete")
    return conn


def cut_last_commit_record(conn: sqlite3.Connection) -> None:
    """Delete the chain's last record, its event and the messages it vouches for."""
    seq, messages = conn.execute(
        "SELECT seq, messages FROM audit ORDER BY seq DESC LIMIT 1"
    ).fetchone()
    conn.execute("DELETE FROM audit WHERE seq = ?", (seq,))
    conn.execute("DELETE FROM events WHERE seq = (SELECT MAX(seq) FROM events)")
    for message_id, _ in json.loads(messages or "[]"):
        conn.execute("DELETE FROM messages WHERE id = ?", (message_id,))


async def check(
    path: Path,
    anchor: tuple[int, str] | None = None,
    *,
    key: bytes | None = None,
    read_only: bool = False,
) -> VerifyResult:
    store = SQLiteStore(f"sqlite:///{path}", audit_key=key, read_only=read_only)
    try:
        return await store.verify_audit(anchor)
    finally:
        await store.close()


async def test_every_stored_event_has_a_record_in_order(db: Path) -> None:
    store = SQLiteStore(f"sqlite:///{db}")
    try:
        assert isinstance(store, AuditTrail)
        events = await store.get_events()
        records = await store.audit_records()
        assert MESSAGES not in {r.type for r in records}  # every commit here had events
        assert [r.event_id for r in records] == [e.id for e in events]
        assert [r.seq for r in records] == list(range(1, len(events) + 1))
        assert [json.loads(r.data) for r in records] == [
            json.loads(e.model_dump_json()) for e in events
        ]
        result = await store.verify_audit()
        assert result.ok and result.checked == len(events)
        s2 = await store.audit_records(session_id="S2")
        assert s2 and {r.session_id for r in s2} == {"S2"}
        last = await store.audit_records(limit=3)
        assert [r.seq for r in last] == [len(events) - 2, len(events) - 1, len(events)]
        assert await store.audit_records(limit=0) == []
    finally:
        await store.close()


def test_the_audit_table_refuses_update_and_delete(db: Path) -> None:
    conn = sqlite3.connect(db)
    try:
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute("UPDATE audit SET data = '{}' WHERE seq = 1")
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute("DELETE FROM audit WHERE seq = 2")
    finally:
        conn.close()


@pytest.mark.parametrize(
    "column", ["data", "type", "session_id", "trace_id", "event_id", "ts", "prev_hash", "hash"]
)
async def test_editing_any_field_of_a_row_is_detected(db: Path, column: str) -> None:
    conn = raw(db)
    value = {"ts": "ts + 0.5", "data": "replace(data, 'run_', 'run_X')"}.get(
        column, f"{column} || 'x'"
    )
    conn.execute(f"UPDATE audit SET {column} = {value} WHERE seq = 7")
    conn.close()
    result = await check(db)
    assert (result.ok, result.tamper, result.first_bad_seq) == (False, "edited", 7)
    assert "record 7" in (result.problem or "")


async def test_a_value_of_the_wrong_type_reads_as_an_edit(db: Path) -> None:
    conn = raw(db)
    conn.execute("UPDATE audit SET ts = 'yesterday' WHERE seq = 4")
    conn.close()
    result = await check(db)
    assert (result.tamper, result.first_bad_seq) == ("edited", 4)


async def test_deleting_a_row_is_detected(db: Path) -> None:
    conn = raw(db)
    conn.execute("DELETE FROM audit WHERE seq = 5")
    conn.close()
    result = await check(db)
    assert (result.ok, result.tamper, result.first_bad_seq) == (False, "deleted", 5)


async def test_deleting_a_row_and_renumbering_is_detected(db: Path) -> None:
    conn = raw(db)
    conn.execute("DELETE FROM audit WHERE seq = 5")
    conn.execute("UPDATE audit SET seq = seq - 1 WHERE seq > 5")  # ascending rowids: no clash
    conn.close()
    result = await check(db)
    assert (result.ok, result.tamper, result.first_bad_seq) == (False, "deleted", 5)


async def test_deleting_the_last_rows_is_detected_against_the_events(db: Path) -> None:
    conn = raw(db)
    (n,) = conn.execute("SELECT MAX(seq) FROM audit").fetchone()
    conn.execute("DELETE FROM audit WHERE seq >= ?", (n - 1,))
    conn.close()
    result = await check(db)
    assert (result.ok, result.tamper, result.first_bad_seq) == (False, "deleted", n - 1)
    assert "no audit record" in (result.problem or "")


async def test_cutting_events_and_audit_together_is_caught_by_an_anchor(db: Path) -> None:
    before = await check(db)
    anchor = parse_anchor(before.anchor)
    conn = raw(db)
    cut_last_commit_record(conn)
    conn.close()
    assert (await check(db)).ok  # consistent on its own ...
    result = await check(db, anchor)  # ... but not with the head kept from before
    assert (result.ok, result.tamper, result.first_bad_seq) == (False, "deleted", anchor[0])


async def test_swapping_two_rows_is_detected(db: Path) -> None:
    conn = raw(db)
    cols = "event_id, type, session_id, trace_id, ts, data, prev_hash, hash"
    row3 = conn.execute(f"SELECT {cols} FROM audit WHERE seq = 3").fetchone()
    row9 = conn.execute(f"SELECT {cols} FROM audit WHERE seq = 9").fetchone()
    sets = ", ".join(f"{c.strip()} = ?" for c in cols.split(","))
    conn.execute(f"UPDATE audit SET {sets} WHERE seq = 3", row9)
    conn.execute(f"UPDATE audit SET {sets} WHERE seq = 9", row3)
    conn.close()
    result = await check(db)
    assert (result.ok, result.tamper, result.first_bad_seq) == (False, "reordered", 3)


async def test_a_failed_commit_writes_no_audit_record(tmp_path: Path) -> None:
    store = SQLiteStore(f"sqlite:///{tmp_path / 'b.db'}")
    try:
        rec = SessionRecord("s_1")
        msg = Message(role="user", content="hi")
        await store.commit_run(rec, [msg], make_events(2))
        with pytest.raises(StoreError):
            await store.commit_run(rec, [msg], make_events(2))  # the message id is taken
        assert len(await store.audit_records()) == 2
        assert (await store.verify_audit()).ok
    finally:
        await store.close()


async def test_two_stores_on_one_file_keep_one_chain(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'b.db'}"
    a, b = SQLiteStore(url), SQLiteStore(url)
    try:
        for i in range(4):
            writer = a if i % 2 else b
            await writer.commit_run(SessionRecord(f"s_{i}"), [], make_events(3, f"s_{i}"))
        result = await a.verify_audit()
        assert result.ok and result.checked == 12
    finally:
        await a.close()
        await b.close()


async def test_a_version_1_database_gets_its_events_chained(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in _MIGRATIONS[1]:
        assert isinstance(statement, str)
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    events = make_events(5)
    conn.executemany(
        "INSERT INTO events (id, session_id, trace_id, run_id, type, data, ts) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            (e.id, e.session_id, e.trace_id, e.run_id, e.type, e.model_dump_json(), e.ts)
            for e in events
        ],
    )
    conn.close()
    store = SQLiteStore(f"sqlite:///{path}")
    try:
        records = await store.audit_records()
        assert [r.event_id for r in records] == [e.id for e in events]
        await store.commit_run(SessionRecord("s_2"), [], make_events(2, "s_2"))
        result = await store.verify_audit()
        assert result.ok and result.checked == 7
    finally:
        await store.close()


# ------------------------------------------------------------------- messages and the key
def test_records_without_messages_hash_as_before() -> None:
    (record,) = seal(make_events(1))
    old_body = (
        canonical_json(
            [record.event_id, record.type, record.session_id, record.trace_id, record.ts]
        )
        + "\n"
        + record.data
    )
    assert record.messages == "" and record.body() == old_body
    assert record.hash == hashlib.sha256((GENESIS + old_body).encode()).hexdigest()


def test_prepare_puts_the_messages_on_the_commits_last_record() -> None:
    events = make_events(3)
    entries = [("msg_1", "a" * 64), ("msg_2", "b" * 64)]
    items = prepare(events, messages=entries, session_id="s_1")
    assert [bool(u.messages) for u in items] == [False, False, True]
    assert json.loads(items[-1].messages) == [list(e) for e in entries]
    assert items[-1].body != record_body(*(getattr(items[-1], f) for f in FIELDS[:6]))
    (alone,) = prepare([], messages=entries, session_id="s_1")
    assert (alone.type, alone.event_id, alone.session_id) == (MESSAGES, "", "s_1")
    assert prepare([], session_id="s_1") == []


def test_a_keyed_chain_needs_its_key() -> None:
    records = seal(make_events(4), key=KEY)
    keyed = verify(records, key=KEY)
    assert keyed.ok and (keyed.keyed, keyed.keyed_from) == (4, 1)
    unkeyed = verify(records)
    assert (unkeyed.ok, unkeyed.tamper, unkeyed.first_bad_seq) == (False, "edited", 1)
    assert KEY_ENV in (unkeyed.problem or "")
    wrong = verify(records, key=b"another key")
    assert (wrong.ok, wrong.first_bad_seq) == (False, 1)
    # someone without the key edits record 3 and re-seals the whole chain with plain sha256
    forged = seal(make_events(4))
    assert verify(forged).ok  # without the key nothing can tell (anchors, or the key)
    caught = verify(forged, key=KEY)
    assert not caught.ok and "no record is sealed with the audit key" in (caught.problem or "")


def test_a_plain_prefix_is_vouched_for_by_the_first_keyed_record() -> None:
    before = seal(make_events(3))  # written before the key was set
    after = seal(make_events(2, "s_2"), 3, before[-1].hash, key=KEY)
    result = verify(before + after, key=KEY)
    assert result.ok and (result.keyed, result.keyed_from) == (2, 4)
    # re-sealing the plain prefix after an edit breaks the keyed record's link
    edited = seal(make_events(3, "s_forged"))
    assert not verify(edited + after, key=KEY).ok
    # a plain record after a keyed one: rewritten, or written without the key
    late = seal(make_events(1, "s_3"), 5, after[-1].hash)
    bad = verify(before + after + late, key=KEY)
    assert (bad.ok, bad.first_bad_seq) == (False, 6)
    assert "not sealed with the audit key" in (bad.problem or "")


def rehash(conn: sqlite3.Connection, key: bytes | None = None) -> None:
    """A forger's full rewrite: re-seal every record over what the tables hold now."""
    events = dict(conn.execute("SELECT id, data FROM events"))
    digests = {
        row[0]: message_digest(*row)
        for row in conn.execute(
            "SELECT id, session_id, run_id, role, agent, ts, data FROM messages"
        )
    }
    rows = conn.execute(
        "SELECT seq, event_id, type, session_id, trace_id, ts, data, messages FROM audit "
        "ORDER BY seq"
    ).fetchall()
    prev = GENESIS
    for seq, eid, kind, sid, tid, ts, data, messages in rows:
        data = events.get(eid, data)
        if messages:
            messages = canonical_json([[m, digests[m]] for m, _ in json.loads(messages)])
        digest = chain_hash(prev, record_body(eid, kind, sid, tid, ts, data, messages), key)
        conn.execute(
            "UPDATE audit SET data = ?, messages = ?, prev_hash = ?, hash = ? WHERE seq = ?",
            (data, messages, prev, digest, seq),
        )
        prev = digest


def forge_handoff_target(conn: sqlite3.Connection) -> int:
    """Point the first stored hand-off at another agent, in `events`; returns its row."""
    seq, data = conn.execute(
        "SELECT seq, data FROM events WHERE type = 'handoff' ORDER BY seq LIMIT 1"
    ).fetchone()
    assert '"target":"billing"' in data
    conn.execute(
        "UPDATE events SET data = ? WHERE seq = ?",
        (data.replace('"target":"billing"', '"target":"refunds"'), seq),
    )
    return int(seq)


async def test_every_message_is_vouched_for_by_its_commits_record(db: Path) -> None:
    store = SQLiteStore(f"sqlite:///{db}")
    try:
        records = await store.audit_records()
        vouched = [m for r in records for m, _ in r.message_entries()]
        stored = [m.id for sid in ("S1", "S2") for m in await store.get_messages(sid)]
        assert sorted(vouched) == sorted(stored) and len(vouched) == len(set(vouched))
        carriers = [r for r in records if r.messages]
        assert {r.type for r in carriers} == {"run_finished"}  # each commit's last event
        result = await store.verify_audit()
        assert result.ok and (result.events, result.messages) == (len(records), len(stored))
    finally:
        await store.close()


async def test_a_commit_with_messages_and_no_events_gets_a_record_of_its_own(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(f"sqlite:///{tmp_path / 'b.db'}")
    try:
        await store.commit_run(SessionRecord("s_1"), [Message(role="user", content="hi")], [])
        (record,) = await store.audit_records()
        assert (record.type, record.session_id, len(record.message_entries())) == (
            MESSAGES,
            "s_1",
            1,
        )
        result = await store.verify_audit()
        assert result.ok and (result.checked, result.events, result.messages) == (1, 0, 1)
    finally:
        await store.close()


async def test_a_forged_handoff_in_events_is_named(db: Path) -> None:
    conn = sqlite3.connect(db, isolation_level=None)  # triggers untouched: events are not audit
    row = forge_handoff_target(conn)
    conn.close()
    store = SQLiteStore(f"sqlite:///{db}")
    try:
        shown = [e for e in await store.get_events() if e.type == "handoff"]
        assert shown[0].payload.target == "refunds"  # what `baton trace` would show ...
    finally:
        await store.close()
    result = await check(db)  # ... and what verify says about it
    assert (result.ok, result.table, result.row, result.tamper) == (False, "events", row, "edited")
    assert f"events row {row} (handoff " in (result.problem or "")
    assert "data" in (result.problem or "")


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("data", "replace(data, 'Issued.', 'Refunded: 5000 CNY.')"),
        ("session_id", "'S2'"),  # moved into another session's transcript
        ("role", "'system'"),
        ("ts", "ts + 1"),
    ],
)
async def test_a_forged_message_is_named(db: Path, column: str, value: str) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    (seq,) = conn.execute(
        "SELECT MIN(seq) FROM messages WHERE role = 'assistant' AND data LIKE '%Issued.%'"
    ).fetchone()
    conn.execute(f"UPDATE messages SET {column} = {value} WHERE seq = ?", (seq,))
    conn.close()
    result = await check(db)
    assert (result.ok, result.table, result.row, result.tamper) == (
        False,
        "messages",
        seq,
        "edited",
    )
    assert f"messages row {seq} (" in (result.problem or "")


async def test_a_deleted_message_is_named(db: Path) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    (mid,) = conn.execute("SELECT id FROM messages WHERE seq = 3").fetchone()
    conn.execute("DELETE FROM messages WHERE seq = 3")
    conn.close()
    result = await check(db)
    assert (result.ok, result.table, result.tamper) == (False, "messages", "deleted")
    assert f"messages row {mid} is gone" in (result.problem or "")
    assert result.first_bad_seq is not None


async def test_a_deleted_event_row_is_named(db: Path) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    (eid,) = conn.execute("SELECT id FROM events WHERE seq = 4").fetchone()
    conn.execute("DELETE FROM events WHERE seq = 4")
    conn.close()
    result = await check(db)
    assert (result.ok, result.table, result.tamper, result.first_bad_seq) == (
        False,
        "events",
        "deleted",
        4,
    )
    assert eid in (result.problem or "")


@pytest.mark.parametrize("table", ["events", "messages"])
async def test_an_inserted_row_is_named(db: Path, table: str) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
    cols = ", ".join(c for c in columns if c != "seq")
    row = conn.execute(f"SELECT {cols} FROM {table} WHERE seq = 2").fetchone()
    forged = tuple(
        "forged_1" if c == "id" else v for c, v in zip(cols.split(", "), row, strict=True)
    )
    conn.execute(f"UPDATE {table} SET seq = seq + 1000 WHERE seq > 2")  # room after row 2
    marks = ", ".join("?" * len(forged))
    conn.execute(f"INSERT INTO {table} (seq, {cols}) VALUES (3, {marks})", forged)
    conn.close()
    result = await check(db)
    assert (result.ok, result.table, result.row, result.tamper) == (False, table, 3, "inserted")
    assert f"{table} row 3 (" in (result.problem or "") and "forged_1" in (result.problem or "")


@pytest.mark.parametrize("table", ["events", "messages"])
async def test_a_row_appended_at_the_end_is_named(db: Path, table: str) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
    cols = ", ".join(c for c in columns if c != "seq")
    row = conn.execute(f"SELECT {cols} FROM {table} ORDER BY seq LIMIT 1").fetchone()
    forged = tuple(
        "forged_1" if c == "id" else v for c, v in zip(cols.split(", "), row, strict=True)
    )
    cur = conn.execute(f"INSERT INTO {table} ({cols}) VALUES ({', '.join('?' * len(row))})", forged)
    conn.close()
    result = await check(db)
    assert (result.ok, result.table, result.row) == (False, table, cur.lastrowid)
    assert "has no audit record" in (result.problem or "")


async def test_rehashing_the_whole_chain_passes_without_a_key_but_not_with_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain, keyed = tmp_path / "plain.db", tmp_path / "keyed.db"
    await desk(f"sqlite:///{plain}").run("invoice for ORD-202607-99", session_id="S1")
    monkeypatch.setenv(KEY_ENV, KEY.decode())  # what `baton run` with the key set does
    await desk(f"sqlite:///{keyed}").run("invoice for ORD-202607-99", session_id="S1")
    monkeypatch.delenv(KEY_ENV)
    assert (await check(keyed, key=KEY)).ok
    for path in (plain, keyed):
        conn = raw(path)
        forge_handoff_target(conn)
        conn.execute("UPDATE messages SET data = replace(data, 'Issued.', 'Refunded.')")
        rehash(conn)  # without the key: plain sha256
        conn.close()
    # the limit, documented: without a key (or an anchor kept elsewhere) a full re-hash passes
    assert (await check(plain)).ok
    caught = await check(keyed, key=KEY)
    assert (caught.ok, caught.tamper) == (False, "edited")
    assert "no record is sealed with the audit key" in (caught.problem or "")
    monkeypatch.setenv(KEY_ENV, KEY.decode())  # the key from the environment, as the CLI has it
    assert not (await check(keyed)).ok


async def test_a_forger_with_the_key_is_not_stopped_by_it(tmp_path: Path) -> None:
    path = tmp_path / "keyed.db"
    team = desk(f"sqlite:///{path}")
    team.store = SQLiteStore(f"sqlite:///{path}", audit_key=KEY)
    await team.run("invoice for ORD-202607-99", session_id="S1")
    await team.store.close()
    before = await check(path, key=KEY)
    conn = raw(path)
    forge_handoff_target(conn)
    rehash(conn, KEY)
    conn.close()
    assert (await check(path, key=KEY)).ok  # the key is a secret: keep it from the file's readers
    assert not (await check(path, parse_anchor(before.anchor), key=KEY)).ok  # an anchor holds


def evidence_copy(db: Path, to: Path) -> Path:
    """A copy of the store file alone, made read-only (0444), as an examiner keeps it."""
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # what a closed store leaves in the file
    conn.close()
    shutil.copyfile(db, to)
    os.chmod(to, stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    return to


def _tree(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}


async def test_a_read_only_copy_verifies_and_is_left_as_it_is(db: Path, tmp_path: Path) -> None:
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    copy = evidence_copy(db, evidence / "copy.db")
    assert stat.S_IMODE(copy.stat().st_mode) == 0o444
    before = _tree(evidence)
    result = await check(copy, read_only=True)
    assert result.ok and result.checked > 0 and result.messages
    assert result.checked == (await check(db)).checked
    assert _tree(evidence) == before  # no -wal, no -shm, not a byte changed
    store = SQLiteStore(f"sqlite:///{copy}", read_only=True)
    try:
        with pytest.raises(StoreError, match="read-only"):
            await store.commit_run(SessionRecord("s_x"), [], make_events(1, "s_x"))
        assert len(await store.audit_records(limit=2)) == 2
    finally:
        await store.close()
    assert _tree(evidence) == before


async def test_a_read_only_copy_of_a_forged_file_fails(db: Path, tmp_path: Path) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    row = forge_handoff_target(conn)
    conn.close()
    copy = evidence_copy(db, tmp_path / "copy.db")
    result = await check(copy, read_only=True)
    assert (result.ok, result.table, result.row) == (False, "events", row)


def test_an_empty_file_is_not_a_baton_store_and_stays_empty(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    with pytest.raises(StoreError, match="not a Baton store: the file is empty"):
        SQLiteStore(f"sqlite:///{empty}", read_only=True)
    assert empty.stat().st_size == 0 and sorted(os.listdir(tmp_path)) == ["empty.db"]
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE notes (x)")
    conn.close()
    with pytest.raises(StoreError, match="not a Baton store: it holds no Baton tables"):
        SQLiteStore(f"sqlite:///{other}", read_only=True)
    with pytest.raises(StoreError, match="does not exist"):
        SQLiteStore(f"sqlite:///{tmp_path / 'missing.db'}", read_only=True)
    assert not (tmp_path / "missing.db").exists()


def version_3_file(path: Path, messages: list[Message], events: list[Event]) -> None:
    """A file as Baton wrote it at schema version 3: events chained, messages not."""
    conn = sqlite3.connect(path, isolation_level=None)
    for step in _MIGRATIONS[1]:
        assert isinstance(step, str)
        conn.execute(step)
    conn.executemany(
        "INSERT INTO messages (id, session_id, run_id, role, agent, data, ts) "
        "VALUES (?, 's_1', ?, ?, ?, ?, ?)",
        [(m.id, m.run_id, m.role, m.agent, m.model_dump_json(), m.ts) for m in messages],
    )
    conn.executemany(
        "INSERT INTO events (id, session_id, trace_id, run_id, type, data, ts) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(e.id, e.session_id, e.trace_id, e.run_id, e.type, event_json(e), e.ts) for e in events],
    )
    for version in (2, 3):
        for step in _MIGRATIONS[version]:
            conn.execute(step) if isinstance(step, str) else step(conn)
    conn.execute("PRAGMA user_version = 3")
    conn.close()


async def test_a_version_3_database_gets_its_messages_chained(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    messages = [Message(role="user", content=f"第 {i} 条", run_id="run_1") for i in range(3)]
    version_3_file(path, messages, make_events(4))
    old = verify(await SQLiteStore(f"sqlite:///{path}", read_only=True).audit_records())
    assert old.ok and old.checked == 4
    # read-only, nothing is migrated: the events are checked, the messages cannot be
    ro = await check(path, read_only=True)
    assert ro.ok and (ro.events, ro.messages) == (4, None)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 3
    conn.close()
    # opened read-write: the messages stored so far are chained after the old head
    store = SQLiteStore(f"sqlite:///{path}")
    try:
        records = await store.audit_records()
        assert [r.type for r in records[4:]] == [MESSAGES]
        assert [m for m, _ in records[4].message_entries()] == [m.id for m in messages]
        assert records[4].prev_hash == old.head_hash
        await store.commit_run(
            SessionRecord("s_1"),
            [Message(role="user", content="new")],
            make_events(1),
        )
        result = await store.verify_audit(parse_anchor(old.anchor))  # old anchors still hold
        assert result.ok and (result.checked, result.events, result.messages) == (6, 5, 4)
    finally:
        await store.close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("UPDATE messages SET data = replace(data, '第 1 条', '第 9 条')")
    conn.close()
    bad = await check(path)
    assert (bad.ok, bad.table, bad.row) == (False, "messages", 2)


async def test_a_version_3_database_migrated_with_a_key(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    version_3_file(path, [Message(role="user", content="hi")], make_events(2))
    store = SQLiteStore(f"sqlite:///{path}", audit_key=KEY)
    try:
        result = await store.verify_audit()
        assert result.ok and (result.keyed, result.keyed_from, result.checked) == (1, 3, 3)
    finally:
        await store.close()
    assert not (await check(path)).ok  # its new record is keyed: verifying needs the key
