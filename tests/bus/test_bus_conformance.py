"""One suite for every bus (`MemoryBus`, `RedisStreamsBus`): the semantics of `baton.bus.base`.

Each test runs once per backend (the `buses` fixture). "Another process" is `buses.peer(bus)`:
a second client on the same Redis keys (the very object for the in-process bus).
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import pytest
from tests.bus.conftest import Buses, MakeBus

from baton.bus import Bus, Delivery, Envelope, EnvelopeError, TurnResult, partition_of


def session_on(partition: int, partitions: int, tag: str = "s") -> str:
    """A session id whose turns go to `partition`."""
    n = 0
    while True:
        sid = f"{tag}{n}"
        if partition_of(sid, partitions) == partition:
            return sid
        n += 1


async def publish(bus: Bus, session_id: str, *messages: str) -> list[Envelope]:
    sent = []
    for message in messages:
        envelope = Envelope(session_id=session_id, message=message)
        await bus.publish(envelope)
        sent.append(envelope)
    return sent


async def drain(bus: Bus, consumer: str, count: int = 100) -> list[Delivery]:
    """Receive until nothing more comes right away."""
    got: list[Delivery] = []
    while True:
        more = await bus.receive(consumer, count=count, block_s=0)
        if not more:
            return got
        got.extend(more)


def messages(got: list[Delivery]) -> list[str]:
    return [d.envelope.message for d in got]


# ------------------------------------------------------------------ delivery and order
async def test_each_partition_is_delivered_in_order_and_acked_once(bus: Bus) -> None:
    sessions = [f"s{i}" for i in range(6)]
    sent: dict[str, list[Envelope]] = {}
    for round_ in range(5):
        for sid in sessions:
            sent.setdefault(sid, []).extend(await publish(bus, sid, f"{sid}-{round_}"))
    assert await bus.pending() == 30
    got = await drain(bus, "a", count=7)
    assert len(got) == 30 and {d.retry_count for d in got} == {0}
    for sid in sessions:  # per session (so per partition): the order published
        assert [d.envelope for d in got if d.envelope.session_id == sid] == sent[sid]
    by_partition: dict[int, list[float]] = {}
    for d in got:
        by_partition.setdefault(partition_of(d.envelope.session_id, 4), []).append(
            d.envelope.submitted_at
        )
    assert all(ts == sorted(ts) for ts in by_partition.values())
    assert await bus.pending() == 30  # in flight until acknowledged
    for d in got:
        await bus.ack("a", d)
    assert await bus.pending() == 0
    assert await bus.receive("a", count=100, block_s=0) == []


async def test_count_bounds_a_receive_and_zero_only_renews(bus: Bus) -> None:
    await publish(bus, "s1", *[f"m{i}" for i in range(5)])
    assert await bus.receive("a", count=0, block_s=0) == []
    first = await bus.receive("a", count=2, block_s=0)
    assert messages(first) == ["m0", "m1"]
    rest = await bus.receive("a", count=10, block_s=0)
    assert messages(rest) == ["m2", "m3", "m4"]


async def test_a_blocked_receive_wakes_on_a_publish(bus: Bus, buses: Buses) -> None:
    client = buses.peer(bus)
    assert await bus.receive("a", count=0) == []  # "a" holds every partition

    async def later() -> None:
        await asyncio.sleep(0.2)
        await publish(client, "s1", "hello")

    task = asyncio.create_task(later())
    t0 = time.monotonic()
    got = await bus.receive("a", count=10, block_s=5)
    waited = time.monotonic() - t0
    await task
    assert messages(got) == ["hello"]
    assert waited < 2.0


async def test_an_empty_receive_waits_block_s(bus: Bus) -> None:
    t0 = time.monotonic()
    assert await bus.receive("a", count=10, block_s=0.3) == []
    assert 0.25 <= time.monotonic() - t0 < 2.0


# ------------------------------------------------------------------ partitions and consumers
async def test_a_partition_is_read_by_one_consumer_at_a_time(make_bus: MakeBus) -> None:
    bus = make_bus(partitions=1, claim_idle_s=0.5)
    await publish(bus, "s1", "m0", "m1")
    got = await bus.receive("a", count=1, block_s=0)
    assert messages(got) == ["m0"]
    # "b" is live too, but the one partition is held by "a" as long as it keeps receiving
    for _ in range(4):
        assert await bus.receive("b", count=10, block_s=0) == []
        await asyncio.sleep(0.2)  # past the lease: "a" renews it below
        await bus.receive("a", count=0, block_s=0)
    await bus.ack("a", got[0])
    assert await bus.receive("b", count=10, block_s=0) == []
    assert messages(await bus.receive("a", count=10, block_s=0)) == ["m1"]


async def test_two_consumers_share_the_partitions_fairly(make_bus: MakeBus, buses: Buses) -> None:
    bus = make_bus(partitions=4, claim_idle_s=2.0)
    other = buses.peer(bus)
    assert await bus.receive("a", count=0) == []  # alone: "a" takes all four
    assert await other.receive("b", count=0) == []  # share now 2: nothing free yet
    assert await bus.receive("a", count=0) == []  # gives up two (nothing pending on them)
    assert await other.receive("b", count=0) == []  # takes them
    sessions = [session_on(p, 4) for p in range(4)]
    for sid in sessions:
        await publish(bus, sid, "hi")
    a = await drain(bus, "a")
    b = await drain(other, "b")
    pa = {partition_of(d.envelope.session_id, 4) for d in a}
    pb = {partition_of(d.envelope.session_id, 4) for d in b}
    assert len(pa) == len(pb) == 2
    assert pa | pb == {0, 1, 2, 3}


async def test_a_consumer_keeps_a_partition_while_it_has_deliveries_there(
    make_bus: MakeBus, buses: Buses
) -> None:
    bus = make_bus(partitions=2, claim_idle_s=2.0)
    other = buses.peer(bus)
    for p in range(2):
        await publish(bus, session_on(p, 2), f"p{p}")
    held = await bus.receive("a", count=10, block_s=0)  # "a" takes both, one delivery each
    assert len(held) == 2
    await other.receive("b", count=0)
    await bus.receive("a", count=0)  # over its share, but nothing is settled: keeps both
    assert await other.receive("b", count=10, block_s=0) == []
    await bus.ack("a", held[1])
    await bus.receive("a", count=0)  # the partition of the settled one is given up
    await publish(bus, held[1].envelope.session_id, "next")
    assert messages(await other.receive("b", count=10, block_s=0)) == ["next"]


async def test_a_consumer_that_joins_under_load_gets_its_share(
    make_bus: MakeBus, buses: Buses
) -> None:
    """Partitions held beyond the share hand out no new entry (they drain), so they are
    given up even while turns keep coming, never to two consumers at once."""
    bus = make_bus(partitions=2, claim_idle_s=2.0)
    other = buses.peer(bus)
    s0, s1 = session_on(0, 2), session_on(1, 2)
    await publish(bus, s0, "a0")
    await publish(bus, s1, "b0")
    first = await bus.receive("a", count=10, block_s=0)  # alone: "a" takes both
    assert sorted(messages(first)) == ["a0", "b0"]
    assert await other.receive("b", count=0) == []  # "b" is live: the share is 1 now
    await publish(bus, s0, "a1")
    await publish(bus, s1, "b1")
    more = await bus.receive("a", count=10, block_s=0)
    assert len(more) == 1  # from the partition it keeps; the other drains
    assert await other.receive("b", count=10, block_s=0) == []  # still held by "a"
    for d in first:
        await bus.ack("a", d)
    await bus.receive("a", count=0)  # the drained partition is given up
    got = await other.receive("b", count=10, block_s=0)
    assert len(got) == 1 and {d.envelope.session_id for d in more + got} == {s0, s1}
    assert await bus.receive("a", count=10, block_s=0) == []


async def test_a_silent_consumer_loses_its_partitions_and_deliveries(
    bus: Bus, buses: Buses
) -> None:
    other = buses.peer(bus)
    sid = session_on(1, 4)
    await publish(bus, sid, "m0", "m1")
    taken = await bus.receive("a", count=10, block_s=0)  # then "a" dies: no ack, no receive
    assert messages(taken) == ["m0", "m1"]
    await publish(bus, sid, "m2")
    assert await other.receive("b", count=10, block_s=0) == []  # "a" still holds it
    await asyncio.sleep(bus.claim_idle_s + 0.2)
    got = await drain(other, "b")
    # the orphans first, in order, their retry_count raised; then the newer entry
    assert messages(got) == ["m0", "m1", "m2"]
    assert [d.retry_count for d in got] == [1, 1, 0]
    assert [d.envelope.id for d in got[:2]] == [d.envelope.id for d in taken]
    for d in got:
        await other.ack("b", d)
    assert await other.pending() == 0
    # the late acknowledgement of the dead consumer changes nothing
    await bus.ack("a", taken[0])
    assert await bus.pending() == 0


async def test_release_hands_the_partitions_over_at_once(make_bus: MakeBus, buses: Buses) -> None:
    bus = make_bus(partitions=2, claim_idle_s=30.0)
    other = buses.peer(bus)
    await publish(bus, "s1", "m0")
    taken = await bus.receive("a", count=10, block_s=0)
    assert messages(taken) == ["m0"]
    assert await other.receive("b", count=10, block_s=0) == []
    await bus.release("a")  # a graceful shutdown: m0 unfinished
    got = await other.receive("b", count=10, block_s=0)  # no claim_idle_s to wait
    assert messages(got) == ["m0"] and got[0].retry_count == 1
    await publish(bus, session_on(0, 2), "p0")
    await publish(bus, session_on(1, 2), "p1")
    assert sorted(messages(await drain(other, "b"))) == ["p0", "p1"]


async def test_a_blocked_receive_keeps_its_partitions(bus: Bus, buses: Buses) -> None:
    other = buses.peer(bus)
    assert await bus.receive("a", count=0) == []
    # "a" blocks for three leases (claim_idle_s 0.5): it renews while it waits
    blocked = asyncio.create_task(bus.receive("a", count=10, block_s=1.5))
    await asyncio.sleep(0.1)
    for _ in range(6):
        assert await other.receive("b", count=10, block_s=0) == []
        await asyncio.sleep(0.2)
    await publish(other, "s1", "late")
    got = await blocked
    assert messages(got) == ["late"]


async def test_an_unacknowledged_delivery_is_handed_out_again_to_its_consumer(bus: Bus) -> None:
    await publish(bus, "s1", "m0")
    first = await bus.receive("a", count=10, block_s=0)
    assert messages(first) == ["m0"]
    assert await bus.receive("a", count=10, block_s=0) == []  # not yet idle
    await asyncio.sleep(bus.claim_idle_s + 0.2)
    again = await drain(bus, "a")
    # a lost acknowledgement: the same delivery again, not counted as a new attempt
    assert messages(again) == ["m0"] and again[0].retry_count == 0
    assert again[0].envelope.id == first[0].envelope.id
    await bus.ack("a", again[0])
    assert await bus.pending() == 0


# ------------------------------------------------------------------ failures and dead letters
async def test_a_failed_delivery_comes_back_first_then_goes_to_the_dead_letters(
    bus: Bus,
) -> None:
    sid = "s1"
    first, second = await publish(bus, sid, "m0", "m1")
    counts = []
    for attempt in range(3):
        got = await bus.receive("a", count=1, block_s=0)
        assert messages(got) == ["m0"]  # before the newer m1
        counts.append(got[0].retry_count)
        dead = await bus.fail("a", got[0], f"boom {attempt}")
        assert dead is (attempt == 2)
    assert counts == [0, 1, 2]
    letters = await bus.dead_letters()
    assert len(letters) == 1
    letter = letters[0]
    assert letter.envelope == first
    assert letter.error == "boom 2" and letter.deliveries == 3
    assert abs(letter.failed_at - time.time()) < 600
    got = await bus.receive("a", count=10, block_s=0)
    assert [d.envelope for d in got] == [second] and got[0].retry_count == 0
    assert await bus.pending() == 1  # m1 in flight; the dead letter is settled
    await bus.ack("a", got[0])
    assert await bus.pending() == 0


async def test_fail_by_a_consumer_that_no_longer_holds_the_delivery(bus: Bus) -> None:
    await publish(bus, "s1", "m0")
    got = await bus.receive("a", count=10, block_s=0)
    assert await bus.fail("b", got[0], "not mine") is False
    await bus.ack("a", got[0])
    assert await bus.fail("a", got[0], "already done") is False
    assert await bus.dead_letters() == [] and await bus.pending() == 0


async def test_orphans_delivered_too_often_go_to_the_dead_letters(
    make_bus: MakeBus, buses: Buses
) -> None:
    bus = make_bus(partitions=1, claim_idle_s=0.3, max_deliveries=2)
    (envelope,) = await publish(bus, "s1", "poison")
    for consumer in ("a", "b"):  # each takes it, then dies
        got = await buses.peer(bus).receive(consumer, count=10, block_s=0)
        assert [d.envelope for d in got] == [envelope]
        await asyncio.sleep(0.45)
    assert await bus.receive("c", count=10, block_s=0) == []
    letters = await bus.dead_letters()
    assert [d.envelope for d in letters] == [envelope]
    assert letters[0].deliveries == 2 and "not acknowledged after 2 deliveries" in letters[0].error
    assert await bus.pending() == 0


async def test_requeue_publishes_a_dead_letter_again(bus: Bus, buses: Buses) -> None:
    (envelope,) = await publish(bus, "s1", "m0")
    for _ in range(3):
        (got,) = await bus.receive("a", count=10, block_s=0)
        await bus.fail("a", got, "boom")
    (letter,) = await bus.dead_letters()
    assert await bus.pending() == 0
    again = await buses.peer(bus).requeue(letter.id)
    assert again == envelope
    assert await bus.dead_letters() == []
    assert await bus.pending() == 1
    got = await bus.receive("a", count=10, block_s=0)
    assert [d.envelope for d in got] == [envelope] and got[0].retry_count == 0  # starts over
    with pytest.raises(LookupError, match="baton dlq list"):
        await bus.requeue(letter.id)
    with pytest.raises(LookupError, match="no dead letter"):
        await bus.requeue("nonsense")


async def test_dead_letters_are_listed_oldest_first_up_to_the_limit(bus: Bus) -> None:
    for i in range(3):
        await publish(bus, f"s{i}", f"m{i}")
    for _ in range(3):
        for d in await drain(bus, "a"):
            await bus.fail("a", d, f"failed {d.envelope.message}")
    letters = await bus.dead_letters()
    assert len(letters) == 3
    assert [d.failed_at for d in letters] == sorted(d.failed_at for d in letters)
    assert len({d.id for d in letters}) == 3
    assert len(await bus.dead_letters(limit=2)) == 2


# ------------------------------------------------------------------ duplicates and counts
async def test_an_acknowledged_envelope_published_again_is_skipped(bus: Bus, buses: Buses) -> None:
    (envelope,) = await publish(bus, "s1", "m0")
    (got,) = await bus.receive("a", count=10, block_s=0)
    await bus.ack("a", got)
    await buses.peer(bus).publish(envelope)  # a client's retry of the same request
    assert await bus.pending() == 1
    await publish(bus, "s1", "m1")
    got2 = await drain(bus, "a")
    assert messages(got2) == ["m1"]
    assert await bus.pending() == 1
    await bus.ack("a", got2[0])
    assert await bus.pending() == 0


async def test_pending_counts_queued_and_in_flight_exactly(bus: Bus) -> None:
    assert await bus.pending() == 0
    await publish(bus, "s1", "m0", "m1")
    await publish(bus, "s2", "m2")
    assert await bus.pending() == 3
    got = await bus.receive("a", count=2, block_s=0)
    assert await bus.pending() == 3
    await bus.ack("a", got[0])
    await bus.ack("a", got[0])  # twice: counted once
    assert await bus.pending() == 2
    await bus.fail("a", got[1], "boom")  # to be delivered again: still pending
    assert await bus.pending() == 2
    for d in await drain(bus, "a"):
        await bus.ack("a", d)
    assert await bus.pending() == 0


async def test_a_delivery_of_another_bus_is_refused(bus: Bus) -> None:
    envelope = Envelope(session_id="s1", message="m")
    with pytest.raises(ValueError, match="not a delivery of this bus"):
        await bus.ack("a", Delivery(envelope, 0, object()))


# ------------------------------------------------------------------ results
async def test_results_are_waited_for_from_another_task(bus: Bus, buses: Buses) -> None:
    worker_side = buses.peer(bus)
    assert await bus.get_result("s1", "req_none") is None
    result = TurnResult(
        request_id="req_1", session_id="s1", status="completed", output="done", worker="w"
    )

    async def later() -> None:
        await asyncio.sleep(0.2)
        await worker_side.put_result(result)

    task = asyncio.create_task(later())
    t0 = time.monotonic()
    got = await bus.get_result("s1", "req_1", wait_s=5)
    waited = time.monotonic() - t0
    await task
    assert got == result
    assert waited < 1.0
    assert await bus.get_result("s1", "req_1") == result
    t0 = time.monotonic()
    assert await bus.get_result("s1", "req_2", wait_s=0.3) is None
    assert time.monotonic() - t0 >= 0.25


async def test_many_waiters_are_all_woken(bus: Bus, buses: Buses) -> None:
    worker_side = buses.peer(bus)
    ids = [f"req_{i}" for i in range(50)]
    waits = [asyncio.create_task(bus.get_result("s", rid, wait_s=10)) for rid in ids]
    twice = asyncio.create_task(bus.get_result("s", ids[0], wait_s=10))
    await asyncio.sleep(0.2)
    t0 = time.monotonic()
    for rid in ids:
        await worker_side.put_result(TurnResult(request_id=rid, session_id="s", status="ok"))
    got = await asyncio.gather(*waits, twice)
    assert [r.request_id for r in got if r is not None] == [*ids, ids[0]]
    assert time.monotonic() - t0 < 3.0


async def test_last_request_is_the_last_envelope_published_for_the_session(
    bus: Bus, buses: Buses
) -> None:
    assert await bus.last_request("s1") is None
    _, last = await publish(bus, "s1", "m0", "m1")
    await publish(bus, "s2", "other")
    assert await bus.last_request("s1") == last.id
    assert await buses.peer(bus).last_request("s1") == last.id


# ------------------------------------------------------------------ requests are per session
async def test_the_same_request_id_in_two_sessions_is_two_requests(bus: Bus, buses: Buses) -> None:
    client = buses.peer(bus)
    s1, s2 = session_on(0, 4, "a"), session_on(0, 4, "b")  # one partition: one stream
    first = Envelope(session_id=s1, message="pay 1", id="req-shared")
    await client.publish(first)
    (got,) = await bus.receive("a", count=10, block_s=0)
    await bus.ack("a", got)
    second = Envelope(session_id=s2, message="pay 2", id="req-shared")
    await client.publish(second)
    again = await drain(bus, "a")
    assert [d.envelope for d in again] == [second]  # not taken for the first one again
    await bus.ack("a", again[0])
    await client.publish(first)  # the same request of the same session: still skipped
    assert await drain(bus, "a") == [] and await bus.pending() == 0


async def test_results_are_kept_and_waited_for_per_session(bus: Bus, buses: Buses) -> None:
    worker_side = buses.peer(bus)
    mine = TurnResult(request_id="req-1", session_id="s1", status="completed", output="yours")
    theirs = TurnResult(request_id="req-1", session_id="s2", status="completed", output="theirs")
    waiting = asyncio.create_task(bus.get_result("s2", "req-1", wait_s=5))
    await asyncio.sleep(0.2)
    await worker_side.put_result(mine)  # wakes the waiter, which finds no result of s2 yet
    await asyncio.sleep(0.2)
    assert not waiting.done()
    await worker_side.put_result(theirs)
    assert await asyncio.wait_for(waiting, 5) == theirs
    assert await bus.get_result("s1", "req-1") == mine
    assert await bus.get_result("s2", "req-1") == theirs
    assert await bus.get_result("s3", "req-1") is None
    # ids that would run together if joined naively stay apart
    glued = TurnResult(request_id="1:x", session_id="a", status="completed")
    await worker_side.put_result(glued)
    assert await bus.get_result("a:1", "x") is None
    assert await bus.get_result("a", "1:x") == glued


async def test_last_request_is_kept_per_session_whatever_the_ids(bus: Bus) -> None:
    for sid in ("s1", "订单-会话", "s\u200b1"):  # a zero-width space makes another session
        await bus.publish(Envelope(session_id=sid, message="m", id=f"req-{sid}"))
    assert await bus.last_request("s1") == "req-s1"
    assert await bus.last_request("订单-会话") == "req-订单-会话"
    assert await bus.last_request("s\u200b1") == "req-s\u200b1"


# ------------------------------------------------------------------ envelopes refused
BAD_ENVELOPES = [
    (dict(session_id=123, message="m"), "session_id: input should be a valid string"),
    (dict(session_id="", message="m"), "session_id: string should have at least 1 character"),
    (dict(session_id="s1", message=None), "message: input should be a valid string"),
    (dict(session_id="s1", message="m", id=""), "id: string should have at least 1"),
    (dict(session_id="s1", message="m", id="r" * 513), "at most 512 characters"),
    (dict(session_id="s1", message="m", headers={"k": 1}), "headers.k"),
    (dict(session_id="s1", message="m", submitted_at=float("nan")), "submitted_at"),
    (dict(session_id="s1", message="pay \ud800 now"), "lone surrogate (half of a UTF-16"),
    (dict(session_id="s\udc80", message="m"), "lone surrogate"),
    (dict(session_id="s1", message="大" * 400_000), "over the bus's limit of 1,048,576"),
]


@pytest.mark.parametrize(("fields", "message"), BAD_ENVELOPES)
async def test_an_envelope_that_could_not_be_read_back_is_refused_at_publish(
    bus: Bus, fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(EnvelopeError, match=re.escape(message)) as caught:
        await bus.publish(Envelope(**fields))
    assert isinstance(caught.value, ValueError)  # bad input: an HTTP 422, a CLI exit 1
    assert await bus.pending() == 0  # nothing was queued
    await publish(bus, "s1", "still works")
    assert messages(await drain(bus, "a")) == ["still works"]


async def test_the_largest_envelope_travels_whole(bus: Bus) -> None:
    text = "订单号 ORD-202607-99 的电子发票" * 15_000  # about 1 MB of Chinese as UTF-8
    sent = Envelope(session_id="s1", message=text[:340_000])
    await bus.publish(sent)
    (got,) = await bus.receive("a", count=1, block_s=0)
    assert got.envelope == sent
