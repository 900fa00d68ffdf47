"""Measurement shared by every side; standard library only, so each peer's own venv can run it.

Each side script calls `main(framework, make_run, import_stmt)` and prints one JSON line.
`make_run(latency_s)` returns a coroutine function that runs one full conversation
(3 model calls, 1 hand-off, 1 tool call) and raises if it went wrong.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
RunOne = Callable[[], Awaitable[None]]
MakeRun = Callable[[float], RunOne]

USER = "please check the invoice for order ORD-202607-99"
ORDER_ID = "ORD-202607-99"
INVOICE = {"order_id": ORDER_ID, "status": "ISSUED", "amount": 299.0}
ANSWER = "Your invoice for ORD-202607-99 is issued: 299.00 CNY."


async def sequential(run: RunOne, n: int, warmup: int = 50) -> list[float]:
    for _ in range(warmup):
        await run()
    gc.collect()
    times: list[float] = []
    for _ in range(n):
        t = time.perf_counter()
        await run()
        times.append((time.perf_counter() - t) * 1e6)
    return times


async def concurrent(run: RunOne, n: int) -> float:
    t = time.perf_counter()
    await asyncio.gather(*(run() for _ in range(n)))
    return n / (time.perf_counter() - t)


def import_ms(stmt: str, repeat: int = 5, env_path: str | None = None) -> float:
    """Median wall time of `stmt` in a fresh interpreter (this one's executable), bytecode
    cached: one unmeasured import first writes every module's `.pyc` into a private cache
    (`PYTHONPYCACHEPREFIX`), so no side pays for compiling sources, whatever
    `PYTHONDONTWRITEBYTECODE` says and however its packages were installed."""
    code = f"import time; t = time.perf_counter(); {stmt}; print(time.perf_counter() - t)"
    if env_path:
        code = f"import sys; sys.path.insert(0, {env_path!r}); " + code
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-pycache-") as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache
        for i in range(repeat + 1):
            out = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
            )
            if i:  # the first run fills the bytecode cache
                runs.append(float(out.stdout.strip().splitlines()[-1]) * 1000)
    return statistics.median(runs)


def event_loop_runner(loop: str) -> Callable[[Coroutine[Any, Any, T]], T]:
    """`asyncio.run`, or `uvloop.run` for `--loop uvloop` (uvloop installed in the side's venv)."""
    if loop == "uvloop":
        import uvloop

        return uvloop.run
    return asyncio.run


def main(
    framework: str, make_run: MakeRun, import_stmt: str, import_path: str | None = None
) -> None:
    ap = argparse.ArgumentParser(description=f"{framework}: one scripted conversation")
    ap.add_argument("--n", type=int, default=2000, help="sequential conversations")
    ap.add_argument("--concurrent", type=int, nargs="*", default=[1000, 5000])
    ap.add_argument("--latency", type=float, default=0.1, help="model latency (s), concurrent")
    ap.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    args = ap.parse_args()
    run = event_loop_runner(args.loop)

    times = run(sequential(make_run(0.0), args.n))
    q = statistics.quantiles(times, n=100)
    rates = {str(c): run(concurrent(make_run(args.latency), c)) for c in args.concurrent}
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result = {
        "framework": framework,
        "python": sys.version.split()[0],
        "loop": args.loop,
        "n": args.n,
        "mean_us": statistics.fmean(times),
        "p50_us": q[49],
        "p99_us": q[98],
        "latency_s": args.latency,
        "conv_per_s": rates,
        "peak_rss_mb": rss_mb,
        "import_ms": import_ms(import_stmt, env_path=import_path),
        "import_stmt": import_stmt,
    }
    print(json.dumps(result))
