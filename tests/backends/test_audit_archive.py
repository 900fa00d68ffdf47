"""Archive and trim of the audit chain on the stores themselves: the triggers still refuse
every other delete or update, a record edited or deleted after the trim is named, and an
anchor added by hand is caught with an audit key (and, as documented, not without one).
The store-independent behaviour is in the public suite (`baton.testing.audit_trail`)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from tests.backends.conftest import POSTGRES_URL, REDIS_URL, namespace
from tests.services import POSTGRES, REDIS, require_service

from baton.backends import SQLiteStore, Store
from baton.backends.archive import (
    ANCHOR_FIELDS,
    Archiving,
    anchor_row,
    make_anchor,
    plan_cut,
    verify_archives,
)
from baton.backends.audit import GENESIS, AuditTrail, VerifyResult, seal, verify
from baton.testing.audit_trail import old_and_new
from baton.testing.kit import make_events

KINDS = ["sqlite", "postgres", "redis"]


def open_store(kind: str, tmp_path: Path, key: str | None = None, ns: str = "") -> Any:
    if kind == "sqlite":
        return SQLiteStore(f"sqlite:///{tmp_path / 'baton.db'}", audit_key=key)
    if kind == "postgres":
        require_service("PostgreSQL", POSTGRES)
        from baton.backends.postgres import PostgresStore

        return PostgresStore(POSTGRES_URL, schema=ns, audit_key=key)
    require_service("Redis", REDIS)
    from baton.backends.redis_store import RedisStore

    return RedisStore(REDIS_URL, prefix=f"{ns}:", audit_key=key)


class Raw:
    """Someone with the database in hand, outside Baton: plain statements and commands."""

    def __init__(self, kind: str, tmp_path: Path, ns: str) -> None:
        self.kind, self.path, self.ns = kind, tmp_path / "baton.db", ns

    async def sql(self, statement: str, *args: Any) -> None:
        if self.kind == "sqlite":
            conn = sqlite3.connect(self.path, isolation_level=None)
            try:
                conn.execute(statement, args)
            finally:
                conn.close()
            return
        import asyncpg  # type: ignore[import-untyped]

        conn = await asyncpg.connect(POSTGRES_URL)
        try:
            await conn.execute(f'SET search_path TO "{self.ns}"')
            await conn.execute(statement.replace("?", "$1") if args else statement, *args)
        finally:
            await conn.close()

    async def redis(self, *command: Any) -> Any:
        import redis.asyncio as aioredis

        client = aioredis.Redis.from_url(REDIS_URL, decode_responses=True)
        try:
            return await client.execute_command(*command)
        finally:
            await client.aclose()

    def key(self, name: str) -> str:
        return f"{self.ns}:{name}"

    async def drop_triggers(self) -> None:
        if self.kind == "sqlite":
            for name in ("audit_no_update", "audit_no_delete", "audit_anchor_follows"):
                await self.sql(f"DROP TRIGGER IF EXISTS {name}")
        else:
            await self.sql("ALTER TABLE audit DISABLE TRIGGER USER")
            await self.sql("ALTER TABLE audit_anchor DISABLE TRIGGER USER")

    async def edit_record(self, seq: int) -> None:
        if self.kind == "redis":
            record = json.loads(await self.redis("HGET", self.key("audit"), seq))
            record["data"] = record["data"].replace("run_1", "run_X")
            await self.redis("HSET", self.key("audit"), seq, json.dumps(record))
            return
        await self.drop_triggers()
        await self.sql("UPDATE audit SET data = replace(data, 'run_1', 'run_X') WHERE seq = ?", seq)

    async def delete_records(self, upto: int) -> None:
        if self.kind == "redis":
            for seq in range(1, upto + 1):
                await self.redis("HDEL", self.key("audit"), seq)
            return
        await self.drop_triggers()
        await self.sql("DELETE FROM audit WHERE seq <= ?", upto)

    async def add_anchor(self, row: tuple[Any, ...]) -> None:
        if self.kind == "redis":
            text = json.dumps(dict(zip(ANCHOR_FIELDS, row, strict=True)))
            await self.redis("RPUSH", self.key("audit:anchors"), text)
            return
        holes = ", ".join(f"${i}" if self.kind == "postgres" else "?" for i in range(1, 8))
        statement = f"INSERT INTO audit_anchor ({', '.join(ANCHOR_FIELDS)}) VALUES ({holes})"
        if self.kind == "sqlite":
            conn = sqlite3.connect(self.path, isolation_level=None)
            try:
                conn.execute(statement, row)
            finally:
                conn.close()
            return
        import asyncpg

        conn = await asyncpg.connect(POSTGRES_URL)
        try:
            await conn.execute(f'SET search_path TO "{self.ns}"')
            await conn.execute(statement, *row)
        finally:
            await conn.close()


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def ns() -> str:
    return namespace()


@pytest.fixture
async def made(kind: str, tmp_path: Path, ns: str) -> AsyncIterator[list[Any]]:
    """Stores the test opens, dropped and closed after it."""
    stores: list[Any] = []
    yield stores
    for st in stores:
        drop = getattr(st, "drop", None)
        if drop is not None:
            await drop()
        await st.close()


async def archived(store: Store, tmp_path: Path) -> None:
    """The chain of `old_and_new` with records 1-10 archived (11-17 kept)."""
    await old_and_new(store)
    assert isinstance(store, Archiving)
    report = await store.archive_audit(tmp_path / "a1.jsonl", keep=0)
    assert (report.first_seq, report.last_seq) == (1, 10)


async def verified(store: Store) -> VerifyResult:
    assert isinstance(store, AuditTrail)
    return await store.verify_audit()


async def test_a_record_edited_or_deleted_after_the_trim_is_named(
    kind: str, tmp_path: Path, ns: str, made: list[Any]
) -> None:
    store = open_store(kind, tmp_path, ns=ns)
    made.append(store)
    await archived(store, tmp_path)
    raw = Raw(kind, tmp_path, ns)
    await raw.edit_record(12)
    result = await verified(store)
    assert (result.ok, result.tamper, result.first_bad_seq) == (False, "edited", 12)
    await raw.delete_records(11)  # the first kept record: its gap shows after the anchor
    result = await verified(store)
    assert (result.ok, result.tamper, result.first_bad_seq) == (False, "deleted", 11)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_the_triggers_refuse_every_other_delete_or_update(
    kind: str, tmp_path: Path, ns: str, made: list[Any]
) -> None:
    store = open_store(kind, tmp_path, ns=ns)
    made.append(store)
    await archived(store, tmp_path)
    raw = Raw(kind, tmp_path, ns)
    refused = Exception  # sqlite3.IntegrityError, asyncpg.RaiseError: the message tells
    for statement in (
        "DELETE FROM audit WHERE seq = 11",
        "DELETE FROM audit",
        "UPDATE audit SET data = 'x' WHERE seq = 12",
        "DELETE FROM audit_anchor",
        "UPDATE audit_anchor SET seq = 16",
        *(["TRUNCATE audit", "TRUNCATE audit_anchor"] if kind == "postgres" else []),
    ):
        with pytest.raises(refused, match="append-only"):
            await raw.sql(statement)
    (anchor,) = await store.audit_anchors()
    records = await store.audit_records()
    wrong_hash = make_anchor(11, records[0].model_copy(update={"hash": "f" * 64}), "", anchor, None)
    not_next = make_anchor(12, records[1], "", anchor, None)
    unsealed_after = make_anchor(11, records[1], "", None, None)  # prev_seal: not the last's
    for forged in (wrong_hash, not_next, unsealed_after):
        with pytest.raises(refused, match="must follow the last one"):
            await raw.add_anchor(anchor_row(forged))
    result = await verified(store)
    assert result.ok, result.problem
    assert [r.seq for r in await store.audit_records()] == list(range(11, 18))


async def forge_anchor(store: Any, raw: Raw) -> VerifyResult:
    """A well-formed anchor sealed without any key, then the records below it deleted: what an
    ordinary statement can do and the triggers allow. What verify says afterwards."""
    await old_and_new(store)
    records = await store.audit_records()
    forged = make_anchor(1, records[9], "0" * 64, None, None)
    assert forged.prev_seal == GENESIS
    await raw.add_anchor(anchor_row(forged))
    if raw.kind == "redis":
        await raw.delete_records(10)
    else:
        await raw.sql("DELETE FROM audit WHERE seq <= ?", 10)
    return await verified(store)


async def test_an_anchor_added_by_hand_fails_with_a_key_and_passes_without_one(
    kind: str, tmp_path: Path, ns: str, made: list[Any]
) -> None:
    keyed = open_store(kind, tmp_path, key="audit-secret", ns=ns)
    made.append(keyed)
    result = await forge_anchor(keyed, Raw(kind, tmp_path, ns))
    assert (result.ok, result.tamper, result.first_bad_seq) == (False, "edited", 10)
    assert "not sealed with the audit key" in (result.problem or "")
    # the documented limit: without a key such an anchor cannot be told from a real archive
    # (only the archive files, kept apart, show that none holds records 1 to 10)
    other, elsewhere = namespace(), tmp_path / "plain"
    elsewhere.mkdir()
    plain = open_store(kind, elsewhere, ns=other)
    made.append(plain)
    assert (await forge_anchor(plain, Raw(kind, elsewhere, other))).ok


async def test_a_keyed_chain_archives_and_needs_its_key_to_verify(
    kind: str, tmp_path: Path, ns: str, made: list[Any]
) -> None:
    keyed = open_store(kind, tmp_path, key="audit-secret", ns=ns)
    made.append(keyed)
    await archived(keyed, tmp_path)
    assert (await verified(keyed)).ok
    (anchor,) = await keyed.audit_anchors()
    path = tmp_path / "a1.jsonl"
    assert verify_archives([path], [anchor], key=b"audit-secret").ok
    unkeyed = verify_archives([path], [anchor])
    assert (unkeyed.ok, unkeyed.tamper, unkeyed.first_bad_seq) == (False, "edited", 1)
    plain = open_store(kind, tmp_path, ns=ns)  # the same data, read without the key
    made.append(plain)
    result = await verified(plain)
    assert not result.ok and "BATON_AUDIT_KEY" in (result.problem or "")


def test_the_newest_record_stays_and_an_anchor_before_the_start_names_the_archive() -> None:
    records = seal(make_events("s", "tr", "run") + make_events("s", "tr", "run2"))
    assert plan_cut(records, set(), max_age_s=None, keep=0, now=0.0) == (9, None)
    held = {records[3].event_id}
    assert plan_cut(records, held, max_age_s=None, keep=0, now=0.0) == (3, 4)
    kept, start = records[4:], (records[3].seq, records[3].hash)
    assert verify(kept, start=start).ok
    assert verify(kept, start=start, anchor=start).ok
    early = verify(kept, start=start, anchor=(2, records[1].hash))
    assert not early.ok and early.tamper is None and "--archive" in (early.problem or "")
    moved = verify(kept, start=(3, records[2].hash))  # a start the records do not follow
    assert (moved.ok, moved.tamper, moved.first_bad_seq) == (False, "deleted", 4)
