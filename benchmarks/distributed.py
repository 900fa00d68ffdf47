"""Distributed execution: conversations/s through workers, and what the Redis bus and the
PostgreSQL store add to a turn.

    python benchmarks/distributed.py [--inflight 5000] [--total 20000] [--latency 0.1]
        [--redis-total 4000] [--redis-inflight 2000] [--turns 300] [--only SECTION ...]

Sections (all in one run; `--only` picks some):

- `inprocess`: one worker and its clients in one process, in-process bus (`MemoryBus`) and
  store (`MemoryStore`), the collector tuned as `baton worker` tunes it; `--total`
  conversations with `--inflight` of them submitted and unanswered at any time, each the
  kernel-overhead conversation (3 model calls of `--latency` s, 1 hand-off, 1 tool call);
  beside it, the baseline: the same conversations through `team.run` with no bus or worker.
- `scaling`: the same conversations on the Redis Streams bus, through 1 and then 2 worker
  processes (`baton worker`, each with its own MemoryStore), submitted from this process;
  conversations/s and the ratio. The Redis server, the client and the workers share the
  machine's cores.
- `overhead`: one turn at a time (model latency 0), submit → result, for each of: in-process
  bus + MemoryStore, in-process bus + PostgreSQL store, Redis bus + MemoryStore (worker in
  another process), Redis bus + PostgreSQL store (likewise); µs per turn (mean, p50, p99) and
  what each adds to the in-process defaults.

Every conversation must complete with its tool called, or the script stops.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import platform
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from benchmarks.distributed_team import ANSWER, build_team, open_bench_store  # noqa: E402

from baton.backends import MemoryStore  # noqa: E402
from baton.bus import Envelope, MemoryBus  # noqa: E402
from baton.bus.redis_streams import RedisStreamsBus  # noqa: E402
from baton.worker import Worker, tune_collector  # noqa: E402

REDIS = "redis://127.0.0.1:6379/0"
POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
EXPECTED = ANSWER.text


def check(result: Any, what: str) -> None:
    if result is None or result.status != "completed" or result.output != EXPECTED:
        raise SystemExit(f"{what}: a conversation did not complete as scripted: {result!r}")


async def drive(bus: Any, total: int, inflight: int, prefix: str) -> float:
    """Submit `total` one-turn conversations keeping `inflight` unanswered; wall seconds."""
    sem = asyncio.Semaphore(inflight)

    async def one(i: int) -> None:
        async with sem:
            env = Envelope(session_id=f"{prefix}-{i}", message="where is my invoice?")
            await bus.publish(env)
            check(await bus.get_result(env.session_id, env.id, wait_s=600), "conversation")

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(total)))
    return time.perf_counter() - t0


# ------------------------------------------------------------------ in-process
async def inprocess(args: argparse.Namespace) -> dict[str, Any]:
    bus = MemoryBus()
    team = build_team(None, args.latency, bus=bus)
    worker = Worker(team, concurrency=args.inflight, block_s=0.05)
    warm = Worker(build_team(None, 0.0, bus=MemoryBus()), block_s=0.05)
    task = asyncio.create_task(warm.run())
    await drive(warm.bus, 200, 50, "warm")
    warm.stop()
    await task
    tune_collector()
    # the baseline: the same conversations through team.run, no bus, no worker
    direct = build_team(None, args.latency)
    sem = asyncio.Semaphore(args.inflight)

    async def one(i: int) -> None:
        async with sem:
            check(await direct.run("where is my invoice?", f"d-{i}"), "direct run")

    cpu = time.process_time()
    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(args.total)))
    base_wall, base_cpu = time.perf_counter() - t0, time.process_time() - cpu
    task = asyncio.create_task(worker.run())
    cpu = time.process_time()
    wall = await drive(bus, args.total, args.inflight, "c")
    cpu = time.process_time() - cpu
    worker.stop()
    await task
    return {
        "conv_per_s": args.total / wall,
        "cpu_us": cpu / args.total * 1e6,
        "base_conv_per_s": args.total / base_wall,
        "base_cpu_us": base_cpu / args.total * 1e6,
    }


# ------------------------------------------------------------------ workers in processes
def start_workers(n: int, bus_url: str, env: dict[str, str], concurrency: int) -> list[Any]:
    procs = []
    for i in range(n):
        cmd = [
            sys.executable,
            "-m",
            "baton",
            "worker",
            "benchmarks.distributed_team:team",
            "--bus",
            bus_url,
            "--concurrency",
            str(concurrency),
            "--name",
            f"bench-{i}",
        ]
        procs.append(
            subprocess.Popen(
                cmd,
                cwd=ROOT,
                env={**os.environ, **env},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    return procs


def stop_workers(procs: list[Any]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()


async def redis_bus(partitions: int = 16) -> RedisStreamsBus:
    return RedisStreamsBus(REDIS, prefix=f"bench-{uuid.uuid4().hex[:8]}:", partitions=partitions)


def bus_url(bus: RedisStreamsBus) -> str:
    return f"{REDIS}?prefix={bus.prefix}&partitions={bus.partitions}"


async def scaling(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n in (1, 2):
        bus = await redis_bus()
        env = {"BENCH_LATENCY_S": str(args.latency), "BENCH_STORE": "memory://"}
        procs = start_workers(n, bus_url(bus), env, args.redis_inflight)
        try:
            await drive(bus, 100 * n, 50, "warm")  # the workers are up and hold partitions
            wall = await drive(bus, args.redis_total, args.redis_inflight, f"w{n}")
            out[n] = args.redis_total / wall
        finally:
            stop_workers(procs)
            await bus.drop()
            await bus.close()
    out["ratio"] = out[2] / out[1]
    return out


# ------------------------------------------------------------------ per-turn overhead
async def sequential(bus: Any, turns: int, prefix: str) -> list[float]:
    times = []
    for i in range(turns + 20):
        env = Envelope(session_id=f"{prefix}-{i}", message="where is my invoice?")
        t0 = time.perf_counter()
        await bus.publish(env)
        result = await bus.get_result(env.session_id, env.id, wait_s=60)
        if i >= 20:  # warm-up
            times.append((time.perf_counter() - t0) * 1e6)
        check(result, prefix)
    return times


async def overhead(args: argparse.Namespace) -> dict[str, list[float]]:
    rows: dict[str, list[float]] = {}
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    for label, store_url in (
        ("MemoryBus + MemoryStore", "memory://"),
        ("MemoryBus + PostgresStore", POSTGRES),
    ):
        store = open_bench_store(store_url, schema) if store_url != "memory://" else MemoryStore()
        bus = MemoryBus()
        worker = Worker(build_team(store, 0.0, bus=bus), block_s=0.05)
        task = asyncio.create_task(worker.run())
        rows[label] = await sequential(bus, args.turns, f"o{len(rows)}")
        worker.stop()
        await task
        drop = getattr(store, "drop", None)
        if drop is not None:
            await drop()
        await worker.team.aclose()
    for label, store_url in (
        ("Redis bus + MemoryStore", "memory://"),
        ("Redis bus + PostgresStore", POSTGRES),
    ):
        bus = await redis_bus(partitions=4)
        env = {"BENCH_LATENCY_S": "0", "BENCH_STORE": store_url, "BENCH_PG_SCHEMA": schema}
        procs = start_workers(1, bus_url(bus), env, 64)
        try:
            await sequential(bus, 20, f"warm{len(rows)}")
            rows[label] = await sequential(bus, args.turns, f"o{len(rows)}")
        finally:
            stop_workers(procs)
            await bus.drop()
            await bus.close()
    if POSTGRES:
        from baton.backends.postgres import PostgresStore

        cleanup = PostgresStore(POSTGRES, schema=schema)
        await cleanup.drop()
        await cleanup.close()
    return rows


def stats(times: list[float]) -> tuple[float, float, float]:
    q = statistics.quantiles(times, n=100)
    return statistics.fmean(times), q[49], q[98]


async def main(args: argparse.Namespace) -> None:
    print(
        f"# {platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}"
    )
    if "inprocess" in args.only:
        r = await inprocess(args)
        print(
            f"\nin-process bus, 1 worker, collector tuned: {args.total:,} conversations, "
            f"{args.inflight:,} in flight, {args.latency * 1000:.0f} ms per model call\n"
            f"  team.run directly (no bus, no worker): {r['base_conv_per_s']:,.0f} "
            f"conversations/s, CPU {r['base_cpu_us']:.0f} µs per conversation\n"
            f"  submit -> worker -> result:            {r['conv_per_s']:,.0f} "
            f"conversations/s, CPU {r['cpu_us']:.0f} µs per conversation (worker and clients)\n"
            f"  the bus and the worker add {r['cpu_us'] - r['base_cpu_us']:.0f} µs of CPU per "
            "conversation"
        )
        gc.unfreeze()
    if "scaling" in args.only:
        r = await scaling(args)
        print(
            f"\nRedis Streams bus, {args.redis_total:,} conversations, {args.redis_inflight:,} "
            f"in flight, {args.latency * 1000:.0f} ms per model call, 16 partitions\n"
            f"  1 worker: {r[1]:,.0f} conversations/s\n"
            f"  2 workers: {r[2]:,.0f} conversations/s\n"
            f"  2 workers / 1 worker: {r['ratio']:.2f}x"
        )
    if "overhead" in args.only:
        rows = await overhead(args)
        base = stats(rows["MemoryBus + MemoryStore"])
        print(f"\none turn at a time, model latency 0, {args.turns} turns, µs submit -> result")
        print(f"{'bus + store':<28} {'mean':>9} {'p50':>9} {'p99':>9} {'added (mean)':>13}")
        for label, times in rows.items():
            mean, p50, p99 = stats(times)
            print(f"{label:<28} {mean:9.0f} {p50:9.0f} {p99:9.0f} {mean - base[0]:13.0f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inflight", type=int, default=5000)
    parser.add_argument("--total", type=int, default=20000)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--redis-total", type=int, default=4000)
    parser.add_argument("--redis-inflight", type=int, default=2000)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument(
        "--only",
        nargs="+",
        default=["inprocess", "scaling", "overhead"],
        choices=["inprocess", "scaling", "overhead"],
    )
    asyncio.run(main(parser.parse_args()))
