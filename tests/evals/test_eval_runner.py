"""Running specs: every check end to end on the quickstart team, pass^k with a model that
fails once in k, reports (JSON round trip, one HTML file) and comparisons."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from examples.eval_quickstart import make_team, policy, scripted_model

from baton import ScriptedModel
from baton.backends import open_store
from baton.core.errors import EvalError
from baton.evals import EvalRun, check_agents, compare, load_spec, parse_spec, team_source
from baton.evals.html import to_html
from baton.evals.report import read_json, write_json
from baton.evals.results import EvalReport
from baton.models.base import ModelRequest

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples/eval_quickstart.yaml"


async def run_spec(text_or_path: str | Path, model: Any, repeat: int = 1) -> EvalReport:
    spec = load_spec(text_or_path) if isinstance(text_or_path, Path) else parse_spec(text_or_path)
    store = open_store("memory://")
    try:
        run = EvalRun(
            spec=spec,
            teams=team_source(make_team, model),
            store=store,
            store_url="memory://",
            model_name="scripted",
            repeat=repeat,
        )
        return await run.run(spec.select("all"))
    finally:
        await store.close()


async def test_the_quickstart_passes_every_check_kind() -> None:
    report = await run_spec(QUICKSTART, scripted_model())
    assert [r.passed for r in report.results] == [True] * 4
    kinds = {c.check for r in report.results for a in r.attempts for c in a.checks}
    assert kinds >= {
        "route", "path", "tools[0]", "state", "status",
        "answer.contains", "answer.regex", "answer.contains_any", "answer.not_contains",
    }  # fmt: skip
    s = report.summary
    assert (s.route_accuracy, s.task_success, s.tool_call_validity, s.pass_k_rate) == (1, 1, 1, 1)
    attempt = report.results[0].attempts[0]
    assert attempt.trace == f"baton trace {attempt.session_id} --store memory://"
    assert attempt.run_ids and attempt.tokens > 0


WRONG = """\
team: examples.eval_quickstart:make_team
cases:
  - id: wrong
    request: How much is the invoice for ORD-1001?
    route: human
    path: {exact: [desk]}
    tools: [{name: lookup_invoice, arguments: {order_id: ORD-2}}]
    state: {order_id: ORD-2}
    status: escalated
    answer: {contains: [USD], contains_any: [refund], not_contains: [EUR], regex: '^Sorry'}
"""


async def test_every_check_kind_fails_with_its_reason() -> None:
    report = await run_spec(WRONG, scripted_model())
    checks = report.results[0].attempts[0].checks
    assert len(checks) == 9 and not any(c.passed for c in checks)
    assert report.summary.route_accuracy == 0 and report.summary.task_success == 0
    assert report.confusion() == {"human": {"billing": 1}}


def flaky(every: int) -> ScriptedModel:
    """The quickstart policy, except that every `every`-th request routes to a human."""
    count = itertools.count(1)

    def step(request: ModelRequest) -> Any:
        if request.agent == "desk" and next(count) % every == 0:
            return ScriptedModel.call("transfer_to_human", reason="unsure", objective="-")
        return policy(request)

    return ScriptedModel(step, record=False)


ONE = """\
team: examples.eval_quickstart:make_team
cases:
  - {id: invoice, request: 'How much is the invoice for ORD-1001?', route: billing}
  - {id: again, request: The invoice for ORD-1001 please., route: billing}
"""


async def test_pass_k_fails_a_case_that_fails_once_in_k() -> None:
    report = await run_spec(ONE, flaky(every=3), repeat=3)
    first, second = report.results
    # desk calls 1-3 are the first case's attempts: the third routes to a person
    assert [a.passed for a in first.attempts] == [True, True, False]
    assert [a.passed for a in second.attempts] == [True, True, False]
    s = report.summary
    assert (s.attempts, s.succeeded, s.pass_k, s.repeat) == (6, 4, 0, 3)
    assert s.pass_k_rate == 0 and s.task_success == pytest.approx(4 / 6)
    steady = await run_spec(ONE, scripted_model(), repeat=3)
    assert steady.summary.pass_k_rate == 1


async def test_a_json_report_round_trips_and_the_html_is_one_file(tmp_path: Path) -> None:
    report = await run_spec(WRONG, scripted_model())
    assert read_json(write_json(report, tmp_path / "r.json")) == report
    page = to_html(report)
    assert page.startswith("<!DOCTYPE html>") and "<style>" in page and "<svg" in page
    assert "Route confusion matrix" in page and 'class="confusion"' in page
    for external in ("<script", "<link", "src=", "href="):
        assert external not in page
    assert "baton trace eval-" in page


async def test_compare_shows_a_regression(tmp_path: Path) -> None:
    good = await run_spec(ONE, scripted_model())
    bad = await run_spec(ONE, flaky(every=2))
    diff = compare(good, bad)
    assert diff.regressed and diff.worse == ["again"] and diff.better == []
    assert diff.deltas["route_accuracy"] == (1.0, 0.5)
    assert any(
        line.startswith("route_accuracy: 100.0 % -> 50.0 % (-50.0 pt)") for line in diff.lines()
    )
    assert compare(bad, good).better == ["again"]


def test_a_route_the_team_lacks_is_refused() -> None:
    spec = parse_spec(ONE.replace("route: billing}", "route: shipping}", 1))
    with pytest.raises(EvalError, match="'shipping', which the team does not have"):
        check_agents(spec.cases, make_team("local"))


def test_a_team_object_cannot_take_another_model() -> None:
    with pytest.raises(EvalError, match="factory that takes `model`"):
        team_source(make_team("local"), scripted_model())
    with pytest.raises(EvalError, match="not a Team or a factory"):
        team_source(42)
    with pytest.raises(EvalError, match="returned a str"):
        team_source(lambda: "no").make()
