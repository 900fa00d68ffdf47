"""The LLM judge earns its place: `Router.fit` measures it on the band the semantic tier
abstains on (held out fold by fold) and keeps it only where it beats abstaining."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import pytest
from word_vectors import Words

from baton import ScriptedModel
from baton.models.base import ModelRequest
from baton.models.scripted import Step
from baton.routing import UNKNOWN, Labelled, LLMJudge, Route, Router, RouterFitReport, Rules
from baton.routing.evaluate import score
from baton.routing.judge_fit import JudgeFit, measure_judge
from baton.routing.judge_gate import DEFER, EVERY, Gate, Judged, best_gate, cross_validated
from baton.routing.semantic import Semantic

ROUTES = [
    Route("billing", ("refund my payment", "invoice copy please", "charge on my card")),
    Route("shipping", ("where is my parcel", "track parcel delivery", "late delivery of my order")),
    Route("tech", ("reset my password", "server is down", "app keeps crashing")),
]
PAIRS = [("refund", "parcel", "billing"), ("password", "invoice", "tech"),
         ("delivery", "server", "shipping")]  # fmt: skip


def labelled() -> list[Labelled]:
    """Clear queries, queries that share one word with each of two routes (the band: half of
    them belong to the first route, half to none) and unrelated ones."""
    out = [Labelled(f"{u} now", r.name) for r in ROUTES for u in r.utterances]
    for k in range(24):
        a, b, route = PAIRS[k % 3]
        label = route if k % 2 == 0 else None
        out.append(Labelled(f"{a} {b} w{k}", label, "in" if label else "oos"))
    out += [Labelled(f"weather joke q{k} z{k}", None, "oos") for k in range(6)]
    return out


GOLD = {x.text: x.label for x in labelled()}


def oracle(request: ModelRequest) -> Step:
    """A judge that is always right, and sure of it."""
    gold = GOLD.get(request.messages[-1].content or "")
    return ScriptedModel.say(f'{{"route": "{gold or UNKNOWN}", "confidence": "high"}}')


def contrarian(request: ModelRequest) -> Step:
    """A judge that is always wrong, and sure of it: it names a route no query belongs to."""
    gold = GOLD.get(request.messages[-1].content or "")
    enum = request.output_schema["properties"]["route"]["enum"] if request.output_schema else []
    wrong = next(n for n in enum if n not in (gold, UNKNOWN))
    return ScriptedModel.say(f'{{"route": "{wrong}", "confidence": "high"}}')


class Given(Semantic):
    """The semantic tier with the thresholds it is given (its fit changes nothing), so that
    its band is known: every query sharing under two words with a route's example."""

    def fit(self, labelled: Sequence[Labelled], **options: object) -> None:  # type: ignore[override]
        return None


def build(model: ScriptedModel, fitted: bool = False) -> tuple[Router, Semantic, LLMJudge]:
    """semantic -> judge; the semantic tier fitted by `Router.fit` when `fitted`."""
    if fitted:
        semantic = Semantic(Words("judge-gate-words-v1"), cache=False)
    else:
        semantic = Given(Words("judge-gate-words-v1"), thresholds=0.6, margin=0.0, cache=False)
    judge = LLMJudge(model)
    return Router([semantic, judge], fallback="unknown", routes=ROUTES), semantic, judge


def accuracies(router: Router, semantic: Semantic) -> tuple[float, float, list[int]]:
    """(router, semantic alone) accuracy on the labelled set, and the semantic tier's band."""
    items = labelled()
    verdicts = semantic.judge_many([x.text for x in items])
    alone = score(items, verdicts, [0.0] * len(items)).overall_accuracy
    full = router.evaluate_sync(items).overall_accuracy
    return full, alone, [i for i, v in enumerate(verdicts) if v.target is None]


def test_a_judge_that_is_always_wrong_is_turned_off(caplog: pytest.LogCaptureFixture) -> None:
    model = ScriptedModel(contrarian)
    router, semantic, judge = build(model)
    with caplog.at_level(logging.WARNING, logger="baton.routing.judge_fit"):
        report = router.fit(labelled())
    assert isinstance(report, RouterFitReport)
    fitted = report["llm"]
    assert isinstance(fitted, JudgeFit) and fitted.measured
    assert not fitted.enabled and not judge.enabled and fitted.threshold is None
    assert fitted.judge_accuracy is not None and fitted.abstain_accuracy is not None
    assert fitted.judge_accuracy <= fitted.abstain_accuracy
    assert "does not beat going without it" in fitted.reason and "turned off" in caplog.text
    assert "judge off" in report.summary()
    asked = len(model.requests)
    assert asked == fitted.calls and asked == fitted.n_judged >= 8
    # off: the router is exactly the semantic tier alone, and the model is never asked again
    full, alone, band = accuracies(router, semantic)
    assert band and full == pytest.approx(alone)
    assert len(model.requests) == asked
    decision = router.route_sync("refund parcel w0")
    assert decision.tier == "fallback" and "off: does not beat" in decision.verdicts[-1].detail


def test_a_judge_that_is_right_stays_on_and_lifts_the_band() -> None:
    model = ScriptedModel(oracle)
    router, semantic, judge = build(model)
    fitted = router.fit(labelled())["llm"]
    assert fitted.enabled and judge.enabled and judge.threshold is None  # acts on every answer
    assert fitted.every_accuracy == pytest.approx(1.0)
    assert fitted.gain is not None and fitted.gain > 0
    assert "beats going without it" in fitted.reason
    full, alone, band = accuracies(router, semantic)
    assert full > alone  # never below the semantic tier, and above it on the band
    items = labelled()
    on_band = [items[i] for i in band]
    with_judge = router.evaluate_sync(on_band).overall_accuracy
    without = sum(x.label is None for x in on_band) / len(on_band)
    assert with_judge == pytest.approx(1.0) and with_judge > without


def test_the_threshold_keeps_confident_answers_and_defers_on_the_rest() -> None:
    def mixed(request: ModelRequest) -> Step:
        gold = GOLD.get(request.messages[-1].content or "")
        if gold is not None:  # right, and sure
            return ScriptedModel.say(f'{{"route": "{gold}", "confidence": "high"}}')
        return ScriptedModel.say('{"route": "billing", "confidence": "low"}')  # wrong, unsure

    router, _, judge = build(ScriptedModel(mixed))
    fitted = router.fit(labelled())["llm"]
    assert fitted.enabled and judge.threshold == pytest.approx(0.75)
    assert fitted.threshold_accuracy == pytest.approx(1.0) == fitted.judge_accuracy
    assert fitted.every_accuracy is not None and fitted.every_accuracy < 1.0
    decision = asyncio.run(router.route("refund parcel w1"))  # unknown: the judge defers
    assert decision.tier == "fallback"
    assert "< threshold 0.75: defers" in decision.verdicts[-1].detail


async def test_measuring_refits_copies_and_leaves_the_semantic_tier_as_fitted() -> None:
    router, semantic, judge = build(ScriptedModel(oracle), fitted=True)
    router.fit(labelled(), judge=False)
    before, texts = semantic.fitted, [x.text for x in labelled()]
    verdicts = [v.target for v in semantic.judge_many(texts)]
    fitted = await measure_judge(router, judge, labelled())
    assert fitted.measured and semantic.fitted is before
    # only the review level may change: a route under it is proposed instead of decided
    assert semantic.review_below == fitted.review_below
    assert [v.target or v.proposal for v in semantic.judge_many(texts)] == verdicts


def test_judge_calls_during_fit_are_capped_and_seeded() -> None:
    first, second = ScriptedModel(oracle), ScriptedModel(oracle)
    a = build(first, fitted=True)[0].fit(labelled(), judge_calls=5)["llm"]
    b = build(second, fitted=True)[0].fit(labelled(), judge_calls=5)["llm"]
    assert len(first.requests) == 5 and a.n_judged == 5 and a.n_band > 5
    asked = [r.messages[-1].content for r in first.requests]
    assert asked == [r.messages[-1].content for r in second.requests]
    assert (a.enabled, a.threshold, a.judge_accuracy) == (b.enabled, b.threshold, b.judge_accuracy)
    assert a.enabled  # right on every judged query


def test_fit_without_the_judge_makes_no_call_and_keeps_its_state() -> None:
    model = ScriptedModel(contrarian)
    router, _, judge = build(model)
    report = router.fit(labelled(), judge=False)
    assert "llm" not in report and model.requests == [] and judge.enabled


def test_a_band_too_small_to_measure_leaves_the_judge_on_with_a_warning() -> None:
    model = ScriptedModel(contrarian)
    router, _, judge = build(model)
    report = router.fit(labelled()[:12])  # the clear queries and three of the band
    fitted = report["llm"]
    assert not fitted.measured and fitted.enabled and judge.enabled
    assert model.requests == []
    assert any(w.startswith("llm: the judge could not be measured") for w in report.warnings)


async def test_fit_inside_a_running_event_loop() -> None:
    router, _, judge = build(ScriptedModel(contrarian))
    report = router.fit(labelled())
    assert not report["llm"].enabled and not judge.enabled


async def test_rules_before_the_judge_shrink_its_band() -> None:
    model = ScriptedModel(oracle)
    rules = Rules({"billing": r"\brefund\b"})
    semantic = Given(Words("judge-gate-words-v1"), thresholds=0.6, margin=0.0, cache=False)
    router = Router([rules, semantic, LLMJudge(model)], routes=ROUTES)
    router.fit(labelled(), judge=False)
    judge = router.tiers[-1]
    assert isinstance(judge, LLMJudge)
    fitted = await measure_judge(router, judge, labelled(), apply=False)
    asked = [r.messages[-1].content or "" for r in model.requests]
    assert asked and not any(text.startswith("refund") for text in asked)
    assert fitted.n_judged == len(asked) and judge.threshold is None  # apply=False


def band(gold: str | None, route: str | None, confidence: float) -> Judged:
    return Judged(gold, None, None, route, confidence)


def pooled(gold: str | None, proposal: str, score: float, route: str, conf: float) -> Judged:
    return Judged(gold, proposal, score, route, conf)


def test_best_gate_prefers_deferring_on_ties() -> None:
    items = [band("a", "a", 0.75), band(None, "b", 0.25), band(None, None, 0.0)]
    assert best_gate(items, []) == (Gate(None, 0.75), 1.0)
    items = [band(None, "a", 0.75), band(None, "b", 0.25)]
    assert best_gate(items, []) == (DEFER, 1.0)  # the judge adds nothing: defer on all
    assert best_gate([band("a", "a", 0.5)], []) == (EVERY, 1.0)  # one confidence: no threshold


def test_a_review_level_lets_the_judge_correct_unsure_semantic_routes() -> None:
    items = [
        pooled("b", "a", 0.30, "b", 0.9),  # unsure and wrong: the judge fixes it
        pooled(None, "a", 0.35, UNKNOWN, 0.8),  # unsure, out of scope: the judge says so
        pooled("a", "a", 0.70, "b", 0.9),  # sure and right: the judge would break it
        band("c", "c", 0.6),
    ]
    gate, acc = best_gate(items, [0.4, 0.8])
    assert gate.level == 0.4 and acc == 1.0
    assert items[0].outcome(0.4, gate.threshold) == "b"
    assert items[1].outcome(0.4, gate.threshold) is None
    assert items[2].outcome(0.4, gate.threshold) == "a"  # above the level: not reviewed
    assert items[2].outcome(None, gate.threshold) == "a"  # no review: the route stands
    # an unsure judge defers: the proposal stands
    assert pooled("a", "a", 0.3, UNKNOWN, 0.2).outcome(0.4, 0.5) == "a"
    assert EVERY.level is None and not EVERY.filters and Gate(0.4, 0.5).filters
    assert cross_validated(items * 3, [0.4, 0.8], 3, 0) == pytest.approx(1.0)


def test_a_failing_model_counts_as_no_answer_and_fit_still_returns() -> None:
    router, _, judge = build(ScriptedModel([ScriptedModel.fail("model down")], loop=True))
    fitted = router.fit(labelled())["llm"]
    assert fitted.measured and not fitted.enabled and not judge.enabled
    assert fitted.answers is not None and fitted.answers["invalid"] == fitted.n_judged
    with pytest.raises(ValueError, match="judge=False"):
        router.fit(labelled(), judge_calls=0)


async def test_the_band_report_says_whether_the_judge_acts() -> None:
    from baton.routing.band import judge_band

    router, _, _ = build(ScriptedModel(contrarian))
    router.fit(labelled())
    band = await judge_band(router, labelled())
    assert band.judge_state.startswith("off: does not beat going without it")
    assert band.gain == 0.0 and "judge: off" in band.summary()


def confusable() -> list[Labelled]:
    """Clear queries (semantic score ~0.87, right) and confusable ones it accepts at ~0.58
    as billing, half of them wrongly: the review pool."""
    out = [Labelled(f"{u} now", r.name) for r in ROUTES for u in r.utterances]
    for k in range(8):
        out.append(Labelled(f"refund payment parcel z{k}", "billing" if k % 2 else "shipping"))
    return out


def judge_of(items: list[Labelled], right: bool) -> ScriptedModel:
    gold = {x.text: x.label for x in items}

    def answer(request: ModelRequest) -> Step:
        truth = gold.get(request.messages[-1].content or "") or UNKNOWN
        enum = request.output_schema["properties"]["route"]["enum"]  # type: ignore[index]
        said = truth if right else next(n for n in enum if n not in (truth, UNKNOWN))
        return ScriptedModel.say(f'{{"route": "{said}", "confidence": "high"}}')

    return ScriptedModel(answer)


def reviewing(model: ScriptedModel) -> tuple[Router, Semantic, LLMJudge]:
    semantic = Given(Words("judge-gate-words-v1"), thresholds=0.5, margin=0.0, cache=False)
    judge = LLMJudge(model)
    return Router([semantic, judge], fallback="unknown", routes=ROUTES), semantic, judge


def test_fit_turns_review_on_where_the_judge_corrects_unsure_routes() -> None:
    items = confusable()
    model = judge_of(items, right=True)
    router, semantic, judge = reviewing(model)
    fitted = router.fit(items)["llm"]
    assert judge.enabled and judge.threshold is None  # sure of every answer: nothing to filter
    assert fitted.enabled and fitted.n_review == 8 and fitted.review_below is not None
    assert semantic.review_below == fitted.review_below and 0.58 < fitted.review_below < 0.9
    assert "reviews semantic routes scored <" in fitted.summary()
    full, alone, _ = accuracies_on(router, semantic, items)
    assert alone == pytest.approx(13 / 17) and full == pytest.approx(1.0)
    asked = len(model.requests)
    clear = router.route_sync("refund my payment now")  # sure: decided without the judge
    assert (clear.target, clear.tier) == ("billing", "semantic") and len(model.requests) == asked
    unsure = router.route_sync("refund payment parcel z0")
    assert (unsure.target, unsure.tier) == ("shipping", "llm")
    assert unsure.verdicts[0].proposal == "billing" and "proposed for review" in (
        unsure.verdicts[0].detail
    )


def test_a_wrong_judge_gets_no_review_and_the_semantic_routes_stand() -> None:
    items = confusable()
    router, semantic, judge = reviewing(judge_of(items, right=False))
    fitted = router.fit(items)["llm"]
    assert not judge.enabled and not fitted.enabled
    assert fitted.review_below is None and semantic.review_below is None
    full, alone, _ = accuracies_on(router, semantic, items)
    assert full == pytest.approx(alone)


def test_a_proposed_route_stands_unless_the_judge_acts() -> None:
    def unsure(request: ModelRequest) -> Step:
        text = request.messages[-1].content or ""
        if "weather" in text:
            return ScriptedModel.say('{"route": "unknown", "confidence": "high"}')
        return ScriptedModel.say('{"route": "tech", "confidence": "low"}')

    semantic = Given(
        Words("judge-gate-words-v1"), thresholds=0.1, margin=0.0, cache=False, review_below=0.99
    )
    judge = LLMJudge(ScriptedModel(unsure), threshold=0.5)
    router = Router([semantic, judge], fallback="unknown", routes=ROUTES)
    kept = router.route_sync("refund my payment now")  # the judge is unsure: defers
    assert (kept.target, kept.tier) == ("billing", "semantic")
    assert "defers" in kept.verdicts[-1].detail and kept.verdicts[0].target is None
    dropped = router.route_sync("refund weather")  # the judge is sure it is out of scope
    assert dropped.target == "unknown" and dropped.tier == "fallback"
    judge.enabled = False  # off: every proposal stands
    assert router.route_sync("refund weather").target == "billing"


def accuracies_on(
    router: Router, semantic: Semantic, items: list[Labelled]
) -> tuple[float, float, list[int]]:
    """(router, semantic alone) accuracy on `items`; a proposal counts as the tier's answer."""
    verdicts = semantic.judge_many([x.text for x in items])
    alone = score(items, verdicts, [0.0] * len(items)).overall_accuracy
    full = router.evaluate_sync(items).overall_accuracy
    return full, alone, [i for i, v in enumerate(verdicts) if v.target is None]
