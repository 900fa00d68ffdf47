"""Topology costs: a delegated worker call against a plain tool call, and parallel fan-out.

    python benchmarks/topologies.py [--n 2000] [--block 100] [--no-sqlite]
        [--latency 0.1] [--fanout-n 4] [--rounds 5]

Per delegated call: with a zero-latency `ScriptedModel`, `--n` conversations per row run one
after another, the rows alternating in blocks of `--block` conversations (each block on a
fresh team and store) so that a machine that slows down mid-run slows every row alike: a lead
that answers at once (the reference), a lead that calls one plain tool and answers, and a
`Supervisor` lead that asks one worker (the worker answers at once, no tool) and answers.
Printed: mean, p50 and p99 µs per conversation and the collector's share, on `MemoryStore`
and (unless `--no-sqlite`) `SQLiteStore` in a temporary directory, and what a delegated call
costs over a tool call (the worker's sub-run, its one model call included).

Fan-out: a `Supervisor` lead asks 4 workers in one response, each worker's model answering
after `--latency` seconds (the lead's at once); `max_parallel=4` against `max_parallel=1`, in
`--rounds` rounds of `--fanout-n` conversations each (one after another), the settings
alternating which goes first. Printed: wall time per conversation, median and range over the
rounds, and the speed-up (target at least 3.5x; 4x is the ceiling).

Every conversation must complete with the answer built from what the tool or the workers
returned, or the script stops: a run that failed early would read as cheap.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1] / "src"))

from baton import Agent, RunResult, ScriptedModel, Supervisor, Team, tool  # noqa: E402
from baton.models import ModelRequest, Step  # noqa: E402

S = ScriptedModel
QUESTION = "How many units of X are in stock?"
STOCK = "42 units"
WARM_UP = 50
FANOUT = 4
TARGET_SPEEDUP = 3.5
STORES = {"memory": "MemoryStore", "sqlite": "SQLiteStore"}


@tool
async def lookup_stock(item: str) -> str:
    """Look up the stock of an item."""
    return STOCK


CALL_TOOL = S.call("lookup_stock", item="X")
ASK_WORKER = S.call("ask_analyst", question=QUESTION)
ANSWER = S.say(f"answer: {STOCK}")
WORKER_ANSWER = S.say(STOCK)


def _answer_from_tool(request: ModelRequest) -> Step:
    """The lead's last step: an answer quoting what came back, so the output proves it ran."""
    return S.say(f"answer: {request.messages[-1].content}")


def direct_policy(request: ModelRequest) -> Step:
    """lead -> answer."""
    return ANSWER


def tool_policy(request: ModelRequest) -> Step:
    """lead -> lookup_stock -> answer quoting the tool's result."""
    if request.messages[-1].role == "tool":
        return _answer_from_tool(request)
    return CALL_TOOL


def delegate_policy(request: ModelRequest) -> Step:
    """lead -> ask_analyst; analyst -> answer; lead -> answer quoting the worker's."""
    if request.agent == "analyst":
        return WORKER_ANSWER
    if request.messages[-1].role == "tool":
        return _answer_from_tool(request)
    return ASK_WORKER


@dataclass(frozen=True)
class Row:
    """One kind of conversation in the per-call comparison."""

    name: str
    label: str
    model_calls: int
    build: Callable[[str | None], Team]
    output: str
    """The answer every conversation of this row must end with."""


def _model(policy: Callable[[ModelRequest], Step]) -> ScriptedModel:
    # record=False keeps memory flat over thousands of conversations
    return ScriptedModel(policy, record=False)


ROWS = [
    Row(
        "direct",
        "lead answers (reference)",
        1,
        lambda store: Team(
            [Agent(name="lead")], entry="lead", model=_model(direct_policy), store=store
        ),
        f"answer: {STOCK}",
    ),
    Row(
        "tool",
        "lead + 1 plain tool call",
        2,
        lambda store: Team(
            [Agent(name="lead", tools=[lookup_stock])],
            entry="lead",
            model=_model(tool_policy),
            store=store,
        ),
        f"answer: {STOCK}",
    ),
    Row(
        "delegate",
        "Supervisor lead + 1 worker",
        3,
        lambda store: Supervisor(
            Agent(name="lead"),
            workers=[Agent(name="analyst", description="stock figures")],
            model=_model(delegate_policy),
            store=store,
        ),
        "answer: " + json.dumps({"worker": "analyst", "answer": STOCK}),
    ),
]


def check(result: RunResult, expected: str, what: str) -> None:
    """Stop the benchmark when a conversation did not end as scripted."""
    if result.status != "completed" or result.output != expected:
        raise SystemExit(
            f"benchmark conversation ({what}) went wrong: {result.status}, output "
            f"{result.output!r} (expected {expected!r}), error {result.error!r}"
        )


class GCTimer:
    """Wall time spent in the garbage collector, per row (`gc.callbacks`)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.row = ""
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            spent = time.perf_counter() - self._start
            self.seconds[self.row] = self.seconds.get(self.row, 0.0) + spent


@dataclass
class CallTimes:
    """What `measure_calls` measured."""

    us: dict[str, list[float]]
    """Row name -> µs of each conversation."""
    gc_us: dict[str, float]
    """Row name -> µs per conversation spent in the garbage collector."""


async def measure_calls(n: int, block: int, sqlite_dir: Path | None = None) -> CallTimes:
    """µs per conversation of each row, `n` each, the rows alternating in blocks of `block`;
    on `MemoryStore`, or on `SQLiteStore` with a database per row in `sqlite_dir`.

    Each block runs on a fresh team (and store), built and collected outside the timing:
    `MemoryStore` keeps every session in memory, which the collector scans, so rows sharing
    one growing heap would each pay for the others' sessions.
    """

    def build(row: Row) -> Team:
        return row.build(f"sqlite:///{sqlite_dir / row.name}.db" if sqlite_dir else None)

    for row in ROWS:
        team = build(row)
        for _ in range(WARM_UP):
            check(await team.run(QUESTION), row.output, row.label)
        await team.aclose()
    times: dict[str, list[float]] = {row.name: [] for row in ROWS}
    in_gc = GCTimer()  # collections outside a timed block count for the row ""
    gc.callbacks.append(in_gc)
    try:
        done = 0
        while done < n:
            size = min(block, n - done)
            for row in ROWS if (done // block) % 2 == 0 else ROWS[::-1]:
                team, out = build(row), times[row.name]
                check(await team.run(QUESTION), row.output, row.label)  # opens the store
                in_gc.row = ""
                gc.collect()
                in_gc.row = row.name
                for _ in range(size):
                    t = time.perf_counter()
                    result = await team.run(QUESTION)
                    out.append((time.perf_counter() - t) * 1e6)
                    check(result, row.output, row.label)
                in_gc.row = ""
                await team.aclose()
            done += size
    finally:
        gc.callbacks.remove(in_gc)
    gc_us = {row.name: in_gc.seconds.get(row.name, 0.0) / n * 1e6 for row in ROWS}
    return CallTimes(times, gc_us)


def fanout_team(max_parallel: int, latency_s: float) -> Supervisor:
    """A lead that asks `FANOUT` workers at once; each worker answers after `latency_s`."""
    names = [f"w{i}" for i in range(FANOUT)]
    ask_all = S.calls(*(S.call(f"ask_{w}", question=QUESTION) for w in names))
    slow_answers = {w: S.slow(S.say(f"{w}: {STOCK}"), latency_s) for w in names}

    def policy(request: ModelRequest) -> Step:
        if request.agent != "lead":
            return slow_answers[request.agent]
        if request.messages[-1].role != "tool":
            return ask_all
        answers = [json.loads(m.content or "{}") for m in request.messages if m.role == "tool"]
        return S.say(" | ".join(sorted(str(a.get("answer")) for a in answers)))

    return Supervisor(
        Agent(name="lead"),
        workers=[Agent(name=w, description=f"source {w}") for w in names],
        model=_model(policy),
        max_parallel=max_parallel,
    )


FANOUT_OUTPUT = " | ".join(f"w{i}: {STOCK}" for i in range(FANOUT))
SETTINGS = {"parallel": FANOUT, "sequential": 1}
"""Name -> `max_parallel`."""


async def measure_fanout(
    conversations: int, rounds: int, latency_s: float
) -> dict[str, list[float]]:
    """Wall ms per conversation of each setting in each round (one value per round)."""
    teams = {name: fanout_team(p, latency_s) for name, p in SETTINGS.items()}
    per_round: dict[str, list[float]] = {name: [] for name in SETTINGS}
    try:
        for name, team in teams.items():  # warm-up: one conversation each
            check(await team.run(QUESTION), FANOUT_OUTPUT, f"fan-out, {name}")
        for rnd in range(rounds):
            order = list(SETTINGS) if rnd % 2 == 0 else list(SETTINGS)[::-1]
            for name in order:
                gc.collect()
                t = time.perf_counter()
                for _ in range(conversations):
                    result = await teams[name].run(QUESTION)
                    check(result, FANOUT_OUTPUT, f"fan-out, {name}")
                per_round[name].append((time.perf_counter() - t) / conversations * 1e3)
    finally:
        for team in teams.values():
            await team.aclose()
    return per_round


def stats(times: list[float]) -> tuple[float, float, float]:
    """Mean, p50 and p99."""
    q = statistics.quantiles(times, n=100)
    return statistics.fmean(times), q[49], q[98]


def spread(values: list[float], fmt: str, unit: str = "") -> str:
    """Median and range of per-round values."""
    lo, hi = min(values), max(values)
    return f"{statistics.median(values):{fmt}}{unit} ({lo:{fmt}}–{hi:{fmt}})"


def print_calls(results: dict[str, CallTimes], n: int, block: int) -> None:
    print(
        f"\nper delegated call: {n} conversations per row after {WARM_UP} warm-up, zero-latency "
        f"ScriptedModel, rows alternating in blocks of {block}; µs per conversation"
    )
    header = (
        f"{'row':<30} {'model calls':>11}  {'store':<12} {'mean':>9} {'p50':>9} {'p99':>9} "
        f"{'GC':>7}"
    )
    print(header)
    print("-" * len(header))
    for store, measured in results.items():
        figures = {name: stats(t) for name, t in measured.us.items()}
        for row in ROWS:
            mean, p50, p99 = figures[row.name]
            print(
                f"{row.label:<30} {row.model_calls:>11}  {STORES[store]:<12} "
                f"{mean:9.1f} {p50:9.1f} {p99:9.1f} {measured.gc_us[row.name]:7.1f}"
            )
        # a difference of p99s is no one call's cost: only the mean and the median are given
        d_mean = figures["delegate"][0] - figures["tool"][0]
        d_p50 = figures["delegate"][1] - figures["tool"][1]
        d_gc = measured.gc_us["delegate"] - measured.gc_us["tool"]
        print(
            f"{'delegated − tool call':<30} {'+1':>11}  {STORES[store]:<12} "
            f"{d_mean:+9.1f} {d_p50:+9.1f} {'':>9} {d_gc:+7.1f}"
        )


def print_fanout(
    per_round: dict[str, list[float]], conversations: int, rounds: int, latency_s: float
) -> None:
    ms = latency_s * 1e3
    print(
        f"\nfan-out: the lead asks {FANOUT} workers in one response, each worker's model answers "
        f"after {ms:.0f} ms; {conversations} conversations per setting per round, {rounds} "
        "rounds, MemoryStore; wall ms per conversation, median (range)"
    )
    header = f"{'setting':<30} {'ms per conversation':>24} {'floor':>8}"
    print(header)
    print("-" * len(header))
    for name, p in SETTINGS.items():
        floor = ms * -(-FANOUT // p)
        label = f"max_parallel={p} ({name})"
        print(f"{label:<30} {spread(per_round[name], '.1f'):>24} {floor:8.0f}")
    ratios = [s / p for s, p in zip(per_round["sequential"], per_round["parallel"], strict=True)]
    print(f"{'speed-up':<30} {spread(ratios, '.2f', 'x'):>24} {FANOUT:7.1f}x")
    ok = statistics.median(ratios) >= TARGET_SPEEDUP
    print(
        f"\ntarget: {'PASS' if ok else 'FAIL'}  max_parallel={FANOUT} is at least "
        f"{TARGET_SPEEDUP}x faster than max_parallel=1: {statistics.median(ratios):.2f}x "
        "(median of the per-round ratios)"
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--n", type=int, default=2000, help="conversations per row (per-call part)")
    ap.add_argument("--block", type=int, default=100, help="conversations per row in a block")
    ap.add_argument(
        "--sqlite",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also measure the per-call part on SQLiteStore",
    )
    ap.add_argument("--latency", type=float, default=0.1, help="seconds per worker model call")
    ap.add_argument("--fanout-n", type=int, default=4, help="conversations per setting per round")
    ap.add_argument("--rounds", type=int, default=5, help="fan-out rounds")
    args = ap.parse_args(argv)
    if args.n < 2 or args.block < 1 or args.fanout_n < 1 or args.rounds < 1:
        ap.error("--n must be at least 2; --block, --fanout-n and --rounds at least 1")
    load = (
        ", load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()) if hasattr(os, "getloadavg") else ""
    )
    given = sys.argv[1:] if argv is None else argv
    print(f"# {shlex.join(['python', 'benchmarks/topologies.py', *given])}")
    print(
        f"# Python {platform.python_version()} on {platform.machine()} "
        f"({platform.processor() or platform.system()}), {os.cpu_count()} CPUs{load}, "
        f"{time.strftime('%Y-%m-%d %H:%M %Z')}"
    )
    calls = {"memory": asyncio.run(measure_calls(args.n, args.block))}
    if args.sqlite:
        with tempfile.TemporaryDirectory() as d:
            calls["sqlite"] = asyncio.run(measure_calls(args.n, args.block, Path(d)))
    print_calls(calls, args.n, args.block)
    per_round = asyncio.run(measure_fanout(args.fanout_n, args.rounds, args.latency))
    print_fanout(per_round, args.fanout_n, args.rounds, args.latency)


if __name__ == "__main__":
    main()
