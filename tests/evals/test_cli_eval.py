"""`baton eval` end to end through typer's CliRunner, and its clear errors."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from baton.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
ENV = {"COLUMNS": "200", "FORCE_COLOR": None, "NO_COLOR": "1", "TERM": "dumb"}


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.chdir(ROOT)
    return CliRunner(env=ENV)


def test_the_quickstart_runs_and_writes_both_reports(runner: CliRunner, tmp_path: Path) -> None:
    out_json, out_html = tmp_path / "r.json", tmp_path / "r.html"
    result = runner.invoke(
        app,
        ["eval", "examples/eval_quickstart.yaml", "--store", "memory://", "--json", str(out_json),
         "--html", str(out_html), "--repeat", "2"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "route accuracy      8/8 = 100.0 %" in result.output
    assert "pass^2" in result.output and "baton trace eval-" in result.output
    doc = json.loads(out_json.read_text())
    assert doc["metrics"]["pass_k"] == 1.0 and doc["summary"]["repeat"] == 2
    assert "Route confusion matrix" in out_html.read_text()


def test_split_tag_and_limit_filter(runner: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    args = ["eval", "examples/eval_quickstart.yaml", "--store", "memory://", "--json", str(out)]
    assert runner.invoke(app, [*args, "--split", "test"]).exit_code == 0
    assert [r["id"] for r in json.loads(out.read_text())["results"]] == ["out-of-scope"]
    assert runner.invoke(app, [*args, "--tag", "billing", "--limit", "2"]).exit_code == 0
    assert [r["id"] for r in json.loads(out.read_text())["results"]] == ["invoice", "unknown-order"]


def test_compare_reports_a_regression_and_exits_1(runner: CliRunner, tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    text = (ROOT / "examples/eval_quickstart.yaml").read_text()
    spec.write_text(text)
    before = tmp_path / "before.json"
    base = ["eval", str(spec), "--store", "memory://"]
    assert runner.invoke(app, [*base, "--json", str(before)]).exit_code == 0
    spec.write_text(text.replace('contains: ["42"]', 'contains: ["43"]'))
    result = runner.invoke(app, [*base, "--compare", str(before)])
    assert result.exit_code == 1, result.output
    assert "worse (1): invoice" in result.output
    assert "task_success: 100.0 % -> 75.0 % (-25.0 pt)" in result.output


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("team: examples.eval_quickstart:make_team\ncases:\n  - {id: a, request: r, rout: x}\n",
         "line 3: cases[0].rout: unknown field 'rout'"),
        ("team: examples.nowhere:team\ncases:\n  - {id: a, request: r}\n",
         "cannot import module 'examples.nowhere'"),
        ("team: examples.eval_quickstart:make_team\ncases:\n  - {id: a, request: r, route: shop}\n",
         "case 'a' names 'shop', which the team does not have"),
        ("team: examples.eval_quickstart:INVOICES\ncases:\n  - {id: a, request: r}\n",
         "is a dict, not a Team or a factory"),
        ("team: examples.eval_quickstart:make_team\nmodel: scripted\n"
         "cases:\n  - {id: a, request: r}\n",
         "this spec names no `scripted` model"),
    ],
)  # fmt: skip
def test_bad_input_is_one_clear_error(
    runner: CliRunner, tmp_path: Path, text: str, needle: str
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    result = runner.invoke(app, ["eval", str(spec), "--store", "memory://"])
    assert result.exit_code == 2, result.output
    assert "error:" in result.output and needle in " ".join(result.output.split())
    assert "Traceback" not in result.output


def test_a_missing_spec_file(runner: CliRunner) -> None:
    result = runner.invoke(app, ["eval", "nope.yaml"])
    assert result.exit_code == 2 and "no spec file at nope.yaml" in result.output


def _desk_eval(monkeypatch: pytest.MonkeyPatch) -> object:
    spec = importlib.util.spec_from_file_location("desk_eval", ROOT / "benchmarks/desk_eval.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "desk_eval", module)  # its dataclasses look it up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("desk_set", "split"), [("insample", None), ("heldout", "test")])
def test_the_desk_spec_gives_the_desk_eval_figures(
    runner: CliRunner, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch, desk_set: str, split: str | None,
) -> None:  # fmt: skip
    desk_json, eval_json = tmp_path / "desk.json", tmp_path / "eval.json"
    desk = _desk_eval(monkeypatch)
    assert desk.main(["--model", "scripted", "--set", desk_set, "--json", str(desk_json)]) == 0  # type: ignore[attr-defined]
    capsys.readouterr()
    args = ["eval", "benchmarks/desk_routing/desk_eval.yaml", "--model", "scripted"]
    args += ["--store", "memory://", "--json", str(eval_json)] + (
        ["--split", split] if split else []
    )
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    d, e = json.loads(desk_json.read_text()), json.loads(eval_json.read_text())
    ds, es = d["summary"], e["summary"]
    assert (es["attempts"], es["routed"], es["succeeded"]) == (
        ds["requests"],
        ds["routed"],
        ds["success"],
    )
    assert (es["tool_calls_emitted"], es["tool_calls_invalid"]) == (
        ds["tool_calls_emitted"],
        ds["tool_calls_invalid"],
    )
    assert [r["success"] for r in d["requests"]] == [
        all(c["passed"] for c in r["attempts"][0]["checks"]) for r in e["results"]
    ]
    assert [r["route"] for r in d["requests"]] == [r["attempts"][0]["route"] for r in e["results"]]
