"""`baton route` and `baton bench routing`."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from baton.cli.app import app


def test_route_prints_every_tier_and_the_decision(runner: CliRunner, in_repo: None) -> None:
    result = runner.invoke(app, ["route", "baton.desk.routed:team", "重启服务器 srv-bj-001"])
    assert result.exit_code == 0, result.output
    assert "rules" in result.output and "tech_support" in result.output
    assert "decision: tech_support" in result.output


def test_route_on_a_team_without_a_router_says_so(runner: CliRunner, in_repo: None) -> None:
    result = runner.invoke(app, ["route", "examples.customer_service:team", "hi"])
    assert result.exit_code == 2
    assert "has no router" in result.output


def test_bench_routing_fits_on_calibration_and_reports_on_test(
    runner: CliRunner, tmp_path: Path
) -> None:
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
        ],
    }
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    result = runner.invoke(app, ["bench", "routing", "--spec", str(path)])
    assert result.exit_code == 0, result.output
    assert "overall accuracy" in result.output and "latency p99" in result.output
    assert "semantic head: nearest" in result.output  # too few examples to compare heads
    bad = runner.invoke(app, ["bench", "routing", "--spec", str(tmp_path / "nope.json")])
    assert bad.exit_code == 2 and "cannot read the spec" in bad.output
