"""The `Leases` capability: one runner per session across processes, until the lease expires."""

from __future__ import annotations

import asyncio

from baton.backends import Store
from baton.backends.base import Leases
from baton.testing.kit import (  # baton_capability: the fixture a star import brings
    baton_capability,  # noqa: F401
    capability,
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
