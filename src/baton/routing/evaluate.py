"""Routing evaluation: accuracy, unknown rejection, per-tier coverage and latency; spec files.

    routes, calibration, test = load_spec("routes-clinc-intents16.json")
    report = evaluate(tier.judge, test)          # or evaluate(decisions, test)
    print(report.summary())

`evaluate` takes either a function called once per query (sync or async) or the results
already computed, one per query. A result is a `RouteDecision` (a router) or a `TierVerdict`
(one tier on its own). A query counts as answered "unknown" when a verdict abstains or says
`UNKNOWN`, or when a decision came from the fallback tier or says `UNKNOWN`.

Spec rows may carry a language (`lang`); the report then gives accuracy per language
(`RoutingReport.by_lang`).
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
class SpecItem(Labelled):
    """A labelled query read from a spec, with the row's optional fields."""

    lang: str | None = None
    """The query's language as the spec labels it (`zh`, `en`, `mixed`, ...); None: unlabelled."""
    also: tuple[str, ...] = ()
    """For a multi-intent query: the routes of its other needs (`label` is the first one)."""


def lang_of(item: Labelled) -> str | None:
    """The language a labelled query carries (a `SpecItem`'s `lang`), or None."""
    lang = getattr(item, "lang", None)
    return str(lang) if lang else None


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


@dataclass(frozen=True)
class LangStats:
    """Accuracy over the queries of one language (nan where there are none of a kind)."""

    n: int
    overall: float
    in_scope: float
    """Share of its in-scope queries routed to their label."""
    out_of_scope: float
    """Share of its out-of-scope queries (label None) answered unknown."""
    n_in: int = 0
    n_out: int = 0


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
    by_lang: dict[str, LangStats] = field(default_factory=dict)
    """Accuracy per language, for the queries that carry one (empty when none does)."""
    outcomes: list[Outcome] = field(default_factory=list, repr=False)

    def accuracy(self, where: Callable[[Labelled], bool]) -> tuple[float, int]:
        """(accuracy, count) over the queries `where` accepts (nan when none)."""
        chosen = [o.correct for o in self.outcomes if where(o.item)]
        return (sum(chosen) / len(chosen) if chosen else math.nan), len(chosen)

    def latency(self, where: Callable[[Outcome], bool]) -> tuple[float, float, int]:
        """(p50, p99, count) of the latency of the outcomes `where` accepts (nan when none)."""
        chosen = [o.latency_ms for o in self.outcomes if where(o)]
        return percentile(chosen, 50), percentile(chosen, 99), len(chosen)

    def mistakes(self) -> list[Outcome]:
        """The queries answered wrongly."""
        return [o for o in self.outcomes if not o.correct]

    def as_rows(self) -> list[tuple[str, str]]:
        """(metric, value) pairs for a table: the headline figures, then tiers and kinds
        (per-language figures: `lang_rows`)."""
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

    def lang_rows(self) -> list[tuple[str, str, str, str]]:
        """(language, overall, in-scope, out-of-scope) per language, counts in brackets."""

        def cell(value: float, n: int) -> str:
            return f"{value:.3f} ({n})" if n else "-"

        return [
            (lang, cell(s.overall, s.n), cell(s.in_scope, s.n_in), cell(s.out_of_scope, s.n_out))
            for lang, s in self.by_lang.items()
        ]

    def to_dict(self) -> dict[str, Any]:
        """The figures as plain JSON-ready data (no per-query outcomes; nan becomes None)."""

        def num(value: float) -> float | None:
            return None if math.isnan(value) else round(value, 4)

        return {
            "n": self.n,
            "overall_accuracy": num(self.overall_accuracy),
            "in_scope_accuracy": num(self.in_scope_accuracy),
            "unknown_rejection": num(self.unknown_rejection),
            "latency_p50_ms": num(self.latency_p50_ms),
            "latency_p99_ms": num(self.latency_p99_ms),
            "tiers": {
                name: {"n": s.n, "coverage": num(s.coverage), "precision": num(s.precision)}
                for name, s in self.tiers.items()
            },
            "by_kind": {kind: num(acc) for kind, acc in self.by_kind.items()},
            "by_lang": {
                lang: {
                    "n": s.n,
                    "overall": num(s.overall),
                    "in_scope": num(s.in_scope),
                    "out_of_scope": num(s.out_of_scope),
                    "n_in": s.n_in,
                    "n_out": s.n_out,
                }
                for lang, s in self.by_lang.items()
            },
        }

    def summary(self) -> str:
        """A few human-readable lines."""
        lines = [
            f"overall {self.overall_accuracy:.3f}  in-scope {self.in_scope_accuracy:.3f}  "
            f"unknown rejected {self.unknown_rejection:.3f}  (n={self.n})",
            f"latency p50 {self.latency_p50_ms:.2f} ms  p99 {self.latency_p99_ms:.2f} ms",
        ]
        for tier, s in self.tiers.items():
            lines.append(f"  {tier:<9} coverage {s.coverage:.3f}  precision {s.precision:.3f}")
        for lang, ls in self.by_lang.items():
            lines.append(
                f"  {lang:<9} overall {ls.overall:.3f}  in-scope {ls.in_scope:.3f}  "
                f"out-of-scope {ls.out_of_scope:.3f}  (n={ls.n})"
            )
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
        if result.proposal is not None:  # a tier alone: its proposal is its answer
            return result.proposal, result.tier
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
    by_lang: dict[str, LangStats] = {}
    for lang in dict.fromkeys(lang_of(o.item) for o in outcomes):
        if lang is None:
            continue
        mine = [o for o in outcomes if lang_of(o.item) == lang]
        ins = [o.correct for o in mine if o.item.label is not None]
        outs = [o.correct for o in mine if o.item.label is None]
        by_lang[lang] = LangStats(
            len(mine),
            _share(o.correct for o in mine),
            _share(ins),
            _share(outs),
            len(ins),
            len(outs),
        )
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
        by_lang=by_lang,
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


def _also(value: Any, routes: set[str], where: str) -> tuple[str, ...]:
    """A row's `also` (one route name or a list of them) as a tuple of route names."""
    if value is None:
        return ()
    names = (value,) if isinstance(value, str) else tuple(value)
    for name in names:
        if name not in routes:
            raise ValueError(f"{where}: also {name!r} is no route")
    return tuple(str(n) for n in names)


def _labelled(rows: Sequence[dict[str, Any]], routes: set[str], where: str) -> list[Labelled]:
    out: list[Labelled] = []
    for i, row in enumerate(rows):
        label = row.get("label")
        if label is not None and label not in routes:
            raise ValueError(f"{where}[{i}]: label {label!r} is no route")
        text, kind = str(row["text"]), str(row.get("kind", "in"))
        lang, also = row.get("lang"), _also(row.get("also"), routes, f"{where}[{i}]")
        if lang or also:
            out.append(SpecItem(text, label, kind, lang=str(lang) if lang else None, also=also))
        else:  # a row without the optional fields reads as before
            out.append(Labelled(text, label, kind))
    return out


def load_spec(path: str | Path) -> RouteSpec:
    """Read a spec file; `routes, calibration, test = load_spec(path)`.

    The file is `{name, routes:[{name, utterances}], calibration:[...], test:[...]}`; example
    rows are `{text, label, kind}`, `label` null meaning the query must come out unknown, with
    optional `lang` (the query's language) and `also` (a multi-intent query's other routes).
    Rows with either come back as `SpecItem`s (a `Labelled` with `lang` and `also`), the
    others as plain `Labelled`. A route may also carry `description` and `not_for`. Labels
    (and `also` names) that name no route are an error.
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
