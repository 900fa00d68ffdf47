"""The second held-out desk_eval set (`benchmarks/desk_routing/desk_eval_v2.json`).

Its `sealed` half is sealed by a sha256 in the README's "New held-out set" section; its `dev`
half may be tuned on. Rows carry desk_eval's `Case` fields, plus `also` (the second need) on
multi-need rows; `lang` may also be `mixed` and `kind` also `multi`. These tests check the
data only: no model runs.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from tests.routing.test_desk_routing_set import canonical_sha256, norm, routed_fit_texts

from baton.desk.data import INVOICES, ORDERS, SERVERS

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "benchmarks" / "desk_routing"
V2 = HERE / "desk_eval_v2.json"
SPEC = HERE / "desk-routes.json"
HELDOUT = HERE / "desk_eval_heldout.json"
README = HERE / "README.md"
SECTION = "## New held-out set (desk_eval_v2.json)"

HALVES = ("sealed", "dev")
MINIMUM = {"sealed": 60, "dev": 40}
SPECIALISTS = ("billing", "orders", "tech_support", "after_sales")
ROUTES = (*SPECIALISTS, "human")
KINDS = ("plain", "ambiguous", "multi", "out_of_scope", "unknown_id")
LANGS = ("en", "zh", "mixed")
SHARE = {"en": (0.35, 0.45), "zh": (0.35, 0.45), "mixed": (0.15, 0.25)}
"""Bounds on each language's share in each half."""
FIELDS = ("lang", "kind", "text", "route", "tool", "arg")

ORDER_ID = re.compile(r"ORD-\d{6}-\d+", re.IGNORECASE)
SERVER_ID = re.compile(r"srv-[a-z]{2}-\d{3}", re.IGNORECASE)
IDS = re.compile(rf"{ORDER_ID.pattern}|{SERVER_ID.pattern}", re.IGNORECASE)
HAN = re.compile(r"[\u4e00-\u9fff]")
LATIN_WORD = re.compile(r"[A-Za-z]{2,}")


@pytest.fixture(scope="module")
def doc() -> dict[str, list[dict[str, Any]]]:
    return json.loads(V2.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def desk_eval() -> ModuleType:
    path = ROOT / "benchmarks" / "desk_eval.py"
    module_spec = importlib.util.spec_from_file_location("desk_eval_for_v2_set", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_spec.name] = module  # dataclasses look their module up there
    module_spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def agent_tools() -> dict[str, set[str]]:
    """Tool names of each specialist, as src/baton/desk/team.py builds them."""
    from baton.desk import DeskDB, build_agents

    return {a.name: {t.name for t in a.tools} for a in build_agents(DeskDB())}


@pytest.fixture(scope="module")
def elsewhere(desk_eval: ModuleType) -> dict[str, str]:
    """Normalised text -> where it comes from, for every request that exists outside this file:
    desk_eval's CASES, the first held-out set, the routing set, the agents' examples, the fit
    set of src/baton/desk/routed.py and the demo script."""
    from baton.desk import DEMO, DeskDB, build_agents

    seen: dict[str, str] = {}
    for c in desk_eval.CASES:
        seen[norm(c.text)] = "benchmarks/desk_eval.py CASES"
    for row in json.loads(HELDOUT.read_text(encoding="utf-8")):
        seen[norm(row["text"])] = "desk_eval_heldout.json"
    spec = json.loads(SPEC.read_text(encoding="utf-8"))
    for half in ("test", "calibration"):
        for row in spec[half]:
            seen[norm(row["text"])] = f"desk-routes.json {half}"
    for a in build_agents(DeskDB()):
        for u in a.examples:
            seen[norm(u)] = f"examples of {a.name}"
    for t in routed_fit_texts():
        seen[norm(t)] = "src/baton/desk/routed.py FIT"
    for d in DEMO:
        seen[norm(d.text)] = "src/baton/desk/script.py DEMO"
    return seen


@pytest.fixture(scope="module")
def earlier_ids(desk_eval: ModuleType) -> set[str]:
    """Every id named by desk_eval's CASES or the first held-out set (upper-cased)."""
    texts = [c.text for c in desk_eval.CASES]
    texts += [r["text"] for r in json.loads(HELDOUT.read_text(encoding="utf-8"))]
    return {m.upper() for t in texts for m in IDS.findall(t)}


def rows_of(doc: dict[str, list[dict[str, Any]]]) -> list[tuple[str, int, dict[str, Any]]]:
    return [(half, i, row) for half in HALVES for i, row in enumerate(doc[half])]


def known(value: str) -> bool:
    """Whether an id is in any table of src/baton/desk/data.py (the tools normalise case)."""
    return any(
        value.upper() in table or value.lower() in table for table in (ORDERS, INVOICES, SERVERS)
    )


def the_seal() -> str:
    text = README.read_text(encoding="utf-8")
    assert SECTION in text, "README.md has no section on desk_eval_v2.json"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    found = re.findall(r"sha256:([0-9a-f]{64})", section)
    assert len(found) == 1, "the section states no single seal"
    return found[0]


# -- shape and seal -------------------------------------------------------------------------


def test_sealed_half_matches_the_seal(doc: dict[str, list[dict[str, Any]]]) -> None:
    assert canonical_sha256(doc["sealed"]) == the_seal()


def test_halves_and_counts(doc: dict[str, list[dict[str, Any]]]) -> None:
    assert set(doc) == set(HALVES)
    for half in HALVES:
        rows = doc[half]
        assert len(rows) >= MINIMUM[half], half
        kinds = Counter(r["kind"] for r in rows)
        assert set(kinds) == set(KINDS), (half, kinds)
        langs = Counter(r["lang"] for r in rows)
        for lang, (lo, hi) in SHARE.items():
            assert lo <= langs[lang] / len(rows) <= hi, (half, lang, langs)
        for kind in KINDS:  # every kind is written in every language
            assert {r["lang"] for r in rows if r["kind"] == kind} == set(LANGS), (half, kind)
        for route in SPECIALISTS:  # every specialist gets plain, ambiguous and multi rows
            mine = Counter(r["kind"] for r in rows if r["route"] == route)
            assert mine["plain"] and mine["ambiguous"] and mine["multi"], (half, route, mine)
        unknown_routes = {r["route"] for r in rows if r["kind"] == "unknown_id"}
        assert {"orders", "billing", "tech_support"} <= unknown_routes, half


def test_rows_are_well_formed(doc: dict[str, list[dict[str, Any]]], desk_eval: ModuleType) -> None:
    for half, i, row in rows_of(doc):
        where = f"{half}[{i}] {row.get('text')!r}"
        assert set(row) - {"also"} == set(FIELDS), where
        assert all(isinstance(v, str) for v in row.values()), where
        assert row["text"] and row["text"].strip() == row["text"], where
        assert row["lang"] in LANGS and row["kind"] in KINDS and row["route"] in ROUTES, where
        assert (row["kind"] == "out_of_scope") == (row["route"] == "human"), where
        if row["kind"] == "multi":
            assert row.get("also") in SPECIALISTS and row["also"] != row["route"], where
        else:
            assert "also" not in row, where
        # desk_eval judges the rows as its own: they build its Case (without `also`)
        case = desk_eval.Case(**{k: row[k] for k in FIELDS})
        if row["route"] == "human":
            assert not case.tool and not case.arg, where
        else:
            assert case.tools and case.key is not None, where


def test_language_tags_match_the_text(doc: dict[str, list[dict[str, Any]]]) -> None:
    """zh: Chinese only; en: no Chinese; mixed: Chinese with English words (ids aside)."""
    for half, _, row in rows_of(doc):
        text = IDS.sub(" ", row["text"])
        han, latin = bool(HAN.search(text)), bool(LATIN_WORD.search(text))
        got = "mixed" if han and latin else "zh" if han else "en"
        assert got == row["lang"], f"{half}: {row['text']!r} reads as {got}"


# -- the expectations fit the desk ----------------------------------------------------------


def test_tools_exist_on_the_route_agent(
    doc: dict[str, list[dict[str, Any]]], agent_tools: dict[str, set[str]]
) -> None:
    for half, _, row in rows_of(doc):
        if row["route"] == "human":
            continue
        tools = [t for t in row["tool"].split("|") if t]
        assert tools and set(tools) <= agent_tools[row["route"]], f"{half}: {row['text']!r}"


def test_ids_fit_the_database(doc: dict[str, list[dict[str, Any]]], earlier_ids: set[str]) -> None:
    """Known ids for every row but unknown_id ones, consistent with what the tools accept;
    unknown ids in no table and in neither desk_eval's CASES nor the first held-out set."""
    for half, _, row in rows_of(doc):
        where = f"{half}: {row['text']!r}"
        ids = IDS.findall(row["text"])
        if row["route"] == "human":
            assert not ids, where
            continue
        key, value = row["arg"].split("=", 1)
        assert key in ("order_id", "server_id"), where
        assert value in row["text"], where
        assert bool(SERVER_ID.fullmatch(value)) == (key == "server_id"), where
        assert bool(ORDER_ID.fullmatch(value)) == (key == "order_id"), where
        if row["kind"] == "unknown_id":
            assert not known(value), where
            assert value.upper() not in earlier_ids, where
            continue
        for found in ids:  # every id the request names, its second need's too
            assert known(found), where
        tools = set(row["tool"].split("|"))
        if "query_invoice" in tools:
            assert value in INVOICES, where
        if "create_return" in tools:
            assert ORDERS[value]["status"] == "DELIVERED", where
        if row.get("also") == "after_sales" or row["route"] == "after_sales":
            returned = [i for i in ids if i.upper() in ORDERS]
            assert any(ORDERS[i.upper()]["status"] == "DELIVERED" for i in returned), where


# -- no duplicates --------------------------------------------------------------------------


def test_no_text_repeats_anywhere(
    doc: dict[str, list[dict[str, Any]]], elsewhere: dict[str, str]
) -> None:
    seen: dict[str, str] = {}
    for half, i, row in rows_of(doc):
        key = norm(row["text"])
        assert key not in seen, f"{row['text']!r} in {half} and {seen[key]}"
        assert key not in elsewhere, f"{row['text']!r} is in {elsewhere[key]}"
        seen[key] = f"{half}[{i}]"


def test_the_routed_fit_set_is_read() -> None:
    """routed_fit_texts() finds the fit set (a rename there would empty the check above)."""
    assert len(routed_fit_texts()) >= 10
