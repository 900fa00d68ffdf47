"""Kernel overhead: one conversation = 3 model calls, 1 hand-off, 1 tool call.

    python benchmarks/overhead.py [--n 2000] [--concurrent 5000] [--latency 0.1]
        [--loop asyncio|uvloop]

A zero-latency `ScriptedModel` isolates what Baton itself costs per conversation (mean, p50,
p99 in microseconds) with `MemoryStore` and `SQLiteStore`, and how much of the MemoryStore
figure is the garbage collector; then `--concurrent` conversations run at once with
`--latency` seconds of simulated model latency (conversations/s, CPU per conversation, peak
RSS). A plain-Python loop doing the same steps with no framework is printed as the floor.
`--loop uvloop` runs everything on uvloop's event loop (`pip install uvloop`).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from baton import Agent, ScriptedModel, Team, tool
from baton.models import ModelRequest, Step

T = TypeVar("T")
INVOICE = {"order_id": "ORD-202607-99", "status": "ISSUED", "amount": 299.0}


@tool
async def query_invoice(order_id: str) -> dict:
    """Look up the e-invoice of an order."""
    return INVOICE


HANDOFF = ScriptedModel.call(
    "transfer_to_billing",
    reason="invoice question",
    objective="Send the invoice of the order",
    state={"order_id": "ORD-202607-99"},
)
QUERY = ScriptedModel.call("query_invoice", order_id="ORD-202607-99")
ANSWER = ScriptedModel.say("Your invoice for ORD-202607-99 is issued: 299.00 CNY.")


def policy(request: ModelRequest) -> Step:
    """triage -> transfer_to_billing; billing -> query_invoice -> answer."""
    if request.agent == "triage":
        return HANDOFF
    return ANSWER if request.messages[-1].role == "tool" else QUERY


def build_team(store: str | None, latency_s: float = 0.0) -> Team:
    # record=False keeps memory flat over thousands of conversations
    model = ScriptedModel(policy, latency_s=latency_s, record=False)
    triage = Agent(name="triage", instructions="Route the user.", handoffs=["billing"])
    billing = Agent(name="billing", instructions="Billing.", tools=[query_invoice])
    return Team([triage, billing], entry="triage", model=model, store=store)


class GCTimer:
    """Wall time spent in the garbage collector while attached (`gc.callbacks`)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._start

    def __enter__(self) -> GCTimer:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


def run_loop(loop: str) -> Callable[[Coroutine[Any, Any, T]], T]:
    """`asyncio.run`, or `uvloop.run` for `--loop uvloop`."""
    if loop == "uvloop":
        import uvloop

        return uvloop.run
    return asyncio.run


async def sequential(team: Team, n: int, gc_timer: GCTimer | None = None) -> list[float]:
    times: list[float] = []
    for _ in range(50):  # warm-up
        await team.run("please check the invoice for order ORD-202607-99")
    gc.collect()
    if gc_timer is not None:
        gc.callbacks.append(gc_timer)
    for _ in range(n):
        t = time.perf_counter()
        r = await team.run("please check the invoice for order ORD-202607-99")
        times.append((time.perf_counter() - t) * 1e6)
        if r.status != "completed" or r.path != ["triage", "billing"]:
            raise SystemExit(f"benchmark conversation went wrong: {r.status} {r.path} {r.error}")
    if gc_timer is not None:
        gc.callbacks.remove(gc_timer)
    return times


async def concurrent(team: Team, n: int) -> float:
    t = time.perf_counter()
    results = await asyncio.gather(
        *(team.run("please check the invoice for order ORD-202607-99") for _ in range(n))
    )
    dt = time.perf_counter() - t
    bad = [r for r in results if r.status != "completed"]
    if bad:
        raise SystemExit(f"{len(bad)} concurrent conversations failed: {bad[0].error}")
    return n / dt


async def plain_python(n: int) -> list[float]:
    """The same steps with no framework: the floor any framework adds to."""

    async def model(step: int) -> dict:
        return [{"tool": "transfer"}, {"tool": "query_invoice"}, {"text": "done"}][step]

    times = []
    for _ in range(n):
        t = time.perf_counter()
        messages = [{"role": "user", "content": "please check the invoice"}]
        holder = "triage"
        for step in range(3):
            out = await model(step)
            if out.get("tool") == "transfer":
                holder = "billing"
                messages = [{"role": "system", "content": holder}, messages[0]]
            elif out.get("tool") == "query_invoice":
                res = await query_invoice.fn("ORD-202607-99")
                messages.append({"role": "tool", "content": json.dumps(res)})
        times.append((time.perf_counter() - t) * 1e6)
    return times


def summary(label: str, times: list[float]) -> str:
    q = statistics.quantiles(times, n=100)
    return (
        f"{label:<28} mean {statistics.fmean(times):8.1f} µs   p50 {q[49]:8.1f} µs   "
        f"p99 {q[98]:8.1f} µs"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--concurrent", type=int, default=5000)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    args = ap.parse_args()
    run = run_loop(args.loop)
    print(f"# {' '.join(['python', *sys.argv])}")
    print(
        f"# {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores, "
        f"{time.strftime('%Y-%m-%d')}, {args.loop} event loop"
    )
    print(f"sequential: {args.n} conversations (3 model calls, 1 hand-off, 1 tool call)")
    print(summary("plain Python (no framework)", run(plain_python(args.n))))
    gc_timer = GCTimer()
    times = run(sequential(build_team(None), args.n, gc_timer))
    print(summary("Baton + MemoryStore", times))
    print(f"{'  of which garbage collection':<28} mean {gc_timer.seconds / args.n * 1e6:8.1f} µs")
    with tempfile.TemporaryDirectory() as d:
        url = f"sqlite:///{d}/bench.db"
        print(summary("Baton + SQLiteStore", run(sequential(build_team(url), args.n))))
    team = build_team(None, args.latency)
    cpu = time.process_time()
    with GCTimer() as in_gc:
        rate = run(concurrent(team, args.concurrent))
    cpu_us = (time.process_time() - cpu) / args.concurrent * 1e6
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"concurrent: {args.concurrent} conversations at {args.latency * 1000:.0f} ms model "
        f"latency (MemoryStore): {rate:,.0f} conversations/s, CPU {cpu_us:.0f} µs per "
        f"conversation (garbage collection {in_gc.seconds / args.concurrent * 1e6:.0f} µs), "
        f"peak RSS {rss_mb:.0f} MB"
    )


if __name__ == "__main__":
    main()
