"""Fixtures shared by the bus tests: a `make_bus` factory per backend (`memory`, `redis`).

Redis runs against the service on 127.0.0.1 (see `tests/services.py`): each test gets a fresh
key prefix whose keys are dropped after it; the Redis variant is skipped when Redis is down
(failed under BATON_REQUIRE_SERVICES=1).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from tests.services import REDIS, require_service

from baton.bus import Bus, MemoryBus

BACKENDS = ["memory", "redis"]

REDIS_URL = f"redis://{REDIS[0]}:{REDIS[1]}/0"

MakeBus = Callable[..., Bus]
"""`make_bus(partitions=..., claim_idle_s=..., max_deliveries=...)`: a fresh bus."""


class Buses:
    """Makes the buses of one test and disposes of them after it.

    `new(**params)` is a fresh bus; `peer(bus)` is the same bus as seen from another process
    (a second client on the same Redis keys; the very object for the in-process bus)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.prefix = f"t_{uuid.uuid4().hex[:12]}"
        self.made: list[Any] = []

    def new(self, **params: Any) -> Bus:
        if self.kind == "memory":
            return MemoryBus(**params)
        from baton.bus.redis_streams import RedisStreamsBus

        bus = RedisStreamsBus(REDIS_URL, prefix=self.prefix, **params)
        self.made.append(bus)
        return bus

    def peer(self, bus: Bus) -> Bus:
        if self.kind == "memory":
            return bus
        from baton.bus.redis_streams import RedisStreamsBus

        assert isinstance(bus, RedisStreamsBus)
        twin = RedisStreamsBus(
            REDIS_URL,
            prefix=bus.prefix,
            partitions=bus.partitions,
            claim_idle_s=bus.claim_idle_s,
            max_deliveries=bus.max_deliveries,
        )
        self.made.append(twin)
        return twin

    async def dispose(self) -> None:
        if self.made:
            try:
                await self.made[0].drop()
            finally:
                for bus in self.made:
                    await bus.close()


@pytest.fixture(params=BACKENDS)
async def buses(request: pytest.FixtureRequest) -> AsyncIterator[Buses]:
    """Every bus backend in turn; its keys dropped after the test."""
    if request.param == "redis":
        require_service("Redis", REDIS)
    made = Buses(request.param)
    try:
        yield made
    finally:
        await made.dispose()


@pytest.fixture
def make_bus(buses: Buses) -> MakeBus:
    """A factory of fresh buses of the backend under test."""
    return buses.new


@pytest.fixture
async def redis_buses() -> AsyncIterator[Buses]:
    """Redis buses only (skipped when Redis is down, failed under BATON_REQUIRE_SERVICES=1)."""
    require_service("Redis", REDIS)
    made = Buses("redis")
    try:
        yield made
    finally:
        await made.dispose()


@pytest.fixture
def bus(buses: Buses) -> Bus:
    """A fresh bus of the backend under test: 4 partitions, claim_idle_s 0.5, 3 deliveries."""
    return buses.new(partitions=4, claim_idle_s=0.5, max_deliveries=3)
