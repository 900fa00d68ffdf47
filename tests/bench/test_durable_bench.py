"""The durable benchmark's counters count what they say: `WireCounter` one round trip per
request answered (a pipelined batch once), `SqlTrace` a commit per COMMIT and per write made
outside a transaction; and the Baton side runs both workloads on SQLite at a tiny size."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest
from tests.services import POSTGRES, require_service

PEERS = Path(__file__).resolve().parents[2] / "benchmarks" / "peers"
sys.path.insert(0, str(PEERS))

from durable_common import SqlTrace, WireCounter, via  # noqa: E402

URL = f"postgresql://postgres@{POSTGRES[0]}:{POSTGRES[1]}/test"


@pytest.mark.services
async def test_the_wire_counter_counts_round_trips() -> None:
    require_service("PostgreSQL", POSTGRES)
    wire = WireCounter(*POSTGRES)
    await wire.start()
    conn = await asyncpg.connect(via(URL, wire.listen_port))
    try:
        await conn.fetchval("SELECT 1")  # (the statement is prepared on first use)
        wire.reset()
        for _ in range(3):
            await conn.fetchval("SELECT 1")
        assert wire.trips == 3
        wire.reset()
        await conn.executemany("SELECT $1::int", [(i,) for i in range(50)])  # one batch
        assert wire.trips <= 2 and wire.bytes_up > 0 and wire.bytes_down > 0
    finally:
        await conn.close()
        await wire.close()


def test_the_sql_trace_counts_commits(tmp_path: Path) -> None:
    counts: dict[str, float] = {}
    conn = sqlite3.connect(tmp_path / "t.db", isolation_level=None)
    conn.execute("CREATE TABLE t (x)")
    conn.set_trace_callback(SqlTrace(counts))
    conn.execute("INSERT INTO t VALUES (1)")  # autocommit: a commit of its own
    conn.execute("BEGIN")
    conn.execute("INSERT INTO t VALUES (2)")
    conn.execute("UPDATE t SET x = 3")
    conn.execute("COMMIT")
    conn.execute("SELECT * FROM t").fetchall()  # a read commits nothing
    assert counts == {"statements": 6, "commits": 2}


def test_the_baton_side_runs_both_workloads_on_sqlite() -> None:
    args = ["--n", "3", "--warmup", "1", "--count-n", "2", "--stores", "memory", "sqlite"]
    out = subprocess.run(
        [sys.executable, str(PEERS / "durable_baton.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=PEERS,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    rows = json.loads(out.stdout.strip().splitlines()[-1])["rows"]
    assert set(rows) == {
        f"{w}/{s}" for w in ("graph", "conversation") for s in ("memory", "sqlite")
    }
    assert rows["graph/sqlite"]["final"]["n"] == 3
    assert rows["conversation/sqlite"]["per_step"]["commits"] > 0
