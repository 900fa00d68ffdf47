"""Routing evaluation: accuracy, unknown rejection, per-tier coverage and latency; spec files.

    routes, calibration, test = load_spec("routes-clinc-intents16.json")
    report = evaluate(tier.judge, test)          # or evaluate(decisions, test)
    print(report.summary())

`evaluate` takes either a function called once per query (sync or async) or the results
already computed, one per query. A result is a `RouteDecision` (a router) or a `TierVerdict`
(one tier on its own). A query counts as answered "unknown" when a verdict abstains or says
`UNKNOWN`, or when a decision came from the fallback tier or says `UNKNOWN`.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from baton.routing.base import UNKNOWN, Labelled, Route, RouteDecision, TierVerdict

Result = RouteDecision | TierVerdict
Decide = Callable[[str], Result | Awaitable[Result]]

ABSTAIN = "abstain"
"""The tier name reported for verdicts that abstained (no tier decided)."""


@dataclass(frozen=True)
class Outcome:
    """One evaluated query: what was expected, what came out, and how long it took."""

    item: Labelled
    target: str
    """The route picked, or `UNKNOWN`."""
    tier: str
    """The tier that decided, or `abstain`."""
    correct: bool
    latency_ms: float
    result: Result | None = None
    """The decision or verdict itself (its per-tier verdicts, for a decision)."""


@dataclass(frozen=True)
class TierStats:
    """How much of the traffic a tier decided, and how much of that it got right."""

    n: int
    coverage: float
    precision: float


@dataclass
class RoutingReport:
    """Figures over one labelled set; `outcomes` keeps every query for slicing."""

    n: int
    overall_accuracy: float
    in_scope_accuracy: float
    """Share of labelled queries (label is a route) routed to their label."""
    unknown_rejection: float
    """Share of unknown queries (label None) answered unknown."""
    latency_p50_ms: float
    latency_p99_ms: float
    tiers: dict[str, TierStats] = field(default_factory=dict)
    by_kind: dict[str, float] = field(default_factory=dict)
    outcomes: list[Outcome] = field(default_factory=list, repr=False)

    def accuracy(self, where: Callable[[Labelled], bool]) -> tuple[float, int]:
        """(accuracy, count) over the queries `where` accepts (nan when none)."""
        chosen = [o.correct for o in self.outcomes if where(o.item)]
        return (sum(chosen) / len(chosen) if chosen else math.nan), len(chosen)

    def mistakes(self) -> list[Outcome]:
        """The queries answered wrongly."""
        return [o for o in self.outcomes if not o.correct]

    def as_rows(self) -> list[tuple[str, str]]:
        """(metric, value) pairs for a table: the headline figures, then tiers and kinds."""
        rows = [
            ("queries", str(self.n)),
            ("overall accuracy", f"{self.overall_accuracy:.3f}"),
            ("in-scope accuracy", f"{self.in_scope_accuracy:.3f}"),
            ("unknown rejected", f"{self.unknown_rejection:.3f}"),
            ("latency p50", f"{self.latency_p50_ms:.2f} ms"),
            ("latency p99", f"{self.latency_p99_ms:.2f} ms"),
        ]
        for tier, s in self.tiers.items():
            rows.append((f"tier {tier}", f"coverage {s.coverage:.3f}, precision {s.precision:.3f}"))
        for kind, acc in self.by_kind.items():
            rows.append((f"kind {kind}", f"{acc:.3f}"))
        return rows

    def summary(self) -> str:
        """A few human-readable lines."""
        lines = [
            f"overall {self.overall_accuracy:.3f}  in-scope {self.in_scope_accuracy:.3f}  "
            f"unknown rejected {self.unknown_rejection:.3f}  (n={self.n})",
            f"latency p50 {self.latency_p50_ms:.2f} ms  p99 {self.latency_p99_ms:.2f} ms",
        ]
        for tier, s in self.tiers.items():
            lines.append(f"  {tier:<9} coverage {s.coverage:.3f}  precision {s.precision:.3f}")
        return "\n".join(lines)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation; nan for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _answer(result: Result) -> tuple[str, str]:
    """(target, tier) with abstentions and fallbacks folded into `UNKNOWN`."""
    if isinstance(result, RouteDecision):
        if result.unknown or result.target == UNKNOWN:
            return UNKNOWN, result.tier
        return result.target, result.tier
    if result.target is None:
        return UNKNOWN, ABSTAIN
    return result.target, result.tier


def score(
    items: Sequence[Labelled], results: Sequence[Result], latencies_ms: Sequence[float]
) -> RoutingReport:
    """The report for results already computed (one per item, in order)."""
    if not (len(items) == len(results) == len(latencies_ms)):
        raise ValueError("items, results and latencies must have the same length")
    outcomes = []
    for item, result, ms in zip(items, results, latencies_ms, strict=True):
        target, tier = _answer(result)
        correct = target == UNKNOWN if item.label is None else target == item.label
        outcomes.append(Outcome(item, target, tier, correct, ms, result))
    return _report(outcomes)


def _share(flags: Iterable[bool]) -> float:
    seen = list(flags)
    return sum(seen) / len(seen) if seen else math.nan


def _report(outcomes: list[Outcome]) -> RoutingReport:
    n = len(outcomes)
    tiers: dict[str, TierStats] = {}
    for tier in dict.fromkeys(o.tier for o in outcomes):
        mine = [o for o in outcomes if o.tier == tier]
        tiers[tier] = TierStats(len(mine), len(mine) / n, _share(o.correct for o in mine))
    kinds = dict.fromkeys(o.item.kind for o in outcomes)
    latencies = [o.latency_ms for o in outcomes]
    return RoutingReport(
        n=n,
        overall_accuracy=_share(o.correct for o in outcomes),
        in_scope_accuracy=_share(o.correct for o in outcomes if o.item.label is not None),
        unknown_rejection=_share(o.correct for o in outcomes if o.item.label is None),
        latency_p50_ms=percentile(latencies, 50),
        latency_p99_ms=percentile(latencies, 99),
        tiers=tiers,
        by_kind={k: _share(o.correct for o in outcomes if o.item.kind == k) for k in kinds},
        outcomes=outcomes,
    )


def evaluate(decide: Decide | Sequence[Result], labelled: Sequence[Labelled]) -> RoutingReport:
    """Report on `labelled`: call `decide` on each query (sync or async), or score results.

    With a function, latency is wall time around each call, one query at a time (call from
    synchronous code; in a running event loop use `aevaluate`). With results already computed
    (one per query, in order), latency is each result's own `latency_ms`.
    """
    if not callable(decide):
        given = list(decide)
        return score(labelled, given, [r.latency_ms for r in given])
    if inspect.iscoroutinefunction(decide):
        return asyncio.run(aevaluate(decide, labelled))
    results: list[Result] = []
    latencies: list[float] = []
    loop: asyncio.AbstractEventLoop | None = None
    try:
        for item in labelled:
            start = time.perf_counter()
            out = decide(item.text)
            if inspect.isawaitable(out):  # a sync wrapper handing back a coroutine
                loop = loop or asyncio.new_event_loop()
                out = loop.run_until_complete(out)
            latencies.append((time.perf_counter() - start) * 1000)
            results.append(out)
    finally:
        if loop is not None:
            loop.close()
    return score(labelled, results, latencies)


async def aevaluate(decide: Decide, labelled: Sequence[Labelled]) -> RoutingReport:
    """`evaluate` for use inside an event loop; queries run one after another."""
    results: list[Result] = []
    latencies: list[float] = []
    for item in labelled:
        start = time.perf_counter()
        out = decide(item.text)
        if inspect.isawaitable(out):
            out = await out
        latencies.append((time.perf_counter() - start) * 1000)
        results.append(out)
    return score(labelled, results, latencies)


class RouteSpec(NamedTuple):
    """A routing benchmark: routes, labelled examples to fit on, labelled test queries."""

    routes: list[Route]
    calibration: list[Labelled]
    test: list[Labelled]


def _labelled(rows: Sequence[dict[str, Any]], routes: set[str], where: str) -> list[Labelled]:
    out = []
    for i, row in enumerate(rows):
        label = row.get("label")
        if label is not None and label not in routes:
            raise ValueError(f"{where}[{i}]: label {label!r} is no route")
        out.append(Labelled(str(row["text"]), label, str(row.get("kind", "in"))))
    return out


def load_spec(path: str | Path) -> RouteSpec:
    """Read a spec file; `routes, calibration, test = load_spec(path)`.

    The file is `{name, routes:[{name, utterances}], calibration:[...], test:[...]}`; example
    rows are `{text, label, kind}`, `label` null meaning the query must come out unknown. A
    route may also carry `description` and `not_for`. Labels that name no route are an error.
    """
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    routes = [
        Route(
            name=str(r["name"]),
            utterances=tuple(str(u) for u in r.get("utterances", ())),
            description=str(r.get("description", "")),
            not_for=str(r.get("not_for", "")),
        )
        for r in data["routes"]
    ]
    names = {r.name for r in routes}
    if len(names) != len(routes):
        raise ValueError(f"{path}: route names are not unique")
    return RouteSpec(
        routes=routes,
        calibration=_labelled(data.get("calibration", []), names, "calibration"),
        test=_labelled(data.get("test", []), names, "test"),
    )
