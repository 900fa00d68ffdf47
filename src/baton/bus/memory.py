"""`MemoryBus`: the in-process bus (the default), with the semantics of the Redis Streams bus.

Everything lives in this process: per partition a deque of new entries, the deliveries handed
out and not yet settled, and the ones to hand out again first (failed, or taken over from a
consumer that stopped). Receiving costs O(partitions + deliveries handed out), never a scan
over the messages queued, so thousands of conversations in flight are not slowed by the bus.

Waiting (`receive`'s `block_s`, `get_result`'s `wait_s`) uses futures of the running loop,
created on demand, so one bus may serve several event loops one after another.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import math
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from baton.bus import wire
from baton.bus.base import (
    DeadLetter,
    Delivery,
    Envelope,
    EnvelopeError,
    TurnResult,
    partition_of,
)
from baton.core.ids import now

_Request = tuple[str, str]
"""(session id, request id): a request's name on the bus."""

_READY, _PENDING, _RETRY, _SETTLED = range(4)
"""Where an entry is: queued, handed out (not settled), to hand out again first, done."""


class _Entry:
    """One published envelope, through its deliveries."""

    __slots__ = (
        "consumer",
        "delivered_at",
        "deliveries",
        "envelope",
        "error",
        "handout",
        "partition",
        "seq",
        "state",
    )

    def __init__(self, envelope: Envelope, partition: int, seq: int) -> None:
        self.envelope = envelope
        self.partition = partition
        self.seq = seq
        self.state = _READY
        self.deliveries = 0
        self.consumer = ""
        self.delivered_at = 0.0
        self.handout = 0
        """Bumped on every hand-out: stale marks in the partition's `order` are skipped."""
        self.error = ""


@dataclass(slots=True)
class _Partition:
    index: int
    ready: deque[_Entry] = field(default_factory=deque)
    """New entries, oldest first."""
    order: deque[tuple[_Entry, int]] = field(default_factory=deque)
    """Hand-outs, oldest first (entry, its `handout` then): the idle scan reads the front."""
    retry: list[_Entry] = field(default_factory=list)
    """Entries to hand out before any new one, sorted by sequence number."""
    unsettled: int = 0
    """Entries handed out or to hand out again (pending + retry)."""
    owner: str | None = None
    lease_until: float = 0.0
    draining: bool = False
    """Held beyond the owner's fair share: no new entry is handed out until it is given up."""
    next_scan: float = 0.0


@dataclass(slots=True)
class _Consumer:
    name: str
    expires: float = 0.0
    waiter: asyncio.Future[None] | None = None
    rotate: int = 0


class MemoryBus:
    """The in-process bus: clients and workers in this process (tests, one-process servers).

    `partitions` spread sessions over independent queues; each is read by one consumer at a
    time (it holds the partition while it keeps receiving: its lease lasts `claim_idle_s`).
    A consumer silent for `claim_idle_s` is presumed dead: its partitions and unacknowledged
    deliveries go to the next consumer that receives. An envelope delivered `max_deliveries`
    times without success goes to the dead-letter queue. Results and the (session, request id)
    of acknowledged envelopes are kept `result_ttl_s`. `publish` checks each envelope as the
    Redis bus does (`baton.bus.wire`), so what works here works there.
    """

    url = "memory://"

    def __init__(
        self,
        partitions: int = 8,
        claim_idle_s: float = 30.0,
        max_deliveries: int = 5,
        *,
        result_ttl_s: float = 86400.0,
    ) -> None:
        if partitions < 1:
            raise ValueError("partitions must be at least 1")
        if claim_idle_s <= 0:
            raise ValueError("claim_idle_s must be positive")
        if max_deliveries < 1:
            raise ValueError("max_deliveries must be at least 1")
        self.partitions = partitions
        self.claim_idle_s = claim_idle_s
        self.max_deliveries = max_deliveries
        self.result_ttl_s = result_ttl_s
        self._parts = [_Partition(i) for i in range(partitions)]
        self._consumers: dict[str, _Consumer] = {}
        self._seq = 0
        self._unsettled = 0
        self._done: OrderedDict[_Request, float] = OrderedDict()
        """(session, request id) -> when it stops being remembered (acknowledged envelopes)."""
        self._results: OrderedDict[_Request, tuple[TurnResult, float]] = OrderedDict()
        self._result_waiters: dict[_Request, list[asyncio.Future[None]]] = {}
        self._last: dict[str, str] = {}
        self._dead: dict[str, DeadLetter] = {}
        self._dead_seq = 0

    # ------------------------------------------------------------------ publishing
    async def publish(self, envelope: Envelope) -> str:
        """Queue the envelope on its session's partition; returns its entry id. Raises
        `EnvelopeError` for an envelope the Redis bus could not carry either."""
        wire.encode(envelope)
        index = partition_of(envelope.session_id, self.partitions)
        self._seq += 1
        part = self._parts[index]
        part.ready.append(_Entry(envelope, index, self._seq))
        self._unsettled += 1
        self._last[envelope.session_id] = envelope.id
        self._wake(part)
        return f"{index}-{self._seq}"

    def _wake(self, part: _Partition) -> None:
        """Wake the partition's owner if it waits, or every waiting consumer if it has none."""
        if part.owner is not None:
            owner = self._consumers.get(part.owner)
            if owner is not None:
                _resolve(owner.waiter)
                return
        for consumer in self._consumers.values():
            _resolve(consumer.waiter)

    # ------------------------------------------------------------------ receiving
    async def receive(self, consumer: str, count: int = 16, block_s: float = 1.0) -> list[Delivery]:
        """Up to `count` deliveries for `consumer`, waiting up to `block_s` for one.

        Every call renews the consumer's hold on its partitions (call it at least every
        `claim_idle_s`; `count=0` only renews). Per partition: first the deliveries to hand out
        again (failed, or taken over from a consumer that stopped; `retry_count` raised), then
        its own deliveries unacknowledged for `claim_idle_s` (handed out again as they were: a
        lost acknowledgement), then new entries in order."""
        c = self._consumers.get(consumer)
        if c is None:
            c = self._consumers[consumer] = _Consumer(consumer)
        deadline = -1.0
        while True:
            t = time.monotonic()
            held = self._balance(c, t)
            if count <= 0:
                return []
            out = self._collect(c, held, count, t)
            if out or block_s <= 0:
                return out
            if deadline < 0:
                deadline = t + block_s
            left = deadline - t
            if left <= 0:
                return []
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            c.waiter = waiter
            try:  # wake early enough to renew the leases while waiting
                await asyncio.wait_for(waiter, min(left, self.claim_idle_s / 3))
            except asyncio.TimeoutError:
                pass
            finally:
                if c.waiter is waiter:
                    c.waiter = None

    def _balance(self, c: _Consumer, t: float) -> list[_Partition]:
        """Renew `c`'s heartbeat and leases, take free partitions up to its fair share, give
        up the ones beyond it that have nothing unsettled and mark the others beyond it
        draining (no new entry is handed out from them, so that their deliveries settle and
        a later call gives them up: a consumer that joins under load gets its share, and no
        session is ever on two consumers); returns the partitions it holds."""
        lease = t + self.claim_idle_s
        c.expires = lease
        live = 0
        for other in list(self._consumers.values()):
            if other.expires > t:
                live += 1
            elif other.waiter is None:
                del self._consumers[other.name]  # silent past claim_idle_s: presumed dead
        share = math.ceil(self.partitions / max(live, 1))
        held: list[_Partition] = []
        free: list[_Partition] = []
        for part in self._parts:
            if part.owner == c.name:
                part.lease_until = lease
                held.append(part)
            elif part.owner is None or part.lease_until <= t:
                free.append(part)
        for part in free:
            if len(held) >= share:
                break
            self._take_over(part, c.name, lease)
            held.append(part)
        while len(held) > share:
            extra = next((p for p in reversed(held) if p.unsettled == 0), None)
            if extra is None:
                break  # the others wait until its deliveries here are settled
            extra.owner = None
            held.remove(extra)
            self._wake(extra)
        for k, part in enumerate(held):
            part.draining = k >= share
        return held

    def _take_over(self, part: _Partition, consumer: str, lease: float) -> None:
        """`consumer` holds `part` now: the unsettled deliveries of the consumer before are
        handed out again first, in order."""
        part.owner, part.lease_until = consumer, lease
        moved = False
        for entry, handout in part.order:
            if entry.state == _PENDING and entry.handout == handout and entry.consumer != consumer:
                entry.state = _RETRY
                part.retry.append(entry)
                moved = True
        if moved:
            part.retry.sort(key=lambda e: e.seq)
            part.order = deque(
                (e, h) for e, h in part.order if e.state == _PENDING and e.handout == h
            )

    def _collect(
        self, c: _Consumer, held: list[_Partition], count: int, t: float
    ) -> list[Delivery]:
        out: list[Delivery] = []
        if not held:
            return out
        c.rotate = (c.rotate + 1) % len(held)
        for part in held[c.rotate :] + held[: c.rotate]:
            if len(out) >= count:
                break
            self._collect_from(part, c.name, count, t, out)
        return out

    def _collect_from(
        self, part: _Partition, consumer: str, count: int, t: float, out: list[Delivery]
    ) -> None:
        while part.retry and len(out) < count:
            entry = part.retry.pop(0)
            if entry.deliveries >= self.max_deliveries:
                self._dead_letter(
                    entry,
                    entry.error
                    or f"not acknowledged after {entry.deliveries} deliveries (the consumers "
                    "that took it stopped)",
                )
                continue
            self._hand_out(entry, consumer, t, out, bump=True)
        if t >= part.next_scan and part.order:  # own deliveries idle past claim_idle_s
            part.next_scan = t + self.claim_idle_s / 3
            idle_before = t - self.claim_idle_s
            order = part.order
            while order and len(out) < count:
                entry, handout = order[0]
                if entry.state != _PENDING or entry.handout != handout:
                    order.popleft()  # settled or handed out since
                    continue
                if entry.delivered_at > idle_before:
                    break
                order.popleft()
                self._hand_out(entry, consumer, t, out, bump=entry.consumer != consumer)
        while part.ready and len(out) < count and not part.draining:
            entry = part.ready.popleft()
            entry.state = _PENDING  # counted as unsettled in the partition from here
            part.unsettled += 1
            self._hand_out(entry, consumer, t, out, bump=True)

    def _hand_out(
        self, entry: _Entry, consumer: str, t: float, out: list[Delivery], *, bump: bool
    ) -> None:
        if self._is_done(_request(entry.envelope)):  # acknowledged before (published twice)
            self._settle(entry)
            return
        if bump:
            entry.deliveries += 1
        entry.state = _PENDING
        entry.consumer = consumer
        entry.delivered_at = t
        entry.handout += 1
        self._parts[entry.partition].order.append((entry, entry.handout))
        out.append(Delivery(entry.envelope, entry.deliveries - 1, entry))

    # ------------------------------------------------------------------ settling
    async def ack(self, consumer: str, delivery: Delivery) -> None:
        """The delivery is done: never delivered again (its session and request id are
        remembered for `result_ttl_s`, so a copy published again is skipped)."""
        entry = delivery.token
        if not isinstance(entry, _Entry):
            raise ValueError("not a delivery of this bus")
        self._remember_done(_request(entry.envelope))
        if entry.state in (_PENDING, _RETRY):
            self._settle(entry)

    async def fail(self, consumer: str, delivery: Delivery, error: str) -> bool:
        """Hand the delivery out again (before the partition's new entries, `retry_count`
        raised), or after `max_deliveries` move it to the dead-letter queue (True). A delivery
        the consumer no longer holds (settled, or taken over) is left alone (False)."""
        entry = delivery.token
        if not isinstance(entry, _Entry):
            raise ValueError("not a delivery of this bus")
        if entry.state != _PENDING or entry.consumer != consumer:
            return False
        if entry.deliveries >= self.max_deliveries:
            self._dead_letter(entry, error)
            return True
        entry.error = error
        entry.state = _RETRY
        entry.handout += 1  # its mark in `order` is stale now
        part = self._parts[entry.partition]
        bisect.insort(part.retry, entry, key=lambda e: e.seq)
        self._wake(part)
        return False

    def _settle(self, entry: _Entry) -> None:
        part = self._parts[entry.partition]
        if entry.state == _RETRY:
            with contextlib.suppress(ValueError):
                part.retry.remove(entry)
        if entry.state != _SETTLED:
            if entry.state != _READY:
                part.unsettled -= 1
            self._unsettled -= 1
        entry.state = _SETTLED
        entry.handout += 1

    def _dead_letter(self, entry: _Entry, error: str) -> None:
        self._dead_seq += 1
        dead_id = f"dlq-{self._dead_seq}"
        self._dead[dead_id] = DeadLetter(dead_id, entry.envelope, error, entry.deliveries, now())
        self._settle(entry)

    def _remember_done(self, request: _Request) -> None:
        t = time.monotonic()
        done = self._done
        done[request] = t + self.result_ttl_s
        done.move_to_end(request)
        while done:
            first = next(iter(done.values()))
            if first > t:
                break
            done.popitem(last=False)

    def _is_done(self, request: _Request) -> bool:
        until = self._done.get(request)
        return until is not None and until > time.monotonic()

    async def release(self, consumer: str) -> None:
        """Give the consumer's partitions up now; its unsettled deliveries go, first, to the
        consumer that takes each partition next (`retry_count` raised)."""
        c = self._consumers.pop(consumer, None)
        if c is not None:
            _resolve(c.waiter)
        for part in self._parts:
            if part.owner == consumer:
                part.owner = None
                self._wake(part)

    # ------------------------------------------------------------------ results
    async def put_result(self, result: TurnResult) -> None:
        """Record a request's result under (its session, its request id) for `result_ttl_s`
        and wake whoever waits for it."""
        t = time.monotonic()
        results = self._results
        request = (result.session_id, result.request_id)
        results[request] = (result, t + self.result_ttl_s)
        results.move_to_end(request)
        while results:
            _, until = next(iter(results.values()))
            if until > t:
                break
            results.popitem(last=False)
        for waiter in self._result_waiters.pop(request, ()):
            _resolve(waiter)

    async def last_request(self, session_id: str) -> str | None:
        """The id of the envelope last published for the session, or None."""
        return self._last.get(session_id)

    async def get_result(
        self, session_id: str, request_id: str, wait_s: float = 0.0
    ) -> TurnResult | None:
        """The result of the session's request `request_id`, waiting up to `wait_s` for it;
        None if there is none yet."""
        request = (session_id, request_id)
        found = self._result(request)
        if found is not None or wait_s <= 0:
            return found
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiters = self._result_waiters.setdefault(request, [])
        waiters.append(waiter)
        try:
            await asyncio.wait_for(waiter, wait_s)
        except asyncio.TimeoutError:
            pass
        finally:
            with contextlib.suppress(ValueError):
                waiters.remove(waiter)
            if not waiters and self._result_waiters.get(request) is waiters:
                del self._result_waiters[request]
        return self._result(request)

    def _result(self, request: _Request) -> TurnResult | None:
        found = self._results.get(request)
        if found is None or found[1] <= time.monotonic():
            return None
        return found[0]

    # ------------------------------------------------------------------ dead letters
    async def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        """The dead-letter queue, oldest first."""
        out: list[DeadLetter] = []
        for dead in self._dead.values():
            if len(out) >= limit:
                break
            out.append(dead)
        return out

    async def requeue(self, dead_id: str) -> Envelope:
        """Publish a dead letter's envelope again (deliveries start over); drop the letter."""
        dead = self._dead.get(dead_id)
        if dead is None:
            raise LookupError(f"no dead letter {dead_id!r} on {self.url} (see `baton dlq list`)")
        if dead.envelope is None:  # only the Redis bus can hold an unreadable entry
            raise EnvelopeError(f"dead letter {dead_id!r} holds no envelope to publish")
        await self.publish(dead.envelope)
        del self._dead[dead_id]
        return dead.envelope

    async def pending(self) -> int:
        """Envelopes published and not yet acknowledged (queued or in flight)."""
        return self._unsettled

    async def close(self) -> None:
        """Nothing to release: wake whoever waits, so they see there is nothing more."""
        for c in self._consumers.values():
            _resolve(c.waiter)


def _request(envelope: Envelope) -> _Request:
    return (envelope.session_id, envelope.id)


def _resolve(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)
