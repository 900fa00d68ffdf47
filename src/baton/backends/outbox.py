"""The outbox: notifiable events committed with the run, and their delivery state.

Why a table of its own, written inside `commit_run`, rather than a reader following the
events table with a cursor: a cursor over event sequence numbers skips rows on PostgreSQL (a
sequence number is taken before its transaction commits, so a reader can pass a number whose
run commits later), Redis has no one ordered event log, and retention may prune events before
they are delivered. Delivery also needs state per notification (tries, a lease, the dead
letter, the delivery log), which the append-only events cannot hold. So the store writes one
outbox row per notifiable event in the same transaction as the run's events: a run that
commits has its rows, a run whose commit fails (a version conflict, a crash) has none, and
a row is never lost once committed. Only four event kinds go there (approval requests,
escalations, failed runs, guard trips), so a commit without them writes nothing more.

A deliverer (`baton.notify.Notifier`) claims due rows under a lease (two deliverers do not
send one row at once), posts them, and settles each row: delivered, retried later, or dead
after its last try; every try is kept in the row's delivery log.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal, Protocol, runtime_checkable

from baton.core.errors import StoreError
from baton.core.events import Event, event_from_json
from baton.core.ids import now

__all__ = [
    "NOTIFIABLE",
    "Delivery",
    "Outbox",
    "OutboxItem",
    "OutboxStatus",
    "outbox_rows",
]

OutboxStatus = Literal["pending", "delivered", "dead", "skipped"]
"""`pending`: to be delivered (now or at `next_at`); `delivered`: every channel took it;
`dead`: its last try failed (the dead letter); `skipped`: nothing to send (a guard trip below
the alert rate, or no channel takes its kind)."""

NOTIFIABLE = frozenset({"approval_requested", "escalated", "run_finished", "guard_tripped"})
"""Event types that may go to the outbox (`run_finished` only when the run failed)."""

OUTBOX_COLUMNS = (
    "id, kind, key, session_id, run_id, ts, event, status, attempts, next_at, owner, "
    "lease_until, deliveries, created_at"
)
"""The outbox table's columns, in `OutboxItem`'s order."""

INSERT_OUTBOX = (
    "INSERT INTO outbox (id, kind, key, session_id, run_id, ts, event, created_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING"
)
"""Insert the rows of `outbox_rows` (`?` placeholders; an event committed twice is one
notification)."""


def notifiable(event: Event) -> bool:
    """Whether `event` goes to the outbox."""
    if event.type not in NOTIFIABLE:
        return False
    return event.type != "run_finished" or getattr(event, "status", None) == "failed"


def _key(event: Event) -> str:
    """What the alert rate counts by: the guard of a guard trip, else nothing."""
    return str(getattr(event, "guard", "")) if event.type == "guard_tripped" else ""


def outbox_rows(events: Sequence[Event], texts: Sequence[str]) -> list[tuple[Any, ...]]:
    """The outbox rows (id, kind, key, session_id, run_id, ts, event, created_at) of the
    notifiable events of a commit; `texts` are the events' JSON as stored."""
    at = now()
    return [
        (e.id, e.type, _key(e), e.session_id, e.run_id, float(e.ts), text, at)
        for e, text in zip(events, texts, strict=True)
        if notifiable(e)
    ]


@dataclass(frozen=True, slots=True)
class Delivery:
    """One try of one outbox item on one channel: the delivery log's line."""

    channel: str
    attempt: int
    """The item's try number (1 for the first)."""
    ok: bool
    status_code: int | None = None
    """The HTTP status the channel answered; None when no answer came (refused, timeout)."""
    error: str = ""
    """Why it failed (the answer's start, or the network error)."""
    key: str = ""
    """The idempotency key sent (the same on every try of the item on the channel)."""
    at: float = field(default_factory=now)


@dataclass(slots=True)
class OutboxItem:
    """A notifiable event in the outbox, with its delivery state."""

    id: str
    """The event's id (unique)."""
    kind: str
    """The event's type."""
    key: str
    """The guard of a guard trip (what the alert rate counts by); else empty."""
    session_id: str
    run_id: str
    ts: float
    """When the event happened."""
    event: str
    """The event's JSON as committed."""
    status: OutboxStatus = "pending"
    attempts: int = 0
    """Tries settled so far."""
    next_at: float = 0.0
    """Not claimed before this time (the backoff after a failed try)."""
    owner: str | None = None
    """The deliverer that holds the item's lease, if any."""
    lease_until: float = 0.0
    """When that lease ends; another deliverer may claim the item after it."""
    deliveries: list[Delivery] = field(default_factory=list)
    """Every try on every channel, oldest first."""
    created_at: float = field(default_factory=now)

    def parsed(self) -> Event:
        """The committed event."""
        return event_from_json(self.event)

    def delivered_to(self) -> set[str]:
        """Channels that took the item (not to be sent again)."""
        return {d.channel for d in self.deliveries if d.ok}


def deliveries_json(deliveries: Sequence[Delivery]) -> str:
    """The delivery log as stored."""
    return json.dumps([asdict(d) for d in deliveries], ensure_ascii=False)


def deliveries_of(text: str) -> list[Delivery]:
    """The delivery log from its stored JSON."""
    return [Delivery(**d) for d in json.loads(text)]


def item_of_row(row: Sequence[Any]) -> OutboxItem:
    """An item from its row (`OUTBOX_COLUMNS`)."""
    (iid, kind, key, sid, run_id, ts, event, status, attempts, next_at, owner, lease, log, at) = row
    return OutboxItem(
        id=iid,
        kind=kind,
        key=key,
        session_id=sid,
        run_id=run_id,
        ts=float(ts),
        event=event,
        status=status,
        attempts=int(attempts),
        next_at=float(next_at),
        owner=owner,
        lease_until=float(lease),
        deliveries=deliveries_of(log),
        created_at=float(at),
    )


@runtime_checkable
class Outbox(Protocol):
    """The notifications committed with runs (`commit_run` writes them), claimed under a
    lease by deliverers and settled with their delivery log."""

    async def claim_outbox(
        self, owner: str, lease_s: float, limit: int = 16, *, at: float | None = None
    ) -> list[OutboxItem]:
        """Claim up to `limit` pending items that are due (`next_at` reached) and held by no
        live lease, oldest commit first: each is leased to `owner` for `lease_s` seconds.
        An item whose holder died is claimed again once its lease ends."""
        ...

    async def settle_outbox(
        self,
        item_id: str,
        owner: str,
        status: OutboxStatus,
        deliveries: Sequence[Delivery],
        *,
        next_at: float = 0.0,
    ) -> bool:
        """End `owner`'s try of the item: append `deliveries` to its log, count the try, set
        `status` (and `next_at` for a retry) and free the lease. False (and nothing written)
        when `owner` no longer holds the item (its lease ended and another claimed it)."""
        ...

    async def get_outbox(self, item_id: str) -> OutboxItem | None:
        """One item with its delivery log, or None."""
        ...

    async def list_outbox(
        self, status: OutboxStatus | None = None, limit: int = 100
    ) -> list[OutboxItem]:
        """Items (of `status` if given), oldest commit first."""
        ...

    async def count_outbox(self, kind: str, key: str, since: float, until: float) -> int:
        """How many items of `kind` and `key` happened in (`since`, `until`] (the guard
        alert rate)."""
        ...

    async def prune_outbox(self, before: float) -> int:
        """Drop settled items (not pending) that happened before `before`; how many."""
        ...

    async def requeue_outbox(self, item_id: str) -> bool:
        """Send a dead item again: pending, due now, its tries counted from 0 (its delivery
        log kept). False when no dead item has that id."""
        ...


class MemoryOutbox:
    """`Outbox` in process memory (`MemoryStore`'s): `_add_outbox` is called by its
    `commit_run` after the commit's checks passed, so a refused commit adds nothing."""

    def __init__(self) -> None:
        self._outbox: dict[str, OutboxItem] = {}

    def _add_outbox(self, events: Sequence[Event]) -> None:
        """File the notifiable events of one commit."""
        for e in events:
            if notifiable(e) and e.id not in self._outbox:
                iid, kind, key, sid, run_id, ts, text, at = outbox_rows([e], [e.model_dump_json()])[
                    0
                ]
                self._outbox[e.id] = OutboxItem(
                    iid, kind, key, sid, run_id, ts, text, created_at=at
                )

    @staticmethod
    def _copy(item: OutboxItem) -> OutboxItem:
        return replace(item, deliveries=list(item.deliveries))

    async def claim_outbox(
        self, owner: str, lease_s: float, limit: int = 16, *, at: float | None = None
    ) -> list[OutboxItem]:
        """Lease up to `limit` due, unleased pending items to `owner` (`Outbox`)."""
        if lease_s <= 0 or limit < 1:
            raise StoreError(
                f"claim_outbox needs lease_s > 0 and limit >= 1, got {lease_s}, {limit}"
            )
        t = now() if at is None else at
        out: list[OutboxItem] = []
        for item in self._outbox.values():
            if len(out) == limit:
                break
            free = item.owner is None or item.lease_until <= t
            if item.status == "pending" and item.next_at <= t and free:
                item.owner, item.lease_until = owner, t + lease_s
                out.append(self._copy(item))
        return out

    async def settle_outbox(
        self,
        item_id: str,
        owner: str,
        status: OutboxStatus,
        deliveries: Sequence[Delivery],
        *,
        next_at: float = 0.0,
    ) -> bool:
        """Append `deliveries`, count the try, set `status` and free the lease (`Outbox`)."""
        item = self._outbox.get(item_id)
        if item is None or item.owner != owner:
            return False
        item.deliveries = [*item.deliveries, *deliveries]
        item.attempts += 1
        item.status, item.next_at, item.owner, item.lease_until = status, next_at, None, 0.0
        return True

    async def get_outbox(self, item_id: str) -> OutboxItem | None:
        """One item with its delivery log, or None (`Outbox`)."""
        item = self._outbox.get(item_id)
        return None if item is None else self._copy(item)

    async def list_outbox(
        self, status: OutboxStatus | None = None, limit: int = 100
    ) -> list[OutboxItem]:
        """Items (of `status` if given), oldest commit first (`Outbox`)."""
        items = [i for i in self._outbox.values() if status is None or i.status == status]
        return [self._copy(i) for i in items[:limit]]

    async def count_outbox(self, kind: str, key: str, since: float, until: float) -> int:
        """Items of `kind` and `key` that happened in (`since`, `until`] (`Outbox`)."""
        return sum(
            1
            for i in self._outbox.values()
            if i.kind == kind and i.key == key and since < i.ts <= until
        )

    async def requeue_outbox(self, item_id: str) -> bool:
        """Make a dead item pending again, due now (`Outbox`)."""
        item = self._outbox.get(item_id)
        if item is None or item.status != "dead":
            return False
        item.status, item.attempts, item.next_at = "pending", 0, 0.0
        return True

    async def prune_outbox(self, before: float) -> int:
        """Drop settled items that happened before `before` (`Outbox`)."""
        gone = [k for k, i in self._outbox.items() if i.status != "pending" and i.ts < before]
        for k in gone:
            del self._outbox[k]
        return len(gone)
