"""The physical floor of a durable step: one commit of the same bytes, same driver, same
settings, nothing else (no framework). Prints one JSON line: median µs per commit.

SQLite: `sqlite3`, WAL, `synchronous=NORMAL`, one autocommit INSERT of `--bytes` bytes.
PostgreSQL: `asyncpg`, the server's `synchronous_commit` (on unless changed), one
autocommit INSERT of `--bytes` bytes (one round trip, one WAL flush).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import statistics
import tempfile
import time
import uuid
from pathlib import Path


def sqlite_floor(n: int, size: int) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-floor-") as tmp:
        conn = sqlite3.connect(Path(tmp) / "floor.db", isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, data TEXT)")
        data = "x" * size
        times = []
        for _ in range(n):
            t = time.perf_counter()
            conn.execute("INSERT INTO t (data) VALUES (?)", (data,))
            times.append((time.perf_counter() - t) * 1e6)
        conn.close()
    return statistics.median(times)


async def postgres_floor(url: str, n: int, size: int) -> float:
    import asyncpg

    conn = await asyncpg.connect(url)
    table = f"floor_{uuid.uuid4().hex[:8]}"
    await conn.execute(f"CREATE TABLE {table} (id BIGSERIAL PRIMARY KEY, data TEXT)")
    data = "x" * size
    times = []
    try:
        for _ in range(n):
            t = time.perf_counter()
            await conn.execute(f"INSERT INTO {table} (data) VALUES ($1)", data)
            times.append((time.perf_counter() - t) * 1e6)
    finally:
        await conn.execute(f"DROP TABLE {table}")
        await conn.close()
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--bytes", type=int, default=4096)
    ap.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    args = ap.parse_args()
    out = {
        "bytes": args.bytes,
        "sqlite_us": sqlite_floor(args.n, args.bytes),
        "postgres_us": asyncio.run(postgres_floor(args.postgres, args.n, args.bytes)),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
