"""`benchmarks/desk_eval.py`'s sets (`--set insample|heldout|v2-dev|v2-sealed`), the language
rule for `mixed` requests and the rule for `multi` ones (the second need must be reached),
on the scripted desk policy only: no language model runs."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "desk_eval.py"


@pytest.fixture(scope="module")
def de() -> ModuleType:
    spec = importlib.util.spec_from_file_location("desk_eval_for_set_tests", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def outcome(de: ModuleType, case: Any, **kw: Any) -> Any:
    """A synthetic run of `case`: routed right, completed, no calls, unless `kw` says."""
    fields: dict[str, Any] = {
        "n": 1,
        "case": case,
        "route": case.route,
        "path": ["triage", case.route],
        "status": "completed",
        "output": "",
        "calls": [],
        "emitted": 0,
        "invalid": 0,
        "invented": 0,
        "model_errors": 0,
        "turn_ms": [],
        "model_s": 0.0,
        "input_tokens": 0,
        "output_tokens": 0,
        "seconds": 0.0,
    }
    fields.update(kw)
    out = de.Outcome(**fields)
    out.failures = de.judge(case, out)
    return out


# -- the sets -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "count"), [("insample", 44), ("heldout", 44), ("v2-sealed", 64), ("v2-dev", 40)]
)
def test_each_set_loads_as_cases(de: ModuleType, name: str, count: int) -> None:
    cases = de.load_set(name)
    assert len(cases) == count
    assert all(isinstance(c, de.Case) for c in cases)
    assert {c.lang for c in cases} <= set(de.GROUPS_LANG)
    assert {c.kind for c in cases} <= set(de.GROUPS_KIND)
    for c in cases:  # `also` on multi requests only
        assert bool(c.also) == (c.kind == "multi"), c


def test_v2_halves_keep_file_order_and_new_groups(de: ModuleType) -> None:
    doc = json.loads((ROOT / "benchmarks/desk_routing/desk_eval_v2.json").read_text("utf-8"))
    for half, name in (("sealed", "v2-sealed"), ("dev", "v2-dev")):
        cases = de.load_set(name)
        assert [c.text for c in cases] == [r["text"] for r in doc[half]]
        assert [c.also for c in cases] == [r.get("also", "") for r in doc[half]]
        assert Counter(c.lang for c in cases)["mixed"] > 0
        assert Counter(c.kind for c in cases)["multi"] > 0
    with pytest.raises(ValueError):
        de.load_set("v3")


def test_expected_names_the_second_need(de: ModuleType) -> None:
    case = de.Case("en", "multi", "x", "billing", "query_invoice", "order_id=A", also="orders")
    assert case.expected == "billing · query_invoice(order_id=A) + orders"
    assert de.Case("en", "out_of_scope", "x", "human").expected == "human"


# -- language and multi rules ---------------------------------------------------------------


def test_a_mixed_request_wants_a_chinese_reply(de: ModuleType) -> None:
    case = de.Case("mixed", "plain", "帮我 check 一下 ORD-1 的 invoice", "billing", "query_invoice",
                   "order_id=ORD-1")  # fmt: skip
    assert outcome(de, case, output="发票 INV-1 金额 299 CNY。").same_language is True
    assert outcome(de, case, output="Invoice INV-1: 299 CNY.").same_language is False
    zh = de.Case("zh", "plain", "发票", "billing", "query_invoice", "order_id=ORD-1")
    en = de.Case("en", "plain", "invoice", "billing", "query_invoice", "order_id=ORD-1")
    assert outcome(de, zh, output="发票 INV-1。").same_language is True
    assert outcome(de, en, output="发票 INV-1。").same_language is False
    assert outcome(de, en, output="Invoice INV-1.").same_language is True
    assert outcome(de, case, output="发票", status="escalated").same_language is None


def test_multi_succeeds_only_when_the_second_need_is_reached(de: ModuleType) -> None:
    case = de.Case("en", "multi", "invoice for ORD-1, and where is ORD-2?", "billing",
                   "query_invoice", "order_id=ORD-1", also="orders")  # fmt: skip
    ok = [de.Call("query_invoice", {"order_id": "ord-1"}, True)]

    reached = outcome(de, case, calls=ok, path=["triage", "billing", "orders"])
    assert reached.second_need is True
    assert reached.success and reached.failures == []

    missed = outcome(de, case, calls=ok, path=["triage", "billing"])
    assert missed.second_need is False
    assert not missed.success
    assert missed.failures == ["second need (orders) not reached"]

    # the second need reached does not excuse the first: the first need's tool must succeed
    no_tool = outcome(de, case, path=["triage", "billing", "orders"])
    assert no_tool.second_need is True and no_tool.failures == ["tool"]

    # routing stays "triage's first hand-off target == route"
    misrouted = outcome(de, case, calls=ok, route="orders", path=["triage", "orders", "billing"])
    assert not misrouted.routed and "route" in misrouted.failures
    # the second route held the baton before the first one: not reached after it
    assert misrouted.second_need is False

    # a second need for a person: the run was escalated
    to_human = de.Case("en", "multi", "x", "billing", "query_invoice", "order_id=ORD-1",
                       also="human")  # fmt: skip
    escalated = outcome(de, to_human, calls=ok, status="escalated", escalated=True)
    assert escalated.second_need is True and escalated.success
    assert outcome(de, to_human, calls=ok).second_need is False

    single = de.Case("en", "plain", "x", "billing", "query_invoice", "order_id=ORD-1")
    assert outcome(de, single, calls=ok).second_need is None


def test_summary_counts_second_needs_and_shows_only_present_groups(
    de: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    multi = de.Case("mixed", "multi", "x", "billing", "query_invoice", "order_id=ORD-1",
                    also="orders")  # fmt: skip
    plain = de.Case("en", "plain", "x", "billing", "query_invoice", "order_id=ORD-1")
    ok = [de.Call("query_invoice", {"order_id": "ORD-1"}, True)]
    runs = [
        outcome(de, multi, calls=ok, path=["triage", "billing", "orders"]),
        outcome(de, multi, calls=ok),
        outcome(de, plain, calls=ok),
    ]
    s = de.summarise(runs, 1.0)
    assert (s["multi"], s["second_need_reached"], s["success"]) == (2, 1, 2)
    assert list(s["by_group"]) == ["en", "mixed", "plain", "multi"]
    de.print_summary(s)
    out = capsys.readouterr().out
    assert "| second need reached (multi) | 1/2 = 50.0 % | |" in out
    assert "| zh |" not in out and "| out_of_scope |" not in out

    s = de.summarise([runs[2]], 1.0)  # no multi case: no such line, no empty groups
    assert list(s["by_group"]) == ["en", "plain"]
    de.print_summary(s)
    assert "second need" not in capsys.readouterr().out


# -- end to end -----------------------------------------------------------------------------


def test_scripted_v2_dev_runs_end_to_end(tmp_path: Path) -> None:
    report = tmp_path / "v2-dev.json"
    args = ["--model", "scripted", "--set", "v2-dev", "--limit", "6", "--json", str(report)]
    out = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        cwd=ROOT,
    ).stdout
    assert "# set: v2-dev" in out
    assert "# 6 requests" in out
    assert re.search(r"^\| routing accuracy \| \d+/6 = ", out, re.M)
    assert re.search(r"^\| task success \| \d+/6 = ", out, re.M)
    assert len(re.findall(r"^\| [1-6] \| (en|zh|mixed) \|", out, re.M)) == 6
    doc = json.loads(report.read_text(encoding="utf-8"))
    assert doc["set"] == "v2-dev"
    assert doc["summary"]["requests"] == 6
    assert [r["case"]["lang"] for r in doc["requests"]] == ["en", "zh", "mixed", "en", "zh", "zh"]


def test_scripted_lang_mixed_runs_multi_cases(de: ModuleType, tmp_path: Path) -> None:
    """In-process: `--lang mixed` on the sealed half keeps only mixed requests, and its multi
    requests are reported on the second-need line."""
    report = tmp_path / "mixed.json"
    argv = ["--model", "scripted", "--set", "v2-sealed", "--lang", "mixed", "--json", str(report)]
    assert de.main(argv) == 0
    doc = json.loads(report.read_text(encoding="utf-8"))
    assert doc["set"] == "v2-sealed"
    assert {r["case"]["lang"] for r in doc["requests"]} == {"mixed"}
    multi = [r for r in doc["requests"] if r["case"]["kind"] == "multi"]
    assert multi and doc["summary"]["multi"] == len(multi)
    assert doc["summary"]["second_need_reached"] == sum(r["second_need"] for r in multi)
    groups = list(doc["summary"]["by_group"])
    assert "mixed" in groups and "en" not in groups and "zh" not in groups


# -- the routed desk ------------------------------------------------------------------------


async def test_the_routed_desk_routes_by_its_router_and_hands_on_the_second_need(
    de: ModuleType,
) -> None:
    """`--desk routed` on the scripted policy: the route is the router's (no triage turn), and
    a request with two needs reaches the second through the kernel's hand-on."""
    from baton.desk.policy import scripted_desk_model

    multi = next(c for c in de.load_set("v2-dev") if c.kind == "multi" and c.lang == "en")
    oos = next(c for c in de.load_set("v2-dev") if c.kind == "out_of_scope")
    outcomes = await de.evaluate(scripted_desk_model(), [multi, oos], "routed")
    first, second = outcomes
    assert "triage" not in first.path
    assert first.route == multi.route and first.second_need is True, first.trace
    assert first.path[:2] == [multi.route, multi.also]
    assert second.route == "human" and second.status == "escalated"
