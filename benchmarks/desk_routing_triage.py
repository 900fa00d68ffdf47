"""The desk's triage agent as a router: its first hand-off on each query of a routing spec.

    python benchmarks/desk_routing_triage.py --spec benchmarks/desk_routing/desk-routes.json
                                             [--half test|calibration] [--limit N]
                                             [--model local|local:<name>|openai:<name>]
                                             [--json PATH]

Each query runs in a fresh session on a freshly built desk (`src/baton/desk`), triage on the
model (default: the embedded local model), exactly as `benchmarks/desk_eval.py` runs it. The
answer is triage's first hand-off target, read from the run's events the way desk_eval reads
it; an escalation to the human queue, a guard's escalation or a reply without a hand-off count
as `unknown`. Only triage's decision is measured: the specialists answer at once with a fixed
reply (no model call), so the run ends right after the hand-off and its wall time is the
routing latency. One warm-up query (not in the spec) runs before timing.

Printed: overall, in-scope and out-of-scope accuracy, accuracy per language and per kind,
latency p50/p99 per query: the figures `baton bench routing --spec` prints for the router.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shlex
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from desk_eval import cpu_name, first_route, resolve  # noqa: E402

from baton import Team  # noqa: E402
from baton.desk.data import DeskDB  # noqa: E402
from baton.desk.team import GUARDS, build_agents  # noqa: E402
from baton.models.scripted import ScriptedModel  # noqa: E402
from baton.routing.base import UNKNOWN, Labelled, TierVerdict  # noqa: E402
from baton.routing.evaluate import RoutingReport, load_spec, score  # noqa: E402

WARM_UP = "Hello, I have a question about my account."
"""Run once before timing (loads the model, fills its caches); not scored."""

ROUTES = ("billing", "orders", "after_sales", "tech_support")


def triage_desk(model: Any) -> Team:
    """The desk of `baton.desk.build_desk`, with specialists that answer at once."""
    stub = ScriptedModel([ScriptedModel.say("Noted.")], loop=True, record=False)
    agents = [
        a if a.name == "triage" else a.model_copy(update={"model": stub})
        for a in build_agents(DeskDB())
    ]
    return Team(
        agents,
        entry="triage",
        guards=GUARDS,
        fallback="human",
        model=model,
    )


def answer(route: str) -> str:
    """Triage's first hand-off as a route name, or `unknown`."""
    return route if route in ROUTES else UNKNOWN


async def triage_once(model: Any, text: str, session: str) -> tuple[str, str, float]:
    """(answer, what triage did, milliseconds) for one query on a fresh desk."""
    team = triage_desk(model)
    t = time.perf_counter()
    result = await team.run(text, session_id=session)
    ms = (time.perf_counter() - t) * 1000
    route = first_route(result.events)
    return answer(route), route, ms


async def run_all(
    model: Any, items: Sequence[Labelled], verbose: bool = True
) -> tuple[list[TierVerdict], list[float]]:
    """Triage's verdict and latency for each query, one after another."""
    await triage_once(model, WARM_UP, "warm-up")
    verdicts: list[TierVerdict] = []
    latencies: list[float] = []
    for n, item in enumerate(items, 1):
        target, route, ms = await triage_once(model, item.text, f"triage-{n}")
        verdicts.append(TierVerdict("triage", target, detail=route, latency_ms=ms))
        latencies.append(ms)
        if verbose:
            want = item.label or UNKNOWN
            mark = "ok" if target == want else f"WRONG (want {want})"
            lang = getattr(item, "lang", None) or "-"
            print(
                f"{n:>3} [{lang}/{item.kind}] {target:<12} {route:<24} {ms / 1000:6.1f} s  "
                f"{mark}  {item.text[:60]}",
                flush=True,
            )
    return verdicts, latencies


def print_figures(report: RoutingReport) -> None:
    """The figures as markdown tables."""
    print("\n| metric | value |\n|---|---|")
    for key, value in report.as_rows():
        print(f"| {key} | {value} |")
    if report.by_lang:
        print("\n| language | overall | in-scope | out-of-scope |\n|---|---|---|---|")
        for row in report.lang_rows():
            print("| " + " | ".join(row) + " |")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--spec", required=True, type=Path, help="a routing spec (JSON)")
    ap.add_argument("--half", choices=("test", "calibration"), default="test")
    ap.add_argument("--limit", type=int, default=None, help="only the first N queries")
    ap.add_argument("--model", default="local", help="local, local:<name>, openai:<name>")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    ap.add_argument("--quiet", action="store_true", help="no line per query")
    args = ap.parse_args(argv)

    _, calibration, test = load_spec(args.spec)
    items = list(test if args.half == "test" else calibration)[: args.limit]
    argv_shown = sys.argv[1:] if argv is None else list(argv)
    model, described = resolve(args.model)
    meta = {
        "command": shlex.join(["python", "benchmarks/desk_routing_triage.py", *argv_shown]),
        "model": described,
        "machine": f"{cpu_name()}, {os.cpu_count()} cores, {platform.machine()}, "
        f"Python {platform.python_version()}",
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "half": args.half,
    }
    for key in ("command", "model", "machine", "date"):
        print(f"# {key}: {meta[key]}")
    print(f"# {len(items)} {args.half} queries, each on a fresh desk and session\n", flush=True)

    t = time.perf_counter()
    verdicts, latencies = asyncio.run(run_all(model, items, verbose=not args.quiet))
    report = score(items, verdicts, latencies)
    print_figures(report)
    print(f"\nwall {time.perf_counter() - t:.0f} s")
    if args.json is not None:
        doc = {
            **meta,
            "report": report.to_dict(),
            "queries": [
                {"text": o.item.text, "label": o.item.label, "answer": o.target, "ms": o.latency_ms}
                for o in report.outcomes
            ],
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, ensure_ascii=False, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
