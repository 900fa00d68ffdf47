"""The linear head's solver, and the semantic tier choosing between its two heads."""

from __future__ import annotations

import numpy as np
import pytest
from test_semantic import WordsEncoder

from baton.routing.base import UNKNOWN, Labelled, Route
from baton.routing.folds import topic_folds, topics
from baton.routing.linear import fit_linear
from baton.routing.semantic import Semantic


def blobs(seed: int = 0, per: int = 40, dim: int = 16, classes: int = 3) -> tuple:
    """Unit vectors around `classes` random centres, with some overlap."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(classes, dim))
    x = np.concatenate([c + rng.normal(scale=1.2, size=(per, dim)) for c in centres])
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y = np.repeat(np.arange(classes), per)
    return x.astype(np.float32), y


def test_fit_converges_and_gives_probabilities() -> None:
    x, y = blobs()
    head = fit_linear(x, y, 3, c=10.0)
    assert head.converged and head.iterations < 500
    proba = head.proba(x)
    assert proba.shape == (len(x), 3)
    assert np.allclose(proba.sum(axis=1), 1.0, atol=1e-5)
    assert (proba.argmax(axis=1) == y).mean() > 0.9


def test_gradient_is_zero_at_the_optimum() -> None:
    """At the optimum of c * loss + |W|^2 / 2: W = -c X^T (P - Y) and sum(P - Y) = 0."""
    x, y = blobs(seed=1)
    c = 3.0
    head = fit_linear(x, y, 3, c=c, tol=1e-8)
    residual = head.proba(x).astype(np.float64) - np.eye(3)[y]
    assert np.abs(head.weights + c * x.T.astype(np.float64) @ residual).max() < 1e-3
    assert np.abs(residual.sum(axis=0)).max() < 1e-3


def test_stronger_regularisation_shrinks_the_weights() -> None:
    x, y = blobs(seed=2)
    loose, tight = fit_linear(x, y, 3, c=100.0), fit_linear(x, y, 3, c=0.1)
    assert np.linalg.norm(tight.weights) < np.linalg.norm(loose.weights)


def test_sample_weights_count_like_repeated_rows() -> None:
    x, y = blobs(seed=3, per=10)
    weights = np.where(np.arange(len(y)) % 2 == 0, 2.0, 1.0)
    repeated = np.concatenate([x, x[::2]]), np.concatenate([y, y[::2]])
    a = fit_linear(x, y, 3, sample_weight=weights, tol=1e-9)
    b = fit_linear(*repeated, 3, tol=1e-9)
    assert np.abs(a.proba(x) - b.proba(x)).max() < 1e-3


def test_agrees_with_scikit_learn() -> None:
    sklearn = pytest.importorskip("sklearn.linear_model", reason="scikit-learn not installed")
    x, y = blobs(seed=4, dim=32, classes=4)
    ours = fit_linear(x, y, 4, c=10.0, tol=1e-9)
    theirs = sklearn.LogisticRegression(C=10.0, tol=1e-10, max_iter=10_000).fit(x, y)
    assert np.abs(ours.proba(x) - theirs.predict_proba(x)).max() < 1e-3


def test_bad_input_is_refused() -> None:
    x, y = blobs()
    with pytest.raises(ValueError, match="two classes"):
        fit_linear(x, np.zeros(len(x), dtype=int), 1)
    with pytest.raises(ValueError, match="out of range"):
        fit_linear(x, y, 2)


def test_topic_folds_keep_a_topic_together() -> None:
    # unknown rows 0-2 are one topic (near-duplicates), 3 and 4 are others; 5-9 are in scope
    rng = np.random.default_rng(0)
    base = rng.normal(size=(4, 8))
    rows = [base[0], base[0] + 0.01, base[0] - 0.01, base[1], base[2]]
    rows += list(rng.normal(size=(5, 8)))
    vectors = np.array(rows) / np.linalg.norm(rows, axis=1, keepdims=True)
    is_unknown = np.array([True] * 5 + [False] * 5)
    assert topics(vectors[:5])[:3] == [0, 0, 0]
    for seed in range(4):
        folds = topic_folds(vectors, is_unknown, 3, seed)
        assert sorted(int(i) for f in folds for i in f) == list(range(10))
        holding = [k for k, f in enumerate(folds) if 0 in f]
        assert all(i in folds[holding[0]] for i in (1, 2))


# -- the two heads in the semantic tier ------------------------------------------------------

ROUTES = [
    Route("billing", ("refund my order", "invoice copy", "charged twice")),
    Route("shipping", ("where is my parcel", "track delivery", "late package")),
]


def labelled_set() -> list[Labelled]:
    """Enough in-scope and unknown examples for the tier to compare its heads."""
    items = []
    for i in range(12):
        items.append(Labelled(f"refund order {i}", "billing"))
        items.append(Labelled(f"parcel delivery {i}", "shipping"))
        items.append(Labelled(f"weather poem {i}", None))
    return items


def test_few_examples_keep_the_nearest_head() -> None:
    tier = Semantic(WordsEncoder(), cache=False)
    tier.bind(ROUTES)
    fit = tier.fit([Labelled("refund order", "billing"), Labelled("weather", None)])
    assert fit.head == "nearest" and fit.cv_accuracy == {} and fit.accept is None


def test_auto_compares_the_candidates_by_cross_validation() -> None:
    tier = Semantic(WordsEncoder(), cache=False)
    tier.bind(ROUTES)
    fit = tier.fit(labelled_set())
    assert set(fit.cv_accuracy) == {"nearest", "nearest+learned", "linear"}
    cv = fit.cv_accuracy
    qualified = ["nearest"] + [
        n for n in ("nearest+learned", "linear") if cv[n] >= cv["nearest"] + 0.01
    ]
    winner = max(qualified, key=cv.__getitem__)
    assert fit.head == ("linear" if winner == "linear" else "nearest")
    assert (fit.learned_examples > 0) == (winner == "nearest+learned")


def test_the_caller_can_decide_head_and_learned_examples() -> None:
    tier = Semantic(WordsEncoder(), cache=False)
    tier.bind(ROUTES)
    forced = tier.fit(labelled_set(), head="nearest", learn_examples=False)
    assert forced.head == "nearest" and forced.cv_accuracy == {} and forced.learned_examples == 0
    nearest = tier.fit(labelled_set(), head="nearest")  # CV between the two nearest variants
    assert set(nearest.cv_accuracy) == {"nearest", "nearest+learned"}
    learned = tier.fit(labelled_set(), learn_examples=True)  # CV between it and the linear head
    assert set(learned.cv_accuracy) == {"nearest+learned", "linear"}


def test_linear_head_routes_and_answers_unknown() -> None:
    tier = Semantic(WordsEncoder(), cache=False, head="linear")
    tier.bind(ROUTES)
    fit = tier.fit(labelled_set())
    assert fit.head == "linear" and fit.accept is not None and 0.0 <= fit.accept <= 1.0
    refund = tier.judge("refund order 99")
    assert refund.target == "billing" and "linear head" in refund.detail
    assert [name for name, _ in refund.candidates] == ["billing", "shipping"]
    assert tier.judge("weather poem 99").target in (UNKNOWN, None)


def test_changed_routes_drop_the_linear_head() -> None:
    tier = Semantic(WordsEncoder(), cache=False, head="linear")
    tier.bind(ROUTES)
    tier.fit(labelled_set())
    tier.bind([*ROUTES, Route("returns", ("send it back", "return label"))])
    verdict = tier.judge("send it back")
    assert "linear head" not in verdict.detail  # its classes were the old routes


def test_bad_head_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="head must be one of"):
        Semantic(WordsEncoder(), cache=False, head="forest")
    with pytest.raises(ValueError, match="linear_c"):
        Semantic(WordsEncoder(), cache=False, linear_c=0)
    tier = Semantic(WordsEncoder(), cache=False)
    tier.bind(ROUTES)
    with pytest.raises(ValueError, match="head must be one of"):
        tier.fit(labelled_set(), head="forest")


def test_a_forced_linear_head_without_enough_examples_acts_above_one_half() -> None:
    tier = Semantic(WordsEncoder(), cache=False, head="linear")
    tier.bind(ROUTES)
    fit = tier.fit([Labelled("refund order", "billing"), Labelled("weather", None)])
    assert fit.head == "linear" and fit.cv_accuracy == {} and fit.accept == 0.5


def test_choose_keeps_the_simplest_unless_another_clearly_wins() -> None:
    from baton.routing.selection import choose

    names = ["nearest", "nearest+learned", "linear"]
    assert choose({}, names) == "nearest"  # nothing compared
    assert choose({"nearest": 0.85, "nearest+learned": 0.855, "linear": 0.859}, names) == "nearest"
    assert choose({"nearest": 0.85, "nearest+learned": 0.87, "linear": 0.865}, names) == (
        "nearest+learned"
    )
    assert choose({"nearest": 0.85, "nearest+learned": 0.87, "linear": 0.88}, names) == "linear"


def test_a_linear_head_with_one_class_says_what_it_needs() -> None:
    tier = Semantic(WordsEncoder(), cache=False, head="linear")
    tier.bind([ROUTES[0]])
    with pytest.raises(ValueError, match="two routes, or unknown examples"):
        tier.fit([Labelled("refund order", "billing")])
