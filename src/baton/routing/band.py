"""The ambiguous band: the queries the semantic tier abstains on, with and without the judge.

    band = await judge_band(router, test, sample=100, seed=0)
    print(band.summary())

A router's semantic tier routes the queries it is sure of and abstains on the rest (the band);
without a judge behind it those fall back, i.e. come out "unknown". With review on, the band
also holds the routes it proposes for review (accepted under its review level, or ahead of the
runner-up by less than its review margin): without the judge those stand. `judge_band` runs the
semantic tier over every query (cheap), draws a seeded random sample of the band, routes only
that sample through the whole router (the judge costs seconds per query on a CPU), and
compares the two answers on the same queries.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from baton.routing.base import Labelled, RouteDecision
from baton.routing.evaluate import RoutingReport, aevaluate, percentile, score

if TYPE_CHECKING:
    from baton.routing.router import Router
    from baton.routing.semantic import Semantic


@dataclass(frozen=True)
class BandReport:
    """Accuracy on a sample of the band with and without the judge, and what the judge cost."""

    n_queries: int
    """Queries the semantic tier judged (the whole labelled set)."""
    n_band: int
    """Of those, the queries it abstained on or proposed a route for review on."""
    n_sample: int
    """Band queries routed through the whole router."""
    semantic: RoutingReport
    """The semantic tier alone on every query (abstentions count as unknown)."""
    without_judge: float
    """Accuracy on the sample when abstentions fall back (the semantic tier alone)."""
    with_judge: float
    """Accuracy on the sample through the whole router."""
    in_scope: tuple[float, float, int]
    """(without, with, count) on the sample's in-scope queries."""
    unknown: tuple[float, float, int]
    """(without, with, count) on the sample's unknown queries."""
    judge_answers: dict[str, int]
    """How the judge's verdicts ended: `route`, `unknown` or `abstain` (no valid answer)."""
    judge_p50_ms: float
    judge_p99_ms: float
    judge_mean_ms: float
    report: RoutingReport
    """The whole router on the sample (per-tier coverage, every outcome)."""
    judge_state: str = ""
    """Whether the judge acts, and why (what `Router.fit` measured); empty when unknown."""

    @property
    def share(self) -> float:
        """The band's share of all queries."""
        return self.n_band / self.n_queries if self.n_queries else 0.0

    @property
    def gain(self) -> float:
        """Accuracy the judge adds on the band (with minus without)."""
        return self.with_judge - self.without_judge

    @property
    def overall_estimate(self) -> float:
        """Overall accuracy with the judge: the semantic figure plus the band's share of the
        gain (exact when the sample is the whole band)."""
        return self.semantic.overall_accuracy + self.share * self.gain

    def summary(self) -> str:
        """A few human-readable lines."""
        ins, unk = self.in_scope, self.unknown
        return "\n".join(
            [
                f"band: {self.n_band}/{self.n_queries} queries ({self.share:.1%}) abstained on "
                f"or proposed for review by the semantic tier; {self.n_sample} sampled",
                f"accuracy on the sample: without judge {self.without_judge:.3f}, with judge "
                f"{self.with_judge:.3f} (gain {self.gain:+.3f})",
                f"  in-scope {ins[0]:.3f} -> {ins[1]:.3f} (n={ins[2]}), unknown {unk[0]:.3f} -> "
                f"{unk[1]:.3f} (n={unk[2]})",
                f"judge answers: {self.judge_answers}; latency p50 {self.judge_p50_ms:.0f} ms, "
                f"p99 {self.judge_p99_ms:.0f} ms, mean {self.judge_mean_ms:.0f} ms",
                f"overall: semantic alone {self.semantic.overall_accuracy:.3f}, with judge "
                f"{self.overall_estimate:.3f} (estimated from the sample)",
                *([f"judge: {self.judge_state}"] if self.judge_state else []),
            ]
        )


def _semantic_tier(router: Router) -> Semantic:
    from baton.routing.semantic import Semantic

    for tier in router.tiers:
        if isinstance(tier, Semantic):
            return tier
    raise ValueError("the router has no Semantic tier: there is no ambiguous band to measure")


def _pair(report: RoutingReport, judged: RoutingReport, where: set[int]) -> tuple[float, float]:
    without = [report.outcomes[i].correct for i in where]
    with_ = [judged.outcomes[i].correct for i in where]
    n = len(where)
    return (sum(without) / n, sum(with_) / n) if n else (float("nan"), float("nan"))


async def judge_band(
    router: Router,
    labelled: Sequence[Labelled],
    sample: int | None = None,
    seed: int = 0,
    judge: str = "llm",
) -> BandReport:
    """Measure the judge on the band: `sample` band queries drawn at random (None: all).

    The router must be bound (and fitted, for meaningful figures) and hold a `Semantic` tier;
    `judge` is the name of the tier whose verdicts are timed.
    """
    semantic = _semantic_tier(router)
    verdicts = semantic.judge_many([x.text for x in labelled])
    alone = score(labelled, verdicts, [v.latency_ms for v in verdicts])
    band = [i for i, v in enumerate(verdicts) if v.target is None]
    chosen = sorted(random.Random(seed).sample(band, min(sample, len(band)))) if sample else band
    items = [labelled[i] for i in chosen]
    report = await aevaluate(router.route, items)
    without = score(items, [verdicts[i] for i in chosen], [0.0] * len(items))
    answers = {"route": 0, "unknown": 0, "abstain": 0}
    latencies: list[float] = []
    for outcome in report.outcomes:
        decision = outcome.result
        if not isinstance(decision, RouteDecision):
            continue
        for verdict in decision.verdicts:
            if verdict.tier != judge:
                continue
            latencies.append(verdict.latency_ms)
            if verdict.target is None:
                answers["abstain"] += 1
            elif verdict.target == "unknown":
                answers["unknown"] += 1
            else:
                answers["route"] += 1
    every = set(range(len(items)))
    in_scope = {i for i in every if items[i].label is not None}
    from baton.routing.judge import LLMJudge

    tier = next((t for t in router.tiers if t.name == judge), None)
    state = ""
    if isinstance(tier, LLMJudge):
        state = ("on" if tier.enabled else "off") + (f": {tier.reason}" if tier.reason else "")
    return BandReport(
        n_queries=len(labelled),
        n_band=len(band),
        n_sample=len(items),
        semantic=alone,
        without_judge=_pair(without, report, every)[0],
        with_judge=_pair(without, report, every)[1],
        in_scope=(*_pair(without, report, in_scope), len(in_scope)),
        unknown=(*_pair(without, report, every - in_scope), len(every - in_scope)),
        judge_answers=answers,
        judge_p50_ms=percentile(latencies, 50),
        judge_p99_ms=percentile(latencies, 99),
        judge_mean_ms=sum(latencies) / len(latencies) if latencies else float("nan"),
        report=report,
        judge_state=state,
    )
