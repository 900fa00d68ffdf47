"""Kernel overhead: one conversation = 3 model calls, 1 hand-off, 1 tool call.

    python benchmarks/overhead.py [--n 2000] [--concurrent 5000] [--latency 0.1]
        [--loop asyncio|uvloop] [--src PATH]
    python benchmarks/overhead.py --baseline-src PATH [--rounds 5] [--n ...] [--concurrent ...]

A zero-latency `ScriptedModel` isolates what Baton itself costs per conversation (mean, p50,
p99 in microseconds) with `MemoryStore` and `SQLiteStore`, and how much of the MemoryStore
figure is the garbage collector; then `--concurrent` conversations run at once with
`--latency` seconds of simulated model latency (conversations/s, CPU per conversation, peak
RSS). A plain-Python loop doing the same steps with no framework is printed as the floor.
`--loop uvloop` runs everything on uvloop's event loop (`pip install uvloop`).

`--src PATH` imports Baton from another checkout's `src/`. `--baseline-src PATH` compares this
checkout with another in one run (e.g. `git worktree add /tmp/baton-baseline <commit>`, then
`--baseline-src /tmp/baton-baseline/src`): each measurement (MemoryStore, SQLiteStore,
`--concurrent`) runs in a fresh subprocess per side, the sides alternating within each of
`--rounds` rounds, and the table gives each side's best and median round with the ratio to the
baseline (median of the per-round ratios, and their range), so the noise stays visible. Every
conversation must complete, through the hand-off and one executed tool call, or the script
stops: a run that failed early would read as cheap.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

HERE = Path(__file__).resolve()
SRC = HERE.parents[1] / "src"


def src_dir(path: str) -> Path:
    """The `src/` of a checkout, given the checkout or its `src/`."""
    p = Path(path).resolve()
    return p / "src" if (p / "src" / "baton").is_dir() else p


def _src_from_argv() -> Path:
    """`--src PATH` of this script's own command line: it must be known before `baton` is
    imported (imported as a module, e.g. by `inflight_gc.py`, this checkout's `src/`)."""
    if __name__ != "__main__":
        return SRC
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--src")
    known, _ = pre.parse_known_args()
    return src_dir(known.src) if known.src else SRC


sys.path.insert(0, str(_src_from_argv()))

from baton import Agent, ScriptedModel, Team, tool  # noqa: E402
from baton.models import ModelRequest, Step  # noqa: E402

T = TypeVar("T")
INVOICE = {"order_id": "ORD-202607-99", "status": "ISSUED", "amount": 299.0}
TOOL_CALLS = [0]
"""Executions of `query_invoice`: one per conversation, or the conversation went wrong (a tool
refused, e.g. for a missing scope, still lets the scripted model answer)."""


@tool
async def query_invoice(order_id: str) -> dict:
    """Look up the e-invoice of an order."""
    TOOL_CALLS[0] += 1
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
    calls = TOOL_CALLS[0]
    for _ in range(n):
        t = time.perf_counter()
        r = await team.run("please check the invoice for order ORD-202607-99")
        times.append((time.perf_counter() - t) * 1e6)
        if r.status != "completed" or r.path != ["triage", "billing"]:
            raise SystemExit(f"benchmark conversation went wrong: {r.status} {r.path} {r.error}")
    if gc_timer is not None:
        gc.callbacks.remove(gc_timer)
    check_tool_calls(calls, n)
    return times


def check_tool_calls(before: int, n: int) -> None:
    if TOOL_CALLS[0] - before != n:
        raise SystemExit(
            f"query_invoice ran {TOOL_CALLS[0] - before} times in {n} conversations (expected "
            "one each): the benchmark conversation went wrong"
        )


async def concurrent(team: Team, n: int) -> float:
    calls = TOOL_CALLS[0]
    t = time.perf_counter()
    results = await asyncio.gather(
        *(team.run("please check the invoice for order ORD-202607-99") for _ in range(n))
    )
    dt = time.perf_counter() - t
    bad = [r for r in results if r.status != "completed" or r.path != ["triage", "billing"]]
    if bad:
        raise SystemExit(f"{len(bad)} concurrent conversations failed: {bad[0].error}")
    check_tool_calls(calls, n)
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


def worker(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    """One measurement in this process (`--worker`), as a dict printed as a JSON line."""
    import baton

    run = run_loop(args.loop)
    out: dict[str, Any] = {"kind": kind, "baton": str(Path(baton.__file__).parent)}
    if kind == "concurrent":
        run(sequential(build_team(None), 0))  # warm-up (50 conversations)
        gc.collect()
        team = build_team(None, args.latency)
        cpu = time.process_time()
        with GCTimer() as in_gc:
            rate = run(concurrent(team, args.concurrent))
        out["conv_per_s"] = rate
        out["cpu_us"] = (time.process_time() - cpu) / args.concurrent * 1e6
        out["gc_us"] = in_gc.seconds / args.concurrent * 1e6
        out["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return out
    gc_timer = GCTimer()
    if kind == "memory":
        times = run(sequential(build_team(None), args.n, gc_timer))
    else:
        with tempfile.TemporaryDirectory() as d:
            times = run(sequential(build_team(f"sqlite:///{d}/bench.db"), args.n, gc_timer))
    q = statistics.quantiles(times, n=100)
    out.update(
        mean_us=statistics.fmean(times),
        p50_us=q[49],
        p99_us=q[98],
        gc_us=gc_timer.seconds / args.n * 1e6,
    )
    return out


def run_worker(src: Path, kind: str, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, str(HERE), "--worker", kind, "--src", str(src), "--n", str(args.n)]
    cmd += ["--concurrent", str(args.concurrent), "--latency", str(args.latency)]
    cmd += ["--loop", args.loop]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    if done.returncode != 0:
        raise SystemExit(f"{shlex.join(cmd)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if Path(result["baton"]).parent != src:
        raise SystemExit(f"{shlex.join(cmd)} imported baton from {result['baton']}, not {src}")
    return result


STORES = {"memory": "MemoryStore", "sqlite": "SQLiteStore"}


def _ratios(new: list[dict[str, Any]], old: list[dict[str, Any]], key: str) -> list[float]:
    return [a[key] / b[key] for a, b in zip(new, old, strict=True)]


def _spread(ratios: list[float]) -> str:
    return f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}–{max(ratios):.2f})"


def compare(args: argparse.Namespace) -> None:
    """This checkout against `--baseline-src`, alternating subprocesses, `--rounds` rounds."""
    sides = {"baseline": src_dir(args.baseline_src), args.label: src_dir(args.src or str(SRC))}
    names = list(sides)
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {
        (side, kind): [] for side in names for kind in ("memory", "sqlite", "concurrent")
    }
    floors: list[float] = []
    run = run_loop(args.loop)
    for side, src in sides.items():
        print(f"# {side}: baton from {src}")
    print(
        f"# {args.rounds} rounds; in each, every measurement runs in a fresh process per side, "
        "the sides alternating (round 1 baseline first, round 2 the other first, ...)"
    )
    for rnd in range(args.rounds):
        order = names if rnd % 2 == 0 else names[::-1]
        floors.append(statistics.fmean(run(plain_python(args.n))))
        line = [f"round {rnd + 1}: floor {floors[-1]:.1f} µs"]
        for kind in ("memory", "sqlite", "concurrent"):
            for side in order:
                runs[side, kind].append(run_worker(sides[side], kind, args))
            base, new = runs["baseline", kind][-1], runs[args.label, kind][-1]
            if kind == "concurrent":
                line.append(f"{kind} {base['conv_per_s']:,.0f} / {new['conv_per_s']:,.0f} conv/s")
            else:
                line.append(f"{STORES[kind]} {base['mean_us']:.1f} / {new['mean_us']:.1f} µs")
        print("; ".join(line) + " (baseline / " + args.label + ")", flush=True)

    print(
        f"\nsequential: {args.n} conversations per round after 50 warm-up (3 model calls, "
        f"1 hand-off, 1 tool call), µs per conversation over {args.rounds} rounds; plain-Python "
        f"floor best {min(floors):.1f} µs, median {statistics.median(floors):.1f} µs"
    )
    header = (
        f"{'row':<28} {'best mean':>10} {'median mean':>12} {'median p50':>11} "
        f"{'median p99':>11} {'GC':>6}   {'mean vs baseline':<22} {'p50 vs baseline':<22}"
    )
    print(header)
    print("-" * len(header))
    verdict: list[float] = []
    verdict_p50: list[float] = []
    for kind, store in STORES.items():
        for side in names:
            rs = runs[side, kind]
            means = [r["mean_us"] for r in rs]
            row = (
                f"{side + ' ' + store:<28} {min(means):10.1f} {statistics.median(means):12.1f} "
                f"{statistics.median(r['p50_us'] for r in rs):11.1f} "
                f"{statistics.median(r['p99_us'] for r in rs):11.1f} "
                f"{statistics.median(r['gc_us'] for r in rs):6.1f}"
            )
            if side != "baseline":
                by_mean = _ratios(rs, runs["baseline", kind], "mean_us")
                by_p50 = _ratios(rs, runs["baseline", kind], "p50_us")
                row += f"   {_spread(by_mean):<22} {_spread(by_p50):<22}"
                if kind == "memory":
                    verdict, verdict_p50 = by_mean, by_p50
            print(row)
    print(
        f"\nconcurrent: {args.concurrent} conversations at once, {args.latency * 1000:.0f} ms "
        "model latency, MemoryStore"
    )
    header = (
        f"{'row':<28} {'best conv/s':>12} {'median conv/s':>14} {'CPU µs/conv':>12} "
        f"{'of which GC':>12} {'peak RSS MB':>12}   {'conv/s vs baseline':<22}"
    )
    print(header)
    print("-" * len(header))
    for side in names:
        rs = runs[side, "concurrent"]
        rates = [r["conv_per_s"] for r in rs]
        row = (
            f"{side + ' MemoryStore':<28} {max(rates):12,.0f} {statistics.median(rates):14,.0f} "
            f"{statistics.median(r['cpu_us'] for r in rs):12.0f} "
            f"{statistics.median(r['gc_us'] for r in rs):12.0f} "
            f"{max(r['rss_mb'] for r in rs):12.0f}"
        )
        if side != "baseline":
            row += f"   {_spread(_ratios(rs, runs['baseline', 'concurrent'], 'conv_per_s'))}"
        print(row)
    ratio = statistics.median(verdict)
    ok = ratio <= 1 + MAX_CHECKPOINT_COST
    print(
        f"\ntarget: {'PASS' if ok else 'FAIL'}  {args.label} MemoryStore costs <= "
        f"{MAX_CHECKPOINT_COST:.0%} more than baseline: {ratio - 1:+.0%} (median of the "
        f"per-round ratios of mean µs per conversation; of p50: "
        f"{statistics.median(verdict_p50) - 1:+.0%})"
    )


MAX_CHECKPOINT_COST = 0.25


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--concurrent", type=int, default=5000)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    ap.add_argument("--src", help="import Baton from this checkout (or its src/)")
    ap.add_argument(
        "--baseline-src", help="compare with Baton from this checkout (or its src/), same run"
    )
    ap.add_argument("--rounds", type=int, default=5, help="rounds of --baseline-src")
    ap.add_argument(
        "--label", default="checkpointed", help="name of this checkout's rows (--baseline-src)"
    )
    ap.add_argument("--timeout", type=float, default=600, help="seconds per measurement process")
    ap.add_argument("--worker", choices=["memory", "sqlite", "concurrent"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args)))
        return
    run = run_loop(args.loop)
    print(f"# {shlex.join(['python', *sys.argv])}")
    print(
        f"# {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores, "
        f"{time.strftime('%Y-%m-%d %H:%M %Z')}, {args.loop} event loop"
    )
    if args.baseline_src:
        compare(args)
        return
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
