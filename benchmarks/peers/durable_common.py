"""The durable benchmark's measurement, shared by both sides; standard library only, so each
side's venv can run it.

A side script calls `main(framework, version, make)` and prints one JSON line.
`make(workload, store, where, args)` returns `(run, close, steps)`: `run(thread_id)` runs one
graph run or one conversation on a fresh thread and returns its final state as JSON data (the
orchestrator checks that both sides end alike), `close()` releases the checkpointer, `steps` is
how many steps a run makes (graph: super-steps; conversation: model calls, tool calls and
hand-offs). `where` is a SQLite file for "sqlite", a PostgreSQL URL for "postgres".

Each (workload, store) pair is measured twice, in separate instances:

- timed: `--n` sequential runs after `--warmup`, nothing else in the loop;
- counted: `--count-n` runs after `--warmup`, PostgreSQL reached through `WireCounter`, a
  proxy in this process that counts round trips at the wire (a client burst answered by a
  server burst), and the server's own counters read before and after with `psql`
  (transactions committed, WAL syncs and WAL bytes: `pg_stat_database`, `pg_stat_wal`); SQLite
  through the connection's statement trace (statements, COMMITs).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

WORKLOADS = ("graph", "conversation")
STORES = ("memory", "sqlite", "postgres")
CONVERSATION_STEPS = 5
"""triage's model call, its hand-off, billing's model call, its tool call, its answer."""

Run = Callable[[str], Awaitable[Any]]
Close = Callable[[], Awaitable[None]]
Counted = dict[str, float]
Make = Callable[[str, str, str, argparse.Namespace, Counted], Awaitable[tuple[Run, Close, int]]]
"""(workload, store, where, args, counts) -> (run, close, steps); `counts` is None when timed,
else the dict a side adds its SQLite statement counts to."""


class WireCounter:
    """A TCP proxy to PostgreSQL that counts round trips: each time a connection's client
    sends after the server last spoke (or first) is one. Pipelined statements sent in one
    burst count once, as they cost one trip."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.trips = 0
        self.bytes_up = 0
        self.bytes_down = 0
        self._server: asyncio.AbstractServer | None = None
        self.listen_port = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.listen_port = self._server.sockets[0].getsockname()[1]

    def reset(self) -> None:
        self.trips = self.bytes_up = self.bytes_down = 0

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
        last = ["server"]

        async def client_to_server() -> None:
            while data := await reader.read(1 << 16):
                if last[0] != "client":
                    self.trips += 1
                    last[0] = "client"
                self.bytes_up += len(data)
                up_writer.write(data)
                await up_writer.drain()
            up_writer.close()

        async def server_to_client() -> None:
            while data := await up_reader.read(1 << 16):
                last[0] = "server"
                self.bytes_down += len(data)
                writer.write(data)
                await writer.drain()
            writer.close()

        with contextlib.suppress(ConnectionError, OSError):
            await asyncio.gather(client_to_server(), server_to_client())


_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


class SqlTrace:
    """A SQLite statement trace (`set_trace_callback`) counting statements and commits: each
    COMMIT, and each write statement made outside a transaction (it commits by itself)."""

    def __init__(self, into: Counted) -> None:
        self.into = into
        self.in_transaction = False

    def __call__(self, statement: str) -> None:
        words = statement.lstrip().upper().split(None, 1)
        head = words[0] if words else ""
        into = self.into
        into["statements"] = into.get("statements", 0) + 1
        if head == "BEGIN":
            self.in_transaction = True
        elif head in ("COMMIT", "END"):
            self.in_transaction = False
            into["commits"] = into.get("commits", 0) + 1
        elif head == "ROLLBACK":
            self.in_transaction = False
        elif not self.in_transaction and (
            head in _WRITES or (head == "WITH" and any(w in statement.upper() for w in _WRITES))
        ):
            into["commits"] = into.get("commits", 0) + 1


def via(url: str, port: int) -> str:
    """`url` with its host and port replaced by the proxy's."""
    parts = urllib.parse.urlsplit(url)
    user = parts.netloc.rpartition("@")[0]
    netloc = f"{user}@127.0.0.1:{port}" if user else f"127.0.0.1:{port}"
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def psql(url: str, sql: str) -> str:
    out = subprocess.run(["psql", url, "-Atc", sql], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def server_counters(url: str, db: str) -> dict[str, float]:
    """PostgreSQL's own counters: commits in `db`, WAL syncs and bytes (all sessions)."""
    row = psql(
        url,
        "SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = "
        f"'{db}'), wal_sync, wal_bytes FROM pg_stat_wal",
    )
    commits, syncs, wal = row.split("|")
    return {"commits": float(commits), "wal_syncs": float(syncs), "wal_bytes": float(wal)}


async def timed(run: Run, n: int, warmup: int, label: str) -> tuple[list[float], Any]:
    final: Any = None
    for i in range(warmup):
        final = await run(f"warm-{label}-{i}")
    gc.collect()
    times: list[float] = []
    for i in range(n):
        t = time.perf_counter()
        final = await run(f"{label}-{i}")
        times.append((time.perf_counter() - t) * 1e6)
    return times, final


def summary(times: list[float], steps: int, cpu_s: float) -> dict[str, float]:
    q = statistics.quantiles(times, n=100)
    mean = statistics.fmean(times)
    return {
        "run_us": mean,
        "run_p50_us": q[49],
        "run_p99_us": q[98],
        "step_us": mean / steps,
        "step_p50_us": q[49] / steps,
        "steps": steps,
        "cpu_step_us": cpu_s * 1e6 / (len(times) * steps),
    }


async def counted(
    make: Make, workload: str, store: str, where: str, args: argparse.Namespace
) -> dict[str, float]:
    """Per step: round trips, transactions, WAL syncs and bytes (PostgreSQL), or statements
    and commits (SQLite), over `--count-n` runs."""
    counts: Counted = {}
    wire: WireCounter | None = None
    if store == "postgres":
        parts = urllib.parse.urlsplit(where)
        wire = WireCounter(parts.hostname or "127.0.0.1", parts.port or 5432)
        await wire.start()
        where = via(where, wire.listen_port)
    run, close, steps = await make(workload, store, where, args, counts)
    before: dict[str, float] = {}
    try:
        for i in range(args.warmup):
            await run(f"cwarm-{workload}-{i}")
        counts.clear()
        if wire is not None:
            # a busy backend reports its counts at most once a second, an idle one after 10 s:
            # wait until the warm-up's are in, so that they are not counted as the runs'
            await asyncio.sleep(11)
            before = server_counters(args.postgres, args.pg_db)
            # one more run, in the server's counts but not in the wire's: a pool may replace
            # connections after the pause, which is no run's cost
            await run(f"count-{workload}-first")
            wire.reset()
        for i in range(args.count_n):
            await run(f"count-{workload}-{i}")
        if wire is not None:  # before close: the pool's goodbyes are not the runs' trips
            counts["round_trips"] = wire.trips / args.count_n
            counts["wire_bytes"] = (wire.bytes_up + wire.bytes_down) / args.count_n
    finally:
        await close()
        if wire is not None:
            await wire.close()
    runs = args.count_n
    if before:
        await asyncio.sleep(0.2)  # closed backends flush their statistics as they exit
        after = server_counters(args.postgres, args.pg_db)
        # (the reading of `before` is a transaction of its own)
        server = {k: after[k] - before[k] - (1 if k == "commits" else 0) for k in after}
        counts.update({k: v / (runs + 1) for k, v in server.items()})
        runs = 1  # per run already
    return {k: v / (runs * steps) for k, v in counts.items()}


def main(framework: str, version: str, make: Make) -> None:
    ap = argparse.ArgumentParser(description=f"{framework}: the durable benchmark")
    ap.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    ap.add_argument("--stores", nargs="+", choices=STORES, default=list(STORES))
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--count-n", type=int, default=20)
    ap.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    ap.add_argument("--durability", choices=["sync", "async"], default="sync")
    ap.add_argument("--no-count", action="store_true", help="timings only")
    args = ap.parse_args()
    args.pg_db = urllib.parse.urlsplit(args.postgres).path.lstrip("/") or "postgres"

    async def one(workload: str, store: str, where: str) -> dict[str, Any]:
        run, close, steps = await make(workload, store, where, args, None)  # type: ignore[arg-type]
        try:
            cpu = time.process_time()
            times, final = await timed(run, args.n, args.warmup, f"{workload}-{store}")
            cpu = time.process_time() - cpu  # (the warm-up's share is small, and alike)
        finally:
            await close()
        row: dict[str, Any] = summary(times, steps, cpu * args.n / (args.n + args.warmup))
        row["final"] = final
        if not args.no_count and store != "memory":
            row["per_step"] = await counted(make, workload, store, where, args)
        return row

    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-durable-") as tmp:
        for workload in args.workloads:
            for store in args.stores:
                where = args.postgres if store == "postgres" else str(Path(tmp) / f"{workload}.db")
                rows[f"{workload}/{store}"] = asyncio.run(one(workload, store, where))
    print(
        json.dumps(
            {
                "framework": framework,
                "version": version,
                "python": sys.version.split()[0],
                "durability": args.durability,
                "rows": rows,
            }
        )
    )
