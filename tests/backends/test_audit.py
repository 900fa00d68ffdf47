"""The hash-chained audit trail: sealing, verification, and tampering with the SQLite file."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from baton import Agent, ScriptedModel, Team, tool
from baton.backends import SQLiteStore
from baton.backends.audit import (
    GENESIS,
    AuditRecord,
    AuditTrail,
    VerifyResult,
    event_json,
    parse_anchor,
    seal,
    verify,
)
from baton.backends.base import SessionRecord
from baton.backends.sqlite import _MIGRATIONS
from baton.core.errors import StoreError
from baton.core.events import Event, RunStarted, ToolCalled
from baton.core.messages import Message

S = ScriptedModel


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


async def check(path: Path, anchor: tuple[int, str] | None = None) -> VerifyResult:
    store = SQLiteStore(f"sqlite:///{path}")
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
    conn.execute("DELETE FROM audit WHERE seq = ?", (anchor[0],))
    conn.execute("DELETE FROM events WHERE seq = (SELECT MAX(seq) FROM events)")
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
