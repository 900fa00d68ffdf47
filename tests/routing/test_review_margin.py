"""Routes the semantic tier accepts while unsure between two of them (a small lead over the
runner-up) are proposed for the judge's review; when the judge has no valid or confident answer
the semantic route stands, so on those queries the judge never makes the router worse."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from word_vectors import Words

from baton import ScriptedModel
from baton.models.base import ModelRequest
from baton.models.scripted import Step
from baton.routing import UNKNOWN, Labelled, LLMJudge, Route, Router
from baton.routing.judge import CONFIDENCE
from baton.routing.judge_fit import _review_pool
from baton.routing.judge_gate import Gate, Judged, best_gate
from baton.routing.semantic import REVIEW_SHARE, Semantic, lead_of, review_margin_of

ROUTES = [
    Route("billing", ("refund my payment", "invoice copy please", "charge on my card")),
    Route("shipping", ("where is my parcel", "track parcel delivery", "late delivery of my order")),
    Route("tech", ("reset my password", "server is down", "app keeps crashing")),
]
WORDS = ["refund", "payment", "invoice", "card", "parcel", "delivery", "track", "order",
         "password", "server", "down", "crashing", "weather", "joke", "my", "now"]  # fmt: skip
TIED = "refund payment track parcel"
"""Two words of a billing example and two of a shipping one: accepted with a lead of 0."""
CLEAR = "refund my payment now"
WHEN = ("now", "please", "today")


def semantic(margin: float | None = 0.1) -> Semantic:
    """A tier with given thresholds (it routes any query sharing words with an example)."""
    return Semantic(
        Words("review-margin-words-v1"), thresholds=0.3, margin=0.0, cache=False,
        review_margin=margin,
    )  # fmt: skip


def answering(route: str, confidence: str = "high") -> ScriptedModel:
    return ScriptedModel(
        lambda r: ScriptedModel.say(f'{{"route": "{route}", "confidence": "{confidence}"}}')
    )


def routed(tier: Semantic, model: ScriptedModel, **judge: float | None) -> Router:
    return Router([tier, LLMJudge(model, **judge)], fallback="unknown", routes=ROUTES)


def test_a_route_unsure_by_margin_is_proposed_and_the_judge_is_asked() -> None:
    tier = semantic(margin=0.1)
    router = routed(tier, model := answering("shipping"))
    unsure = tier.routes and tier.judge(TIED)
    assert unsure and unsure.target is None and unsure.proposal == "billing"
    assert "under the review margin 0.100: proposed for review" in unsure.detail
    decision = router.route_sync(TIED)  # the judge is sure it is shipping: it overturns
    assert (decision.target, decision.tier) == ("shipping", "llm") and len(model.requests) == 1
    clear = router.route_sync(CLEAR)  # a clear lead: decided, no model call
    assert (clear.target, clear.tier) == ("billing", "semantic") and len(model.requests) == 1


def test_without_a_review_margin_the_route_is_decided() -> None:
    model = answering("shipping")
    decision = routed(semantic(margin=None), model).route_sync(TIED)
    assert (decision.target, decision.tier) == ("billing", "semantic") and not model.requests


def invalid(request: ModelRequest) -> Step:
    return ScriptedModel.say("no idea")


def failing(request: ModelRequest) -> Step:
    return ScriptedModel.fail("model down")


@pytest.mark.parametrize(
    "model",
    [
        answering("shipping", "low"),  # another route, unsure
        answering("shipping", "medium"),  # under the default review threshold ("high")
        answering(UNKNOWN, "medium"),  # out of scope, unsure
        ScriptedModel(invalid),  # no valid answer after a re-ask
        ScriptedModel(failing),  # the model fails
    ],
    ids=["low", "medium", "unknown-medium", "invalid", "failing"],
)
def test_a_judge_that_defers_leaves_the_semantic_route(model: ScriptedModel) -> None:
    decision = routed(semantic(), model).route_sync(TIED)
    assert model.requests  # it was asked
    assert (decision.target, decision.tier) == ("billing", "semantic")
    assert decision.verdicts[-1].target is None


def test_the_review_threshold_is_what_overturning_needs() -> None:
    sure_enough = routed(semantic(), answering("shipping", "medium"), review_threshold=0.5)
    assert sure_enough.route_sync(TIED).target == "shipping"
    sure_of_unknown = routed(semantic(), answering(UNKNOWN, "high"))
    assert sure_of_unknown.route_sync(TIED).tier == "fallback"
    # agreeing with the proposal needs no more confidence than any answer
    agrees = routed(semantic(), answering("billing", "low"))
    assert (agrees.route_sync(TIED).target, agrees.route_sync(TIED).tier) == ("billing", "llm")
    # on the band (the tier abstained) only `threshold` applies
    abstaining = Semantic(Words("review-margin-words-v1"), thresholds=0.99, cache=False)
    band = routed(abstaining, answering("shipping", "low")).route_sync(TIED)
    assert (band.target, band.tier) == ("shipping", "llm")
    low = routed(semantic(), answering("shipping", "medium"))
    detail = low.route_sync(TIED).verdicts[-1].detail
    assert "confidence 0.50 < review threshold 0.75: defers to the proposed billing" in detail


BEHAVIOURS = {
    "low": lambda r: ScriptedModel.say('{"route": "tech", "confidence": "low"}'),
    "medium-unknown": lambda r: ScriptedModel.say('{"route": "unknown", "confidence": "medium"}'),
    "invalid": invalid,
    "failing": failing,
}


@settings(max_examples=60, deadline=None)
@given(
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=6),
    margin=st.floats(0.0, 1.0),
    behaviour=st.sampled_from(sorted(BEHAVIOURS)),
)
def test_unsure_routes_reach_the_judge_and_stand_when_it_defers(
    words: list[str], margin: float, behaviour: str
) -> None:
    tier = semantic(margin=margin)
    model = ScriptedModel(BEHAVIOURS[behaviour])
    router = routed(tier, model)
    text = " ".join(words)
    alone = tier.judge(text)
    decision = router.route_sync(text)
    if alone.target not in (None, UNKNOWN):  # sure: decided without the judge
        assert lead_of(alone.candidates) >= margin and not model.requests
        assert decision.target == alone.target
    elif alone.proposal is not None:  # unsure by margin: the judge is asked, the route stands
        assert lead_of(alone.candidates) < margin and model.requests
        assert decision.target == alone.proposal  # it stands, or the judge agreed with it
    elif alone.target is None:  # abstained: the band, as before
        assert model.requests


@settings(max_examples=100, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.integers(-1, 2), st.integers(-1, 2), st.floats(0.0, 1.0)),
        min_size=1,
        max_size=40,
    )
)
def test_the_fitted_review_margin_covers_held_out_mistakes_within_its_share(
    rows: list[tuple[int, int, float]],
) -> None:
    pred = np.array([p for p, _, _ in rows])
    gold = np.array([g for _, g, _ in rows])
    lead = np.array([x for _, _, x in rows])
    margin = review_margin_of(pred, gold, lead)
    accepted = pred >= 0
    wrong = accepted & (pred != gold)
    if margin is None:
        if wrong.any():  # every mistake led by more than the share allows
            cap = np.quantile(lead[accepted], REVIEW_SHARE)
            assert (lead[wrong] >= cap).all()
        return
    assert margin <= np.quantile(lead[accepted], REVIEW_SHARE) + 1e-12
    under = wrong & (lead < np.quantile(lead[accepted], REVIEW_SHARE))
    assert under.any() and (lead[under] < margin).all()  # each reviewable mistake is reviewed


def labelled() -> list[Labelled]:
    """Clear queries, a few that tie a billing and a shipping example (half each way: the
    tier is wrong on half of them, with no lead) and unrelated ones."""
    out = [Labelled(f"{u} {w}", r.name) for r in ROUTES for u in r.utterances for w in WHEN]
    for k in range(4):
        out.append(Labelled(f"refund parcel q{k}", "billing" if k % 2 else "shipping"))
    out += [Labelled(f"weather joke w{k} z{k}", None, "oos") for k in range(10)]
    return out


def test_fit_sets_the_review_margin_from_held_out_decisions() -> None:
    tier = Semantic(Words("review-margin-words-v1"), cache=False, review_margin="fit")
    Router([tier], routes=ROUTES).fit(labelled(), judge=False)
    fitted = tier.fitted
    assert fitted is not None and tier.fit_review_margin
    assert fitted.review_margin is not None and tier.review_margin == fitted.review_margin
    assert fitted.review_margin > 0 and "proposed for review" in fitted.summary()
    tie = tier.judge("refund parcel q9")  # held out: the tie's route is proposed, not decided
    assert tie.target is None and tie.proposal is not None
    plain = Semantic(Words("review-margin-words-v1"), cache=False)
    Router([plain], routes=ROUTES).fit(labelled(), judge=False)
    assert plain.review_margin is None and plain.fitted is not None
    assert plain.fitted.review_margin is None
    with pytest.raises(ValueError, match="review_margin"):
        Semantic(Words("review-margin-words-v1"), cache=False, review_margin="auto")  # type: ignore[arg-type]


def pooled(gold: str | None, route: str | None, conf: float, lead: float) -> Judged:
    """A review-pool query the semantic tier accepted as `a` with a high score."""
    return Judged(gold, "a", 0.9, route, conf, lead)


def test_a_gate_reviews_by_margin_and_overturns_only_when_sure() -> None:
    items = [
        pooled("b", "b", 0.9, 0.05),  # close call, wrong, the judge is sure: fixed
        pooled("a", "b", 0.6, 0.08),  # close call, right, the judge is unsure: must stand
        pooled("a", "b", 0.9, 0.6),  # a clear lead: never reviewed
    ]
    assert Gate(margin=0.1).outcome(items[0]) == "b"
    assert Gate(margin=0.1).outcome(items[1]) == "b"  # no review threshold: overturned
    assert Gate(margin=0.1, review_threshold=0.7).outcome(items[1]) == "a"
    assert Gate(margin=0.1).outcome(items[2]) == "a" and Gate().outcome(items[0]) == "a"
    gate, acc = best_gate(items, [], [0.1, 0.7])
    assert acc == 1.0 and gate.margin == 0.1 and gate.level is None
    assert 0.6 < gate.review_threshold <= 0.9 and gate.review_filters


def test_the_review_pool_holds_routes_unsure_by_margin() -> None:
    from baton.routing.base import TierVerdict

    def accepted(score: float, lead: float) -> list[TierVerdict]:
        candidates = [("a", score), ("b", score - lead)]
        return [TierVerdict("semantic", "a", score, candidates)]

    verdicts = [accepted(0.9, 0.02), accepted(0.9, 0.5), accepted(0.9, 0.6), accepted(0.3, 0.6)]
    verdicts.append([TierVerdict("semantic", None, 0.2, [("a", 0.2), ("b", 0.1)])])
    pool, levels, margins = _review_pool(verdicts)
    assert 0 in pool and 3 in pool and 4 not in pool  # unsure by margin, by score; band apart
    assert margins and levels and all(not math.isinf(m) for m in margins)


def test_the_default_review_threshold_is_the_high_level() -> None:
    assert LLMJudge(answering("billing")).review_threshold == CONFIDENCE["high"]
