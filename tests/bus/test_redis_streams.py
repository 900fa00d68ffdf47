"""What is particular to `RedisStreamsBus` (the shared semantics are in test_bus_conformance.py):
URLs and `open_bus`, key names, errors, dropped connections, consumers racing for partitions,
and `Worker`s on it."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import socket
from typing import Any

import pytest
import redis.asyncio as aioredis
from tests.bus import test_worker
from tests.bus.conftest import REDIS_URL, Buses

import baton.bus
import baton.worker
from baton import MemoryStore
from baton.bus import (
    Bus,
    BusError,
    Envelope,
    MemoryBus,
    TurnResult,
    Worker,
    open_bus,
    partition_of,
)
from baton.bus.redis_streams import RedisStreamsBus
from baton.core.errors import BatonError, ConfigError


def closed_port() -> int:
    with socket.socket() as s:  # nobody listens on it once this socket is closed
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ------------------------------------------------------------------ URLs (no server needed)
def test_the_url_parameters_are_read_and_removed_before_connecting() -> None:
    bus = RedisStreamsBus(
        "redis://127.0.0.1:6379/0?prefix=app&partitions=3&claim_idle_s=2.5&max_deliveries=4"
        "&socket_timeout=7"
    )
    assert (bus.prefix, bus.partitions, bus.claim_idle_s, bus.max_deliveries) == ("app", 3, 2.5, 4)
    assert bus.keys == "app:bus:"
    assert bus._connect_url == "redis://127.0.0.1:6379/0?socket_timeout=7"
    same = RedisStreamsBus("redis://127.0.0.1:6379/0?partitions=3", partitions=3)
    assert same.partitions == 3
    assert RedisStreamsBus("redis://h:6379/0", prefix="x:", partitions=5).keys == "x:bus:"


@pytest.mark.parametrize(
    ("url", "kwargs", "message"),
    [
        ("redis://h/0?partitions=3", {"partitions": 4}, "give it in one place"),
        ("redis://h/0?partitions=many", {}, "partitions='many'"),
        ("redis://h/0?claim_idle_s=0", {}, "claim_idle_s must be positive"),
        ("redis://h/0", {"max_deliveries": 0}, "max_deliveries must be at least 1"),
        ("redis://h/0", {"partitions": 0}, "partitions must be at least 1"),
        ("redis://h/0", {"prefix": ""}, "non-empty key prefix"),
        ("http://h/0", {}, "bad Redis bus URL"),
    ],
)
def test_bad_parameters_are_refused_when_the_bus_is_made(
    url: str, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        RedisStreamsBus(url, **kwargs)


def test_tls_and_unix_socket_urls_are_accepted() -> None:
    assert RedisStreamsBus("rediss://cache.example:6380/0").where == "cache.example:6380"
    assert RedisStreamsBus("unix:///run/redis.sock?db=0&prefix=p").where == "/run/redis.sock"


async def test_a_unix_socket_bus_connects_to_its_socket() -> None:
    bus = RedisStreamsBus("unix:///nowhere/redis.sock?prefix=p")
    try:
        with pytest.raises(BatonError, match=r"unreachable \(Error 2 connecting to /nowhere/"):
            await bus.get_result("s", "r")  # the socket is tried: the URL and options are fine
    finally:
        await bus.close()


def test_the_password_is_never_shown() -> None:
    bus = RedisStreamsBus("redis://user:s3cret@127.0.0.1:6379/0?prefix=p")
    assert "s3cret" not in bus.url and "s3cret" not in repr(bus)
    assert bus.url == "redis://user:***@127.0.0.1:6379/0?prefix=p"


def test_open_bus_by_url_or_object() -> None:
    assert isinstance(open_bus(None), MemoryBus)
    assert isinstance(open_bus("memory://"), MemoryBus)
    tuned = open_bus("memory://?partitions=3&claim_idle_s=0.5&max_deliveries=2")
    assert isinstance(tuned, MemoryBus)
    assert (tuned.partitions, tuned.claim_idle_s, tuned.max_deliveries) == (3, 0.5, 2)
    mine = MemoryBus()
    assert open_bus(mine) is mine
    for url in (
        "redis://127.0.0.1:6379/0?prefix=a&partitions=16&claim_idle_s=2",
        "rediss://127.0.0.1:6379/0",
        "unix:///tmp/redis.sock",
    ):
        bus = open_bus(url)
        assert isinstance(bus, RedisStreamsBus) and isinstance(bus, Bus)
    assert open_bus("redis://h/0?partitions=16").partitions == 16


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("kafka://broker:9092", "unknown bus URL 'kafka://broker:9092': use 'memory://'"),
        ("memory://?partitions=x", "is not a number"),
        ("memory://?colour=blue", "unknown parameter 'colour'"),
        ("memory://?partitions=0", "partitions must be at least 1"),
        (42, "bus must be a URL or a Bus object"),
    ],
)
def test_open_bus_refuses_what_it_does_not_know(spec: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        open_bus(spec)
    assert isinstance(caught.value, BatonError)
    if spec == "kafka://broker:9092":
        for scheme in baton.bus.SCHEMES:
            assert scheme in str(caught.value)


def test_the_package_exports() -> None:
    assert baton.bus.RedisStreamsBus is RedisStreamsBus
    for name in ("MemoryBus", "RedisStreamsBus", "BusError", "open_bus"):
        assert name in baton.bus.__all__
    # the worker runs teams and lives beside the bus; the old spelling still resolves
    assert "Worker" not in baton.bus.__all__ and "Worker" in baton.__all__
    assert baton.bus.Worker is baton.worker.Worker is baton.Worker
    with pytest.raises(AttributeError):
        _ = baton.bus.KafkaBus  # type: ignore[attr-defined]


async def test_an_unreachable_server_is_a_bus_error_that_says_what_to_do() -> None:
    bus = RedisStreamsBus(f"redis://:s3cret@127.0.0.1:{closed_port()}/0")
    try:
        for call in (
            bus.publish(Envelope(session_id="s1", message="m")),
            bus.receive("a", block_s=0),
            bus.pending(),
            bus.get_result("s1", "req_1", wait_s=0.1),
        ):
            with pytest.raises(BusError) as caught:
                await call
            text = str(caught.value)
            assert "unreachable" in text and "start Redis or fix the bus URL" in text
            assert f"redis://:***@127.0.0.1:{bus.where.split(':')[1]}/0" in text
            assert "s3cret" not in text
    finally:
        await bus.close()
    with pytest.raises(BusError, match="closed"):
        await bus.pending()


# ------------------------------------------------------------------ against the server
@pytest.fixture
async def rbus(redis_buses: Buses) -> RedisStreamsBus:
    bus = redis_buses.new(partitions=4, claim_idle_s=0.5, max_deliveries=3)
    assert isinstance(bus, RedisStreamsBus)
    return bus


async def keys_of(bus: RedisStreamsBus) -> list[str]:
    client = aioredis.from_url(REDIS_URL, decode_responses=True)
    try:
        return sorted([k async for k in client.scan_iter(match=bus.prefix + "*")])
    finally:
        await client.aclose()


async def test_keys_carry_a_hash_tag_per_partition(rbus: RedisStreamsBus) -> None:
    for p in range(4):
        sid = next(f"s{n}" for n in range(1000) if partition_of(f"s{n}", 4) == p)
        await rbus.publish(Envelope(session_id=sid, message="m"))
    (got, *_) = await rbus.receive("a", count=1, block_s=0)
    await rbus.ack("a", got)
    keys = await keys_of(rbus)
    p = rbus.prefix
    for i in range(4):
        assert f"{p}:bus:{{p{i}}}" in keys  # the stream
        assert f"{p}:bus:{{p{i}}}:n" in keys
        assert f"{p}:bus:{{p{i}}}:lease" in keys
    partition = got.token.partition
    sid, rid = got.envelope.session_id, got.envelope.id
    assert f"{p}:bus:{{p{partition}}}:acked:{len(sid)}:{sid}:{rid}" in keys
    # every per-partition key has the partition's hash tag (one Redis Cluster slot)
    for key in keys:
        if "{" in key:
            assert key.startswith(f"{p}:bus:{{p") and "}" in key


async def test_drop_deletes_the_bus_keys_only(rbus: RedisStreamsBus) -> None:
    client = aioredis.from_url(REDIS_URL, decode_responses=True)
    try:
        await client.set(f"{rbus.prefix}:store-key", "kept")
        await rbus.publish(Envelope(session_id="s1", message="m"))
        await rbus.put_result(TurnResult(request_id="r", session_id="s1", status="completed"))
        assert len(await keys_of(rbus)) > 2
        await rbus.drop()
        assert await keys_of(rbus) == [f"{rbus.prefix}:store-key"]
        assert await rbus.pending() == 0
    finally:
        await client.delete(f"{rbus.prefix}:store-key")
        await client.aclose()


async def test_connections_killed_by_the_server_are_survived(
    rbus: RedisStreamsBus, redis_buses: Buses
) -> None:
    client = redis_buses.peer(rbus)
    sent = Envelope(session_id="s1", message="m")
    await client.publish(sent)
    waiting = asyncio.create_task(client.get_result("s1", sent.id, wait_s=10))
    blocked = asyncio.create_task(rbus.receive("a", count=10, block_s=0))
    assert [d.envelope for d in await blocked] == [sent]
    blocked = asyncio.create_task(rbus.receive("a", count=10, block_s=2))
    await asyncio.sleep(0.3)  # the result waiter subscribed; the consumer blocks in XREAD
    killer = aioredis.from_url(REDIS_URL)
    try:
        assert await killer.client_kill_filter(_type="normal", skipme=True) >= 2
    finally:
        await killer.aclose()
    with contextlib.suppress(BusError):  # the next call may fail; the one after works
        await rbus.pending()
    assert await rbus.pending() == 1
    await blocked  # its connection was cut: it reconnected (or reports nothing new)
    await rbus.put_result(TurnResult(request_id=sent.id, session_id="s1", status="completed"))
    result = await asyncio.wait_for(waiting, 5)
    assert result is not None and result.status == "completed"


async def test_racing_consumers_keep_each_session_in_order_and_lose_nothing(
    redis_buses: Buses,
) -> None:
    first = redis_buses.new(partitions=8, claim_idle_s=1.0)
    views = [first, redis_buses.peer(first), redis_buses.peer(first)]
    sessions = [f"s{i}" for i in range(20)]
    sent = []
    for turn in range(10):
        for sid in sessions:
            env = Envelope(session_id=sid, message=f"{sid}/{turn}")
            await first.publish(env)
            sent.append(env)
    seen: dict[str, list[tuple[int, str]]] = {}
    done: list[str] = []

    async def consume(bus: Bus, name: str) -> None:
        idle = 0
        while idle < 5:
            got = await bus.receive(name, count=7, block_s=0.1)
            idle = 0 if got else idle + 1
            for d in got:
                seen.setdefault(d.envelope.session_id, []).append(
                    (int(d.envelope.message.split("/")[1]), name)
                )
                await asyncio.sleep(0)
                await bus.ack(name, d)
                done.append(d.envelope.id)

    await asyncio.gather(*(consume(b, f"c{i}") for i, b in enumerate(views)))
    assert sorted(done) == sorted(e.id for e in sent)  # each once
    for sid in sessions:
        assert [turn for turn, _ in seen[sid]] == list(range(10)), sid
    assert await first.pending() == 0
    assert len({name for runs in seen.values() for _, name in runs}) >= 2  # shared out


def test_one_bus_serves_several_event_loops_in_turn(redis_buses: Buses) -> None:
    bus = RedisStreamsBus(REDIS_URL, prefix=redis_buses.prefix)

    async def publish() -> str:
        return await bus.publish(Envelope(session_id="s1", message="m"))

    async def pending() -> int:
        return await bus.pending()

    asyncio.run(publish())
    asyncio.run(publish())
    assert asyncio.run(pending()) == 2
    asyncio.run(bus.drop())


# ------------------------------------------------------------------ workers on Redis
@pytest.fixture
def worker_bus(redis_buses: Buses) -> RedisStreamsBus:
    test_worker.PAID.clear()
    bus = redis_buses.new(partitions=4, claim_idle_s=1.0)
    assert isinstance(bus, RedisStreamsBus)
    return bus


async def test_a_worker_answers_each_turn_once_and_in_order(worker_bus: RedisStreamsBus) -> None:
    team = test_worker.desk(bus=worker_bus)
    worker = Worker(team, block_s=0.05)
    task = await test_worker.started(worker)
    sent = [await team.submit(f"pay please {i}", session_id=f"s{i % 4}") for i in range(12)]
    results = [await team.result(e.session_id, request_id=e.id, wait_s=20) for e in sent]
    assert [r.status for r in results] == ["completed"] * 12
    assert len(test_worker.PAID) == 12
    for i in range(4):
        users = [m.content for m in await team.store.get_messages(f"s{i}") if m.role == "user"]
        assert users == [f"pay please {j}" for j in range(i, 12, 4)]
    await worker_bus.publish(sent[0])  # a client's retry of an answered request: skipped
    await asyncio.sleep(0.3)
    worker.stop()
    stats = await task
    assert stats.answered == 12 and stats.retried == 0
    assert await worker_bus.pending() == 0 and len(test_worker.PAID) == 12


async def test_a_worker_shut_down_hands_its_turn_to_another(
    worker_bus: RedisStreamsBus, redis_buses: Buses
) -> None:
    store = MemoryStore()
    team = test_worker.desk(store=store, bus=worker_bus, latency_s=0.4)
    first = Worker(team, name="first", drain_s=0.1, block_s=0.05)
    task = await test_worker.started(first)
    await team.submit("pay please", session_id="s1")
    for _ in range(100):
        if test_worker.PAID:
            break
        await asyncio.sleep(0.02)
    assert test_worker.PAID
    first.stop()
    stats = await task
    assert stats.released == 1
    other_process = redis_buses.peer(worker_bus)
    second = Worker(test_worker.desk(store=store, bus=other_process), name="second", block_s=0.05)
    task2 = await test_worker.started(second)
    result = await team.result("s1", wait_s=10)
    second.stop()
    await task2
    assert result.status == "completed" and result.worker == "second"
    assert len(test_worker.PAID) == 1


async def test_results_of_the_older_layout_are_read_for_their_own_session_only(
    rbus: RedisStreamsBus,
) -> None:
    """An older version kept results under `result:{request id}`: after an upgrade they are
    still found (kept `result_ttl_s`), and never handed to another session."""
    old = TurnResult(request_id="req-old", session_id="s1", status="completed", output="old")
    client = aioredis.from_url(REDIS_URL, decode_responses=True)
    try:
        await client.set(rbus.keys + "result:req-old", json.dumps(dataclasses.asdict(old)))
        assert await rbus.get_result("s1", "req-old") == old
        assert await rbus.get_result("s2", "req-old") is None
        # something else under a session's key is not that session's result either
        forged = dataclasses.replace(old, request_id="req-new", session_id="s2")
        await client.set(rbus.keys + "result:2:s1:req-new", json.dumps(dataclasses.asdict(forged)))
        assert await rbus.get_result("s1", "req-new") is None
    finally:
        await client.aclose()
    new = TurnResult(request_id="req-old", session_id="s1", status="completed", output="new")
    await rbus.put_result(new)  # the current layout wins once written
    assert await rbus.get_result("s1", "req-old") == new
