"""The `Outbox` capability of `SQLiteStore` (`baton.backends.outbox`): its rows are written
by `commit_run` in the run's transaction; these methods claim, settle, list and prune them."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, TypeVar

from baton.backends.outbox import (
    OUTBOX_COLUMNS,
    Delivery,
    OutboxItem,
    OutboxStatus,
    deliveries_json,
    deliveries_of,
    item_of_row,
)
from baton.core.errors import StoreError
from baton.core.ids import now

T = TypeVar("T")

OUTBOX_TABLE = """CREATE TABLE IF NOT EXISTS outbox (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    session_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    ts REAL NOT NULL,
    event TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    next_at REAL NOT NULL DEFAULT 0,
    owner TEXT,
    lease_until REAL NOT NULL DEFAULT 0,
    deliveries TEXT NOT NULL DEFAULT '[]',
    created_at REAL NOT NULL
)"""
"""The outbox table (schema 12); rowid orders rows as committed."""

_DUE = (
    "SELECT id FROM outbox WHERE status = 'pending' AND next_at <= ? "
    "AND (owner IS NULL OR lease_until <= ?) ORDER BY rowid LIMIT ?"
)


_REQUEUE = (
    "UPDATE outbox SET status = 'pending', attempts = 0, next_at = 0 "
    "WHERE id = ? AND status = 'dead'"
)


class SQLiteOutbox:
    """`Outbox` over the SQLite store's connection; every write in one IMMEDIATE
    transaction, so two processes sharing the file never claim one row both."""

    path: str

    if TYPE_CHECKING:  # what the store this is mixed into gives (`SQLiteStore`)

        async def _run(self, action: str, work: Callable[[sqlite3.Connection], T]) -> T: ...

        def _transaction(self, conn: sqlite3.Connection) -> AbstractContextManager[None]: ...

        def _needs(self, table: str, action: str) -> None: ...

    async def claim_outbox(
        self, owner: str, lease_s: float, limit: int = 16, *, at: float | None = None
    ) -> list[OutboxItem]:
        """Lease up to `limit` due, unleased pending items to `owner` (`Outbox`)."""
        self._needs("outbox", "claim_outbox")
        if lease_s <= 0 or limit < 1:
            raise StoreError(
                f"claim_outbox needs lease_s > 0 and limit >= 1, got {lease_s}, {limit}"
            )
        t = now() if at is None else at

        def claim(conn: sqlite3.Connection) -> list[OutboxItem]:
            with self._transaction(conn):
                ids = [r[0] for r in conn.execute(_DUE, (t, t, limit))]
                if not ids:
                    return []
                marks = ", ".join("?" * len(ids))
                conn.execute(
                    f"UPDATE outbox SET owner = ?, lease_until = ? WHERE id IN ({marks})",
                    (owner, t + lease_s, *ids),
                )
                rows = conn.execute(
                    f"SELECT {OUTBOX_COLUMNS} FROM outbox WHERE id IN ({marks}) ORDER BY rowid",
                    ids,
                ).fetchall()
            return [item_of_row(r) for r in rows]

        return await self._run("claim_outbox", claim)

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
        self._needs("outbox", "settle_outbox")

        def settle(conn: sqlite3.Connection) -> bool:
            with self._transaction(conn):
                row = conn.execute(
                    "SELECT owner, deliveries FROM outbox WHERE id = ?", (item_id,)
                ).fetchone()
                if row is None or row[0] != owner:
                    return False
                log = [*deliveries_of(row[1]), *deliveries]
                conn.execute(
                    "UPDATE outbox SET status = ?, attempts = attempts + 1, next_at = ?, "
                    "owner = NULL, lease_until = 0, deliveries = ? WHERE id = ?",
                    (status, next_at, deliveries_json(log), item_id),
                )
            return True

        return await self._run("settle_outbox", settle)

    async def get_outbox(self, item_id: str) -> OutboxItem | None:
        """One item with its delivery log, or None (`Outbox`)."""
        items = await self._select("get_outbox", "WHERE id = ?", (item_id,))
        return items[0] if items else None

    async def list_outbox(
        self, status: OutboxStatus | None = None, limit: int = 100
    ) -> list[OutboxItem]:
        """Items (of `status` if given), oldest commit first (`Outbox`)."""
        if status is None:
            return await self._select("list_outbox", "ORDER BY rowid LIMIT ?", (limit,))
        where = "WHERE status = ? ORDER BY rowid LIMIT ?"
        return await self._select("list_outbox", where, (status, limit))

    async def count_outbox(self, kind: str, key: str, since: float, until: float) -> int:
        """Items of `kind` and `key` that happened in (`since`, `until`] (`Outbox`)."""
        self._needs("outbox", "count_outbox")
        sql = "SELECT COUNT(*) FROM outbox WHERE kind = ? AND key = ? AND ts > ? AND ts <= ?"

        def count(conn: sqlite3.Connection) -> int:
            return int(conn.execute(sql, (kind, key, since, until)).fetchone()[0])

        return await self._run("count_outbox", count)

    async def prune_outbox(self, before: float) -> int:
        """Drop settled items that happened before `before` (`Outbox`)."""
        self._needs("outbox", "prune_outbox")

        def prune(conn: sqlite3.Connection) -> int:
            with self._transaction(conn):
                cur = conn.execute(
                    "DELETE FROM outbox WHERE status != 'pending' AND ts < ?", (before,)
                )
            return int(cur.rowcount)

        return await self._run("prune_outbox", prune)

    async def requeue_outbox(self, item_id: str) -> bool:
        """Make a dead item pending again, due now (`Outbox`)."""
        self._needs("outbox", "requeue_outbox")

        def requeue(conn: sqlite3.Connection) -> bool:
            with self._transaction(conn):
                cur = conn.execute(_REQUEUE, (item_id,))
            return cur.rowcount == 1

        return await self._run("requeue_outbox", requeue)

    async def _select(self, action: str, tail: str, params: Sequence[object]) -> list[OutboxItem]:
        self._needs("outbox", action)

        def select(conn: sqlite3.Connection) -> list[OutboxItem]:
            rows = conn.execute(f"SELECT {OUTBOX_COLUMNS} FROM outbox {tail}", params)
            return [item_of_row(r) for r in rows.fetchall()]

        return await self._run(action, select)
