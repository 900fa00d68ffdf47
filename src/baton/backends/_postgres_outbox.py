"""The `Outbox` capability of `PostgresStore` (`baton.backends.outbox`): its rows are written
by `commit_run` in the run's transaction; these methods claim, settle, list and prune them.
A claim is one statement that skips rows another deliverer's claim has locked
(`FOR UPDATE SKIP LOCKED`), so two deliverers never take one row."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from baton.backends.outbox import (
    OUTBOX_COLUMNS,
    Delivery,
    OutboxItem,
    OutboxStatus,
    deliveries_json,
    item_of_row,
)
from baton.core.errors import StoreError
from baton.core.ids import now

T = TypeVar("T")

OUTBOX_MIGRATION = (
    """CREATE TABLE outbox (
        id TEXT PRIMARY KEY,
        seq BIGSERIAL NOT NULL,
        kind TEXT NOT NULL,
        key TEXT NOT NULL,
        session_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        ts DOUBLE PRECISION NOT NULL,
        event TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'pending',
        attempts INTEGER NOT NULL DEFAULT 0,
        next_at DOUBLE PRECISION NOT NULL DEFAULT 0,
        owner TEXT,
        lease_until DOUBLE PRECISION NOT NULL DEFAULT 0,
        deliveries TEXT NOT NULL DEFAULT '[]',
        created_at DOUBLE PRECISION NOT NULL
    )""",
    "CREATE INDEX outbox_due ON outbox (status, next_at, seq)",
    "CREATE INDEX outbox_rate ON outbox (kind, key, ts)",
)
"""The outbox table (schema 5); `seq` orders claims as rows were written."""

_CLAIM = (
    f"UPDATE outbox SET owner = $1, lease_until = $2 WHERE id IN ("
    "SELECT id FROM outbox WHERE status = 'pending' AND next_at <= $3 "
    "AND (owner IS NULL OR lease_until <= $3) ORDER BY seq LIMIT $4 FOR UPDATE SKIP LOCKED"
    f") RETURNING seq, {OUTBOX_COLUMNS}"
)
_SETTLE = (
    "UPDATE outbox SET status = $1, attempts = attempts + 1, next_at = $2, owner = NULL, "
    "lease_until = 0, deliveries = (deliveries::jsonb || $3::jsonb)::text "
    "WHERE id = $4 AND owner = $5 RETURNING 1"
)


class PostgresOutbox:
    """`Outbox` over the PostgreSQL store's connections."""

    if TYPE_CHECKING:  # what the store this is mixed into gives (`PostgresStore`)

        async def _run(
            self,
            action: str,
            work: Callable[[Any], Awaitable[T]],
            *,
            write: bool = False,
            migrate: bool = True,
            done: Callable[[T], None] | None = None,
        ) -> T: ...

    async def claim_outbox(
        self, owner: str, lease_s: float, limit: int = 16, *, at: float | None = None
    ) -> list[OutboxItem]:
        """Lease up to `limit` due, unleased pending items to `owner` (`Outbox`)."""
        if lease_s <= 0 or limit < 1:
            raise StoreError(
                f"claim_outbox needs lease_s > 0 and limit >= 1, got {lease_s}, {limit}"
            )
        t = now() if at is None else at

        async def claim(conn: Any) -> list[Any]:
            rows: list[Any] = await conn.fetch(_CLAIM, owner, t + lease_s, t, limit)
            return rows

        rows = await self._run("claim_outbox", claim, write=True)
        return [item_of_row(tuple(r)[1:]) for r in sorted(rows, key=lambda r: r[0])]

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
        log = deliveries_json(deliveries)

        async def settle(conn: Any) -> bool:
            return await conn.fetchval(_SETTLE, status, next_at, log, item_id, owner) is not None

        return await self._run("settle_outbox", settle, write=True)

    async def get_outbox(self, item_id: str) -> OutboxItem | None:
        """One item with its delivery log, or None (`Outbox`)."""
        items = await self._select("get_outbox", "WHERE id = $1", (item_id,))
        return items[0] if items else None

    async def list_outbox(
        self, status: OutboxStatus | None = None, limit: int = 100
    ) -> list[OutboxItem]:
        """Items (of `status` if given), oldest first (`Outbox`)."""
        if status is None:
            return await self._select("list_outbox", "ORDER BY seq LIMIT $1", (limit,))
        where = "WHERE status = $1 ORDER BY seq LIMIT $2"
        return await self._select("list_outbox", where, (status, limit))

    async def count_outbox(self, kind: str, key: str, since: float, until: float) -> int:
        """Items of `kind` and `key` that happened in (`since`, `until`] (`Outbox`)."""
        sql = "SELECT COUNT(*) FROM outbox WHERE kind = $1 AND key = $2 AND ts > $3 AND ts <= $4"

        async def count(conn: Any) -> int:
            return int(await conn.fetchval(sql, kind, key, since, until))

        return await self._run("count_outbox", count)

    async def prune_outbox(self, before: float) -> int:
        """Drop settled items that happened before `before` (`Outbox`)."""

        async def prune(conn: Any) -> int:
            status: str = await conn.execute(
                "DELETE FROM outbox WHERE status <> 'pending' AND ts < $1", before
            )
            return int(status.rpartition(" ")[2] or 0)

        return await self._run("prune_outbox", prune, write=True)

    async def requeue_outbox(self, item_id: str) -> bool:
        """Make a dead item pending again, due now (`Outbox`)."""
        sql = (
            "UPDATE outbox SET status = 'pending', attempts = 0, next_at = 0 "
            "WHERE id = $1 AND status = 'dead' RETURNING 1"
        )

        async def requeue(conn: Any) -> bool:
            return await conn.fetchval(sql, item_id) is not None

        return await self._run("requeue_outbox", requeue, write=True)

    async def _select(self, action: str, tail: str, params: Sequence[object]) -> list[OutboxItem]:
        async def select(conn: Any) -> list[Any]:
            rows: list[Any] = await conn.fetch(
                f"SELECT {OUTBOX_COLUMNS} FROM outbox {tail}", *params
            )
            return rows

        return [item_of_row(tuple(r)) for r in await self._run(action, select)]
