"""The bus: how turns reach workers when one process is not enough (seeds 000 §4, 001 §4.3).

A client publishes an `Envelope` (one turn of one session: the message, the user, trace
headers) and a worker receives it as a `Delivery`, runs it (`team.run(..., request_id=
envelope.id)`, which never runs a request twice), then acknowledges it. A request is named by
its session and its id together: the same id in two sessions is two requests (deduplication,
results and `last_request` are all per session). A worker that dies
leaves its deliveries unacknowledged; after `claim_idle_s` another worker reclaims them (the
orphan scan). A delivery that fails `max_deliveries` times goes to the dead-letter queue with
its error (`baton dlq list|retry`); so does an entry that is not a valid envelope (written by
hand, by another program, or on the wrong partition), with the reason it cannot be read.

Ordering: sessions are partitioned over `partitions` streams by a hash of the session id, and
the bus gives a partition's messages to one consumer at a time, in order; the worker keeps at
most one turn of a session in flight. Results go back on the bus (`put_result`), where
`team.result(session_id)` waits for them.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from baton.core.errors import BatonError
from baton.core.ids import new_id, now


class BusError(BatonError):
    """The bus failed (unreachable, a dropped connection) or holds data it cannot read. The
    message says what failed and what to do; nothing acknowledged is lost."""


class EnvelopeError(BatonError, ValueError):
    """An envelope the bus cannot carry (a field of the wrong type, text that is not valid
    Unicode, too big), or a bus entry that is not an envelope; the message says which field
    and what to do."""


def partition_of(session_id: str, partitions: int) -> int:
    """The partition (stream) a session's turns go to: stable across processes and runs."""
    return zlib.crc32(session_id.encode("utf-8", "surrogatepass")) % partitions


@dataclass(frozen=True, slots=True)
class Envelope:
    """One turn of one session, as it travels on the bus. Every field is JSON."""

    session_id: str
    message: str
    user_id: str | None = None
    id: str = field(default_factory=lambda: new_id("req_"))
    """The request id: the same on every delivery; the run is recorded under it in the
    session, so a redelivered request is never run twice. It names a request within its
    session only: the same id in another session is another request."""
    headers: dict[str, str] = field(default_factory=dict)
    """Trace context (`traceparent`, `tracestate`) and anything else to carry along."""
    submitted_at: float = field(default_factory=now)


@dataclass(frozen=True, slots=True)
class Delivery:
    """An envelope handed to one consumer, until it acknowledges or fails it."""

    envelope: Envelope
    retry_count: int
    """Earlier deliveries of this envelope (0 on the first)."""
    token: Any = None
    """The bus's handle for `ack`/`fail` (a stream and entry id); opaque to workers."""


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """An envelope that failed `max_deliveries` times, or a bus entry that could not be read
    as one, with the last error."""

    id: str
    """The dead letter's id (name it in `requeue`)."""
    envelope: Envelope | None
    """The envelope; None when the entry was not a valid envelope (see `error` and `raw`)."""
    error: str
    deliveries: int
    failed_at: float
    raw: str = ""
    """What an unreadable entry held (clipped, bytes that are not UTF-8 as escapes); empty
    when `envelope` is set."""


@dataclass(frozen=True, slots=True)
class TurnResult:
    """What a worker reports for a request (a summary of its `RunResult`)."""

    request_id: str
    session_id: str
    status: str
    output: str | None = None
    error: str | None = None
    run_id: str | None = None
    worker: str = ""
    """The consumer that ran it."""
    finished_at: float = field(default_factory=now)


@runtime_checkable
class Bus(Protocol):
    """Where turns wait for workers, and where their results come back."""

    url: str
    partitions: int
    claim_idle_s: float
    """A delivery unacknowledged this long belongs to a consumer presumed dead: reclaimed."""
    max_deliveries: int
    """Deliveries of one envelope before it goes to the dead-letter queue."""

    async def publish(self, envelope: Envelope) -> str:
        """Queue the envelope on its session's partition; returns the bus's entry id. Raises
        `EnvelopeError` for an envelope that could not be read back (`baton.bus.wire`)."""
        ...

    async def receive(self, consumer: str, count: int = 16, block_s: float = 1.0) -> list[Delivery]:
        """Up to `count` deliveries for `consumer` (waiting up to `block_s` for one): first its
        own unacknowledged ones and those of consumers idle past `claim_idle_s` (reclaimed,
        `retry_count` raised), then new ones, each partition's in order. A partition is read
        by one consumer at a time (the consumer holds it while it keeps receiving)."""
        ...

    async def ack(self, consumer: str, delivery: Delivery) -> None:
        """The delivery is done (its result is recorded): never delivered again."""
        ...

    async def fail(self, consumer: str, delivery: Delivery, error: str) -> bool:
        """The delivery failed: deliver it again later, or, after `max_deliveries`, move it to
        the dead-letter queue with `error` (returns True then)."""
        ...

    async def release(self, consumer: str) -> None:
        """The consumer stops (a graceful shutdown): give its partitions up at once, leaving
        its unacknowledged deliveries to be reclaimed by the others."""
        ...

    async def put_result(self, result: TurnResult) -> None:
        """Record a request's result under (its session, its request id), kept for a while,
        and wake whoever waits for it."""
        ...

    async def last_request(self, session_id: str) -> str | None:
        """The id of the envelope last published for the session, or None."""
        ...

    async def get_result(
        self, session_id: str, request_id: str, wait_s: float = 0.0
    ) -> TurnResult | None:
        """The result of the session's request `request_id`, waiting up to `wait_s` for it;
        None if there is none yet (another session's request of the same id is not it)."""
        ...

    async def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        """The dead-letter queue, oldest first."""
        ...

    async def requeue(self, dead_id: str) -> Envelope:
        """Publish a dead letter's envelope again (its deliveries start over) and drop it from
        the dead-letter queue. `LookupError` for an unknown id, `EnvelopeError` for a letter
        that holds no valid envelope (nothing to publish)."""
        ...

    async def pending(self) -> int:
        """Envelopes published and not yet acknowledged (queued or in flight)."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...
