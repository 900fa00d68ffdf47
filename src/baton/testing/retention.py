"""The `Retaining` capability: `store.gc(policy)` deletes what a `Retention` policy does not
keep, never what a waiting run or the audit chain needs, and says what it did.

`gc` walks every session of the store, so these tests count on the fresh store the `store`
fixture gives each test.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from baton.backends import Checkpoints, Sessions, Snapshot, Snapshots, Store
from baton.backends.audit import AuditTrail
from baton.backends.base import CheckpointStatus
from baton.backends.retention import GcReport, Retaining, Retention
from baton.core.errors import ConfigError
from baton.core.events import Event, RunStarted
from baton.core.messages import Message
from baton.testing.kit import (  # baton_capability: the fixture a star import brings
    baton_capability,  # noqa: F401
    capability,
    make_checkpoint,
    new_session,
)

DAY = 86_400.0
"""A day in seconds, the unit of the ages these tests give."""


def stamped_messages(n: int, ts: float, run: str = "run_1") -> list[Message]:
    """`n` user messages `m0`, `m1`, ... stamped one second apart from `ts` on."""
    return [Message(role="user", content=f"m{i}", run_id=run, ts=ts + i) for i in range(n)]


def stamped_events(session_id: str, n: int, ts: float, run: str = "run_1") -> list[Event]:
    """`n` `RunStarted` events saying `e0`, `e1`, ... stamped one second apart from `ts` on."""
    return [
        RunStarted(trace_id="tr", session_id=session_id, run_id=run, message=f"e{i}", ts=ts + i)
        for i in range(n)
    ]


async def fill(store: Store, session_id: str, n: int, ts: float) -> None:
    """Commit `n` messages and `n` events to session `session_id`, stamped from `ts` on."""
    record = await store.get_session(session_id) or new_session(session_id)
    await store.commit_run(record, stamped_messages(n, ts), stamped_events(session_id, n, ts))


async def run_gc(store: Store, policy: Any, *, dry_run: bool = False) -> GcReport:
    """`store.gc(policy)`, once the store is known to be `Retaining`."""
    assert isinstance(store, Retaining), f"{type(store).__name__} lacks the Retaining capability"
    return await store.gc(policy, dry_run=dry_run)


def said(events: list[Event]) -> list[str]:
    """What the `RunStarted` events among `events` say."""
    return [e.message for e in events if isinstance(e, RunStarted)]


async def ok_audit(store: Store) -> None:
    """The store's audit chain, if it keeps one, still verifies."""
    if isinstance(store, AuditTrail):
        result = await store.verify_audit()
        assert result.ok, result.problem


@capability(Retaining, Sessions)
async def test_keep_last_counts_per_session(store: Store) -> None:
    old = time.time() - 10 * DAY
    await fill(store, "a", 5, old)
    await fill(store, "b", 2, old)
    before = [m.id for m in await store.get_messages("a")]

    report = await run_gc(store, Retention(keep_messages=3, keep_events=1))

    assert [m.id for m in await store.get_messages("a")] == before[-3:]
    assert len(await store.get_messages("b")) == 2
    assert said(await store.get_events("a")) == ["e4"]
    assert len(await store.get_events("b")) == 1
    assert report.deleted == {"messages": 2, "events": 5, "snapshots": 0, "checkpoints": 0}
    assert report.sessions == 2 and not report.dry_run
    await ok_audit(store)


@capability(Retaining, Sessions)
async def test_max_age_deletes_what_is_older_unless_a_count_keeps_it(store: Store) -> None:
    now = time.time()
    await fill(store, "a", 3, now - 10 * DAY)
    await fill(store, "a", 2, now - 60)

    await run_gc(store, Retention(max_age_s=DAY, keep_messages=3))

    kept = [m.content for m in await store.get_messages("a")]
    assert kept == ["m2", "m0", "m1"]  # the newest 3 stay although one of them is old
    assert said(await store.get_events("a")) == ["e0", "e1"]
    await ok_audit(store)


@capability(Retaining, Sessions)
async def test_dry_run_deletes_nothing_and_counts_the_same(store: Store) -> None:
    await fill(store, "a", 4, time.time() - 10 * DAY)
    policy = Retention(max_age_s=DAY)

    dry = await run_gc(store, policy, dry_run=True)
    assert len(await store.get_messages("a")) == 4 and len(await store.get_events("a")) == 4
    done = await run_gc(store, policy)

    assert dry.dry_run and dry.deleted == done.deleted
    assert done.deleted["messages"] == 4 and done.deleted["events"] == 4
    assert await store.get_messages("a") == [] and await store.get_events("a") == []
    assert dry.bytes_before == dry.bytes_after
    if done.bytes_before is not None:
        assert done.bytes_after is not None and done.bytes_after <= done.bytes_before
    await ok_audit(store)
    again = await run_gc(store, policy)
    assert sum(again.deleted.values()) == 0
    await ok_audit(store)


@capability(Retaining, Sessions)
@pytest.mark.parametrize("policy", [None, {"max_age_s": DAY}, "30d"], ids=["none", "dict", "str"])
async def test_gc_takes_a_retention_and_nothing_else(store: Store, policy: Any) -> None:
    await fill(store, "a", 2, time.time() - 10 * DAY)
    with pytest.raises(ConfigError, match="takes a Retention"):
        await run_gc(store, policy)
    assert len(await store.get_messages("a")) == 2 and len(await store.get_events("a")) == 2


@capability(Retaining, Sessions, AuditTrail)
async def test_the_chain_names_what_gc_deleted(store: Store) -> None:
    assert isinstance(store, AuditTrail)
    await fill(store, "a", 3, time.time() - 10 * DAY)
    first = (await store.get_messages("a"))[0].id
    await run_gc(store, Retention(keep_messages=2))
    await fill(store, "a", 1, time.time())  # the chain goes on after the gc's record

    (record,) = [r for r in await store.audit_records("a") if r.type == "retention"]
    assert json.loads(record.data)["messages"] == [first]
    assert json.loads(record.data)["events"] == []  # no rule for events: all kept
    assert (await store.verify_audit()).ok


@capability(Retaining, Sessions, Checkpoints)
async def test_checkpoints_waiting_for_a_person_are_never_deleted(store: Store) -> None:
    old = time.time() - 10 * DAY
    statuses: dict[str, CheckpointStatus] = {
        "waits": "awaiting_approval",
        "asks": "interrupted",
        "gone": "cancelled",
        "crashed": "running",
    }
    for session_id, status in statuses.items():
        await fill(store, session_id, 2, old)
        await store.put_checkpoint(make_checkpoint(session_id, status=status, updated_at=old))
    await store.put_checkpoint(make_checkpoint("fresh", status="running"))

    dry = await run_gc(store, Retention(max_age_s=DAY), dry_run=True)
    report = await run_gc(store, Retention(max_age_s=DAY))

    assert (dry.deleted, dry.held, dry.waiting) == (report.deleted, report.held, report.waiting)
    left = {cp.session_id: cp.status for cp in await store.list_checkpoints()}
    assert left == {"waits": "awaiting_approval", "asks": "interrupted", "fresh": "running"}
    assert report.deleted["checkpoints"] == 2 and report.waiting == 2
    # a waiting run reads what it committed back on resume: its session keeps it
    for session_id in ("waits", "asks"):
        assert len(await store.get_messages(session_id)) == 2
        assert len(await store.get_events(session_id)) == 2
    for session_id in ("gone", "crashed"):
        assert await store.get_messages(session_id) == []
        assert await store.get_events(session_id) == []
    assert report.held == 2
    await ok_audit(store)


@capability(Retaining, Sessions, Checkpoints)
async def test_a_finished_runs_checkpoint_is_deleted_by_its_commit(store: Store) -> None:
    await store.put_checkpoint(make_checkpoint("s", run_id="run_1"))
    record = new_session("s")
    await store.commit_run(record, stamped_messages(1, time.time()), [], run_id="run_1")
    assert await store.get_checkpoint("s") is None


@capability(Retaining, Sessions, Snapshots)
async def test_snapshots_keep_the_newest_per_thread(store: Store) -> None:
    assert isinstance(store, Snapshots)
    old = time.time() - 10 * DAY
    await fill(store, "t", 1, time.time())  # gc walks sessions: a graph thread is one
    for step in range(4):
        snap = Snapshot("t", f"r:{step}", "r", step, None, {"step": step}, created_at=old + step)
        await store.put_snapshot(snap)

    aged = await run_gc(store, Retention(max_age_s=DAY))
    assert [s.id for s in await store.list_snapshots("t")] == ["r:3"]  # the current one stays
    assert aged.deleted["snapshots"] == 3

    for step in range(4, 7):
        await store.put_snapshot(Snapshot("t", f"r:{step}", "r", step, None, {}))
    await run_gc(store, Retention(keep_snapshots=2))
    assert [s.id for s in await store.list_snapshots("t")] == ["r:6", "r:5"]
