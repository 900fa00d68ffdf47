"""The semantic tier's decision rule, and its search on labelled examples.

A query's top route (the highest score) is accepted when its score reaches the route's
threshold, it beats the runner-up by the margin, and (when a reject set is used) it beats the
mean similarity of the query's nearest known unknowns by the reject gap. `fit_rule` searches
the margin and reject gap on quantile grids, picks the global threshold that maximises the
weighted accuracy for each pair, then fits each route's threshold on the examples it wins and
shrinks it toward the global one (a prior worth `prior` examples).

Two guards keep a fit from collapsing. Without unknown examples nothing says where rejecting
starts, and maximising accuracy would accept everything; each threshold then keeps
`NO_UNKNOWN_KEEP` of its route's correctly ranked examples instead. And no threshold exceeds
`CEILING`: one above it would route only near-copies of the examples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

NO_UNKNOWN_KEEP = 0.9
"""Without unknown examples: the share of its route's correctly ranked examples a threshold
keeps."""
MISSING = -1e8
"""A score under this is no score: the route's every example was left out (a copy)."""
CEILING = 0.95
"""No threshold is fitted above this: cosine scores above it are near-copies of an example
(`baton.routing.duplicates`), so a higher threshold would route nothing new."""


def best_cut(scores: Any, gain: Any) -> tuple[float, float]:
    """The threshold t maximising sum(gain[scores >= t]), and that sum (0 when none helps)."""
    import numpy as np

    if len(scores) == 0:
        return float("inf"), 0.0
    order = np.argsort(-scores, kind="stable")
    s = scores[order]
    total = np.cumsum(gain[order])
    i = int(np.argmax(total))  # first maximum: the highest threshold among equals
    if total[i] <= 0:
        return float(s[0]) + 1e-6, 0.0
    # halfway to the next score, so a tiny shift of the data does not flip the edge item
    cut = float(s[i]) if i + 1 == len(s) else float(s[i] + s[i + 1]) / 2
    return cut, float(total[i])


def ranked(matrix: Any) -> tuple[Any, Any, Any]:
    """Per row of a (queries, routes) score matrix: top route, its score, lead over the next."""
    import numpy as np

    order = np.argsort(-matrix, axis=1, kind="stable")
    rows = np.arange(len(matrix))
    top = matrix[rows, order[:, 0]]
    if matrix.shape[1] > 1:
        margins = top - matrix[rows, order[:, 1]]
    else:
        margins = np.full(len(matrix), np.inf)
    return order[:, 0], top, margins


@dataclass(frozen=True)
class Rule:
    """Fitted thresholds, margin and reject gap (-inf: the reject set is not used)."""

    threshold: float
    """The global threshold that per-route thresholds are shrunk toward."""
    thresholds: Any
    """(routes,) the threshold of each route."""
    margin: float
    reject_gap: float
    wins: Any
    """(routes,) how many fitting examples each route's own threshold was fitted on."""

    def apply(self, matrix: Any, near: Any | None = None) -> Any:
        """Per query, the accepted route's column, or -1 (not confident)."""
        import numpy as np

        pred, top, margins = ranked(matrix)
        lead = top - near if near is not None else np.full(len(top), np.inf)
        ok = (top >= self.thresholds[pred]) & (margins >= self.margin)
        ok &= lead >= self.reject_gap
        return np.where(ok, pred, -1)


def fit_rule(matrix: Any, gold: Any, near: Any | None, weight: Any, prior: float = 10.0) -> Rule:
    """Search the rule that maximises weighted accuracy on labelled scores.

    `matrix`: (examples, routes) scores; `gold`: each example's route column, -1 for unknown;
    `near`: each example's mean similarity to its nearest known unknowns (None: no reject set);
    `weight`: each example's weight. An in-scope example counts when accepted for its route, an
    unknown one when not accepted.
    """
    import numpy as np

    routes = matrix.shape[1]
    scored = matrix.max(axis=1) > MISSING if len(matrix) else np.zeros(0, dtype=bool)
    if not scored.all():  # every example of every route was left out: no evidence, drop it
        matrix, gold, weight = matrix[scored], gold[scored], weight[scored]
        near = near[scored] if near is not None else None
    if not len(matrix):
        return Rule(CEILING, np.full(routes, CEILING), 0.0, -np.inf, np.zeros(routes, np.int64))
    pred, top, margins = ranked(matrix)
    lead = top - near if near is not None else np.full(len(top), np.inf)
    is_unknown = gold < 0
    # accepting an example gains when its top route is right, loses when it should be
    # rejected; everything not accepted counts as a rejection
    gain = weight * ((pred == gold).astype(float) - is_unknown.astype(float))

    quantiles = np.linspace(0.0, 0.6, 25)
    finite = margins[np.isfinite(margins)]  # one route: no runner-up, no margin to fit
    margin_grid = np.unique(
        np.concatenate([[0.0], np.quantile(finite, quantiles) if len(finite) else []])
    )
    lead_grid: list[float] = [-np.inf]  # first: not using the reject set wins ties
    if near is not None:
        lead_grid += [float(v) for v in np.unique(np.quantile(lead, quantiles))]
    best = (-np.inf, 0.0, 0.0, -np.inf)
    for m in margin_grid:
        for g in lead_grid:
            ok = (margins >= m) & (lead >= g)
            cut, value = best_cut(top[ok], gain[ok])
            if value > best[0] + 1e-12:
                best = (value, cut, float(m), g)
    _, threshold, margin, reject_gap = best

    ok = (margins >= margin) & (lead >= reject_gap)
    correct = ok & (pred == gold)
    keep = not is_unknown.any()  # nothing to learn rejection from: keep most examples
    if keep and correct.any():
        threshold = float(np.quantile(top[correct], 1 - NO_UNKNOWN_KEEP))
    thresholds = np.full(routes, threshold, dtype=np.float64)
    wins = np.zeros(routes, dtype=np.int64)
    for i in range(routes):
        mine = ok & (pred == i)
        n = int(mine.sum())
        wins[i] = n
        if n == 0:
            continue
        if keep:
            right = top[mine & correct]
            own = float(np.quantile(right, 1 - NO_UNKNOWN_KEEP)) if len(right) else threshold
        else:
            own, _ = best_cut(top[mine], gain[mine])
            own = min(own, float(top[mine].max()) + 1e-6)  # "reject all" stays near the data
        # few examples: trust the global threshold more (a prior worth `prior` examples)
        thresholds[i] = (n * own + prior * threshold) / (n + prior)
    thresholds = np.minimum(thresholds, CEILING)
    threshold = min(float(threshold), CEILING)
    return Rule(float(threshold), thresholds, margin, float(reject_gap), wins)
