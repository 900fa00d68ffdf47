"""The outbox is written in the run's own transaction: a commit that fails after its outbox
rows were written (SQLite, PostgreSQL) leaves none. What every store's outbox does is the
conformance suite `baton.testing.outbox`, run over every store in tests/backends."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from tests.notify.notify_kit import (
    POSTGRES_URL,
    approval,
    dispose,
    failed,
    outbox_store,
)

from baton.backends import SessionRecord
from baton.backends.sqlite import SQLiteStore
from baton.core.errors import StoreError


async def test_a_commit_that_fails_mid_transaction_writes_no_notification(tmp_path: Path) -> None:
    path = tmp_path / "o.db"
    store = SQLiteStore(f"sqlite:///{path}")
    try:
        # the audit record is the commit's last write: make it fail, after the outbox rows
        raw = sqlite3.connect(path)
        raw.execute(
            "CREATE TRIGGER fail BEFORE INSERT ON audit BEGIN SELECT RAISE(ABORT, 'disk'); END"
        )
        raw.commit()
        raw.close()
        with pytest.raises(StoreError, match="disk"):
            await store.commit_run(SessionRecord("S1"), [], [approval(), failed()])
        assert await store.list_outbox() == []
        assert await store.get_events("S1") == []
    finally:
        await store.close()


async def test_a_postgres_commit_that_fails_mid_transaction_writes_no_notification(
    tmp_path: Path,
) -> None:
    store = outbox_store("postgres", tmp_path)
    try:
        await store.commit_run(SessionRecord("S0"), [], [])  # creates the schema
        import asyncpg

        conn = await asyncpg.connect(POSTGRES_URL)
        try:
            # the audit records are the commit's last write: make them fail, after the outbox
            await conn.execute(f'SET search_path TO "{store.schema}"')
            await conn.execute(
                "CREATE FUNCTION fail() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE EXCEPTION 'disk'; END $$"
            )
            await conn.execute(
                "CREATE TRIGGER fail BEFORE INSERT ON audit FOR EACH ROW EXECUTE FUNCTION fail()"
            )
        finally:
            await conn.close()
        with pytest.raises(StoreError, match="disk"):
            await store.commit_run(SessionRecord("S1"), [], [approval(), failed()])
        assert await store.list_outbox() == []
        assert await store.get_events("S1") == []
    finally:
        await dispose(store)
