"""Spec rows' `lang` and `also`, and the per-language figures of a routing report (no model)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from baton.routing.base import UNKNOWN, Labelled, RouteDecision, TierVerdict
from baton.routing.evaluate import SpecItem, lang_of, load_spec, score

ROUTES = [{"name": "billing", "utterances": ["refund"]}, {"name": "orders", "utterances": ["x"]}]


def write(tmp_path: Path, test: list[dict[str, Any]], **extra: Any) -> Path:
    path = tmp_path / "spec.json"
    doc = {"name": "t", "routes": ROUTES, "calibration": [], "test": test, **extra}
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return path


def test_load_spec_keeps_lang_and_also(tmp_path: Path) -> None:
    rows: list[dict[str, Any]] = [
        {"text": "退款", "label": "billing", "kind": "in", "lang": "zh"},
        {"text": "refund and where is it", "label": "billing", "kind": "multi", "lang": "en",
         "also": "orders"},
        {"text": "a list too", "label": "orders", "kind": "multi", "also": ["billing"]},
    ]  # fmt: skip
    _, _, test = load_spec(write(tmp_path, rows))
    assert test[0] == SpecItem("退款", "billing", "in", lang="zh")
    assert test[1] == SpecItem("refund and where is it", "billing", "multi", "en", ("orders",))
    assert test[2] == SpecItem("a list too", "orders", "multi", None, ("billing",))
    assert all(isinstance(item, Labelled) for item in test)  # usable wherever Labelled is
    assert [lang_of(item) for item in test] == ["zh", "en", None]


def test_load_spec_without_the_fields_reads_plain_labelled(tmp_path: Path) -> None:
    _, _, test = load_spec(write(tmp_path, [{"text": "refund", "label": "billing"}]))
    assert test == [Labelled("refund", "billing", "in")]
    assert type(test[0]) is Labelled and lang_of(test[0]) is None


def test_load_spec_rejects_also_that_is_no_route(tmp_path: Path) -> None:
    row = {"text": "refund", "label": "billing", "kind": "multi", "also": "returns"}
    with pytest.raises(ValueError, match=r"test\[0\]: also 'returns' is no route"):
        load_spec(write(tmp_path, [row]))


def verdict(target: str | None, ms: float = 1.0) -> TierVerdict:
    return TierVerdict("semantic", target, latency_ms=ms)


def test_report_gives_accuracy_per_language() -> None:
    items = [
        SpecItem("a", "billing", lang="en"),
        SpecItem("b", "orders", lang="en"),
        SpecItem("c", None, "oos", lang="en"),
        SpecItem("d", "billing", lang="zh"),
        SpecItem("e", None, "oos", lang="zh"),
        SpecItem("f", None, "oos", lang="zh"),
        Labelled("g", "orders"),  # no language: counted overall only
    ]
    answers = ["billing", "billing", None, "billing", UNKNOWN, "orders", "orders"]
    report = score(items, [verdict(a) for a in answers], [1.0] * len(items))
    assert list(report.by_lang) == ["en", "zh"]
    en, zh = report.by_lang["en"], report.by_lang["zh"]
    assert (en.n, en.n_in, en.n_out) == (3, 2, 1)
    assert en.overall == pytest.approx(2 / 3) and en.in_scope == 0.5 and en.out_of_scope == 1.0
    assert (zh.n, zh.n_in, zh.n_out) == (3, 1, 2)
    assert zh.overall == pytest.approx(2 / 3) and zh.in_scope == 1.0 and zh.out_of_scope == 0.5
    assert report.n == 7 and report.overall_accuracy == pytest.approx(5 / 7)
    assert report.lang_rows() == [
        ("en", "0.667 (3)", "0.500 (2)", "1.000 (1)"),
        ("zh", "0.667 (3)", "1.000 (1)", "0.500 (2)"),
    ]
    assert "en        overall 0.667" in report.summary()


def test_language_without_out_of_scope_queries_shows_a_dash() -> None:
    items = [SpecItem("a", "billing", lang="mixed")]
    report = score(items, [verdict("billing")], [1.0])
    assert math.isnan(report.by_lang["mixed"].out_of_scope)
    assert report.lang_rows() == [("mixed", "1.000 (1)", "1.000 (1)", "-")]


def test_report_without_languages_has_none() -> None:
    report = score([Labelled("a", "billing")], [verdict("billing")], [1.0])
    assert report.by_lang == {} and report.lang_rows() == []
    assert report.to_dict()["by_lang"] == {}


def test_to_dict_is_json_ready() -> None:
    items = [SpecItem("a", "billing", lang="zh"), SpecItem("b", "orders", lang="zh")]
    report = score(items, [verdict("billing", 2.0), verdict(None, 4.0)], [2.0, 4.0])
    data = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert data["n"] == 2 and data["overall_accuracy"] == 0.5
    assert data["unknown_rejection"] is None  # nan: no unknown query
    assert data["by_lang"]["zh"] == {
        "n": 2, "overall": 0.5, "in_scope": 0.5, "out_of_scope": None, "n_in": 2, "n_out": 0,
    }  # fmt: skip
    assert data["tiers"]["semantic"]["n"] == 1 and data["by_kind"] == {"in": 0.5}
    assert data["latency_p50_ms"] == 3.0


def test_latency_of_a_slice() -> None:
    items = [Labelled("a", "billing"), Labelled("b", "orders"), Labelled("c", None)]
    decisions = [
        RouteDecision("billing", "semantic", latency_ms=2.0),
        RouteDecision("orders", "llm", latency_ms=4000.0),
        RouteDecision("unknown", "fallback", latency_ms=4.0),
    ]
    report = score(items, decisions, [d.latency_ms for d in decisions])
    p50, p99, n = report.latency(lambda o: o.tier != "llm")
    assert n == 2 and p50 == 3.0 and p99 == pytest.approx(3.98)
    assert math.isnan(report.latency(lambda o: False)[0])
