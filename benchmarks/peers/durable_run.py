"""Durable runs side by side: Baton and LangGraph, both checkpointing every step.

    python benchmarks/peers/durable_run.py [--n 200] [--repeat 5]
        [--workloads graph conversation] [--stores memory sqlite postgres]
        [--postgres postgresql://postgres@127.0.0.1:5432/test]
        [--langgraph-python /tmp/peers-venv-langgraph/bin/python]

Two workloads, each on Baton and on LangGraph, on three checkpointers:

- graph: the 3-node cyclic graph of `graph_common.py` (7 super-steps a run);
- conversation: triage hands off to billing, which calls one tool and answers (5 steps:
  3 model calls, 1 hand-off, 1 tool call), Baton's `Team` against langgraph-swarm;

- memory: `MemoryStore` / `InMemorySaver`;
- sqlite: `SQLiteStore` / `AsyncSqliteSaver`, both WAL with `synchronous=NORMAL`;
- postgres: `PostgresStore` (asyncpg) / `AsyncPostgresSaver` (psycopg), the same local
  server, its `synchronous_commit` for both.

Same durability on both sides: LangGraph runs with `durability="sync"` (each checkpoint saved
before the next step, as Baton does; `--langgraph-durability async` for its default). Each
side runs in its own process from its own venv and prints one JSON line
(`durable_baton.py`, `durable_langgraph.py`); the final state of every row must be the same.
`--repeat k` runs the sides k times, alternating which goes first; the table shows each
side's median round and the ratio is the median of the per-round ratios.

CPU is the side process's CPU time per step (all its threads: SQLite's too); the rest of a
step is waiting (for the database, the disk). Counted per step in a separate pass (so that
counting costs no time in the timed one): round trips at the wire (a proxy between the side
and PostgreSQL), bytes on the wire, transactions committed (`pg_stat_database.xact_commit`,
read-only ones included), WAL syncs and WAL bytes (`pg_stat_wal`) for PostgreSQL; statements
and commits (the connection's trace) for SQLite.
The floor is one commit of 4 KB with the same driver and settings (`durable_floor.py`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_LANGGRAPH = "/tmp/peers-venv-langgraph/bin/python"
MIN_RATIO = 3.0
"""Target: Baton at least this many times cheaper per durable step (sqlite, postgres)."""
MIN_RATIO_MEMORY_GRAPH = 5.0
"""Target: Baton's graph at least this many times cheaper than on LangGraph's InMemorySaver."""
MAX_PG_TRIPS = 2.0
"""Target: PostgreSQL round trips per conversation step."""


def run_side(python: str, script: str, args: argparse.Namespace, count: bool) -> dict[str, Any]:
    cmd = [python, str(HERE / script), "--n", str(args.n), "--warmup", str(args.warmup)]
    cmd += ["--workloads", *args.workloads, "--stores", *args.stores]
    cmd += ["--postgres", args.postgres, "--count-n", str(args.count_n)]
    cmd += ["--durability", args.langgraph_durability]
    if not count:
        cmd.append("--no-count")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, cwd=HERE)
    if out.returncode != 0:
        raise RuntimeError(f"{script} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def floor(args: argparse.Namespace) -> dict[str, float]:
    cmd = [args.baton_python, str(HERE / "durable_floor.py"), "--postgres", args.postgres]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, check=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def median_row(rounds: list[dict[str, Any]], key: str) -> dict[str, Any]:
    rows = sorted((r["rows"][key] for r in rounds), key=lambda row: row["step_us"])
    return dict(rows[len(rows) // 2])


def counts(row: dict[str, Any], store: str) -> str:
    c = row.get("per_step") or {}
    if store == "postgres" and c:
        return (
            f"{c['round_trips']:5.1f} trips {c['commits']:4.1f} xact {c['wal_syncs']:4.1f} "
            f"syncs {c['wal_bytes'] / 1024:5.1f} KB WAL"
        )
    if store == "sqlite" and c:
        return f"{c.get('statements', 0):5.1f} stmts {c.get('commits', 0):4.1f} commits"
    return ""


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--n", type=int, default=200, help="timed runs per row and round")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--count-n", type=int, default=20, help="runs of the counting pass")
    ap.add_argument("--repeat", type=int, default=5, help="rounds (sides alternate)")
    ap.add_argument("--workloads", nargs="+", default=["graph", "conversation"])
    ap.add_argument("--stores", nargs="+", default=["memory", "sqlite", "postgres"])
    ap.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    ap.add_argument("--langgraph-durability", choices=["sync", "async"], default="sync")
    ap.add_argument("--baton-python", default=sys.executable)
    ap.add_argument(
        "--langgraph-python",
        default=DEFAULT_LANGGRAPH if Path(DEFAULT_LANGGRAPH).exists() else None,
    )
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per side")
    args = ap.parse_args()
    if not args.langgraph_python:
        raise SystemExit(
            f"no LangGraph python: create {DEFAULT_LANGGRAPH} (python3 -m venv ... && pip "
            "install langgraph langgraph-checkpoint-sqlite langgraph-checkpoint-postgres "
            "langgraph-swarm 'psycopg[binary]') or pass --langgraph-python"
        )

    print(f"# {shlex.join(['python', *sys.argv])}")
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M')}, Python {platform.python_version()} on "
        f"{platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, "
        f"{args.repeat} round(s), LangGraph durability={args.langgraph_durability}"
    )
    sides = [
        ("Baton", args.baton_python, "durable_baton.py"),
        ("LangGraph", args.langgraph_python, "durable_langgraph.py"),
    ]
    rounds: dict[str, list[dict[str, Any]]] = {"Baton": [], "LangGraph": []}
    for i in range(args.repeat):
        for name, python, script in sides if i % 2 == 0 else sides[::-1]:
            rounds[name].append(run_side(python, script, args, count=i == 0))
    counted = {name: r[0]["rows"] for name, r in rounds.items()}
    base = floor(args)

    keys = [f"{w}/{s}" for w in args.workloads for s in args.stores]
    for key in keys:
        finals = {json.dumps(r[-1]["rows"][key]["final"], sort_keys=True) for r in rounds.values()}
        if len(finals) != 1:
            raise SystemExit(f"{key}: the two sides ended differently: {finals}")
    versions = {name: r[-1]["version"] for name, r in rounds.items()}
    print(
        f"\n{args.n} sequential runs per row and round after {args.warmup} warm-up, a fresh "
        f"thread each; Baton {versions['Baton'] or '(checkout)'}, LangGraph "
        f"{versions['LangGraph']}; floor: one autocommit INSERT of {base['bytes']} bytes = "
        f"{base['sqlite_us']:.0f} µs on SQLite, {base['postgres_us']:.0f} µs on PostgreSQL"
    )
    header = (
        f"{'workload/store':<22} {'framework':<10} {'µs/step':>9} {'p50':>8} {'CPU':>7} "
        f"{'µs/run':>9} {'LG/Baton':>9} {'vs floor':>9}  counted per step"
    )
    print(header)
    print("-" * (len(header) + 40))
    verdicts = []
    for key in keys:
        workload, store = key.split("/")
        per_round = [
            g["rows"][key]["step_us"] / b["rows"][key]["step_us"]
            for b, g in zip(rounds["Baton"], rounds["LangGraph"], strict=True)
        ]
        ratio = statistics.median(per_round)
        for name in ("Baton", "LangGraph"):
            row = median_row(rounds[name], key)
            shown = f"{ratio:8.1f}x" if name == "LangGraph" else f"{'1.0x':>9}"
            floor_us = base.get(f"{store}_us")
            vs = f"{row['step_us'] / floor_us:8.1f}x" if floor_us else f"{'':>9}"
            print(
                f"{key:<22} {name:<10} {row['step_us']:9.1f} {row['step_p50_us']:8.1f} "
                f"{row['cpu_step_us']:7.0f} {row['run_us']:9.1f} {shown} {vs}  "
                f"{counts(counted[name][key], store)}"
            )
        listed = ", ".join(f"{r:.1f}x" for r in per_round)
        need = MIN_RATIO if store != "memory" else MIN_RATIO_MEMORY_GRAPH
        if store == "memory" and workload != "graph":
            continue
        verdicts.append(
            f"  {'PASS' if ratio >= need else 'FAIL'}  {key}: LangGraph/Baton per step >= "
            f"{need:.0f}x: {ratio:.1f}x (rounds {listed})"
        )
    trips = (counted["Baton"].get("conversation/postgres") or {}).get("per_step")
    if trips:
        ok = trips["round_trips"] <= MAX_PG_TRIPS
        verdicts.append(
            f"  {'PASS' if ok else 'FAIL'}  PostgreSQL round trips per conversation step <= "
            f"{MAX_PG_TRIPS:.0f}: {trips['round_trips']:.1f}"
        )
    print("\ntargets:")
    print("\n".join(verdicts))


if __name__ == "__main__":
    main()
