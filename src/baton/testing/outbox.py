"""The `Outbox` capability: the notifiable events of a commit are written with it (and only
with it), claimed under a lease by one deliverer at a time, and settled with their delivery
log."""

from __future__ import annotations

import pytest

from baton.backends import SessionRecord, Store
from baton.backends.outbox import Delivery, Outbox
from baton.core.approval import ApprovalCard
from baton.core.errors import ConflictError, StoreError
from baton.core.events import (
    ApprovalRequested,
    Escalated,
    EscalationCard,
    Event,
    GuardTripped,
    RunFinished,
    RunStarted,
)
from baton.testing.kit import (  # baton_capability: the fixture a star import brings
    baton_capability,  # noqa: F401
    capability,
)


def _approval() -> ApprovalRequested:
    card = ApprovalCard(
        id="ap-1",
        session_id="S1",
        run_id="R1",
        trace_id="T1",
        agent="billing",
        kind="tool",
        tool="refund",
        call_id="c1",
    )
    return ApprovalRequested(
        trace_id="T1", session_id="S1", run_id="R1", agent="billing", card=card
    )


def _failed() -> RunFinished:
    return RunFinished(
        trace_id="T1", session_id="S1", run_id="R1", status="failed", error="model down"
    )


def _trip(ts: float, guard: str = "max_hops") -> GuardTripped:
    return GuardTripped(
        trace_id="T1", session_id="S1", run_id="R1", guard=guard, detail="5 hops", ts=ts
    )


async def _commit(store: Store, *events: Event, sid: str = "S1") -> None:
    rec = await store.get_session(sid) or SessionRecord(sid)
    await store.commit_run(rec, [], list(events))


@capability(Outbox)
async def test_the_notifiable_events_of_a_commit_go_to_the_outbox(store: Store) -> None:
    assert isinstance(store, Outbox)
    card = EscalationCard(session_id="S1", trace_id="T1", path=["a"], reasons=["loop"])
    events: list[Event] = [
        RunStarted(trace_id="T1", session_id="S1", run_id="R1", message="hi"),
        _approval(),
        Escalated(trace_id="T1", session_id="S1", run_id="R1", to="human", card=card),
        _trip(10.0),
        _failed(),
        RunFinished(trace_id="T1", session_id="S1", run_id="R2", status="completed"),
    ]
    await _commit(store, *events)
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
    assert all(i.status == "pending" and i.attempts == 0 and not i.deliveries for i in items)


@capability(Outbox)
async def test_a_commit_that_is_refused_writes_no_notification(store: Store) -> None:
    assert isinstance(store, Outbox)
    await _commit(store)
    with pytest.raises(ConflictError):
        await store.commit_run(SessionRecord("S1"), [], [_approval()])  # stale: version 0
    assert await store.list_outbox() == []


@capability(Outbox)
async def test_claims_are_leased_and_settled_by_their_holder(store: Store) -> None:
    assert isinstance(store, Outbox)
    await _commit(store, _approval(), _failed())
    a = await store.claim_outbox("a", lease_s=30, at=100.0)
    assert len(a) == 2 and all(i.owner == "a" for i in a)
    assert await store.claim_outbox("b", lease_s=30, at=110.0) == []  # a's lease is live
    # a dies; after its lease b takes the items over, and a can no longer settle them
    b = await store.claim_outbox("b", lease_s=30, limit=1, at=131.0)
    assert [i.id for i in b] == [a[0].id]
    d = Delivery("ops", 1, False, 500, "boom", key=f"{a[0].id}:ops", at=131.5)
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
    ok = Delivery("ops", 2, True, 200, key=d.key, at=201.5)
    assert await store.settle_outbox(again.id, "c", "delivered", [ok])
    done = await store.get_outbox(again.id)
    assert done is not None and done.deliveries == [d, ok] and done.delivered_to() == {"ops"}
    assert [i.id for i in await store.list_outbox("delivered")] == [again.id]
    assert await store.get_outbox("nope") is None


@capability(Outbox)
async def test_items_handed_out_are_copies(store: Store) -> None:
    assert isinstance(store, Outbox)
    await _commit(store, _failed())
    (item,) = await store.list_outbox()
    item.status = "dead"
    item.deliveries.append(Delivery("x", 1, True))
    (again,) = await store.list_outbox()
    assert again.status == "pending" and again.deliveries == []


@capability(Outbox)
async def test_count_and_prune(store: Store) -> None:
    assert isinstance(store, Outbox)
    trips = [_trip(t) for t in (10.0, 20.0, 30.0)] + [_trip(25.0, "max_visits")]
    await _commit(store, *trips)
    assert await store.count_outbox("guard_tripped", "max_hops", 10.0, 30.0) == 2
    assert await store.count_outbox("guard_tripped", "max_hops", 0.0, 30.0) == 3
    assert await store.count_outbox("guard_tripped", "max_visits", 0.0, 30.0) == 1
    (first,) = await store.claim_outbox("a", lease_s=5, limit=1, at=50.0)
    assert await store.settle_outbox(first.id, "a", "skipped", [])
    assert await store.prune_outbox(before=100.0) == 1  # pending ones stay
    assert len(await store.list_outbox()) == 3


@capability(Outbox)
async def test_claim_refuses_nonsense(store: Store) -> None:
    assert isinstance(store, Outbox)
    with pytest.raises(StoreError, match="lease_s > 0"):
        await store.claim_outbox("a", lease_s=0)


@capability(Outbox)
async def test_a_dead_item_is_requeued_with_its_log(store: Store) -> None:
    assert isinstance(store, Outbox)
    await _commit(store, _failed())
    (item,) = await store.claim_outbox("a", lease_s=5, at=10.0)
    failed = Delivery("ops", 1, False, 500, "boom", at=10.5)
    assert not await store.requeue_outbox(item.id)  # not dead: nothing to do
    assert await store.settle_outbox(item.id, "a", "dead", [failed], next_at=0.0)
    assert await store.claim_outbox("b", lease_s=5, at=20.0) == []
    assert await store.requeue_outbox(item.id)
    assert not await store.requeue_outbox("nope")
    (again,) = await store.claim_outbox("b", lease_s=5, at=20.0)
    assert (again.id, again.status, again.attempts) == (item.id, "pending", 0)
    assert again.deliveries == [failed]
