"""Fixtures shared by the store tests: one `store` fixture per backend.

PostgreSQL and Redis run against the services on 127.0.0.1 (see `tests/services.py`): each
test gets a fresh namespace (a PostgreSQL schema, a Redis key prefix) that is dropped after
it, so tests never see each other's rows.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from tests.services import POSTGRES, REDIS, require_service

from baton.backends import MemoryStore, SQLiteStore, Store

BACKENDS = ["memory", "sqlite", "postgres", "redis"]

POSTGRES_URL = f"postgresql://postgres@{POSTGRES[0]}:{POSTGRES[1]}/test"
REDIS_URL = f"redis://{REDIS[0]}:{REDIS[1]}/0"


def namespace() -> str:
    """A fresh PostgreSQL schema name / Redis key prefix for one test."""
    return f"t_{uuid.uuid4().hex[:12]}"


def make_store(kind: str, tmp_path: Path) -> Store:
    """A fresh store of backend `kind`; SQLite lives in a file under `tmp_path`, PostgreSQL and
    Redis in a namespace of their own (skipped, or failed under BATON_REQUIRE_SERVICES=1,
    when the service is down)."""
    if kind == "memory":
        return MemoryStore()
    if kind == "memory-json":  # checkpoints kept as JSON text, as a persistent store keeps them
        return MemoryStore(serialise_checkpoints=True)
    if kind == "sqlite":
        return SQLiteStore(f"sqlite:///{tmp_path / 'baton.db'}")
    if kind == "postgres":
        require_service("PostgreSQL", POSTGRES)
        from baton.backends.postgres import PostgresStore

        return PostgresStore(POSTGRES_URL, schema=namespace())
    if kind == "redis":
        require_service("Redis", REDIS)
        from baton.backends.redis_store import RedisStore

        return RedisStore(REDIS_URL, prefix=f"{namespace()}:")
    raise ValueError(f"unknown backend {kind!r}")


async def dispose(store: Store) -> None:
    """Close a store made by `make_store`, dropping a service store's namespace first."""
    drop = getattr(store, "drop", None)
    try:
        if drop is not None:
            await drop()
    finally:
        await store.close()


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Every backend in turn, closed (and its namespace dropped) after the test."""
    s = make_store(request.param, tmp_path)
    try:
        yield s
    finally:
        await dispose(s)


@pytest.fixture
async def schema() -> AsyncIterator[str]:
    """A PostgreSQL schema of one test's own, dropped after it (on a connection of its own)."""
    require_service("PostgreSQL", POSTGRES)
    import asyncpg

    name = namespace()
    try:
        yield name
    finally:
        conn = await asyncpg.connect(POSTGRES_URL)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        finally:
            await conn.close()
