"""Blackboards on SQLite alone: processes sharing a file, old schemas (the `Blackboard`
conformance suite runs over every backend from `baton.testing.blackboard`)."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from baton.backends import SQLiteStore
from baton.backends.sqlite import _MIGRATIONS, SCHEMA_VERSION
from baton.core.errors import ConflictError, StoreError
from baton.testing.blackboard import NESTED


def url(path: Path) -> str:
    return f"sqlite:///{path}"


# A process that says "ready", waits for "go" on stdin, then adds 1 to one board entry
# `increments` times with write_with_retry and prints the conflicts it met.
_INCREMENTER = """
import asyncio, sys
from baton.backends import SQLiteStore, write_with_retry

def add(current):
    return (current or 0) + 1

async def main(url, name, increments):
    store = SQLiteStore(url, busy_timeout_s=30)
    try:
        print("ready", flush=True)
        sys.stdin.readline()
        met = 0
        for _ in range(int(increments)):
            _, conflicts = await write_with_retry(
                store, "shared", "count", add, writer=name, attempts=1000, backoff_s=0.001
            )
            met += conflicts
        print(met, flush=True)
    finally:
        await store.close()

asyncio.run(main(*sys.argv[1:]))
"""


def test_two_processes_incrementing_one_entry_lose_no_update(tmp_path: Path) -> None:
    db = tmp_path / "baton.db"
    asyncio.run(SQLiteStore(url(db)).close())  # create the file before the race
    increments = 50
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _INCREMENTER, url(db), f"p{i}", str(increments)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.startswith("ready"), line + proc.communicate(timeout=60)[1]
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=60)
            assert proc.returncode == 0, stderr
            assert int(stdout.strip()) >= 0
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    async def check() -> None:
        store = SQLiteStore(url(db))
        try:
            entry = await store.read_entry("shared", "count")
            assert entry is not None
            total = 2 * increments
            assert (entry.value, entry.version, entry.seq) == (total, total, total)
            assert entry.writer in ("p0", "p1")
        finally:
            await store.close()

    asyncio.run(check())


def version_5_file(path: Path) -> None:
    """A file as Baton wrote it at schema version 5 (before blackboards), with one session."""
    raw = sqlite3.connect(path, isolation_level=None)
    for version in (1, 2, 3, 4, 5):
        for step in _MIGRATIONS[version]:
            raw.execute(step) if isinstance(step, str) else step(raw)
    raw.execute("PRAGMA user_version = 5")
    raw.execute(
        "INSERT INTO sessions (id, user_id, holder, holder_since, incoming, state, created_at, "
        "updated_at, version) VALUES ('s_old', 'u1', 'billing', NULL, NULL, '{}', 1.0, 2.0, 1)"
    )
    raw.close()


async def test_a_version_5_file_read_only_has_empty_boards_and_migrates_when_opened(
    tmp_path: Path,
) -> None:
    db = tmp_path / "baton.db"
    version_5_file(db)
    ro = SQLiteStore(url(db), read_only=True)
    try:
        assert await ro.read_board("b") == {}
        assert await ro.read_entry("b", "k") is None
        assert await ro.board_changes("b") == []
        with pytest.raises(StoreError, match="predates blackboards"):
            await ro.write_entry("b", "k", 1, 0)
        with pytest.raises(StoreError, match="predates blackboards"):
            await ro.delete_board("b")
        got = await ro.get_session("s_old")
        assert got is not None and got.version == 1
    finally:
        await ro.close()
    raw = sqlite3.connect(db)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == 5  # nothing migrated
    raw.close()

    store = SQLiteStore(url(db))
    try:
        await store.write_entry("b", "k", NESTED, 0, writer="w")
        got = await store.get_session("s_old")
        assert got is not None and (got.holder, got.version) == ("billing", 1)
    finally:
        await store.close()
    raw = sqlite3.connect(db)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    raw.close()
    ro = SQLiteStore(url(db), read_only=True)
    try:  # the migrated file, read-only, shows its boards and writes none
        entry = await ro.read_entry("b", "k")
        assert entry is not None and (entry.value, entry.version) == (NESTED, 1)
        with pytest.raises(StoreError, match="read-only"):
            await ro.write_entry("b", "k", 2, 1)
    finally:
        await ro.close()


async def test_two_stores_on_one_file_share_versions_and_seqs(tmp_path: Path) -> None:
    a, b = SQLiteStore(url(tmp_path / "baton.db")), SQLiteStore(url(tmp_path / "baton.db"))
    try:
        first = await a.write_entry("board", "k", "甲", 0)
        assert await b.read_entry("board", "k") == first
        second = await b.write_entry("board", "other", "乙", 0)
        assert second.seq == 2
        with pytest.raises(ConflictError, match="holds version 1"):
            await b.write_entry("board", "k", "乙", 0)
        assert await a.board_changes("board", since_seq=1) == [second]
    finally:
        await a.close()
        await b.close()
