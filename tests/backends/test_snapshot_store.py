"""Graph snapshots on SQLite alone (an old schema, two stores on one file) and memory
eviction (the `Snapshots` conformance suite runs over every backend from
`baton.testing.snapshots`)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from baton.backends import MemoryStore, SessionRecord, SQLiteStore
from baton.backends.sqlite import _MIGRATIONS, SCHEMA_VERSION
from baton.core.errors import StoreError
from baton.testing.snapshots import STATE, snap


def url(path: Path) -> str:
    return f"sqlite:///{path}"


def version_6_file(path: Path) -> None:
    """A file as Baton wrote it at schema version 6 (before snapshots), with one session."""
    raw = sqlite3.connect(path, isolation_level=None)
    for version in range(1, 7):
        for step in _MIGRATIONS[version]:
            raw.execute(step) if isinstance(step, str) else step(raw)
    raw.execute("PRAGMA user_version = 6")
    raw.execute(
        "INSERT INTO sessions (id, user_id, holder, holder_since, incoming, state, created_at, "
        "updated_at, version) VALUES ('s_old', 'u1', 'billing', NULL, NULL, '{}', 1.0, 2.0, 1)"
    )
    raw.close()


async def test_a_version_6_file_read_only_has_no_snapshots_and_migrates_when_opened(
    tmp_path: Path,
) -> None:
    db = tmp_path / "baton.db"
    version_6_file(db)
    ro = SQLiteStore(url(db), read_only=True)
    try:
        assert await ro.get_snapshot("s_old", "r1:1") is None
        assert await ro.list_snapshots("s_old") == []
        with pytest.raises(StoreError, match="predates graph snapshots"):
            await ro.put_snapshot(snap("s_old", 1))
        with pytest.raises(StoreError, match="predates graph snapshots"):
            await ro.delete_snapshots("s_old")
        got = await ro.get_session("s_old")
        assert got is not None and got.version == 1
    finally:
        await ro.close()
    raw = sqlite3.connect(db)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == 6  # nothing migrated
    raw.close()

    store = SQLiteStore(url(db))
    try:
        saved = await store.put_snapshot(snap("s_old", 1, data=STATE))
        got = await store.get_session("s_old")
        assert got is not None and (got.holder, got.version) == ("billing", 1)
    finally:
        await store.close()
    raw = sqlite3.connect(db)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    raw.close()
    ro = SQLiteStore(url(db), read_only=True)
    try:  # the migrated file, read-only, shows its snapshots and writes none
        assert await ro.list_snapshots("s_old") == [saved]
        with pytest.raises(StoreError, match="read-only"):
            await ro.put_snapshot(snap("s_old", 2, "r1:1"))
    finally:
        await ro.close()


async def test_two_stores_on_one_file_see_each_others_snapshots(tmp_path: Path) -> None:
    a, b = SQLiteStore(url(tmp_path / "baton.db")), SQLiteStore(url(tmp_path / "baton.db"))
    try:
        first = await a.put_snapshot(snap("t", 1, data="甲"))
        assert await b.get_snapshot("t", "r1:1") == first
        second = await b.put_snapshot(snap("t", 2, "r1:1", data="乙"))
        assert second.seq == 2  # b took the thread's next seq, after a's
        assert await a.list_snapshots("t") == [second, first]
        await a.put_snapshot(snap("t", 3, "r1:2"), keep_last=1)
        assert [s.id for s in await b.list_snapshots("t")] == ["r1:3"]
        await b.delete_snapshots("t")
        assert await a.list_snapshots("t") == []
    finally:
        await a.close()
        await b.close()


# ---------------------------------------------------------------- memory only


async def test_memory_evicts_a_threads_snapshots_with_its_session() -> None:
    store = MemoryStore(max_sessions=1)
    await store.put_snapshot(snap("s_a", 1))
    await store.commit_run(SessionRecord("s_a"), [], [])
    await store.commit_run(SessionRecord("s_b"), [], [])  # evicts s_a
    assert await store.get_session("s_a") is None
    assert await store.list_snapshots("s_a") == []
