"""Multi-intent detection: a request cut into its needs, each routed with the router's tiers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from baton.routing import Labelled, Route, Router, Rules
from baton.routing.intents import MAX_PARTS, Intent, split_intents, split_request

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "benchmarks" / "desk_routing" / "desk-routes.json"
ROUTES = [Route(n) for n in ("billing", "after_sales", "orders", "tech_support")]
RULES = {
    "billing": [r"\binvoice\b", "发票", r"\brefund\b", "退款"],
    "after_sales": [r"\bbroken\b", "坏了", r"\breturn\b", "退货"],
    "orders": [r"\bparcel\b", "快递", "到哪"],
}


def rules_router() -> Router:
    return Router([Rules(RULES)], routes=ROUTES)


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        (
            "the invoice for ORD-1 is wrong AND the keyboard is broken",
            ["the invoice for ORD-1 is wrong", "the keyboard is broken"],
        ),
        ("发票不对，而且东西坏了", ["发票不对", "东西坏了"]),
        (
            "Where's my parcel? Also I need the receipt.",
            ["Where's my parcel?", "I need the receipt."],
        ),
        (
            "包裹什么时候送到？顺便问一下发票开好了没有",
            ["包裹什么时候送到？", "问一下发票开好了没有"],
        ),
        ("我要退货；另外，把钱退给我。", ["我要退货", "把钱退给我。"]),
        # a part under two words joins the next one (or, at the end, the one before)
        ("I also need the invoice", ["I also need the invoice"]),
        ("return it and refund", ["return it and refund"]),
        # a full stop inside an id or an abbreviation does not cut
        ("e.g. ORD-1.5 is late", ["e.g. ORD-1.5 is late"]),
        ("where is my order", ["where is my order"]),
    ],
)
def test_split_request(text: str, parts: list[str]) -> None:
    assert split_request(text) == parts


async def test_two_routes_give_the_first_and_a_pending_need() -> None:
    router = rules_router()
    split = await split_intents(router, "the invoice for ORD-1 is wrong and the keyboard is broken")
    assert split.decision.target == "billing" and split.decision.tier == "rules"
    assert split.intents == [
        Intent("billing", "the invoice for ORD-1 is wrong"),
        Intent("after_sales", "the keyboard is broken"),
    ]
    assert split.pending == [Intent("after_sales", "the keyboard is broken")]
    assert split.decision.verdicts[-1].tier == "intents"
    assert "after_sales <- 'the keyboard is broken'" in split.decision.verdicts[-1].detail
    assert split.pending[0].to_slot() == {"route": "after_sales", "text": "the keyboard is broken"}
    # every routing made on the way is kept: one per part
    assert [d.target for d in split.routed] == ["billing", "after_sales"]


async def test_chinese_needs_keep_the_users_words() -> None:
    split = await split_intents(rules_router(), "发票不对，而且东西坏了")
    assert [(i.route, i.text) for i in split.intents] == [
        ("billing", "发票不对"),
        ("after_sales", "东西坏了"),
    ]


async def test_one_route_is_the_routers_own_decision() -> None:
    router = rules_router()
    text = "where is my invoice and how much is the invoice"
    split = await split_intents(router, text)
    plain = await router.route(text)
    assert split.intents == [] and split.pending == []
    assert (split.decision.target, split.decision.tier) == (plain.target, plain.tier)
    assert [v.summary() for v in split.decision.verdicts] == [v.summary() for v in plain.verdicts]
    # the two parts were routed, then the whole request
    assert len(split.routed) == 3 and split.routed[-1] is split.decision


async def test_a_part_no_route_takes_joins_its_neighbour() -> None:
    text = "hello there. the invoice is wrong. it was a gift. the keyboard is broken"
    split = await split_intents(rules_router(), text)
    assert split.intents == [
        Intent("billing", "hello there. the invoice is wrong. it was a gift."),
        Intent("after_sales", "the keyboard is broken"),
    ]


async def test_a_route_that_comes_back_joins_its_first_need() -> None:
    text = "the invoice is wrong; the keyboard is broken; also send the invoice again"
    split = await split_intents(rules_router(), text)
    assert split.intents == [
        Intent("billing", "the invoice is wrong … send the invoice again"),
        Intent("after_sales", "the keyboard is broken"),
    ]


async def test_a_long_message_is_routed_whole() -> None:
    text = "; ".join(["the invoice is wrong", "the keyboard is broken"] * MAX_PARTS)
    assert len(split_request(text)) > MAX_PARTS
    split = await split_intents(rules_router(), text)
    assert split.intents == [] and split.decision.target == "billing"


async def test_an_unknown_request_goes_to_the_fallback_as_before() -> None:
    split = await split_intents(rules_router(), "tell me a joke and sing a song")
    assert split.intents == [] and split.decision.unknown


def test_the_desk_multi_requests_split() -> None:
    """Every two-need request of the desk set's dev half cuts into two parts or more."""
    spec = json.loads(SPEC.read_text(encoding="utf-8"))
    multi = [row["text"] for row in spec["calibration"] if row.get("kind") == "multi"]
    assert len(multi) >= 8
    assert all(len(split_request(text)) >= 2 for text in multi)


async def test_the_semantic_tier_finds_both_needs_of_the_desk_requests() -> None:
    """On the desk set's dev half, with the semantic tier fitted on its single-need queries."""
    from baton.routing import Semantic

    spec = json.loads(SPEC.read_text(encoding="utf-8"))
    rows = spec["calibration"]
    routes = [Route(r["name"], tuple(r.get("utterances", ()))) for r in spec["routes"]]
    router = Router([Semantic()], routes=routes)
    router.fit([Labelled(r["text"], r["label"], r["kind"]) for r in rows if r["kind"] != "multi"])
    found = false = 0
    for row in rows:
        split = await split_intents(router, row["text"])
        if row["kind"] == "multi":
            found += [i.route for i in split.intents] == [row["label"], row["also"]]
        else:
            false += bool(split.intents)
    assert found >= 6  # of 8 (8 when written)
    assert false <= 3  # of 72 (0 when written)
