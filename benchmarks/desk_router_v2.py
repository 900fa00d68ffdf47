"""The routed desk's router on the second held-out desk set, beside the triage agent.

    python benchmarks/desk_router_v2.py --half dev|sealed [--judge on|off]
                                        [--model local|local:<name>|openai:<name>]
                                        [--triage PATH] [--json PATH] [--quiet]

The router is `src/baton/desk/routed.py`'s (`build_routed_desk`: rules -> semantic -> LLM judge
-> human), fitted as the example fits it; the judge runs on `--model` (default: the embedded
model). `--judge off` measures the rules and the semantic tier alone (no model is loaded).
Each row of `benchmarks/desk_routing/desk_eval_v2.json`'s chosen half is one labelled query:
its `route`, none for `human` (out of scope: the router must answer unknown, i.e. the human
queue); a `multi` row counts as routed when its first need is. The sealed half is only run
and reported, never tuned on.

Printed: accuracy overall, in scope, out of scope, per language and per kind, latency, and
with the judge on, how many queries the judge was asked about and how many answers it changed
against the same router without it (right -> wrong, wrong -> right). `--triage PATH` reads
`benchmarks/desk_eval.py --set v2-<half> --json PATH` and prints triage's routing accuracy
(its first hand-off, as desk_eval counts it) on the same rows beside the router's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from desk_eval import cpu_name, resolve  # noqa: E402

from baton.cli.bench_routing import asked_judge  # noqa: E402
from baton.desk.routed import build_routed_desk  # noqa: E402
from baton.routing import UNKNOWN, LLMJudge, Router  # noqa: E402
from baton.routing.base import Labelled, RouteDecision, TierVerdict  # noqa: E402
from baton.routing.evaluate import RoutingReport, SpecItem, lang_of, score  # noqa: E402
from baton.routing.semantic import Semantic  # noqa: E402

V2 = ROOT / "benchmarks" / "desk_routing" / "desk_eval_v2.json"
HALVES = ("dev", "sealed")
LANGS = ("en", "zh", "mixed")
KINDS = ("plain", "ambiguous", "multi", "out_of_scope", "unknown_id")
WARM_UP = "Hello, I have a question about my account."
"""Routed once before timing, with the judge off (loads the encoder); not scored."""


def load_half(half: str, path: Path = V2) -> list[SpecItem]:
    """One half's rows as labelled queries: `route` (None for `human`), kind, language and,
    on a multi row, its second need."""
    rows = json.loads(path.read_text(encoding="utf-8"))[half]
    return [
        SpecItem(
            row["text"],
            None if row["route"] == "human" else row["route"],
            row["kind"],
            lang=row["lang"],
            also=(row["also"],) if row.get("also") else (),
        )
        for row in rows
    ]


def judge_of(router: Router) -> LLMJudge | None:
    """The router's LLM judge, if it has one."""
    return next((t for t in router.tiers if isinstance(t, LLMJudge)), None)


async def route_all(router: Router, items: Sequence[Labelled]) -> tuple[list[Any], list[float]]:
    """The router's decision on each query, one after another, and its latency (ms)."""
    decisions: list[Any] = []
    latencies: list[float] = []
    for item in items:
        t = time.perf_counter()
        decisions.append(await router.route(item.text))
        latencies.append((time.perf_counter() - t) * 1000)
    return decisions, latencies


def answer(outcome_target: str) -> str:
    """A report's answer as the desk names it (`human` for unknown)."""
    return "human" if outcome_target == UNKNOWN else outcome_target


def triage_report(path: Path, items: Sequence[Labelled]) -> RoutingReport:
    """Triage's routing on `items`, read from desk_eval's `--json` output (rows matched by
    text): its first hand-off, `human` counting as unknown; a guard's escalation or a reply
    without a hand-off is wrong for every row, as desk_eval counts it."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    routed = {r["case"]["text"]: str(r["route"]) for r in doc.get("requests", [])}
    missing = [x.text for x in items if x.text not in routed]
    if missing:
        raise SystemExit(
            f"{path}: {len(missing)} of {len(items)} rows are not in it (e.g. {missing[0]!r}); "
            "run desk_eval.py with --set v2-<half> and no --limit or --lang"
        )
    verdicts = [
        TierVerdict("triage", UNKNOWN if routed[x.text] == "human" else routed[x.text])
        for x in items
    ]
    return score(items, verdicts, [0.0] * len(items))


def cell(report: RoutingReport, where: Callable[[Labelled], bool]) -> str:
    """`accuracy (right/n)` over the queries `where` accepts."""
    acc, n = report.accuracy(where)
    if not n:
        return "-"
    return f"{acc:.3f} ({round(acc * n)}/{n})" if not math.isnan(acc) else "-"


def figure_rows() -> list[tuple[str, Callable[[Labelled], bool]]]:
    """(name, which queries) for each row of the figures table."""
    rows: list[tuple[str, Callable[[Labelled], bool]]] = [
        ("overall", lambda x: True),
        ("in scope", lambda x: x.label is not None),
        ("out of scope", lambda x: x.label is None),
    ]
    rows += [(f"lang {code}", lambda x, code=code: lang_of(x) == code) for code in LANGS]
    rows += [(f"kind {kind}", lambda x, kind=kind: x.kind == kind) for kind in KINDS]
    return rows


def print_table(columns: dict[str, RoutingReport]) -> None:
    """The figures of each column side by side, as markdown."""
    print("\n| | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    for name, where in figure_rows():
        print(f"| {name} | " + " | ".join(cell(r, where) for r in columns.values()) + " |")


def reviewed(decision: Any) -> bool:
    """Whether the semantic tier proposed a route for review (rather than abstained)."""
    verdicts = getattr(decision, "verdicts", ())
    return any(v.tier == Semantic.name and v.proposal is not None for v in verdicts)


def changes(alone: RoutingReport, full: RoutingReport, decisions: Sequence[Any]) -> dict[str, int]:
    """How the judge changed the router's answers: asked (of which reviews of a proposed
    route), right->wrong, wrong->right, wrong->wrong (another wrong answer)."""
    counts = {"asked": 0, "asked_review": 0}
    counts |= {"right_to_wrong": 0, "wrong_to_right": 0, "wrong_to_wrong": 0}
    for a, f, decision in zip(alone.outcomes, full.outcomes, decisions, strict=True):
        asked = asked_judge(decision)
        counts["asked"] += asked
        counts["asked_review"] += asked and reviewed(decision)
        if a.target == f.target:
            continue
        if a.correct and not f.correct:
            counts["right_to_wrong"] += 1
        elif f.correct and not a.correct:
            counts["wrong_to_right"] += 1
        else:
            counts["wrong_to_wrong"] += 1
    return counts


def describe(decision: Any) -> str:
    """The decision's tier and every tier's verdict, in short."""
    if not isinstance(decision, RouteDecision):
        return ""
    return "; ".join(v.summary() for v in decision.verdicts)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--half", choices=HALVES, default="dev", help="sealed: only ever reported")
    ap.add_argument("--judge", choices=("on", "off"), default="on")
    ap.add_argument("--model", default="local", help="the judge's model (with --judge on)")
    ap.add_argument("--triage", type=Path, default=None, help="desk_eval.py --json output")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    ap.add_argument("--quiet", action="store_true", help="no line per query")
    args = ap.parse_args(argv)

    items = load_half(args.half)
    argv_shown = sys.argv[1:] if argv is None else list(argv)
    described = "none (--judge off)"
    model: Any = "local"  # never loaded with the judge off: only the judge would call it
    if args.judge == "on":
        model, described = resolve(args.model)
    meta = {
        "command": shlex.join(["python", "benchmarks/desk_router_v2.py", *argv_shown]),
        "half": args.half,
        "judge": args.judge,
        "model": described,
        "machine": f"{cpu_name()}, {os.cpu_count()} cores, {platform.machine()}, "
        f"Python {platform.python_version()}",
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    for key in ("command", "half", "judge", "model", "machine", "date"):
        print(f"# {key}: {meta[key]}")

    router = build_routed_desk(model).team.entry
    assert isinstance(router, Router)
    judge = judge_of(router)
    semantic = next((t for t in router.tiers if isinstance(t, Semantic)), None)
    if semantic is not None and semantic.fitted is not None:
        print("\n" + semantic.fitted.summary())
    print(f"\n# {len(items)} {args.half} queries\n", flush=True)

    if judge is not None:
        judge.enabled = False  # the router without the judge: the rules and semantic tier
    asyncio.run(router.route(WARM_UP))
    t = time.perf_counter()
    quiet_decisions, quiet_ms = asyncio.run(route_all(router, items))
    alone = score(items, quiet_decisions, quiet_ms)
    columns = {"rules + semantic": alone}
    full = alone
    decisions = quiet_decisions
    if args.judge == "on" and judge is not None:
        judge.enabled = True
        decisions, full_ms = asyncio.run(route_all(router, items))
        full = score(items, decisions, full_ms)
        columns["+ judge"] = full
    wall = time.perf_counter() - t

    if not args.quiet:
        for n, (item, a, f, decision) in enumerate(
            zip(items, alone.outcomes, full.outcomes, decisions, strict=True), 1
        ):
            want = item.label or "human"
            mark = "ok" if f.correct else f"WRONG (want {want})"
            shift = f" (without the judge {answer(a.target)})" if a.target != f.target else ""
            print(
                f"{n:>3} [{lang_of(item)}/{item.kind}] {answer(f.target):<12} {f.tier:<9}"
                f"{mark}{shift}  {item.text[:70]}\n      {describe(decision)}"
            )

    triage = triage_report(args.triage, items) if args.triage is not None else None
    if triage is not None:
        columns["triage agent"] = triage
    print_table(columns)
    print(
        f"\nlatency: p50 {full.latency_p50_ms:.2f} ms, p99 {full.latency_p99_ms:.2f} ms "
        f"(without the judge p50 {alone.latency_p50_ms:.2f} ms, p99 {alone.latency_p99_ms:.2f} "
        f"ms); wall {wall:.0f} s"
    )
    changed = changes(alone, full, decisions) if args.judge == "on" else None
    if changed is not None:
        state = ("on" if judge is not None and judge.enabled else "off") + (
            f": {judge.reason}" if judge is not None and judge.reason else ""
        )
        print(
            f"judge ({state}): asked about {changed['asked']} of {len(items)} queries "
            f"({changed['asked_review']} reviews of a proposed route); changed "
            f"{changed['wrong_to_right']} wrong -> right, {changed['right_to_wrong']} right -> "
            f"wrong, {changed['wrong_to_wrong']} wrong -> another wrong"
        )
    if args.json is not None:
        doc = {
            **meta,
            "figures": {name: report.to_dict() for name, report in columns.items()},
            "judge_changes": changed,
            "queries": [
                {
                    "text": item.text,
                    "label": item.label,
                    "lang": lang_of(item),
                    "kind": item.kind,
                    "semantic_alone": answer(a.target),
                    "router": answer(f.target),
                    "tier": f.tier,
                    "judge_asked": asked_judge(decision),
                }
                for item, a, f, decision in zip(
                    items, alone.outcomes, full.outcomes, decisions, strict=True
                )
            ],
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, ensure_ascii=False, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
