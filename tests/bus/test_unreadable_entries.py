"""Stream entries the Redis bus did not write: each ends in the dead-letter queue with its
error after `max_deliveries` (or, when it is a valid envelope, runs once), and the entries
after it on the partition are still delivered, in order. Entries are written by hand with a
plain Redis client, as a script, another program or `redis-cli` would."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from tests.bus.conftest import REDIS_URL, Buses
from tests.bus.test_bus_conformance import drain, messages, session_on

from baton.bus import Envelope, EnvelopeError, partition_of
from baton.bus.redis_streams import RedisStreamsBus
from baton.bus.wire import MAX_ENVELOPE_BYTES

PARTS = 4


@pytest.fixture
async def rbus(redis_buses: Buses) -> RedisStreamsBus:
    bus = redis_buses.new(partitions=PARTS, claim_idle_s=0.5, max_deliveries=3)
    assert isinstance(bus, RedisStreamsBus)
    return bus


@pytest.fixture
async def raw() -> AsyncIterator[aioredis.Redis]:
    """A plain client that reads and writes bytes."""
    client = aioredis.from_url(REDIS_URL)
    try:
        yield client
    finally:
        await client.aclose()


def good(session_id: str, message: str = "m", **more: Any) -> dict[str, Any]:
    """The JSON fields of a valid envelope."""
    fields = {
        "session_id": session_id,
        "message": message,
        "user_id": None,
        "id": "req-hand",
        "headers": {},
        "submitted_at": 1.0,
    }
    return {**fields, **more}


SID = session_on(2, PARTS, "u")
"""The session of the valid turns after each bad entry (partition 2)."""

UNREADABLE: list[tuple[str, dict[str, Any], str]] = [
    ("missing fields", {"foo": "bar"}, "no envelope (no field 'e')"),
    ("not JSON", {"e": "{not json"}, "not valid JSON"),
    ("a JSON array", {"e": "[1, 2]"}, "JSON list, not an object"),
    ("nested too deep", {"e": "[" * 200_000}, "not valid JSON"),
    ("wrong types", {"e": json.dumps(good(SID, message=42))}, "message: input should be a"),
    ("a missing id", {"e": json.dumps({"session_id": SID, "message": "m"})}, "id: field required"),
    ("a field too many", {"e": json.dumps(good(SID, admin=True))}, "admin: extra inputs"),
    ("an empty session", {"e": json.dumps(good(""))}, "session_id: string should have"),
    ("NaN for a time", {"e": json.dumps(good(SID, submitted_at=float("nan")))}, "submitted_at"),
    ("invalid UTF-8", {"e": b'{"session_id": "\xff\xfe", "message": "m"}'}, "byte 0xff at offset"),
    (
        "a lone surrogate",
        {"e": json.dumps(good(SID, message="pay \ud800"))},  # json.dumps writes "\ud800"
        "lone surrogate (half of a UTF-16 pair",
    ),
    ("a huge message", {"e": b"x" * (MAX_ENVELOPE_BYTES + 10)}, "over the bus's limit"),
]


async def write(client: aioredis.Redis, bus: RedisStreamsBus, partition: int, fields: Any) -> str:
    entry = await client.xadd(bus._pkey(partition), fields)
    return entry.decode() if isinstance(entry, bytes) else str(entry)


async def settled_letters(bus: RedisStreamsBus) -> list[Any]:
    """Receive until the bad entry is a dead letter; the turns handed out meanwhile."""
    got = await drain(bus, "w1")
    for d in got:
        await bus.ack("w1", d)
    return got


@pytest.mark.parametrize(("kind", "fields", "error"), UNREADABLE, ids=[u[0] for u in UNREADABLE])
async def test_an_unreadable_entry_is_a_dead_letter_and_the_partition_goes_on(
    rbus: RedisStreamsBus, raw: aioredis.Redis, kind: str, fields: dict[str, Any], error: str
) -> None:
    await rbus.publish(Envelope(session_id=SID, message="before"))
    await write(raw, rbus, 2, fields)
    after = [Envelope(session_id=SID, message=f"after {i}") for i in range(2)]
    for envelope in after:
        await rbus.publish(envelope)
    got: list[Any] = []
    for _ in range(10):  # one at a time: the bad entry is in the way of the next one
        more = await rbus.receive("w1", count=1, block_s=0)
        got.extend(more)
        for d in more:
            await rbus.ack("w1", d)
        if not more:
            break
    assert messages(got) == ["before", "after 0", "after 1"]
    assert [d.retry_count for d in got] == [0, 0, 0]
    (letter,) = await rbus.dead_letters()
    assert letter.envelope is None, kind
    assert error in letter.error and letter.error.startswith("EnvelopeError: ")
    assert letter.deliveries == 3
    assert len(letter.raw) <= 4096
    assert await rbus.pending() == 0  # the bad entry was never counted as a turn
    with pytest.raises(EnvelopeError, match="holds no envelope to publish again"):
        await rbus.requeue(letter.id)
    assert [d.id for d in await rbus.dead_letters()] == [letter.id]  # kept as the record


async def test_a_turn_on_the_wrong_partition_is_a_dead_letter_that_retry_puts_right(
    rbus: RedisStreamsBus, redis_buses: Buses
) -> None:
    """A client configured with another number of partitions (3, the workers' bus 4) puts a
    session's turn on a stream whose consumer must not run that session."""
    misconfigured = redis_buses.new(partitions=3)
    stray = next(
        f"v{n}" for n in range(1000) if partition_of(f"v{n}", 3) == 2 != partition_of(f"v{n}", 4)
    )
    home = partition_of(stray, PARTS)
    sent = Envelope(session_id=stray, message="stray turn")
    await misconfigured.publish(sent)
    await rbus.publish(Envelope(session_id=SID, message="next"))
    got = await settled_letters(rbus)
    assert messages(got) == ["next"]
    (letter,) = await rbus.dead_letters()
    assert letter.envelope == sent and letter.raw == ""
    assert f"sits on partition 2, but the session's turns go to partition {home} of 4" in (
        letter.error
    )
    assert "another number of partitions" in letter.error
    assert await rbus.pending() == 0
    again = await rbus.requeue(letter.id)  # published on the session's own partition
    assert again == sent
    (delivery,) = await rbus.receive("w1", count=10, block_s=0)
    assert delivery.envelope == sent and delivery.token.partition == home
    await rbus.ack("w1", delivery)
    assert await rbus.pending() == 0


async def test_entries_of_the_older_layout_are_read_and_their_acks_honoured(
    rbus: RedisStreamsBus, raw: aioredis.Redis
) -> None:
    """An older version wrote `id` and `e` only and acknowledged by request id alone: its
    queued turns are delivered after an upgrade, and one it acknowledged is still skipped."""
    older = [Envelope(session_id=SID, message=f"old {i}", id=f"req-old-{i}") for i in range(2)]
    for envelope in older:
        body = json.dumps(dataclasses.asdict(envelope))
        await write(raw, rbus, 2, {"id": envelope.id, "e": body})
        await raw.incr(rbus._pkey(2, ":n"))
    await raw.set(rbus._pkey(2, ":done:req-old-0"), "1")  # acknowledged (a copy published again)
    assert await rbus.pending() == 2
    got = await settled_letters(rbus)
    assert [d.envelope for d in got] == older[1:]
    assert await rbus.pending() == 0 and await rbus.dead_letters() == []


async def test_an_entry_whose_fields_disagree_with_its_envelope_is_a_dead_letter(
    rbus: RedisStreamsBus, raw: aioredis.Redis
) -> None:
    """The bus skips an acknowledged request by the entry's fields: an entry naming another
    request than its envelope could dodge that, so it is not run."""
    await write(raw, rbus, 2, {"s": SID, "id": "req-other", "e": json.dumps(good(SID))})
    await rbus.publish(Envelope(session_id=SID, message="next"))
    assert messages(await settled_letters(rbus)) == ["next"]
    (letter,) = await rbus.dead_letters()
    assert letter.envelope is not None and letter.envelope.id == "req-hand"
    assert f"names session {SID!r}, request 'req-other', but its envelope is request " in (
        letter.error
    )


async def test_a_valid_envelope_written_by_hand_runs_once(
    rbus: RedisStreamsBus, raw: aioredis.Redis
) -> None:
    await write(raw, rbus, 2, {"e": json.dumps(good(SID, "by hand"))})  # no id or s field
    got = await settled_letters(rbus)
    assert messages(got) == ["by hand"] and got[0].envelope.id == "req-hand"
    assert await rbus.dead_letters() == []
    assert await rbus.pending() == 0  # not published by the bus: never counted


async def test_an_entry_on_a_stream_another_program_made_is_read(
    rbus: RedisStreamsBus, raw: aioredis.Redis
) -> None:
    """The first entry of a partition written by hand (XADD made the stream, no group)."""
    await write(raw, rbus, 2, {"e": "{not json"})
    await write(raw, rbus, 2, {"e": json.dumps(good(SID, "after"))})
    got = await settled_letters(rbus)
    assert messages(got) == ["after"]
    (letter,) = await rbus.dead_letters()
    assert "not valid JSON" in letter.error and letter.raw == "{not json"


async def test_bytes_that_are_not_utf8_are_shown_as_escapes(
    rbus: RedisStreamsBus, raw: aioredis.Redis
) -> None:
    await write(raw, rbus, 0, {"e": b"\xff\x00\xe4\xb8\xad\x1b[31m"})
    await settled_letters(rbus)
    (letter,) = await rbus.dead_letters()
    assert letter.raw == "\\xff\x00中\x1b[31m"  # the CLI shows control characters as escapes


async def test_unreadable_entries_do_not_stop_the_other_partitions(
    rbus: RedisStreamsBus, raw: aioredis.Redis
) -> None:
    for p in range(PARTS):
        await write(raw, rbus, p, {"e": b"\xff"})
    sessions = [session_on(p, PARTS, "w") for p in range(PARTS)]
    for sid in sessions:
        await rbus.publish(Envelope(session_id=sid, message=sid))
    got = await settled_letters(rbus)
    assert sorted(messages(got)) == sorted(sessions)
    assert len(await rbus.dead_letters()) == PARTS


async def test_a_huge_entry_keeps_only_its_start_in_the_dead_letter(
    rbus: RedisStreamsBus, raw: aioredis.Redis
) -> None:
    await write(raw, rbus, 0, {"e": "大" * (MAX_ENVELOPE_BYTES // 3 + 10)})
    await settled_letters(rbus)
    (letter,) = await rbus.dead_letters()
    assert f"is {(MAX_ENVELOPE_BYTES // 3 + 10) * 3:,} bytes" in letter.error
    assert letter.raw == "大" * 4096
    (row,) = await raw.xrange(rbus.keys + "dlq")
    assert len(row[1][b"e"]) == 4 * 4096  # the copy kept is clipped


async def test_a_non_utf8_announcement_does_not_stop_result_waiters(
    rbus: RedisStreamsBus, raw: aioredis.Redis, redis_buses: Buses
) -> None:
    from baton.bus import TurnResult

    waiting = asyncio.create_task(rbus.get_result("s1", "req-1", wait_s=10))
    await asyncio.sleep(0.3)
    await raw.publish(rbus.keys + "results", b"\xff\xfe")
    await asyncio.sleep(0.1)
    await redis_buses.peer(rbus).put_result(
        TurnResult(request_id="req-1", session_id="s1", status="completed")
    )
    found = await asyncio.wait_for(waiting, 5)
    assert found is not None and found.status == "completed"


async def test_a_worker_runs_on_past_unreadable_entries(
    rbus: RedisStreamsBus, raw: aioredis.Redis
) -> None:
    from tests.bus import test_worker

    team = test_worker.echo_desk(rbus)
    test_worker.ANSWERED.clear()
    await write(raw, rbus, 2, {"e": b'{"session_id": "\xff'})
    await write(raw, rbus, 2, {"e": json.dumps(good(SID, message=["not", "text"]))})
    worker = test_worker.Worker(team, block_s=0.05)
    task = await test_worker.started(worker)
    sent = [await team.submit(f"turn {i}", session_id=SID) for i in range(3)]
    results = [await team.result(SID, request_id=e.id, wait_s=10) for e in sent]
    worker.stop()
    stats = await task
    assert [r.output for r in results] == [f"answer to turn {i}" for i in range(3)]
    assert test_worker.ANSWERED == ["turn 0", "turn 1", "turn 2"]  # in order, once each
    assert stats.bus_outages == 0 and stats.answered == 3
    letters = await rbus.dead_letters()
    assert [d.envelope for d in letters] == [None, None]
    assert "not UTF-8" in letters[0].error and "message: input should be" in letters[1].error
    assert await rbus.pending() == 0
