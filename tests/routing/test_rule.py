"""The decision rule's search: thresholds, margin and reject gap come from the labelled scores."""

from __future__ import annotations

import numpy as np
import pytest

from baton.routing.rule import best_cut, fit_rule, ranked


def test_best_cut_splits_halfway_between_kept_and_dropped_scores() -> None:
    scores = np.array([0.9, 0.8, 0.4, 0.3])
    gain = np.array([1.0, 1.0, -1.0, -1.0])
    cut, value = best_cut(scores, gain)
    assert cut == pytest.approx(0.6) and value == 2.0
    # nothing worth accepting: the cut sits just above the best score
    cut, value = best_cut(scores, -np.abs(gain))
    assert cut > 0.9 and value == 0.0


def test_ranked_gives_top_route_score_and_margin() -> None:
    pred, top, margins = ranked(np.array([[0.2, 0.7, 0.5], [0.9, 0.1, 0.3]]))
    assert pred.tolist() == [1, 0]
    assert top.tolist() == pytest.approx([0.7, 0.9]) and margins.tolist() == pytest.approx(
        [0.2, 0.6]
    )
    _, _, single = ranked(np.array([[0.4], [0.6]]))
    assert np.isinf(single).all()  # one route: no runner-up


def test_thresholds_follow_where_in_scope_and_unknown_scores_separate() -> None:
    # route 0's in-scope examples score 0.70-0.80, its unknowns 0.50-0.55; route 1 sits lower
    matrix = np.array(
        [[0.80, 0.1], [0.75, 0.1], [0.70, 0.1], [0.55, 0.1], [0.50, 0.1],
         [0.1, 0.60], [0.1, 0.58], [0.1, 0.56], [0.1, 0.40], [0.1, 0.35]]
    )  # fmt: skip
    gold = np.array([0, 0, 0, -1, -1, 1, 1, 1, -1, -1])
    rule = fit_rule(matrix, gold, None, np.ones(len(gold)), prior=0.0)
    assert 0.55 < rule.thresholds[0] < 0.70
    assert 0.40 < rule.thresholds[1] < 0.56
    assert rule.apply(matrix).tolist() == gold.tolist()
    # shifted data moves the thresholds with it: nothing is a constant
    shifted = fit_rule(matrix + 0.1, gold, None, np.ones(len(gold)), prior=0.0)
    assert shifted.thresholds == pytest.approx(rule.thresholds + 0.1)


def test_per_route_thresholds_shrink_toward_the_global_one() -> None:
    matrix = np.array([[0.9, 0.1], [0.85, 0.1], [0.6, 0.1], [0.1, 0.5], [0.1, 0.3]])
    gold = np.array([0, 0, -1, 1, -1])
    alone = fit_rule(matrix, gold, None, np.ones(5), prior=0.0)
    shrunk = fit_rule(matrix, gold, None, np.ones(5), prior=1000.0)
    # the global threshold (0.725) suits route 0; route 1's own data wants a lower one
    assert alone.thresholds[1] < alone.threshold - 0.2
    assert alone.thresholds[1] < shrunk.thresholds[1] < shrunk.threshold
    assert shrunk.thresholds[1] == pytest.approx(shrunk.threshold, abs=0.01)
    assert shrunk.wins.tolist() == alone.wins.tolist() == [3, 2]


def test_reject_gap_is_used_only_when_it_helps() -> None:
    # the unknown example scores higher than the in-scope ones, but sits near known unknowns
    matrix = np.array([[0.8, 0.1], [0.79, 0.1], [0.81, 0.1]])
    gold = np.array([0, 0, -1])
    near = np.array([0.2, 0.25, 0.75])
    rule = fit_rule(matrix, gold, near, np.ones(3))
    assert np.isfinite(rule.reject_gap) and 0.06 < rule.reject_gap <= 0.54
    assert rule.apply(matrix, near).tolist() == [0, 0, -1]
    # when scores alone separate everything, the reject set stays off
    plain = fit_rule(np.array([[0.8, 0.1], [0.3, 0.1]]), np.array([0, -1]), np.array([0.2, 0.2]),
                     np.ones(2))  # fmt: skip
    assert plain.reject_gap == -np.inf


def test_a_single_route_is_fitted_without_a_margin() -> None:
    matrix = np.array([[0.9], [0.8], [0.3]])
    rule = fit_rule(matrix, np.array([0, 0, -1]), None, np.ones(3))
    assert rule.margin == 0.0
    assert rule.apply(matrix).tolist() == [0, 0, -1]
