"""The graph benchmark shared by both sides; standard library only, so each venv can run it.

One run of the graph: START -> plan -> work -> check, and check -> work again until `n`
reaches `ROUNDS`, then END. With `ROUNDS = 3` a run takes 7 super-steps (plan, then
work/check three times), each with one pure-Python async node and no model call, so the time
per super-step is the framework's own cost: scheduling the node, merging its write through the
reducers, choosing the next node, and saving a checkpoint.

Each side script calls `main(framework, version, make_graph, add_args)` and prints one JSON
line. `make_graph(checkpointer, db_path, args)` returns `(run, close)`: `run(thread_id)` runs
the graph once from `INPUT` on that thread and returns the final state as JSON data; `close()`
releases the checkpointer (`add_args` adds a side's own options to `args`).

`--profile PREFIX` writes a cProfile of the measured runs per checkpointer (read it with
`python -m pstats PREFIX-memory.prof`); the timings then include the profiler's.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from common import event_loop_runner

ROUNDS = 3
"""How many times `work` runs (check loops back to it ROUNDS - 1 times)."""
SUPER_STEPS = 1 + 2 * ROUNDS
"""Super-steps per run: plan, then work and check each round."""
INPUT: dict[str, Any] = {"items": [], "n": 0}
EXPECTED: dict[str, Any] = {
    "items": ["plan", *(f"{name}:{i}" for i in range(1, ROUNDS + 1) for name in ("work", "check"))],
    "n": ROUNDS,
}
CHECKPOINTERS = ("memory", "sqlite")

Run = Callable[[str], Awaitable[dict[str, Any]]]
Close = Callable[[], Awaitable[None]]
MakeGraph = Callable[[str, str, argparse.Namespace], Awaitable[tuple[Run, Close]]]
AddArgs = Callable[[argparse.ArgumentParser], None]


# The nodes' logic, the same on both sides (each side wraps it in its own state type).
def plan_update() -> dict[str, Any]:
    return {"items": ["plan"]}


def work_update(n: int) -> dict[str, Any]:
    return {"items": [f"work:{n + 1}"], "n": n + 1}


def check_update(n: int) -> dict[str, Any]:
    return {"items": [f"check:{n}"]}


def route(n: int) -> str:
    return "again" if n < ROUNDS else "done"


async def measure(run: Run, n: int, warmup: int, label: str) -> tuple[list[float], Any]:
    """`warmup` then `n` sequential runs, each on a fresh thread; µs per run, final state."""
    final: Any = None
    for i in range(warmup):
        final = await run(f"warm-{label}-{i}")
    gc.collect()
    times: list[float] = []
    for i in range(n):
        thread = f"{label}-{i}"
        t = time.perf_counter()
        final = await run(thread)
        times.append((time.perf_counter() - t) * 1e6)
    if final != EXPECTED:
        raise SystemExit(f"{label}: wrong final state {final!r}, expected {EXPECTED!r}")
    return times, final


def summary(times: list[float]) -> dict[str, float]:
    q = statistics.quantiles(times, n=100)
    mean = statistics.fmean(times)
    return {
        "mean_us": mean,
        "p50_us": q[49],
        "p99_us": q[98],
        "step_us": mean / SUPER_STEPS,
        "step_p50_us": q[49] / SUPER_STEPS,
    }


def main(
    framework: str, version: str, make_graph: MakeGraph, add_args: AddArgs | None = None
) -> None:
    ap = argparse.ArgumentParser(description=f"{framework}: the 3-node graph benchmark")
    ap.add_argument("--n", type=int, default=300, help="sequential runs per checkpointer")
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--checkpointers", nargs="+", choices=CHECKPOINTERS, default=CHECKPOINTERS)
    ap.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    ap.add_argument(
        "--sqlite-synchronous",
        choices=["NORMAL", "FULL"],
        default="NORMAL",
        help="SQLite's synchronous setting (WAL journal either way); Baton's store uses NORMAL",
    )
    ap.add_argument(
        "--profile",
        metavar="PREFIX",
        help="profile the measured runs with cProfile into PREFIX-<checkpointer>.prof",
    )
    if add_args is not None:
        add_args(ap)
    args = ap.parse_args()
    loop_run = event_loop_runner(args.loop)

    async def one(checkpointer: str, db: str) -> tuple[list[float], Any]:
        run, close = await make_graph(checkpointer, db, args)
        try:
            if not args.profile:
                return await measure(run, args.n, args.warmup, checkpointer)
            for i in range(args.warmup):
                await run(f"warm-{checkpointer}-{i}")
            with cProfile.Profile() as profile:
                out = await measure(run, args.n, 0, checkpointer)
            profile.dump_stats(f"{args.profile}-{checkpointer}.prof")
            return out
        finally:
            await close()

    rows: dict[str, Any] = {}
    final: Any = None
    with tempfile.TemporaryDirectory(prefix="bench-graph-") as tmp:
        for checkpointer in args.checkpointers:
            db = str(Path(tmp) / f"{checkpointer}.db")
            times, final = loop_run(one(checkpointer, db))
            rows[checkpointer] = summary(times)
    result = {
        "framework": framework,
        "version": version,
        "python": sys.version.split()[0],
        "loop": args.loop,
        "n": args.n,
        "super_steps": SUPER_STEPS,
        "options": {k: v for k, v in vars(args).items() if k not in ("n", "warmup", "loop")},
        "final": final,
        "checkpointers": rows,
    }
    print(json.dumps(result))
