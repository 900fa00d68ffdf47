"""The outbox committed with the run (MemoryStore and SQLiteStore): exactly the notifiable
events go in, in the run's transaction (a commit that fails writes none), and deliverers
claim items under a lease and settle them with their delivery log."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from tests.notify.notify_kit import (
    POSTGRES_URL,
    approval,
    dispose,
    escalated,
    failed,
    outbox_store,
    tripped,
)

from baton.backends import SessionRecord
from baton.backends.outbox import Delivery, Outbox
from baton.backends.sqlite import SQLiteStore
from baton.core.errors import ConflictError, StoreError
from baton.core.events import RunFinished, RunStarted


async def test_the_notifiable_events_of_a_commit_go_to_the_outbox(store: Outbox) -> None:
    events = [
        RunStarted(trace_id="T1", session_id="S1", run_id="R1", message="hi"),
        approval(),
        escalated(),
        tripped(),
        failed(),
        RunFinished(trace_id="T1", session_id="S1", run_id="R2", status="completed"),
    ]
    await store.commit_run(SessionRecord("S1"), [], events)  # type: ignore[attr-defined]
    items = await store.list_outbox()
    assert [i.kind for i in items] == [
        "approval_requested",
        "escalated",
        "guard_tripped",
        "run_finished",
    ]
    assert [i.id for i in items] == [e.id for e in events[1:5]]
    assert items[2].key == "max_hops" and items[0].key == ""
    assert items[0].parsed() == events[1]
    assert all(i.status == "pending" and i.attempts == 0 for i in items)


async def test_a_commit_that_is_refused_writes_no_notification(store: Outbox) -> None:
    rec = SessionRecord("S1")
    await store.commit_run(rec, [], [])  # type: ignore[attr-defined]
    stale = SessionRecord("S1")  # version 0: the store holds 1
    with pytest.raises(ConflictError):
        await store.commit_run(stale, [], [approval()])  # type: ignore[attr-defined]
    assert await store.list_outbox() == []


async def test_a_commit_that_fails_mid_transaction_writes_no_notification(tmp_path: Path) -> None:
    path = tmp_path / "o.db"
    store = SQLiteStore(f"sqlite:///{path}")
    try:
        # the audit record is the commit's last write: make it fail, after the outbox rows
        raw = sqlite3.connect(path)
        raw.execute(
            "CREATE TRIGGER fail BEFORE INSERT ON audit BEGIN SELECT RAISE(ABORT, 'disk'); END"
        )
        raw.commit()
        raw.close()
        with pytest.raises(StoreError, match="disk"):
            await store.commit_run(SessionRecord("S1"), [], [approval(), failed()])
        assert await store.list_outbox() == []
        assert await store.get_events("S1") == []
    finally:
        await store.close()


async def test_a_postgres_commit_that_fails_mid_transaction_writes_no_notification(
    tmp_path: Path,
) -> None:
    store = outbox_store("postgres", tmp_path)
    try:
        await store.commit_run(SessionRecord("S0"), [], [])  # creates the schema
        import asyncpg

        conn = await asyncpg.connect(POSTGRES_URL)
        try:
            # the audit records are the commit's last write: make them fail, after the outbox
            await conn.execute(f'SET search_path TO "{store.schema}"')
            await conn.execute(
                "CREATE FUNCTION fail() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE EXCEPTION 'disk'; END $$"
            )
            await conn.execute(
                "CREATE TRIGGER fail BEFORE INSERT ON audit FOR EACH ROW EXECUTE FUNCTION fail()"
            )
        finally:
            await conn.close()
        with pytest.raises(StoreError, match="disk"):
            await store.commit_run(SessionRecord("S1"), [], [approval(), failed()])
        assert await store.list_outbox() == []
        assert await store.get_events("S1") == []
    finally:
        await dispose(store)


async def test_claims_are_leased_and_settled_by_their_holder(store: Outbox) -> None:
    await store.commit_run(SessionRecord("S1"), [], [approval(), failed()])  # type: ignore[attr-defined]
    a = await store.claim_outbox("a", lease_s=30, at=100.0)
    assert len(a) == 2 and all(i.owner == "a" for i in a)
    assert await store.claim_outbox("b", lease_s=30, at=110.0) == []  # a's lease is live
    # a dies; after its lease b takes the items over, and a can no longer settle them
    b = await store.claim_outbox("b", lease_s=30, limit=1, at=131.0)
    assert [i.id for i in b] == [a[0].id]
    d = Delivery("ops", 1, False, 500, "boom", key=f"{a[0].id}:ops")
    assert not await store.settle_outbox(a[0].id, "a", "delivered", [d])
    assert await store.settle_outbox(b[0].id, "b", "pending", [d], next_at=200.0)
    item = await store.get_outbox(b[0].id)
    assert item is not None
    assert (item.status, item.attempts, item.owner, item.next_at) == ("pending", 1, None, 200.0)
    assert item.deliveries == [d]
    # not due before next_at; then claimed again, and delivered
    assert [i.id for i in await store.claim_outbox("c", lease_s=60, at=150.0)] == [a[1].id]
    (again,) = await store.claim_outbox("c", lease_s=30, at=201.0)  # a[1] is still c's
    assert again.id == a[0].id
    ok = Delivery("ops", 2, True, 200, key=d.key)
    assert await store.settle_outbox(again.id, "c", "delivered", [ok])
    done = await store.get_outbox(again.id)
    assert done is not None and done.deliveries == [d, ok] and done.delivered_to() == {"ops"}
    assert [i.id for i in await store.list_outbox("delivered")] == [again.id]


async def test_count_and_prune(store: Outbox) -> None:
    trips = [tripped(ts=t) for t in (10.0, 20.0, 30.0)] + [tripped("max_visits", ts=25.0)]
    await store.commit_run(SessionRecord("S1"), [], trips)  # type: ignore[attr-defined]
    assert await store.count_outbox("guard_tripped", "max_hops", 10.0, 30.0) == 2
    assert await store.count_outbox("guard_tripped", "max_hops", 0.0, 30.0) == 3
    assert await store.count_outbox("guard_tripped", "max_visits", 0.0, 30.0) == 1
    (first,) = await store.claim_outbox("a", lease_s=5, limit=1, at=50.0)
    await store.settle_outbox(first.id, "a", "skipped", [])
    assert await store.prune_outbox(before=100.0) == 1  # pending ones stay
    assert len(await store.list_outbox()) == 3


async def test_claim_refuses_nonsense(store: Outbox) -> None:
    with pytest.raises(StoreError, match="lease_s > 0"):
        await store.claim_outbox("a", lease_s=0)
