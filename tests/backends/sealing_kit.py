"""One place of stored data (a SQLite file, a PostgreSQL schema, a Redis key prefix) that
several store objects open, as several processes would, and raw access to what it holds,
read and written without Baton's code: the proof of what is at rest."""

from __future__ import annotations

import json
import sqlite3
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.backends.conftest import POSTGRES_URL, REDIS_URL
from tests.services import POSTGRES, REDIS, require_service

from baton.backends import CheckpointKeys, Store
from baton.backends.sealing import CheckpointKeyProvider

PLACES = ["sqlite", "postgres", "redis"]
"""The stores that keep checkpoints at rest."""


def keys(*pairs: tuple[str, bytes]) -> CheckpointKeys:
    """A keyring, the first key sealing."""
    return CheckpointKeys(list(pairs))


K1 = ("k1", bytes(range(32)))
K2 = ("k2", bytes(range(100, 132)))


@dataclass
class Place:
    """Where one store's data lives; `open` makes another store object on it."""

    kind: str
    tmp: Path
    ns: str = field(default_factory=lambda: f"t_{uuid.uuid4().hex[:12]}")
    opened: list[Store] = field(default_factory=list)

    def open(self, checkpoint_keys: CheckpointKeyProvider | str | None = None) -> Store:
        """A new store object on this place (another process's, in production)."""
        store: Store
        if self.kind == "sqlite":
            from baton.backends.sqlite import SQLiteStore

            store = SQLiteStore(f"sqlite:///{self.db}", checkpoint_keys=checkpoint_keys)
        elif self.kind == "postgres":
            require_service("PostgreSQL", POSTGRES)
            from baton.backends.postgres import PostgresStore

            store = PostgresStore(POSTGRES_URL, schema=self.ns, checkpoint_keys=checkpoint_keys)
        else:
            require_service("Redis", REDIS)
            from baton.backends.redis_store import RedisStore

            store = RedisStore(REDIS_URL, prefix=f"{self.ns}:", checkpoint_keys=checkpoint_keys)
        self.opened.append(store)
        return store

    @property
    def db(self) -> Path:
        return self.tmp / "baton.db"

    async def raw_data(self, session_id: str) -> str:
        """The checkpoint's data as stored."""
        if self.kind == "sqlite":
            with sqlite3.connect(self.db) as conn:
                row = conn.execute(
                    "SELECT data FROM checkpoints WHERE session_id = ?", (session_id,)
                ).fetchone()
            assert row is not None, session_id
            return str(row[0])
        if self.kind == "postgres":
            import asyncpg

            conn = await asyncpg.connect(POSTGRES_URL)
            try:
                text = await conn.fetchval(
                    f'SELECT data FROM "{self.ns}".checkpoints WHERE session_id = $1', session_id
                )
            finally:
                await conn.close()
            assert text is not None, session_id
            return str(text)
        r = self._redis()
        try:
            text = await r.hget(f"{self.ns}:cp:{session_id}", "data")
        finally:
            await r.aclose()
        assert text is not None, session_id
        return str(text)

    async def set_raw_data(self, session_id: str, data: str) -> None:
        """Overwrite the checkpoint's data as stored (an attacker with the database)."""
        if self.kind == "sqlite":
            with sqlite3.connect(self.db) as conn:
                conn.execute(
                    "UPDATE checkpoints SET data = ? WHERE session_id = ?", (data, session_id)
                )
            return
        if self.kind == "postgres":
            import asyncpg

            conn = await asyncpg.connect(POSTGRES_URL)
            try:
                await conn.execute(
                    f'UPDATE "{self.ns}".checkpoints SET data = $1 WHERE session_id = $2',
                    data,
                    session_id,
                )
            finally:
                await conn.close()
            return
        r = self._redis()
        try:
            await r.hset(f"{self.ns}:cp:{session_id}", "data", data)
        finally:
            await r.aclose()

    async def dump(self) -> str:
        """Every value the place holds, in every table or key, as one text."""
        parts: list[str] = []
        if self.kind == "sqlite":
            with sqlite3.connect(self.db) as conn:
                tables = [
                    r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
                ]
                for t in tables:
                    parts += [repr(row) + str(row) for row in conn.execute(f'SELECT * FROM "{t}"')]
            return "\n".join(parts)
        if self.kind == "postgres":
            import asyncpg

            conn = await asyncpg.connect(POSTGRES_URL)
            try:
                tables = await conn.fetch(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = $1",
                    self.ns,
                )
                for t in tables:
                    rows = await conn.fetch(f'SELECT * FROM "{self.ns}"."{t[0]}"')
                    parts += [" ".join(str(v) for v in row.values()) for row in rows]
            finally:
                await conn.close()
            return "\n".join(parts)
        r = self._redis()
        try:
            async for key in r.scan_iter(match=f"{self.ns}:*"):
                kind = await r.type(key)
                value: Any
                if kind == "hash":
                    value = await r.hgetall(key)
                elif kind == "list":
                    value = await r.lrange(key, 0, -1)
                elif kind == "zset":
                    value = await r.zrange(key, 0, -1)
                elif kind == "set":
                    value = await r.smembers(key)
                else:
                    value = await r.get(key)
                parts.append(f"{key} {value}")
        finally:
            await r.aclose()
        return "\n".join(parts)

    def _redis(self) -> Any:
        import redis.asyncio as aioredis

        return aioredis.Redis.from_url(REDIS_URL, decode_responses=True)

    async def close(self) -> None:
        """Close every store opened here, then drop the place's data (a schema, a prefix)."""
        for store in self.opened:
            await store.close()  # closing twice is harmless
        if self.kind != "sqlite" and self.opened:
            last = self.open()
            try:
                await last.drop()  # type: ignore[attr-defined]
            finally:
                await last.close()


def holds(text: str, secret: str) -> bool:
    """Whether `text` holds `secret`, as it is or escaped in JSON (ASCII escapes)."""
    return secret in text or json.dumps(secret)[1:-1] in text
