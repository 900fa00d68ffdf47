"""Capacity of a deployment: what one conversation turn costs every part of it, and what N
workers therefore need, checked against a run with 1 and then 2 worker processes.

    python benchmarks/capacity.py [--total 2000] [--inflight 400] [--latency 0.05]

The deployment of docs/deploy.md on one machine: `baton worker` processes on the Redis Streams
bus (16 partitions) sharing one `PostgresStore`, the benchmark's process submitting the
kernel-overhead conversation (3 model calls of `--latency` s on a scripted model, 1 hand-off,
1 tool call; every turn a fresh session) and keeping `--inflight` unanswered.

Measured per turn, for 1 and for 2 workers: CPU of the workers, of the submitting client, of
Redis and of PostgreSQL (from /proc: every process's user + system time); Redis commands and
bytes in and out (`INFO`); PostgreSQL transactions, rows written, WAL bytes and WAL syncs
(`pg_stat_database`, `pg_stat_wal`). From the 1-worker figures the script derives each part's
ceiling in turns/s (a worker is one core: 1 / its CPU per turn; Redis runs commands on one
thread: 1 / its CPU per turn; the machine: cores / all CPU per turn) and prints the ratio 2
workers should reach on this machine beside the one measured.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1] / "src"))
sys.path.insert(0, str(HERE.parents[1]))

from benchmarks.distributed import (  # noqa: E402
    POSTGRES,
    bus_url,
    drive,
    redis_bus,
    start_workers,
    stop_workers,
)

TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds of `pids` (those still alive)."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / TICK  # utime, stime
    return total


def pids_of(name: str) -> list[int]:
    out = subprocess.run(["pgrep", "-x", name], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def redis_info(bus: Any) -> dict[str, float]:
    out = subprocess.run(["redis-cli", "INFO", "stats"], capture_output=True, text=True)
    info = dict(line.split(":", 1) for line in out.stdout.splitlines() if ":" in line)
    keys = ("total_commands_processed", "total_net_input_bytes", "total_net_output_bytes")
    return {k: float(info[k]) for k in keys}


def pg_counters() -> dict[str, float]:
    sql = (
        "SELECT xact_commit, tup_inserted + tup_updated + tup_deleted, "
        "(SELECT wal_bytes FROM pg_stat_wal), (SELECT wal_sync FROM pg_stat_wal) "
        "FROM pg_stat_database WHERE datname = 'test'"
    )
    out = subprocess.run(["psql", POSTGRES, "-Atc", sql], capture_output=True, text=True)
    commits, rows, wal, syncs = (float(x) for x in out.stdout.strip().split("|"))
    return {"commits": commits, "rows": rows, "wal_bytes": wal, "wal_syncs": syncs}


async def one_setup(n: int, args: argparse.Namespace) -> dict[str, float]:
    schema = f"bench_cap_{uuid.uuid4().hex[:8]}"
    bus = await redis_bus()
    env = {"BENCH_LATENCY_S": str(args.latency), "BENCH_STORE": POSTGRES, "BENCH_PG_SCHEMA": schema}
    procs = start_workers(n, bus_url(bus), env, args.inflight)
    workers = [p.pid for p in procs]
    try:
        await drive(bus, 100 * n, 50, f"warm{n}")  # workers up, schema made, partitions held
        # (PostgreSQL forks a process per connection: the workers' exist by now)
        redis, postgres = pids_of("redis-server"), pids_of("postgres")
        await asyncio.sleep(11)  # PostgreSQL's counters of the warm-up are reported by now
        pg0, rd0 = pg_counters(), redis_info(bus)
        c0 = {
            "workers": cpu_s(workers),
            "redis": cpu_s(redis),
            "postgres": cpu_s(postgres),
            "client": time.process_time(),
        }
        wall = await drive(bus, args.total, args.inflight, f"c{n}")
        c1 = {
            "workers": cpu_s(workers),
            "redis": cpu_s(redis),
            "postgres": cpu_s(postgres),
            "client": time.process_time(),
        }
        rd1 = redis_info(bus)
    finally:
        stop_workers(procs)  # their connections close: PostgreSQL reports their counts
        await bus.drop()
        await bus.close()
    await asyncio.sleep(1)
    pg1 = pg_counters() | {"commits": pg_counters()["commits"] - 1}
    subprocess.run(["psql", POSTGRES, "-qc", f"DROP SCHEMA {schema} CASCADE"], check=True)
    t = args.total
    row = {"turns_per_s": t / wall}
    row |= {f"cpu_{k}_us": (c1[k] - c0[k]) / t * 1e6 for k in c0}
    row |= {f"redis_{k}": (rd1[k] - rd0[k]) / t for k in rd0}
    row |= {f"pg_{k}": (pg1[k] - pg0[k] - (1 if k == "commits" else 0)) / t for k in pg0}
    return row


def report(rows: dict[int, dict[str, float]], cores: int) -> None:
    print(f"\n{'per turn':<34} {'1 worker':>12} {'2 workers':>12}")
    names = [
        ("turns/s", "turns_per_s", "{:,.0f}"),
        ("CPU, workers (µs)", "cpu_workers_us", "{:,.0f}"),
        ("CPU, client (µs)", "cpu_client_us", "{:,.0f}"),
        ("CPU, Redis (µs)", "cpu_redis_us", "{:,.0f}"),
        ("CPU, PostgreSQL (µs)", "cpu_postgres_us", "{:,.0f}"),
        ("Redis commands", "redis_total_commands_processed", "{:.1f}"),
        ("Redis bytes in + out", "redis_bytes", "{:,.0f}"),
        ("PostgreSQL transactions", "pg_commits", "{:.1f}"),
        ("PostgreSQL rows written", "pg_rows", "{:.1f}"),
        ("PostgreSQL WAL bytes", "pg_wal_bytes", "{:,.0f}"),
        ("PostgreSQL WAL syncs", "pg_wal_syncs", "{:.2f}"),
    ]
    for row in rows.values():
        row["redis_bytes"] = (
            row["redis_total_net_input_bytes"] + row["redis_total_net_output_bytes"]
        )
    for label, key, fmt in names:
        print(f"{label:<34} {fmt.format(rows[1][key]):>12} {fmt.format(rows[2][key]):>12}")

    one = rows[1]
    total = sum(one[k] for k in one if k.startswith("cpu_"))
    ceilings = {
        "one worker (one core)": 1e6 / one["cpu_workers_us"],
        "Redis (one thread)": 1e6 / max(one["cpu_redis_us"], 1e-9),
        f"this machine ({cores} cores, all parts)": cores * 1e6 / total,
    }
    print("\nceilings from the 1-worker run, turns/s:")
    for label, value in ceilings.items():
        print(f"  {label:<40} {value:,.0f}")
    expected = min(2 * ceilings["one worker (one core)"], ceilings[list(ceilings)[-1]])
    expected = min(expected, ceilings["Redis (one thread)"]) / one["turns_per_s"]
    measured = rows[2]["turns_per_s"] / one["turns_per_s"]
    print(f"\n2 workers / 1 worker: expected {expected:.2f}x here, measured {measured:.2f}x")


async def main(args: argparse.Namespace) -> None:
    cores = os.cpu_count() or 1
    print(f"# {' '.join(['python', *sys.argv])}")
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M')}, Python {platform.python_version()}, {cores} "
        f"cores, load {os.getloadavg()[0]:.1f}; {args.total:,} turns, {args.inflight} in "
        f"flight, {args.latency * 1000:.0f} ms per model call"
    )
    rows = {n: await one_setup(n, args) for n in (1, 2)}
    report(rows, cores)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--total", type=int, default=2000)
    ap.add_argument("--inflight", type=int, default=400)
    ap.add_argument("--latency", type=float, default=0.05)
    asyncio.run(main(ap.parse_args()))
