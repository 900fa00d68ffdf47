"""Graph super-step overhead: Baton's `Graph` against LangGraph's `StateGraph`.

    python benchmarks/peers/graph_run.py [--n 300] [--warmup 30] [--repeat 3]
        [--checkpointers memory sqlite] [--loop asyncio|uvloop] [--langgraph-durability async|sync]
        [--langgraph-python /tmp/peers-venv-langgraph/bin/python]

The same 3-node graph on both sides (START -> plan -> work -> check, check -> work twice,
then END: 7 super-steps a run, pure-Python async nodes, a list state key with an append
reducer and a counter), checkpointed on every super-step: Baton on `MemoryStore` and
`SQLiteStore`, LangGraph on `InMemorySaver` and `AsyncSqliteSaver` (both SQLite files in WAL
mode with `synchronous=NORMAL`, Baton's setting). Each run is on a fresh
thread id; `--n` runs in a row after `--warmup`. Each side runs in its own process (LangGraph
from its own venv, `pip install langgraph langgraph-checkpoint-sqlite`) and prints one JSON
line; this script checks that both reached the same final state and prints one table.

`--repeat k` runs the sides k times in turn (Baton, LangGraph, LangGraph, Baton, ...: the side
that goes first alternates) and keeps each side's best round per checkpointer (lowest mean);
the ratio is also given as the median of the per-round ratios.
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
MIN_RATIO = 10.0
"""Target: Baton's time per super-step at least this many times below LangGraph's."""


def run_side(python: str, script: str, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [python, str(HERE / script), "--n", str(args.n), "--warmup", str(args.warmup)]
    cmd += ["--checkpointers", *args.checkpointers, "--loop", args.loop]
    if script == "graph_langgraph.py":
        cmd += ["--durability", args.langgraph_durability]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    if out.returncode != 0:
        raise RuntimeError(f"{script} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def best(rounds: list[dict[str, Any]], checkpointer: str) -> dict[str, float]:
    return dict(min((r["checkpointers"][checkpointer] for r in rounds), key=lambda c: c["mean_us"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300, help="sequential runs per checkpointer")
    ap.add_argument("--warmup", type=int, default=30, help="unmeasured runs first")
    ap.add_argument("--repeat", type=int, default=3, help="rounds; each side's best is kept")
    ap.add_argument(
        "--checkpointers", nargs="+", choices=["memory", "sqlite"], default=["memory", "sqlite"]
    )
    ap.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    ap.add_argument(
        "--langgraph-durability",
        choices=["async", "sync"],
        default="async",
        help="LangGraph's durability (async, its default: saves overlap the next step)",
    )
    ap.add_argument("--baton-python", default=sys.executable)
    ap.add_argument(
        "--langgraph-python",
        default=DEFAULT_LANGGRAPH if Path(DEFAULT_LANGGRAPH).exists() else None,
    )
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per side")
    args = ap.parse_args()
    if not args.langgraph_python:
        raise SystemExit(
            f"no LangGraph python: create {DEFAULT_LANGGRAPH} (python3 -m venv ... && pip install "
            "langgraph langgraph-checkpoint-sqlite) or pass --langgraph-python"
        )

    print(f"# {shlex.join(['python', *sys.argv])}")
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M')}, Python {platform.python_version()} on "
        f"{platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, "
        f"{args.loop} event loop, best of {args.repeat} round(s)"
    )
    sides = [
        ("Baton", args.baton_python, "graph_baton.py"),
        ("LangGraph", args.langgraph_python, "graph_langgraph.py"),
    ]
    rounds: dict[str, list[dict[str, Any]]] = {"Baton": [], "LangGraph": []}
    for i in range(args.repeat):
        for name, python, script in sides if i % 2 == 0 else sides[::-1]:
            rounds[name].append(run_side(python, script, args))

    finals = {name: json.dumps(r[-1]["final"], sort_keys=True) for name, r in rounds.items()}
    steps = rounds["Baton"][-1]["super_steps"]
    print(f"\nfinal state, Baton:     {finals['Baton']}")
    print(f"final state, LangGraph: {finals['LangGraph']}")
    if len(set(finals.values())) != 1:
        raise SystemExit("the two sides reached different final states")
    versions = {name: r[-1]["version"] for name, r in rounds.items()}

    print(
        f"\n{args.n} sequential runs per row after {args.warmup} warm-up, {steps} super-steps a "
        f"run, a fresh thread per run; SQLite in WAL mode with synchronous=NORMAL on both "
        f"sides; LangGraph durability={args.langgraph_durability}; "
        f"Baton {versions['Baton'] or '(checkout)'}, LangGraph {versions['LangGraph']}"
    )
    header = (
        f"{'checkpointer':<13} {'framework':<10} {'µs/step':>9} {'p50 µs/step':>12} "
        f"{'µs/run':>9} {'p50 µs/run':>11} {'p99 µs/run':>11} {'LangGraph/Baton':>16}"
    )
    print(header)
    print("-" * len(header))
    verdicts = []
    for cp in args.checkpointers:
        b, lg = best(rounds["Baton"], cp), best(rounds["LangGraph"], cp)
        pairs = zip(rounds["Baton"], rounds["LangGraph"], strict=True)
        per_round = [
            g["checkpointers"][cp]["mean_us"] / x["checkpointers"][cp]["mean_us"] for x, g in pairs
        ]
        ratio = lg["mean_us"] / b["mean_us"]
        for name, row in (("Baton", b), ("LangGraph", lg)):
            shown = f"{ratio:15.1f}x" if name == "LangGraph" else f"{'1.0x':>16}"
            print(
                f"{cp:<13} {name:<10} {row['step_us']:9.1f} {row['step_p50_us']:12.1f} "
                f"{row['mean_us']:9.1f} {row['p50_us']:11.1f} {row['p99_us']:11.1f} {shown}"
            )
        median = statistics.median(per_round)
        listed = ", ".join(f"{r:.1f}x" for r in per_round)
        ok = median >= MIN_RATIO
        verdicts.append(
            f"  {'PASS' if ok else 'FAIL'}  {cp}: LangGraph/Baton per super-step >= "
            f"{MIN_RATIO:.0f}x: {median:.1f}x (median of rounds {listed}; best means {ratio:.1f}x)"
        )
    print("\ntargets:")
    print("\n".join(verdicts))


if __name__ == "__main__":
    main()
