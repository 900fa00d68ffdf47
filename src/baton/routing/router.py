"""`Router`: tiers in order, first confident verdict wins, else the fallback.

router = Router([Rules({...}), Semantic(), LLMJudge()], fallback="human")
team = Team(agents, entry=router)              # routes each new session's first message
decision = await router.route("我要退款")        # or standalone
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from baton.core.errors import ConfigError
from baton.routing.base import UNKNOWN, Labelled, Route, RouteDecision, Tier, TierVerdict

if TYPE_CHECKING:
    from baton.routing.evaluate import RoutingReport
    from baton.routing.fit_report import RouterFitReport


class Router:
    """Layered routing: `tiers` in order (rules -> semantic -> LLM judge), then `fallback`.

    A tier's verdict is final when it names a route; when it names `unknown` the request goes
    to the fallback at once; when it abstains the next tier decides. `fallback` is an agent
    name or `"human"` (the human queue).
    """

    def __init__(
        self,
        tiers: Sequence[Tier],
        fallback: str = "human",
        routes: Sequence[Route] | None = None,
    ) -> None:
        if not tiers:
            raise ConfigError("a Router needs at least one tier (e.g. Semantic())")
        self.tiers = list(tiers)
        self.fallback = fallback
        self.routes: list[Route] = []
        if routes is not None:
            self.bind(routes)

    def bind(self, routes: Sequence[Route]) -> None:
        """Give every tier the routes (a Team does this with its agents)."""
        names = [r.name for r in routes]
        if len(set(names)) != len(names):
            raise ConfigError(f"duplicate route names in {names}")
        self.routes = list(routes)
        for tier in self.tiers:
            tier.bind(self.routes)

    def _check_bound(self) -> None:
        if not self.routes:
            raise ConfigError(
                "the router has no routes: pass routes=[Route(...)] or use it as Team(entry=...)"
            )

    async def route(
        self,
        text: str,
        history: Sequence[Any] | None = None,
        context: dict[str, Any] | None = None,
    ) -> RouteDecision:
        """Decide who gets `text`; never raises for a tier's model misbehaving."""
        self._check_bound()
        t = time.perf_counter()
        verdicts: list[TierVerdict] = []
        said_unknown = False
        for tier in self.tiers:
            try:
                verdict = await tier.decide(text, history, context, verdicts)
            except (
                Exception
            ) as exc:  # a failing tier abstains; the next one or the fallback decides
                verdict = TierVerdict(tier.name, None, detail=f"{type(exc).__name__}: {exc}")
            verdicts.append(verdict)
            if verdict.target is None:
                continue
            if verdict.target == UNKNOWN:
                said_unknown = True
                break
            return _decided(verdict, verdict.target, t, verdicts)
        # a route proposed for review stands when no later tier decided (nor said unknown)
        proposed = None if said_unknown else next((v for v in verdicts if v.proposal), None)
        if proposed is not None and proposed.proposal is not None:
            return _decided(proposed, proposed.proposal, t, verdicts)
        ranked = next((v.candidates for v in reversed(verdicts) if v.candidates), [])
        return RouteDecision(
            target=self.fallback,
            tier="fallback",
            score=None,
            candidates=[n for n, _ in ranked],
            latency_ms=(time.perf_counter() - t) * 1000,
            verdicts=verdicts,
        )

    def route_sync(self, text: str) -> RouteDecision:
        """`route` for scripts."""
        return asyncio.run(self.route(text))

    def fit(
        self,
        labelled: Sequence[Labelled],
        *,
        judge: bool = True,
        judge_calls: int = 40,
    ) -> RouterFitReport:
        """Fit every tier that learns from data (thresholds, margins, head), then measure the
        LLM judge where it acts.

        `labelled`: in-scope queries with their route, and unknown ones (`label=None`). The
        routes' own example utterances may be among them: each is scored without its copies
        (leave-one-out), and the report warns that such a fit is a guess. Returns a
        `RouterFitReport`: what each tier chose (by tier name), the warnings, and the
        cross-validated accuracy.

        When the router has an `LLMJudge`, it is asked about at most `judge_calls` of the
        labelled queries the tiers before it abstain on or the semantic tier accepts with a
        low score (held out fold by fold), and turned off when it does not beat going without
        it there; else it stays on, acting on every band answer or behind a fitted gate (a
        confidence threshold, a review level and margin under which the semantic tier's routes
        go to the judge, and the confidence it needs to overturn one), whichever measured
        better (`report["llm"]`, a
        `baton.routing.judge_fit.JudgeFit`; see that module). `judge=False`
        skips this (no model call; the judge keeps its state). Inside a running event loop
        the measurement runs on a worker thread.
        """
        from baton.routing.fit_report import collect

        self._check_bound()
        fitted: dict[str, Any] = {}
        for tier in self.tiers:
            fit = getattr(tier, "fit", None)
            if callable(fit):
                fitted[tier.name] = fit(labelled)
        if judge:
            from baton.routing.judge_fit import fit_judges

            fitted.update(fit_judges(self, labelled, max_calls=judge_calls))
        return collect(fitted)

    async def evaluate(self, labelled: Sequence[Labelled]) -> RoutingReport:
        """Accuracy, unknown rejection, per-tier coverage/precision, latency on `labelled`.

        A decision that ends at the fallback counts as `unknown` (no route took the query).
        """
        from baton.routing.evaluate import aevaluate

        self._check_bound()
        return await aevaluate(self.route, labelled)

    def evaluate_sync(self, labelled: Sequence[Labelled]) -> RoutingReport:
        """`evaluate` for scripts."""
        return asyncio.run(self.evaluate(labelled))


def _decided(
    verdict: TierVerdict, target: str, started: float, verdicts: list[TierVerdict]
) -> RouteDecision:
    """The decision `verdict`'s tier made (or proposed, when no later tier decided)."""
    return RouteDecision(
        target=target,
        tier=verdict.tier,
        score=verdict.score,
        candidates=[n for n, _ in verdict.candidates],
        latency_ms=(time.perf_counter() - started) * 1000,
        verdicts=verdicts,
    )


def routes_from_agents(agents: Sequence[Any]) -> list[Route]:
    """Routes for a team's agents: name, examples, description and not_for."""
    return [
        Route(
            name=a.name,
            utterances=tuple(a.examples),
            description=a.description,
            not_for=a.not_for,
        )
        for a in agents
    ]
