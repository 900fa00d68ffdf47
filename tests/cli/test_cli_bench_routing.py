"""`baton bench routing --spec`: the fit report, per-language figures, warm-up and `--json`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from baton.cli.app import app
from baton.models.scripted import ScriptedModel

SPEC: dict[str, Any] = {
    "name": "tiny-bilingual",
    "routes": [
        {"name": "billing", "utterances": ["where is my invoice", "我要退款"]},
        {"name": "orders", "utterances": ["where is my parcel", "我的订单到哪了"]},
    ],
    "calibration": [
        {"text": "send me the invoice", "label": "billing", "kind": "in", "lang": "en"},
        {"text": "发票什么时候开", "label": "billing", "kind": "in", "lang": "zh"},
        {"text": "has my parcel shipped", "label": "orders", "kind": "in", "lang": "en"},
        {"text": "包裹什么时候到", "label": "orders", "kind": "in", "lang": "zh"},
        {"text": "what's the weather", "label": None, "kind": "oos", "lang": "en"},
    ],
    "test": [
        {"text": "I need a refund please", "label": "billing", "kind": "in", "lang": "en"},
        {"text": "退款到账了吗", "label": "billing", "kind": "in", "lang": "zh"},
        {"text": "when does my order arrive", "label": "orders", "kind": "in", "lang": "en"},
        {"text": "我的 order 什么时候 ship", "label": "orders", "kind": "in", "lang": "mixed",
         "also": "billing"},
        {"text": "tell me a joke", "label": None, "kind": "oos", "lang": "en"},
        {"text": "讲个笑话", "label": None, "kind": "oos", "lang": "zh"},
    ],
}  # fmt: skip


@pytest.fixture
def spec_path(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(SPEC, ensure_ascii=False), encoding="utf-8")
    return path


def test_prints_the_fit_report_and_a_table_per_language(
    runner: CliRunner, spec_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from baton.routing import Router

    routed: list[str] = []
    route_sync = Router.route_sync

    def spy(self: Router, text: str) -> Any:
        routed.append(text)
        return route_sync(self, text)

    monkeypatch.setattr(Router, "route_sync", spy)
    out = tmp_path / "out" / "bench.json"
    result = runner.invoke(app, ["bench", "routing", "--spec", str(spec_path), "--json", str(out)])
    assert result.exit_code == 0, result.output
    text = result.output
    assert "fit on calibration:" in text and "semantic: " in text  # the fit report's summary
    assert "accuracy per language" in text
    for header in ("language", "overall", "in-scope", "out-of-scope"):
        assert header in text
    lines = {line.split()[0]: line for line in text.splitlines() if line.strip()}
    assert lines["en"].split()[1] == "3" and lines["zh"].split()[1] == "2"
    assert lines["mixed"].split()[1] == "1" and lines["mixed"].rstrip().endswith("-")
    assert routed == [SPEC["calibration"][0]["text"]]  # one warm-up query, not a test one

    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["tiers"] == "semantic" and doc["n_test"] == 6 and doc["n_calibration"] == 5
    assert doc["fit"]["summary"].startswith("semantic: ")
    assert isinstance(doc["fit"]["warnings"], list)
    report = doc["report"]
    assert report["n"] == 6 and set(report["by_lang"]) == {"en", "zh", "mixed"}
    assert report["by_lang"]["en"]["n_in"] == 2 and report["by_lang"]["en"]["n_out"] == 1
    assert report["by_lang"]["mixed"]["out_of_scope"] is None
    assert report["latency_p99_ms"] is not None
    assert "judge_not_called" not in doc


def test_fit_warnings_are_printed(runner: CliRunner, tmp_path: Path) -> None:
    """A fit on the routes' own examples is a guess, and the bench says so."""
    own = {
        **SPEC,
        "calibration": [
            {"text": "where is my invoice", "label": "billing", "kind": "in"},
            {"text": "where is my parcel", "label": "orders", "kind": "in"},
        ],
    }
    path = tmp_path / "own.json"
    path.write_text(json.dumps(own, ensure_ascii=False), encoding="utf-8")
    result = runner.invoke(app, ["bench", "routing", "--spec", str(path)])
    assert result.exit_code == 0, result.output
    assert "warning:" in result.output


def test_spec_without_languages_prints_no_language_table(runner: CliRunner, tmp_path: Path) -> None:
    plain = {
        "name": "plain",
        "routes": SPEC["routes"],
        "calibration": [{k: v for k, v in r.items() if k != "lang"} for r in SPEC["calibration"]],
        "test": [{k: v for k, v in r.items() if k not in ("lang", "also")} for r in SPEC["test"]],
    }
    path = tmp_path / "plain.json"
    path.write_text(json.dumps(plain, ensure_ascii=False), encoding="utf-8")
    result = runner.invoke(app, ["bench", "routing", "--spec", str(path)])
    assert result.exit_code == 0, result.output
    assert "overall accuracy" in result.output
    assert "accuracy per language" not in result.output


def test_with_the_judge_reports_latency_when_it_is_not_called(
    runner: CliRunner, spec_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = ScriptedModel(lambda request: ScriptedModel.say('{"route": "unknown"}'))
    monkeypatch.setattr("baton.routing.judge.resolve_model", lambda spec: model)
    out = tmp_path / "judge.json"
    args = ["bench", "routing", "--spec", str(spec_path), "--tiers", "semantic+llm"]
    result = runner.invoke(app, [*args, "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "accuracy per language" in result.output
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["tiers"] == "semantic+llm" and doc["model"] == "local"
    free = doc["judge_not_called"]
    assert 0 <= free["n"] <= 6
    if free["n"]:
        assert "latency when the judge is not called" in result.output
        assert free["latency_p99_ms"] is not None


def test_band_writes_json(
    runner: CliRunner, spec_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = ScriptedModel(lambda request: ScriptedModel.say('{"route": "unknown"}'))
    monkeypatch.setattr("baton.routing.judge.resolve_model", lambda spec: model)
    out = tmp_path / "band.json"
    args = ["bench", "routing", "--spec", str(spec_path), "--tiers", "semantic+llm"]
    result = runner.invoke(app, [*args, "--band", "2", "--json", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["seed"] == 0 and doc["band"]["n_queries"] == 6
    assert set(doc["band"]["semantic"]["by_lang"]) == {"en", "zh", "mixed"}


def test_band_without_the_judge_fails_before_fitting(runner: CliRunner, spec_path: Path) -> None:
    result = runner.invoke(app, ["bench", "routing", "--spec", str(spec_path), "--band", "2"])
    assert result.exit_code == 2 and "--tiers semantic+llm" in result.output
    assert "fit on calibration" not in result.output


def test_multi_intent_routes_each_request_as_a_team_would(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--multi-intent`: a request with two needs counts as routed to its first need, and a
    query whose parts asked the judge is not among the judge-free latencies."""
    spec = {
        **SPEC,
        "test": [
            # routed whole, the invoice wins; the first need is the parcel
            {"text": "where is my parcel, and also where is my invoice", "label": "orders",
             "kind": "multi", "lang": "en", "also": "billing"},
            {"text": "where is my parcel", "label": "orders", "kind": "in", "lang": "en"},
        ],
    }  # fmt: skip
    path = tmp_path / "multi.json"
    path.write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    model = ScriptedModel(lambda request: ScriptedModel.say('{"route": "unknown"}'))
    monkeypatch.setattr("baton.routing.judge.resolve_model", lambda spec: model)
    out = tmp_path / "multi-out.json"
    args = ["bench", "routing", "--spec", str(path), "--tiers", "semantic+llm", "--multi-intent"]
    result = runner.invoke(app, [*args, "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "multi-intent" in result.output
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["multi_intent"] is True
    assert doc["report"]["by_kind"]["multi"] == 1.0
    assert doc["judge_not_called"]["n"] <= 2
