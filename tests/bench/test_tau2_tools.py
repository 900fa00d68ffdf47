"""τ² tool semantics, the replay harness and the missing-workload path, on tiny synthetic data.

These run without the workload; `test_tau2_replay.py` runs the real tasks.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from tau2_kit import (
    RETAIL_TASKS,
    action,
    airline_db,
    domain_from,
    retail_db,
    task,
    write_workload,
)
from typer.testing import CliRunner

from baton.bench.tau2 import (
    Mutation,
    MutationNotApplicable,
    Replayer,
    WorkloadMissing,
    load_domain,
    run_bench,
    run_live,
)
from baton.bench.tau2.airline import CERTIFICATE_IDS, NOW, AirlineTools
from baton.bench.tau2.data import db_hash, resolve_data_dir
from baton.bench.tau2.live import LIVE_GUARDS, STOP, scenario_text
from baton.bench.tau2.oracle import apply_actions, gold_outcome
from baton.bench.tau2.replay import corrupt_value, plan_turns
from baton.bench.tau2.retail import RetailTools
from baton.bench.tau2.teams import ROLES, SHARED_TOOLS, build_team
from baton.bench.tau2.toolkit import TRANSFER, WRITE, ActionRefused
from baton.cli.app import app
from baton.models.base import ModelRequest
from baton.models.scripted import ScriptedModel, Step
from baton.runtime.guards import Guards


@pytest.fixture
def retail() -> RetailTools:
    return RetailTools(retail_db())


@pytest.fixture
def airline() -> AirlineTools:
    return AirlineTools(airline_db())


def refused(tools: Any, name: str, match: str, **args: Any) -> None:
    """The call raises `ActionRefused` and leaves the database untouched."""
    before = db_hash(tools.db)
    with pytest.raises(ActionRefused, match=match):
        tools.call(name, args)
    assert db_hash(tools.db) == before


# ---------------------------------------------------------------------------- shared tools
def test_calculate_rounds_to_two_decimals_and_never_evaluates_code(retail: RetailTools) -> None:
    assert retail.calculate("(10 + 2.345) * 2") == "24.69"
    assert retail.calculate("-3 / 4") == "-0.75"
    refused(retail, "calculate", "Invalid characters", expression="__import__('os')")
    refused(retail, "calculate", "Division by zero", expression="1 / 0")
    refused(retail, "calculate", "Invalid expression", expression="2 +")
    assert retail.transfer_to_human_agents("help") == "Transfer successful"


# ---------------------------------------------------------------------------- retail
def test_retail_lookups(retail: RetailTools) -> None:
    assert retail.find_user_id_by_email("ANN.LEE@example.COM") == "ann_lee_1"
    assert retail.find_user_id_by_name_zip("aNN", "lee", "78701") == "ann_lee_1"
    refused(
        retail,
        "find_user_id_by_name_zip",
        "User not found",
        first_name="Ann",
        last_name="Lee",
        zip="78702",
    )
    refused(retail, "get_order_details", "Order #W9 not found", order_id="#W9")
    refused(retail, "get_product_details", "Product 111 not found", product_id="111")
    assert retail.get_item_details("222")["price"] == 20.0
    assert list(retail.list_all_product_types()) == ["Desk Lamp", "T-Shirt"]


def test_cancel_refunds_every_payment_and_gift_cards_at_once(retail: RetailTools) -> None:
    refused(
        retail, "cancel_pending_order", "Non-pending", order_id="#W2", reason="no longer needed"
    )
    with pytest.raises(ValidationError):  # the schema's enum refuses other reasons
        retail.call("cancel_pending_order", {"order_id": "#W1", "reason": "too slow"})
    order = retail.call("cancel_pending_order", {"order_id": "#W1", "reason": "ordered by mistake"})
    assert order["status"] == "cancelled" and order["cancel_reason"] == "ordered by mistake"
    assert order["payment_history"][-1] == {
        "transaction_type": "refund",
        "amount": 40.0,
        "payment_method_id": "gift_card_1",
    }
    assert retail.db["users"]["ann_lee_1"]["payment_methods"]["gift_card_1"]["balance"] == 44.0
    refused(
        retail, "cancel_pending_order", "Non-pending", order_id="#W1", reason="no longer needed"
    )


def test_modify_items_keeps_the_last_variant_quirk_and_happens_once(retail: RetailTools) -> None:
    refused(
        retail,
        "modify_pending_order_items",
        "different",
        order_id="#W1",
        item_ids=["111"],
        new_item_ids=["111"],
        payment_method_id="credit_card_1",
    )
    refused(
        retail,
        "modify_pending_order_items",
        "not found or not available",
        order_id="#W1",
        item_ids=["111"],
        new_item_ids=["114"],
        payment_method_id="credit_card_1",
    )
    refused(
        retail,
        "modify_pending_order_items",
        "not found or not available",
        order_id="#W1",
        item_ids=["111"],
        new_item_ids=["222"],
        payment_method_id="credit_card_1",
    )
    refused(
        retail,
        "modify_pending_order_items",
        "Insufficient gift card",
        order_id="#W1",
        item_ids=["111"],
        new_item_ids=["113"],
        payment_method_id="gift_card_1",
    )
    order = retail.call(
        "modify_pending_order_items",
        {
            "order_id": "#W1",
            "item_ids": ["111", "221"],
            "new_item_ids": ["112", "222"],
            "payment_method_id": "credit_card_1",
        },
    )
    # +2.5 and -10: a refund of 7.5; both items take the last variant's (222) price, options
    assert order["payment_history"][-1] == {
        "transaction_type": "refund",
        "amount": 7.5,
        "payment_method_id": "credit_card_1",
    }
    assert [i["item_id"] for i in order["items"]] == ["112", "222"]
    assert [i["price"] for i in order["items"]] == [20.0, 20.0]
    assert order["items"][0]["options"] == {"color": "blue"}
    assert order["status"] == "pending (item modified)"
    refused(
        retail,
        "modify_pending_order_items",
        "Non-pending",
        order_id="#W1",
        item_ids=["112"],
        new_item_ids=["113"],
        payment_method_id="credit_card_1",
    )
    # the address of a modified order can still change: its status still contains "pending"
    retail.call(
        "modify_pending_order_address",
        {
            "order_id": "#W1",
            "address1": "9 Elm",
            "address2": "",
            "city": "Waco",
            "state": "TX",
            "country": "USA",
            "zip": "76701",
        },
    )
    assert retail.db["orders"]["#W1"]["address"]["city"] == "Waco"


def test_a_zero_difference_is_logged_as_a_refund_and_gift_cards_pay(retail: RetailTools) -> None:
    db = retail.db
    db["products"]["p1"]["variants"]["113"]["price"] = 10.0
    retail.call(
        "modify_pending_order_items",
        {
            "order_id": "#W1",
            "item_ids": ["111"],
            "new_item_ids": ["113"],
            "payment_method_id": "gift_card_1",
        },
    )
    assert db["orders"]["#W1"]["payment_history"][-1]["transaction_type"] == "refund"
    assert db["orders"]["#W1"]["payment_history"][-1]["amount"] == 0.0
    assert db["users"]["ann_lee_1"]["payment_methods"]["gift_card_1"]["balance"] == 4.0


def test_modify_items_stores_the_unrounded_price_difference(retail: RetailTools) -> None:
    """Upstream keeps the float sum of `new - old` as it is in the payment entry: 10.1 - 10.0
    is stored as 0.09999999999999964, never as 0.1 (issue 15, item 12: rounding it to cents
    made 35 retail gold databases differ from the ones τ²'s own evaluator computes); the gift
    card's balance is then rounded to cents (`round(balance, 2)` after the change, upstream's
    `modify_pending_order_items`)."""
    db = retail.db
    db["products"]["p1"]["variants"]["112"]["price"] = 10.1
    raw = 10.1 - 10.0
    assert raw != round(raw, 2)  # the case where rounding would change the stored float
    retail.call(
        "modify_pending_order_items",
        {
            "order_id": "#W1",
            "item_ids": ["111"],
            "new_item_ids": ["112"],
            "payment_method_id": "gift_card_1",
        },
    )
    entry = db["orders"]["#W1"]["payment_history"][-1]
    assert entry["transaction_type"] == "payment"
    assert entry["amount"] == raw and entry["amount"] != 0.1
    assert repr(entry["amount"]) == "0.09999999999999964"
    balance = db["users"]["ann_lee_1"]["payment_methods"]["gift_card_1"]["balance"]
    assert balance == round(4.0 - raw, 2) == 3.9 and 4.0 - raw != 3.9  # the card: in cents


def test_modify_items_sums_the_differences_item_by_item_without_rounding(
    retail: RetailTools,
) -> None:
    db = retail.db
    db["products"]["p1"]["variants"]["112"]["price"] = 10.1
    db["products"]["p2"]["variants"]["222"]["price"] = 20.2
    retail.call(
        "modify_pending_order_items",
        {
            "order_id": "#W1",
            "item_ids": ["111", "221"],
            "new_item_ids": ["112", "222"],
            "payment_method_id": "credit_card_1",
        },
    )
    raw = 0.0
    raw += 10.1 - 10.0
    raw += 20.2 - 30.0
    assert raw != round(raw, 2)
    entry = db["orders"]["#W1"]["payment_history"][-1]
    assert entry == {
        "transaction_type": "refund",
        "amount": abs(raw),
        "payment_method_id": "credit_card_1",
    }
    assert entry["amount"] != 9.7


def test_exchange_rounds_the_price_difference_to_cents(retail: RetailTools) -> None:
    """The exchange, unlike the modification, rounds the summed difference (the prose:
    "summed and rounded"), before the gift-card check."""
    retail.db["products"]["p1"]["variants"]["112"]["price"] = 10.1
    order = retail.call(
        "exchange_delivered_order_items",
        {
            "order_id": "#W2",
            "item_ids": ["111"],
            "new_item_ids": ["112"],
            "payment_method_id": "credit_card_1",
        },
    )
    assert order["exchange_price_difference"] == 0.1
    assert repr(order["exchange_price_difference"]) == "0.1"


def test_cancel_rounds_gift_card_refunds_to_cents(retail: RetailTools) -> None:
    db = retail.db
    db["users"]["ann_lee_1"]["payment_methods"]["gift_card_1"]["balance"] = 0.1
    db["orders"]["#W1"]["payment_history"][0]["amount"] = 0.2
    assert 0.1 + 0.2 != 0.3
    retail.call("cancel_pending_order", {"order_id": "#W1", "reason": "no longer needed"})
    assert db["users"]["ann_lee_1"]["payment_methods"]["gift_card_1"]["balance"] == 0.3


def test_modify_payment_needs_a_single_payment_and_moves_gift_card_money(
    retail: RetailTools,
) -> None:
    refused(
        retail,
        "modify_pending_order_payment",
        "different",
        order_id="#W1",
        payment_method_id="gift_card_1",
    )
    refused(
        retail,
        "modify_pending_order_payment",
        "Payment method paypal_9 not found",
        order_id="#W1",
        payment_method_id="paypal_9",
    )
    order = retail.call(
        "modify_pending_order_payment", {"order_id": "#W1", "payment_method_id": "credit_card_1"}
    )
    assert [(p["transaction_type"], p["payment_method_id"]) for p in order["payment_history"]] == [
        ("payment", "gift_card_1"),
        ("payment", "credit_card_1"),
        ("refund", "gift_card_1"),
    ]
    assert retail.db["users"]["ann_lee_1"]["payment_methods"]["gift_card_1"]["balance"] == 44.0
    assert order["status"] == "pending"
    refused(
        retail,
        "modify_pending_order_payment",
        "exactly one payment",
        order_id="#W1",
        payment_method_id="gift_card_1",
    )


def test_moving_a_payment_rounds_the_gift_card_balance_to_cents(retail: RetailTools) -> None:
    """Upstream's `modify_pending_order_payment` rounds each gift card's balance after it
    changes (`round(balance, 2)`): 0.1 + 0.2 lands as 0.3, not 0.30000000000000004; the
    payment entries keep the order's amount as it was."""
    db = retail.db
    db["orders"]["#W1"]["payment_history"][0]["amount"] = 0.2
    db["users"]["ann_lee_1"]["payment_methods"]["gift_card_1"]["balance"] = 0.1
    assert 0.1 + 0.2 != 0.3
    order = retail.call(
        "modify_pending_order_payment", {"order_id": "#W1", "payment_method_id": "credit_card_1"}
    )
    assert db["users"]["ann_lee_1"]["payment_methods"]["gift_card_1"]["balance"] == 0.3
    assert [p["amount"] for p in order["payment_history"]] == [0.2, 0.2, 0.2]


def test_exchange_and_return_of_delivered_orders(retail: RetailTools) -> None:
    refused(
        retail,
        "exchange_delivered_order_items",
        "Non-delivered",
        order_id="#W1",
        item_ids=["111"],
        new_item_ids=["112"],
        payment_method_id="credit_card_1",
    )
    refused(
        retail,
        "exchange_delivered_order_items",
        "3 x item 111 not found",
        order_id="#W2",
        item_ids=["111"] * 3,
        new_item_ids=["112"] * 3,
        payment_method_id="credit_card_1",
    )
    refused(
        retail,
        "exchange_delivered_order_items",
        "should match",
        order_id="#W2",
        item_ids=["111", "111"],
        new_item_ids=["112"],
        payment_method_id="credit_card_1",
    )
    refused(
        retail,
        "exchange_delivered_order_items",
        "Insufficient gift card",
        order_id="#W2",
        item_ids=["111", "111"],
        new_item_ids=["113", "112"],
        payment_method_id="gift_card_1",
    )
    refused(
        retail,
        "return_delivered_order_items",
        "original payment method or a gift card",
        order_id="#W2",
        item_ids=["111"],
        payment_method_id="paypal_9",
    )
    payments_before = list(retail.db["orders"]["#W2"]["payment_history"])
    order = retail.call(
        "exchange_delivered_order_items",
        {
            "order_id": "#W2",
            "item_ids": ["222", "111"],
            "new_item_ids": ["221", "113"],
            "payment_method_id": "credit_card_1",
        },
    )
    assert order["status"] == "exchange requested"
    assert order["exchange_items"] == ["111", "222"]
    assert order["exchange_new_items"] == ["113", "221"]
    assert order["exchange_price_difference"] == 15.0
    assert order["payment_history"] == payments_before  # nothing is charged yet
    refused(
        retail,
        "return_delivered_order_items",
        "Non-delivered",
        order_id="#W2",
        item_ids=["111"],
        payment_method_id="credit_card_1",
    )


def test_return_accepts_any_gift_card(retail: RetailTools) -> None:
    order = retail.call(
        "return_delivered_order_items",
        {"order_id": "#W2", "item_ids": ["111", "222"], "payment_method_id": "gift_card_1"},
    )
    assert order["status"] == "return requested"
    assert order["return_items"] == ["111", "222"]
    assert order["return_payment_method_id"] == "gift_card_1"


# ---------------------------------------------------------------------------- airline
BOOKING: dict[str, Any] = {
    "user_id": "raj_roy_1",
    "origin": "JFK",
    "destination": "SEA",
    "flight_type": "one_way",
    "cabin": "basic_economy",
    "flights": [
        {"flight_number": "HAT001", "date": "2024-05-20"},
        {"flight_number": "HAT002", "date": "2024-05-20"},
    ],
    "passengers": [{"first_name": "Raj", "last_name": "Roy", "dob": "1980-01-01"}],
    # 100 + 50 + 30 insurance + 2 x 50 bags = 280
    "payment_methods": [
        {"payment_id": "certificate_1", "amount": 100},
        {"payment_id": "gift_card_1", "amount": 80},
        {"payment_id": "credit_card_1", "amount": 100},
    ],
    "total_baggages": 3,
    "nonfree_baggages": 2,
    "insurance": "yes",
}


def test_book_reservation_needs_the_exact_sum_then_pays_and_takes_seats(
    airline: AirlineTools,
) -> None:
    short = {**BOOKING, "payment_methods": [{"payment_id": "credit_card_1", "amount": 279}]}
    refused(airline, "book_reservation", "does not add up, total price is 280", **short)
    greedy = {**BOOKING, "payment_methods": [{"payment_id": "gift_card_1", "amount": 280}]}
    refused(
        airline, "book_reservation", "Not enough balance in payment method gift_card_1", **greedy
    )
    landed = {**BOOKING, "flights": [{"flight_number": "HAT001", "date": "2024-05-21"}]}
    refused(airline, "book_reservation", "not available on date 2024-05-21", **landed)
    res = airline.call("book_reservation", BOOKING)
    assert res["reservation_id"] == "HATHAT" and res["created_at"] == NOW
    assert [s["price"] for s in res["flights"]] == [100, 50]
    methods = airline.db["users"]["raj_roy_1"]["payment_methods"]
    assert "certificate_1" not in methods  # used up, remainder and all
    assert methods["gift_card_1"]["amount"] == 20.0
    assert airline.db["users"]["raj_roy_1"]["reservations"] == ["ABC123", "HATHAT"]
    day = airline.db["flights"]["HAT001"]["dates"]["2024-05-20"]
    assert day["available_seats"]["basic_economy"] == 4
    again = {**BOOKING, "payment_methods": [{"payment_id": "credit_card_1", "amount": 280}]}
    assert airline.call("book_reservation", again)["reservation_id"] == "HATHAU"


def test_cancel_reservation_refunds_but_keeps_the_seats(airline: AirlineTools) -> None:
    seats = airline.db["flights"]["HAT001"]["dates"]["2024-05-20"]["available_seats"]["economy"]
    res = airline.call("cancel_reservation", {"reservation_id": "ABC123"})
    assert res["status"] == "cancelled"
    assert res["payment_history"] == [
        {"payment_id": "credit_card_1", "amount": 480},
        {"payment_id": "credit_card_1", "amount": -480},
    ]
    assert (
        airline.db["flights"]["HAT001"]["dates"]["2024-05-20"]["available_seats"]["economy"]
        == seats
    )


def test_update_flights_keeps_old_prices_and_charges_the_difference(airline: AirlineTools) -> None:
    change = {
        "reservation_id": "ABC123",
        "cabin": "economy",
        "flights": [
            {"flight_number": "HAT001", "date": "2024-05-20"},  # kept at 150
            {"flight_number": "HAT002", "date": "2024-05-21"},  # new at 120
        ],
        "payment_id": "certificate_1",
    }
    refused(airline, "update_reservation_flights", "Certificate cannot be used", **change)
    res = airline.call("update_reservation_flights", {**change, "payment_id": "gift_card_1"})
    # (150 + 120 - 150 - 90) x 2 passengers = 60, from the gift card
    assert [s["price"] for s in res["flights"]] == [150, 120]
    assert res["payment_history"][-1] == {"payment_id": "gift_card_1", "amount": 60}
    assert airline.db["users"]["raj_roy_1"]["payment_methods"]["gift_card_1"]["amount"] == 40.0
    # a cabin change reprices every segment; 2 x (400 + 200) - 2 x 270 = 660 is too much
    upgrade = {**change, "cabin": "business", "payment_id": "gift_card_1"}
    refused(airline, "update_reservation_flights", "Gift card balance is not enough", **upgrade)
    # the same flights and cabin cost nothing and log nothing
    n = len(res["payment_history"])
    airline.call("update_reservation_flights", {**change, "payment_id": "credit_card_1"})
    assert len(res["payment_history"]) == n


def test_bags_passengers_and_certificates(airline: AirlineTools) -> None:
    bags = {"reservation_id": "ABC123", "total_baggages": 4, "nonfree_baggages": 2}
    res = airline.call("update_reservation_baggages", {**bags, "payment_id": "gift_card_1"})
    assert res["payment_history"][-1] == {"payment_id": "gift_card_1", "amount": 100}
    assert (res["total_baggages"], res["nonfree_baggages"]) == (4, 2)
    refused(
        airline,
        "update_reservation_passengers",
        "does not match",
        reservation_id="ABC123",
        passengers=[{"first_name": "A", "last_name": "B", "dob": "2000-01-01"}],
    )
    for cert in CERTIFICATE_IDS:
        airline.call("send_certificate", {"user_id": "raj_roy_1", "amount": 50})
        assert airline.db["users"]["raj_roy_1"]["payment_methods"][cert]["amount"] == 50.0
    refused(airline, "send_certificate", "Too many", user_id="raj_roy_1", amount=50)


def test_searches(airline: AirlineTools) -> None:
    assert [
        f["flight_number"] for f in airline.search_direct_flight("JFK", "ORD", "2024-05-20")
    ] == [
        "HAT001",
        "HAT003",
    ]
    assert airline.search_direct_flight("JFK", "ORD", "2024-05-21") == []  # landed
    pairs = airline.search_onestop_flight("JFK", "SEA", "2024-05-20")
    # HAT001 lands 10:00 and connects the same day; HAT003 lands "+1" and connects next day
    assert [(a["flight_number"], b["flight_number"], b["date"]) for a, b in pairs] == [
        ("HAT001", "HAT002", "2024-05-20"),
        ("HAT003", "HAT002", "2024-05-21"),
    ]
    assert airline.get_flight_status("HAT001", "2024-05-21") == "landed"
    assert len(airline.list_all_airports()) == 20


# ---------------------------------------------------------------------------- teams
def test_each_specialist_holds_only_its_own_tools(tmp_path: Path) -> None:
    for name, tools in (("retail", RetailTools), ("airline", AirlineTools)):
        domain = domain_from(tmp_path, name, {}, [])
        team = build_team(domain, ScriptedModel([]), db={}).team
        owned = [t for r in ROLES[name] for t in r.tools]
        assert sorted(owned) == sorted(set(tools.KINDS) - {TRANSFER, *SHARED_TOOLS})
        for role in ROLES[name]:
            agent = team.agents[role.name]
            assert sorted(t.name for t in agent.tools) == sorted([*role.tools, *SHARED_TOOLS])
            assert "human" in agent.handoffs
            for t in agent.tools:
                kind = tools.KINDS[t.name].lower()
                assert t.scopes == (f"{name}:{kind}",)
        writes = [n for n, k in tools.KINDS.items() if k == WRITE]
        assert all(f"{name}:write" in tools().tools[n].scopes for n in writes)


# ---------------------------------------------------------------------------- the harness
def test_replay_walks_the_gold_actions_and_matches_the_oracle(tmp_path: Path) -> None:
    domain = domain_from(tmp_path, "retail", retail_db(), RETAIL_TASKS)
    replayer = Replayer(domain)
    results = {t.id: asyncio.run(replayer.run(t)) for t in domain.tasks}
    for r in results.values():
        assert r.passed, r
        assert r.errors == r.gold_errors and r.guard_trips == 0
    assert results["lookup-then-cancel"].gold_errors == 1  # the wrong email
    assert results["lookup-then-cancel"].db_changed and results["lookup-then-cancel"].communicated
    assert not results["read-only"].db_changed
    assert [r.escalations for r in results.values()] == [0, 0, 0, 1]
    assert results["to-a-human"].status == "escalated" and results["to-a-human"].tickets == 1


def test_mutations_make_the_comparison_fail(tmp_path: Path) -> None:
    domain = domain_from(tmp_path, "retail", retail_db(), RETAIL_TASKS)
    replayer = Replayer(domain)
    two_writes = domain.task("return-and-address")
    for mutation in (
        Mutation("drop"),
        Mutation("corrupt"),
        Mutation("corrupt", argument="payment_method_id"),
        Mutation("drop", write=-1),
        Mutation("corrupt", write=1, argument="zip"),
    ):
        r = asyncio.run(replayer.run(two_writes, mutation))
        assert not r.db_match and not r.writes_match and not r.passed, mutation
    # these two writes commute and the return is once-only: only the write log sees it
    for mutation in (Mutation("reorder"), Mutation("duplicate")):
        r = asyncio.run(replayer.run(two_writes, mutation))
        assert r.db_match and not r.writes_match and not r.passed, mutation
    with pytest.raises(MutationNotApplicable, match="successful write"):
        asyncio.run(replayer.run(domain.task("read-only"), Mutation("drop")))
    with pytest.raises(MutationNotApplicable, match="single write"):
        asyncio.run(replayer.run(domain.task("lookup-then-cancel"), Mutation("reorder")))


def test_the_oracle_skips_failing_actions(tmp_path: Path) -> None:
    domain = domain_from(tmp_path, "retail", retail_db(), RETAIL_TASKS)
    gold = gold_outcome(domain, domain.task("lookup-then-cancel"))
    assert gold.failed == (0,) and gold.errors[0].startswith("ActionRefused: User not found")
    doubled = [*domain.task("lookup-then-cancel").actions] * 2
    again = apply_actions(domain, doubled, RetailTools())
    assert again.hash == gold.hash and again.failed == (0, 5, 8)  # the second cancel fails


def test_turn_plan_closes_before_a_final_transfer(tmp_path: Path) -> None:
    domain = domain_from(tmp_path, "retail", retail_db(), RETAIL_TASKS)
    t = domain.task("to-a-human")
    turns = plan_turns(t, t.actions)
    assert [x.action.name if x.action else None for x in turns] == [
        "get_order_details",
        None,
        TRANSFER,
    ]
    assert '"order_id": "#W2"' in turns[0].message  # the user states the id


def test_corrupt_value() -> None:
    assert corrupt_value("#W2378156") == "#W2378157"
    assert corrupt_value("no longer needed") == "no longer neededx"
    assert corrupt_value(["19", "20"]) == ["10", "20"]
    assert corrupt_value([{"a": "x1"}]) == [{"a": "x2"}]
    assert corrupt_value(3) == 4 and corrupt_value(True) is False


# ---------------------------------------------------------------------------- missing data
def test_a_missing_workload_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(WorkloadMissing, match="no τ²-bench workload at"):
        resolve_data_dir(tmp_path / "nowhere")
    with pytest.raises(WorkloadMissing, match="no retail/ folder"):
        load_domain("retail", tmp_path)
    (tmp_path / "airline").mkdir()
    with pytest.raises(WorkloadMissing, match="no database in"):
        load_domain("airline", tmp_path)
    with pytest.raises(ValueError, match="unknown τ² domain"):
        load_domain("telecom", tmp_path)


CLI_ENV = {"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}


def test_cli_reports_a_missing_workload_before_loading_a_model(tmp_path: Path) -> None:
    runner = CliRunner(env=CLI_ENV)
    result = runner.invoke(app, ["bench", "tau2", "--data", str(tmp_path / "nowhere")])
    assert result.exit_code == 2 and "no τ²-bench workload at" in result.output
    args = ["bench", "tau2", "--data", str(tmp_path), "--domain", "retail", "--model", "local"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "no retail/ folder" in result.output


def test_cli_replays_a_workload_folder_and_refuses_unknown_models(tmp_path: Path) -> None:
    root = write_workload(tmp_path / "tau2")
    runner = CliRunner(env=CLI_ENV)
    result = runner.invoke(app, ["bench", "tau2", "--data", str(root)])
    assert result.exit_code == 0, result.output
    assert "retail: 4/4 end states equal to the oracle · 4/4 passed · 1 escalated" in result.output
    assert "total: 5/5 passed" in result.output
    result = runner.invoke(app, ["bench", "tau2", "--data", str(root), "--split", "test"])
    assert result.exit_code == 0 and "total: 3/3 passed" in result.output
    result = runner.invoke(app, ["bench", "tau2", "--data", str(root), "--model", "gpt-9"])
    assert result.exit_code == 2 and "unknown model 'gpt-9'" in result.output
    with pytest.raises(ValueError, match="unknown split"):
        run_bench(root, split="dev")


# ---------------------------------------------------------------------------- live mode
LIVE_TASKS = [
    task(
        "cancel",
        [action("cancel_pending_order", order_id="#W1", reason="no longer needed")],
        info=["40.0"],
    ),
    task("nothing", []),
    task("address", RETAIL_TASKS[1]["evaluation_criteria"]["actions"]),
]
LIVE_TASKS[0]["user_scenario"] = {
    "instructions": {"reason_for_call": "Cancel order #W1.", "known_info": "Email ann.lee@x"}
}


def live_brain(request: ModelRequest) -> Step:
    """Plays the user (cancel #W1, then stop) and the desk (orders cancels it)."""
    last = request.messages[-1]
    if request.agent == "user":
        first = not any(m.role == "assistant" for m in request.messages)
        wants = "Cancel order #W1" in (request.messages[0].content or "")
        return ScriptedModel.say(
            "Please cancel order #W1, no longer needed." if first and wants else STOP
        )
    if last.role == "tool":
        return ScriptedModel.say("Order #W1 is cancelled; 40.0 went back to your gift card.")
    if request.agent == "triage":
        return ScriptedModel.call(
            "transfer_to_orders", reason="cancel", objective="cancel #W1", state={"order_id": "#W1"}
        )
    return ScriptedModel.call("cancel_pending_order", order_id="#W1", reason="no longer needed")


def test_live_mode_grades_a_model_against_the_oracle(tmp_path: Path) -> None:
    domain = domain_from(tmp_path, "retail", retail_db(), LIVE_TASKS)
    model = ScriptedModel(live_brain)
    results = [asyncio.run(run_live(domain, t, model)) for t in domain.tasks]
    done, nothing, missed = results
    assert (done.db_match, done.communicated, done.reward, done.turns) == (True, True, True, 1)
    assert (nothing.db_match, nothing.reward, nothing.turns) == (True, True, 0)
    assert (missed.db_match, missed.reward) == (False, False)  # the user left; nothing was done
    assert "Cancel order #W1." in scenario_text(domain.task("cancel").user_scenario)


def test_live_runs_give_a_slow_local_model_time_and_name_a_timeout(tmp_path: Path) -> None:
    # a CPU model reading a τ² agent's ~4,000-token prompt can take minutes: the live harness's
    # model limit is far above the kernel default, and a timeout that still happens is reported
    # as a problem of the run, not scored silently as the model's escalation
    assert LIVE_GUARDS.model_timeout_s >= 15 * Guards().model_timeout_s
    assert LIVE_GUARDS.model_copy(update={"model_timeout_s": 1.0}) == Guards(model_timeout_s=1.0)
    domain = domain_from(tmp_path, "retail", retail_db(), LIVE_TASKS)

    def slow_desk(request: ModelRequest) -> Step:
        step = live_brain(request)
        return step if request.agent == "user" else ScriptedModel.slow(step, 1.0)

    task = domain.task("cancel")
    quick = Guards(model_timeout_s=0.05)
    result = asyncio.run(run_live(domain, task, ScriptedModel(slow_desk), guards=quick))
    assert result.status == "escalated" and not result.reward
    assert any(p.startswith("model_timeout:") for p in result.problems), result.problems
    patient = asyncio.run(run_live(domain, task, ScriptedModel(live_brain)))
    assert patient.reward and not patient.problems


def test_run_bench_on_a_model_reports_pass_1(tmp_path: Path) -> None:
    root = tmp_path / "tau2"
    write_workload(root)
    (root / "retail" / "tasks.json").write_text(json.dumps(LIVE_TASKS), encoding="utf-8")
    ids = [t["id"] for t in LIVE_TASKS]
    splits = {"base": ids, "train": ids, "test": ids}
    (root / "retail" / "split_tasks.json").write_text(json.dumps(splits), encoding="utf-8")
    summary = run_bench(root, "retail", model=ScriptedModel(live_brain))
    assert summary.model == "scripted" and summary.total == 3
    assert summary.pass_1 == pytest.approx(2 / 3) and summary.passed == 2


# ------------------------------------------------ upstream's tool code, where gold never goes
# (benchmarks/tau2_fidelity.py runs upstream's own tools on every task; these pin what it
# found in the paths no gold action takes)


def test_cancel_after_a_payment_change_refunds_every_entry_as_upstream(
    retail: RetailTools,
) -> None:
    retail.call(
        "modify_pending_order_payment", {"order_id": "#W1", "payment_method_id": "credit_card_1"}
    )
    order = retail.call("cancel_pending_order", {"order_id": "#W1", "reason": "no longer needed"})
    # three entries before (gift card paid, card paid, gift card refunded), three refunds after
    assert [(p["transaction_type"], p["payment_method_id"]) for p in order["payment_history"]] == [
        ("payment", "gift_card_1"),
        ("payment", "credit_card_1"),
        ("refund", "gift_card_1"),
        ("refund", "gift_card_1"),
        ("refund", "credit_card_1"),
        ("refund", "gift_card_1"),
    ]
    # 4 + 40 (the payment moved) + 40 + 40 (each gift card entry refunded again)
    assert retail.db["users"]["ann_lee_1"]["payment_methods"]["gift_card_1"]["balance"] == 124.0


def test_empty_item_lists_pass_as_upstream(retail: RetailTools) -> None:
    order = retail.call(
        "modify_pending_order_items",
        {
            "order_id": "#W1",
            "item_ids": [],
            "new_item_ids": [],
            "payment_method_id": "credit_card_1",
        },
    )
    assert order["status"] == "pending (item modified)"
    assert order["payment_history"][-1]["transaction_type"] == "refund"
    assert order["payment_history"][-1]["amount"] == 0


def test_a_chained_swap_changes_the_first_item_holding_the_id_now(retail: RetailTools) -> None:
    shirt = retail.db["products"]["p1"]["variants"]
    first = dict(retail.db["orders"]["#W1"]["items"][0])
    retail.db["orders"]["#W1"]["items"] = [
        {**first, "item_id": "111", "price": shirt["111"]["price"]},
        {**first, "item_id": "112", "price": shirt["112"]["price"]},
    ]
    order = retail.call(
        "modify_pending_order_items",
        {
            "order_id": "#W1",
            "item_ids": ["111", "112"],
            "new_item_ids": ["112", "113"],
            "payment_method_id": "credit_card_1",
        },
    )
    # 111 -> 112, then the first item holding 112 now (the same one) -> 113; as upstream
    assert [item["item_id"] for item in order["items"]] == ["113", "112"]


def test_airports_and_whole_unit_payments_are_upstreams(airline: AirlineTools) -> None:
    airports = airline.list_all_airports()
    assert airports[0] == {"iata": "SFO", "city": "San Francisco"}
    assert {"iata": "DFW", "city": "Dallas"} in airports
    assert {"iata": "LGA", "city": "LaGuardia"} in airports
    whole = {**BOOKING, "payment_methods": [{"payment_id": "credit_card_1", "amount": 280.0}]}
    res = airline.call("book_reservation", whole)
    assert res["payment_history"][0]["amount"] == 280
    assert type(res["payment_history"][0]["amount"]) is int
    with pytest.raises(ValidationError):
        airline.call(
            "book_reservation",
            {**BOOKING, "payment_methods": [{"payment_id": "credit_card_1", "amount": 279.5}]},
        )
