"""Where the LLM judge acts: the arithmetic of its gate, on judged labelled queries.

The judge is asked about two kinds of query: the band (the tiers before it abstained: without
the judge the query comes out unknown) and the review pool (the semantic tier accepted a route
with a low score, or a small lead over the runner-up: without the judge that route stands). A
gate is four numbers:

- `level`: the review level. Pool queries scored under it go to the judge; the rest keep the
  semantic tier's route. None: no review by score.
- `margin`: the review margin. Pool queries whose route leads the runner-up by less go to the
  judge too. None: no review by margin (with neither, the judge sees the band only).
- `threshold`: the confidence under which the judge defers (the query keeps what it would get
  without the judge). -inf: it acts on every valid answer.
- `review_threshold`: the confidence under which the judge, besides, does not overturn a
  reviewed route (answering another route or unknown): the route stands. -inf: no more than
  `threshold` is needed.

`best_gate` picks the most accurate gate on a set of judged queries, ties going to the simpler
one (no review, then review by score alone, by margin alone, by both; lower levels and margins
first; then higher thresholds: deferring more).
`cross_validated` is the honest estimate of a gate chosen that way: fitted on the other folds,
scored on the held-out one.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from baton.routing.base import UNKNOWN


@dataclass(frozen=True)
class Judged:
    """One labelled query the judge was asked about."""

    gold: str | None
    """The right route, None for unknown."""
    baseline: str | None
    """What the router answers without the judge: None (unknown) for a band query, the
    semantic tier's route for a review-pool query."""
    score: float | None
    """The semantic tier's score for a review-pool query; None for a band query."""
    route: str | None
    """The judge's answer: a route, `UNKNOWN`, or None (no valid answer)."""
    confidence: float
    lead: float | None = None
    """How far the semantic tier's route led the runner-up, for a review-pool query."""

    @property
    def overturns(self) -> bool:
        """Whether the judge's answer overturns a reviewed route (another route, or unknown)."""
        return self.score is not None and self.route is not None and self.route != self.baseline

    def reviewed(self, level: float | None, margin: float | None = None) -> bool:
        """Whether a review-pool query goes to the judge: scored under `level`, or leading the
        runner-up by less than `margin` (False for a band query, which always goes to it)."""
        if self.score is None:
            return False
        low = level is not None and self.score < level
        close = margin is not None and self.lead is not None and self.lead < margin
        return low or close

    def outcome(
        self,
        level: float | None,
        threshold: float,
        margin: float | None = None,
        review_threshold: float = -math.inf,
    ) -> str | None:
        """The router's answer under the gate (None: unknown)."""
        if self.score is not None and not self.reviewed(level, margin):
            return self.baseline  # not reviewed: the semantic tier's route stands
        if self.route is None or self.confidence < threshold:
            return self.baseline  # no valid answer, or not sure enough: the judge defers
        if self.overturns and self.confidence < review_threshold:
            return self.baseline  # not sure enough to overturn the reviewed route
        return None if self.route == UNKNOWN else self.route


@dataclass(frozen=True)
class Gate:
    """A review level and margin (None: no review that way) and a confidence threshold (-inf:
    none)."""

    level: float | None = None
    threshold: float = -math.inf
    margin: float | None = None
    review_threshold: float = -math.inf

    def outcome(self, item: Judged) -> str | None:
        """The router's answer on `item` under this gate (None: unknown)."""
        return item.outcome(self.level, self.threshold, self.margin, self.review_threshold)

    @property
    def filters(self) -> bool:
        """Whether the threshold keeps some answers and drops others."""
        return -math.inf < self.threshold < math.inf

    @property
    def review_filters(self) -> bool:
        """Whether the review threshold keeps some overturning answers and drops others."""
        return -math.inf < self.review_threshold < math.inf


EVERY = Gate()
"""The judge on the band only, acting on every answer: nothing fitted."""


def accuracy(items: Sequence[Judged], gate: Gate) -> float:
    """Share of `items` the router gets right under `gate`."""
    if not items:
        return 0.0
    return sum(gate.outcome(x) == x.gold for x in items) / len(items)


def baseline_accuracy(items: Sequence[Judged]) -> float:
    """Share right without the judge (the band unknown, the pool's routes standing)."""
    return sum(x.baseline == x.gold for x in items) / len(items) if items else 0.0


DEFER = Gate(None, math.inf)
"""The judge deferring on everything: the router as without it."""


def reviews(
    levels: Sequence[float], margins: Sequence[float] = ()
) -> list[tuple[float | None, float | None]]:
    """(level, margin) pairs to try, simplest first: no review, by score alone, by margin
    alone, by both; lower values first."""
    by_score, by_margin = sorted(set(levels)), sorted(set(margins))
    return [
        (None, None),
        *((level, None) for level in by_score),
        *((None, margin) for margin in by_margin),
        *((level, margin) for level in by_score for margin in by_margin),
    ]


def best_gate(
    items: Sequence[Judged], levels: Sequence[float], margins: Sequence[float] = ()
) -> tuple[Gate, float]:
    """The most accurate gate over `levels` and `margins` (and no review) and the answers'
    confidences; ties go to deferring on everything (`DEFER`), then the simpler review
    (`reviews`' order), then the higher threshold, then the higher review threshold."""
    # the lowest confidence filters nothing: it is no threshold (-inf stands for it)
    thresholds = sorted({x.confidence for x in items if x.route is not None}, reverse=True)[:-1]
    overturning = sorted({x.confidence for x in items if x.overturns}, reverse=True)[:-1]
    best, best_acc = DEFER, baseline_accuracy(items)
    for level, margin in reviews(levels, margins):
        # without review no route is reviewed: a review threshold would change nothing
        review_thresholds = overturning if (level, margin) != (None, None) else []
        for threshold in [*thresholds, -math.inf]:
            for review_threshold in [*review_thresholds, -math.inf]:
                gate = Gate(level, threshold, margin, review_threshold)
                acc = accuracy(items, gate)
                if acc > best_acc:
                    best, best_acc = gate, acc
    return best, best_acc


def cross_validated(
    items: Sequence[Judged],
    levels: Sequence[float],
    folds: int,
    seed: int,
    margins: Sequence[float] = (),
) -> float:
    """Accuracy over `items` of a gate chosen by `best_gate` on the other folds."""
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    k = max(2, min(folds, len(items)))
    right = 0
    for f in range(k):
        held = set(order[f::k])
        gate, _ = best_gate([items[i] for i in order if i not in held], levels, margins)
        right += sum(gate.outcome(items[i]) == items[i].gold for i in held)
    return right / len(items) if items else 0.0
