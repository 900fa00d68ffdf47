"""Where the LLM judge acts: the arithmetic of its gate, on judged labelled queries.

The judge is asked about two kinds of query: the band (the tiers before it abstained: without
the judge the query comes out unknown) and the review pool (the semantic tier accepted a route
with a low score: without the judge that route stands). A gate is a pair:

- `level`: the review level. Pool queries scored under it go to the judge; the rest keep the
  semantic tier's route. None: no review, the judge sees the band only.
- `threshold`: the confidence under which the judge defers (the query keeps what it would get
  without the judge). -inf: it acts on every valid answer.

`best_gate` picks the most accurate gate on a set of judged queries, ties going to the simpler
one (no review, then a lower review level, then a higher threshold: deferring more).
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

    def outcome(self, level: float | None, threshold: float) -> str | None:
        """The router's answer under the gate (None: unknown)."""
        if self.score is not None and (level is None or self.score >= level):
            return self.baseline  # not reviewed: the semantic tier's route stands
        if self.route is None or self.confidence < threshold:
            return self.baseline  # no valid answer, or not sure enough: the judge defers
        return None if self.route == UNKNOWN else self.route


@dataclass(frozen=True)
class Gate:
    """A review level (None: the band only) and a confidence threshold (-inf: none)."""

    level: float | None = None
    threshold: float = -math.inf

    @property
    def filters(self) -> bool:
        """Whether the threshold keeps some answers and drops others."""
        return -math.inf < self.threshold < math.inf


EVERY = Gate()
"""The judge on the band only, acting on every answer: nothing fitted."""


def accuracy(items: Sequence[Judged], gate: Gate) -> float:
    """Share of `items` the router gets right under `gate`."""
    if not items:
        return 0.0
    return sum(x.outcome(gate.level, gate.threshold) == x.gold for x in items) / len(items)


def baseline_accuracy(items: Sequence[Judged]) -> float:
    """Share right without the judge (the band unknown, the pool's routes standing)."""
    return sum(x.baseline == x.gold for x in items) / len(items) if items else 0.0


DEFER = Gate(None, math.inf)
"""The judge deferring on everything: the router as without it."""


def best_gate(items: Sequence[Judged], levels: Sequence[float]) -> tuple[Gate, float]:
    """The most accurate gate over `levels` (and no review) and the answers' confidences;
    ties go to deferring on everything (`DEFER`), then no review, then the lower level, then
    the higher threshold."""
    # the lowest confidence filters nothing: it is no threshold (-inf stands for it)
    thresholds = sorted({x.confidence for x in items if x.route is not None}, reverse=True)[:-1]
    best, best_acc = DEFER, baseline_accuracy(items)
    for level in [None, *sorted(set(levels))]:
        for threshold in [*thresholds, -math.inf]:
            gate = Gate(level, threshold)
            acc = accuracy(items, gate)
            if acc > best_acc:
                best, best_acc = gate, acc
    return best, best_acc


def cross_validated(
    items: Sequence[Judged], levels: Sequence[float], folds: int, seed: int
) -> float:
    """Accuracy over `items` of a gate chosen by `best_gate` on the other folds."""
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    k = max(2, min(folds, len(items)))
    right = 0
    for f in range(k):
        held = set(order[f::k])
        gate, _ = best_gate([items[i] for i in order if i not in held], levels)
        right += sum(items[i].outcome(gate.level, gate.threshold) == items[i].gold for i in held)
    return right / len(items) if items else 0.0
