"""The `Leases` capability: one runner per session across processes, until the lease expires;
and `FencedCheckpoints`: a checkpoint saved under a lease renewed in the same write."""

from __future__ import annotations

import asyncio

import pytest

from baton.backends import Store
from baton.backends.base import (
    Checkpoints,
    Fence,
    FencedCheckpoints,
    KeptSnapshot,
    Leases,
    Snapshot,
    Snapshots,
)
from baton.core.errors import ConflictError, StoreError
from baton.core.ids import new_id
from baton.testing.kit import (  # baton_capability: the fixture a star import brings
    baton_capability,  # noqa: F401
    capability,
    make_checkpoint,
)


@capability(Leases)
async def test_lease_is_exclusive_and_released_by_its_owner(store: Store) -> None:
    assert await store.acquire_lease("s_1", "worker-a", 30) is True
    assert await store.acquire_lease("s_1", "worker-b", 30) is False
    assert await store.acquire_lease("s_2", "worker-b", 30) is True  # another key
    await store.release_lease("s_1", "worker-b")  # not the owner: no-op
    assert await store.acquire_lease("s_1", "worker-b", 30) is False
    await store.release_lease("s_1", "worker-a")
    assert await store.acquire_lease("s_1", "worker-b", 30) is True
    assert await store.acquire_lease("s_1", "worker-a", 30) is False
    await store.release_lease("s_missing", "worker-a")  # nothing held: no error


@capability(Leases)
async def test_lease_is_renewed_by_its_owner(store: Store) -> None:
    assert await store.acquire_lease("k", "worker-a", 0.05) is True
    assert await store.acquire_lease("k", "worker-a", 30) is True  # renewal, now long
    await asyncio.sleep(0.08)
    assert await store.acquire_lease("k", "worker-b", 30) is False


@capability(Leases)
async def test_expired_lease_is_taken_over(store: Store) -> None:
    assert await store.acquire_lease("k", "worker-a", 0.05) is True
    assert await store.acquire_lease("k", "worker-b", 0.05) is False
    await asyncio.sleep(0.08)
    assert await store.acquire_lease("k", "worker-b", 30) is True
    assert await store.acquire_lease("k", "worker-a", 30) is False
    await store.release_lease("k", "worker-a")  # lost it: releasing does nothing
    assert await store.acquire_lease("k", "worker-c", 30) is False


@capability(FencedCheckpoints, Checkpoints)
async def test_a_fenced_checkpoint_renews_the_lease_in_the_same_write(store: Store) -> None:
    assert isinstance(store, FencedCheckpoints)
    sid = new_id("s_")
    fence = Fence(f"session|{sid}", "worker-a", 0.05)
    assert await store.put_checkpoint_fenced(make_checkpoint(sid, "run_1", 1), fence) is True
    got = await store.get_checkpoint(sid)
    assert got is not None and got.seq == 1
    assert await store.acquire_lease(fence.key, "worker-b", 30) is False  # it holds the lease
    long = Fence(fence.key, "worker-a", 30)
    assert await store.put_checkpoint_fenced(make_checkpoint(sid, "run_1", 2), long) is True
    await asyncio.sleep(0.08)  # past the first lease: the second save renewed it
    assert await store.acquire_lease(fence.key, "worker-b", 30) is False
    with pytest.raises(ConflictError):  # a stale save conflicts as put_checkpoint's does
        await store.put_checkpoint_fenced(make_checkpoint(sid, "run_1", 2), long)


@capability(FencedCheckpoints, Checkpoints)
async def test_a_fenced_checkpoint_of_a_process_that_lost_its_lease_saves_nothing(
    store: Store,
) -> None:
    assert isinstance(store, FencedCheckpoints)
    sid = new_id("s_")
    key = f"session|{sid}"
    await store.put_checkpoint(make_checkpoint(sid, "run_taker", 5))
    assert await store.acquire_lease(key, "taker", 30) is True
    stalled = Fence(key, "stalled", 30)
    assert await store.put_checkpoint_fenced(make_checkpoint(sid, "run_old", 9), stalled) is False
    got = await store.get_checkpoint(sid)
    assert got is not None and (got.run_id, got.seq) == ("run_taker", 5)
    assert await store.acquire_lease(key, "stalled", 30) is False  # the taker keeps it


def _snap(thread: str, sid: str, step: int, data: object = None) -> KeptSnapshot:
    return KeptSnapshot(Snapshot(thread, sid, "run_1", step, None, data or {"step": step}), 2)


@capability(FencedCheckpoints, Checkpoints, Snapshots)
async def test_a_fenced_checkpoint_saves_the_steps_snapshots_in_the_same_write(
    store: Store,
) -> None:
    assert isinstance(store, FencedCheckpoints) and isinstance(store, Snapshots)
    sid = new_id("s_")
    fence = Fence(f"session|{sid}", "worker-a", 30)
    for seq, name in enumerate(("a", "b", "c"), start=1):
        shots = [_snap(sid, name, seq)]
        assert await store.put_checkpoint_fenced(make_checkpoint(sid, "run_1", seq), fence, shots)
    kept = await store.list_snapshots(sid)
    assert [(s.id, s.seq, s.data) for s in kept] == [("c", 3, {"step": 3}), ("b", 2, {"step": 2})]
    # a step saved again (a resumed run) replaces its snapshot and keeps its seq
    again = [_snap(sid, "c", 3, {"step": 3, "again": True})]
    assert await store.put_checkpoint_fenced(make_checkpoint(sid, "run_1", 4), fence, again)
    got = await store.get_snapshot(sid, "c")
    assert got is not None and (got.seq, got.data) == (3, {"step": 3, "again": True})
    assert [s.id for s in await store.list_snapshots(sid)] == ["c", "b"]

    # refused: a stale checkpoint, or a lease another process holds, saves no snapshot
    with pytest.raises(ConflictError):
        await store.put_checkpoint_fenced(
            make_checkpoint(sid, "run_1", 4), fence, [_snap(sid, "x", 9)]
        )
    stalled = Fence(fence.key, "stalled", 30)
    shots = [_snap(sid, "y", 9)]
    assert (
        await store.put_checkpoint_fenced(make_checkpoint(sid, "run_1", 9), stalled, shots) is False
    )
    assert await store.get_snapshot(sid, "x") is None and await store.get_snapshot(sid, "y") is None
    # data that is not JSON writes nothing at all: not the checkpoint either
    with pytest.raises(StoreError):
        bad = [_snap(sid, "z", 5, {"f": {1, 2}})]
        await store.put_checkpoint_fenced(make_checkpoint(sid, "run_1", 5), fence, bad)
    cp = await store.get_checkpoint(sid)
    assert cp is not None and cp.seq == 4 and await store.get_snapshot(sid, "z") is None
