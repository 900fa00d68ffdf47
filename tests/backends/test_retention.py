"""Retention (`baton.backends.retention`) on every store: `gc` deletes what a `Retention`
policy does not keep, never what a waiting run or the audit chain needs, and says what it did."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from baton.backends import SQLiteStore, Store
from baton.backends.audit import AuditTrail
from baton.backends.base import Snapshot, Snapshots
from baton.backends.retention import GcReport, Retaining, Retention, parse_age
from baton.core.errors import ConfigError
from baton.core.events import Event, RunStarted
from baton.core.messages import Message
from baton.testing.kit import make_checkpoint, new_session

DAY = 86_400.0


def messages(n: int, ts: float, run: str = "run_1") -> list[Message]:
    return [Message(role="user", content=f"m{i}", run_id=run, ts=ts + i) for i in range(n)]


def events(sid: str, n: int, ts: float, run: str = "run_1") -> list[Event]:
    return [
        RunStarted(trace_id="tr", session_id=sid, run_id=run, message=f"e{i}", ts=ts + i)
        for i in range(n)
    ]


async def fill(store: Store, sid: str, n: int, ts: float) -> None:
    """Commit `n` messages and `n` events to session `sid`, stamped from `ts` on."""
    rec = await store.get_session(sid) or new_session(sid)
    await store.commit_run(rec, messages(n, ts), events(sid, n, ts))


async def gc(store: Store, policy: Retention, *, dry_run: bool = False) -> GcReport:
    assert isinstance(store, Retaining)
    return await store.gc(policy, dry_run=dry_run)


def said(events: list[Event]) -> list[str]:
    return [e.message for e in events if isinstance(e, RunStarted)]


async def ok_audit(store: Store) -> None:
    if isinstance(store, AuditTrail):
        result = await store.verify_audit()
        assert result.ok, result.problem


async def test_every_store_retains(store: Store) -> None:
    assert isinstance(store, Retaining)


async def test_keep_last_counts_per_session(store: Store) -> None:
    old = time.time() - 10 * DAY
    await fill(store, "a", 5, old)
    await fill(store, "b", 2, old)
    before = [m.id for m in await store.get_messages("a")]

    report = await gc(store, Retention(keep_messages=3, keep_events=1))

    assert [m.id for m in await store.get_messages("a")] == before[-3:]
    assert len(await store.get_messages("b")) == 2
    assert [e.message for e in await store.get_events("a")] == ["e4"]  # type: ignore[attr-defined]
    assert len(await store.get_events("b")) == 1
    assert report.deleted == {"messages": 2, "events": 5, "snapshots": 0, "checkpoints": 0}
    assert report.sessions == 2 and not report.dry_run
    await ok_audit(store)


async def test_max_age_deletes_what_is_older_unless_a_count_keeps_it(store: Store) -> None:
    now = time.time()
    await fill(store, "a", 3, now - 10 * DAY)
    await fill(store, "a", 2, now - 60)

    await gc(store, Retention(max_age_s=DAY, keep_messages=3))

    kept = [m.content for m in await store.get_messages("a")]
    assert kept == ["m2", "m0", "m1"]  # the newest 3 stay although one of them is old
    assert [e.message for e in await store.get_events("a")] == ["e0", "e1"]  # type: ignore[attr-defined]
    await ok_audit(store)


async def test_dry_run_deletes_nothing_and_counts_the_same(store: Store) -> None:
    await fill(store, "a", 4, time.time() - 10 * DAY)
    policy = Retention(max_age_s=DAY)

    dry = await gc(store, policy, dry_run=True)
    assert len(await store.get_messages("a")) == 4 and len(await store.get_events("a")) == 4
    done = await gc(store, policy)

    assert dry.dry_run and dry.deleted == done.deleted
    assert done.deleted["messages"] == 4 and done.deleted["events"] == 4
    assert await store.get_messages("a") == [] and await store.get_events("a") == []
    assert dry.bytes_before == dry.bytes_after
    if done.bytes_before is not None:
        assert done.bytes_after is not None and done.bytes_after <= done.bytes_before
    await ok_audit(store)
    again = await gc(store, policy)
    assert sum(again.deleted.values()) == 0
    await ok_audit(store)


async def test_the_chain_names_what_gc_deleted(store: Store) -> None:
    if not isinstance(store, AuditTrail):
        pytest.skip("keeps no audit chain")
    await fill(store, "a", 3, time.time() - 10 * DAY)
    first = (await store.get_messages("a"))[0].id
    await gc(store, Retention(keep_messages=2))
    await fill(store, "a", 1, time.time())  # the chain goes on after the gc's record

    (record,) = [r for r in await store.audit_records("a") if r.type == "retention"]
    assert json.loads(record.data)["messages"] == [first]
    assert json.loads(record.data)["events"] == []  # no rule for events: all kept
    assert (await store.verify_audit()).ok


async def test_a_row_deleted_by_anything_but_gc_still_fails_the_audit(tmp_path: Path) -> None:
    store = SQLiteStore(f"sqlite:///{tmp_path / 'a.db'}")
    await fill(store, "a", 4, time.time() - 10 * DAY)
    await gc(store, Retention(keep_messages=2))
    assert (await store.verify_audit()).ok
    kept = await store.get_messages("a")
    await store.close()
    con = sqlite3.connect(tmp_path / "a.db")
    con.execute("DELETE FROM messages WHERE id = ?", (kept[0].id,))
    con.commit()
    con.close()
    store = SQLiteStore(f"sqlite:///{tmp_path / 'a.db'}")

    found = await store.verify_audit()

    assert not found.ok and found.tamper == "deleted" and found.table == "messages"
    assert kept[0].id in (found.problem or "")
    await store.close()


async def test_checkpoints_waiting_for_a_person_are_never_deleted(store: Store) -> None:
    old = time.time() - 10 * DAY
    for sid, status in (
        ("waits", "awaiting_approval"),
        ("asks", "interrupted"),
        ("gone", "cancelled"),
        ("crashed", "running"),
    ):
        await fill(store, sid, 2, old)
        await store.put_checkpoint(make_checkpoint(sid, status=status, updated_at=old))
    await store.put_checkpoint(make_checkpoint("fresh", status="running"))

    dry = await gc(store, Retention(max_age_s=DAY), dry_run=True)
    report = await gc(store, Retention(max_age_s=DAY))

    assert (dry.deleted, dry.held, dry.waiting) == (report.deleted, report.held, report.waiting)
    left = {cp.session_id: cp.status for cp in await store.list_checkpoints()}
    assert left == {"waits": "awaiting_approval", "asks": "interrupted", "fresh": "running"}
    assert report.deleted["checkpoints"] == 2 and report.waiting == 2
    # a waiting run reads what it committed back on resume: its session keeps it
    for sid in ("waits", "asks"):
        assert len(await store.get_messages(sid)) == 2 and len(await store.get_events(sid)) == 2
    for sid in ("gone", "crashed"):
        assert await store.get_messages(sid) == [] and await store.get_events(sid) == []
    assert report.held == 2
    await ok_audit(store)


async def test_a_finished_runs_checkpoint_is_deleted_by_its_commit(store: Store) -> None:
    await store.put_checkpoint(make_checkpoint("s", run_id="run_1"))
    rec = new_session("s")
    await store.commit_run(rec, messages(1, time.time()), [], run_id="run_1")
    assert await store.get_checkpoint("s") is None


async def test_snapshots_keep_the_newest_per_thread(store: Store) -> None:
    assert isinstance(store, Snapshots)
    old = time.time() - 10 * DAY
    await fill(store, "t", 1, time.time())  # gc walks sessions: a graph thread is one
    for step in range(4):
        snap = Snapshot("t", f"r:{step}", "r", step, None, {"step": step}, created_at=old + step)
        await store.put_snapshot(snap)

    aged = await gc(store, Retention(max_age_s=DAY))
    assert [s.id for s in await store.list_snapshots("t")] == ["r:3"]  # the current one stays
    assert aged.deleted["snapshots"] == 3

    for step in range(4, 7):
        await store.put_snapshot(Snapshot("t", f"r:{step}", "r", step, None, {}))
    await gc(store, Retention(keep_snapshots=2))
    assert [s.id for s in await store.list_snapshots("t")] == ["r:6", "r:5"]


@pytest.mark.parametrize(
    "bad",
    [
        {},
        {"max_age_s": 0},
        {"max_age_s": -1.0},
        {"max_age_s": "30d"},
        {"max_age_s": float("inf")},
        {"keep_messages": -1},
        {"keep_snapshots": 0},
        {"keep_events": 1.5},
        {"keep_events": True},
    ],
)
def test_a_bad_policy_is_refused_naming_the_rule(bad: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=next(iter(bad), "no rule")):
        Retention(**bad)


def test_ages_are_read_with_their_unit() -> None:
    assert parse_age("90") == 90 and parse_age("30m") == 1800 and parse_age("2w") == 14 * DAY
    assert parse_age("30d") == 30 * DAY and parse_age("1.5h") == 5400
    for bad in ("", "d", "30x", "-1d", "0", "nan", "infd"):
        with pytest.raises(ConfigError, match="bad age"):
            parse_age(bad)
