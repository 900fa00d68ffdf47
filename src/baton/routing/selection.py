"""How `Semantic.fit` chooses what decides: candidates cross-validated on the labelled examples.

The candidates are the plain nearest-example head, the nearest head with the labelled in-scope
queries learned as examples, and the linear head. Each is fitted on the training part of 5
topic-grouped folds (`baton.routing.folds`), twice over, and scored on the held-out part with
the same weights the fit uses. The first candidate (the simplest) stays unless another beats it
by `LEAD`; among those that do, the most accurate wins.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from baton.routing.folds import topic_folds
from baton.routing.linear import LinearHead
from baton.routing.rule import best_cut

LEAD = 0.01
"""How much higher a candidate's cross-validated accuracy must be than the simplest one's for
`fit` to prefer it: the plain nearest head is the simplest and explainable one, and on CLINC150
domains10 a CV lead within noise came with a large loss on test (see docs/benchmarks.md)."""
NO_CV_ACCEPT = 0.5
"""The linear head's probability threshold when the examples are too few to fit one."""
CV_FOLDS, CV_REPEATS = 5, 2
MIN_EACH = 10
"""In-scope and unknown examples needed, each, before candidates are compared."""

FitPredict = Callable[[Any], Callable[[Any], Any]]
"""Given training row numbers, a fitted head as a function: held-out row numbers -> route
column or -1 (row numbers, so that it can leave out what a held-out example copies)."""
FitLinear = Callable[[Any], LinearHead]
"""Given training row numbers, the linear head fitted on them."""


def cross_validate(
    vectors: Any,
    gold: Any,
    weight: Any,
    routes: int,
    nearest: Mapping[str, FitPredict],
    linear: FitLinear | None,
) -> tuple[dict[str, float], Any]:
    """Mean held-out accuracy of each `nearest` candidate and, when given, of `linear`.

    `vectors`, `gold` (route column, -1 for unknown) and `weight` describe the labelled examples.
    Returns the accuracies (empty when there are under `MIN_EACH` in-scope or unknown examples,
    or one route) and the linear head's out-of-fold probabilities from the first repeat, with
    an unknown column (None without `linear` or accuracies).
    """
    import numpy as np

    is_unknown = gold < 0
    if min(int(is_unknown.sum()), int((~is_unknown).sum())) < MIN_EACH or routes < 2:
        return {}, None
    scores: dict[str, list[float]] = {name: [] for name in nearest}
    oof = np.zeros((len(gold), routes + 1)) if linear is not None else None
    for repeat in range(CV_REPEATS):
        for held in topic_folds(vectors, is_unknown, CV_FOLDS, repeat):
            train = np.setdiff1d(np.arange(len(gold)), held)
            if len(held) == 0 or not (gold[train] >= 0).any():
                continue
            for name, fit in nearest.items():
                pred = fit(train)(held)
                scores[name].append(weighted_accuracy(pred, gold[held], weight[held]))
            if linear is None or oof is None:
                continue
            head = linear(train)
            proba = head.proba(vectors[held])
            if not head.unknown:  # this fold's training part had no unknown example
                proba = np.concatenate([proba, np.zeros((len(held), 1))], axis=1)
            if repeat == 0:
                oof[held] = proba
            top = proba.argmax(axis=1)
            pred = np.where(top >= routes, -1, top)
            accuracy = weighted_accuracy(pred, gold[held], weight[held])
            scores.setdefault("linear", []).append(accuracy)
    return {k: float(np.mean(v)) for k, v in scores.items() if v}, oof


def choose(cv: Mapping[str, float], candidates: list[str]) -> str:
    """The winner among `candidates` (simplest first) by their CV accuracies `cv`."""
    simplest = candidates[0]
    qualified = [simplest] + [
        name for name in candidates[1:] if cv.get(name, -1.0) >= cv.get(simplest, 0.0) + LEAD
    ]
    return max(qualified, key=lambda name: cv.get(name, 0.0))  # ties: the simpler one


def weighted_accuracy(pred: Any, gold: Any, weight: Any) -> float:
    """Share of weight on examples answered right (-1: unknown)."""
    total = float(weight.sum())
    return float((weight * (pred == gold)).sum()) / total if total > 0 else 0.0


def accept_threshold(oof: Any, gold: Any, weight: Any, routes: int) -> float:
    """The linear head's probability threshold, from out-of-fold probabilities.

    Among examples whose most probable class is a route, accepting one gains when the route is
    right and loses when the example is unknown; `best_cut` finds the threshold that gains most.
    A route answered wrongly for an in-scope example is a loss either way, so it is not counted.
    """
    if oof is None:  # too few examples to cross-validate: act when more likely right than not
        return NO_CV_ACCEPT
    top = oof.argmax(axis=1)
    routed = top < routes
    if not routed.any():
        return 0.0
    gain = weight * ((top == gold).astype(float) - (gold < 0).astype(float))
    cut, _ = best_cut(oof.max(axis=1)[routed], gain[routed])
    return float(min(max(cut, 0.0), 1.0))


def out_of_fold_accuracy(
    vectors: Any, gold: Any, weight: Any, fit: FitPredict, folds: int = CV_FOLDS
) -> float | None:
    """Weighted accuracy of `fit`'s out-of-fold answers over `folds` deterministic folds.

    For labelled sets too small for `cross_validate`: every example is answered once by a head
    fitted without its fold (unknown examples held out by topic, as there). None when fewer
    than two in-scope examples leave nothing to fold.
    """
    import numpy as np

    is_unknown = gold < 0
    if int((~is_unknown).sum()) < 2:
        return None
    pred = np.full(len(gold), -2)
    every = np.arange(len(gold))
    for held in topic_folds(vectors, is_unknown, min(folds, len(gold)), 0):
        train = np.setdiff1d(every, held)
        if len(held) == 0 or not (gold[train] >= 0).any():
            continue
        pred[held] = fit(train)(held)
    done = pred > -2
    return weighted_accuracy(pred[done], gold[done], weight[done]) if done.any() else None
