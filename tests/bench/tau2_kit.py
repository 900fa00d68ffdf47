"""Tiny τ² databases and domains for tests that must run without the workload."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from baton.bench.tau2.data import Domain, parse_task


def retail_db() -> dict[str, Any]:
    """One user with a credit card and a gift card; a pending and a delivered order."""
    shirt = {
        "name": "T-Shirt",
        "product_id": "p1",
        "variants": {
            "111": {"item_id": "111", "options": {"size": "S"}, "available": True, "price": 10.0},
            "112": {"item_id": "112", "options": {"size": "M"}, "available": True, "price": 12.5},
            "113": {"item_id": "113", "options": {"size": "L"}, "available": True, "price": 15.0},
            "114": {"item_id": "114", "options": {"size": "XL"}, "available": False, "price": 9.0},
        },
    }
    lamp = {
        "name": "Desk Lamp",
        "product_id": "p2",
        "variants": {
            "221": {
                "item_id": "221",
                "options": {"color": "red"},
                "available": True,
                "price": 30.0,
            },
            "222": {
                "item_id": "222",
                "options": {"color": "blue"},
                "available": True,
                "price": 20.0,
            },
        },
    }

    def item(product: dict[str, Any], item_id: str) -> dict[str, Any]:
        v = product["variants"][item_id]
        return {
            "name": product["name"],
            "product_id": product["product_id"],
            "item_id": item_id,
            "price": v["price"],
            "options": dict(v["options"]),
        }

    address = {
        "address1": "1 Main St",
        "address2": "",
        "city": "Austin",
        "country": "USA",
        "state": "TX",
        "zip": "78701",
    }
    return {
        "products": {"p1": shirt, "p2": lamp},
        "users": {
            "ann_lee_1": {
                "user_id": "ann_lee_1",
                "name": {"first_name": "Ann", "last_name": "Lee"},
                "address": dict(address),
                "email": "Ann.Lee@example.com",
                "payment_methods": {
                    "credit_card_1": {"source": "credit_card", "id": "credit_card_1"},
                    "gift_card_1": {"source": "gift_card", "id": "gift_card_1", "balance": 4.0},
                },
                "orders": ["#W1", "#W2"],
            }
        },
        "orders": {
            "#W1": {
                "order_id": "#W1",
                "user_id": "ann_lee_1",
                "address": dict(address),
                "items": [item(shirt, "111"), item(lamp, "221")],
                "status": "pending",
                "fulfillments": [],
                "payment_history": [
                    {
                        "transaction_type": "payment",
                        "amount": 40.0,
                        "payment_method_id": "gift_card_1",
                    }
                ],
            },
            "#W2": {
                "order_id": "#W2",
                "user_id": "ann_lee_1",
                "address": dict(address),
                "items": [item(shirt, "111"), item(shirt, "111"), item(lamp, "222")],
                "status": "delivered",
                "fulfillments": [],
                "payment_history": [
                    {
                        "transaction_type": "payment",
                        "amount": 40.0,
                        "payment_method_id": "credit_card_1",
                    }
                ],
            },
        },
    }


def _day(price: int, seats: int = 5) -> dict[str, Any]:
    return {
        "status": "available",
        "available_seats": {"basic_economy": seats, "economy": seats, "business": seats},
        "prices": {"basic_economy": price, "economy": price * 2, "business": price * 4},
    }


def airline_db() -> dict[str, Any]:
    """Three flights (one landing "+1"), one user with three payment kinds, one reservation."""

    def flight(number: str, origin: str, dest: str, dep: str, arr: str) -> dict[str, Any]:
        return {
            "origin": origin,
            "destination": dest,
            "flight_number": number,
            "scheduled_departure_time_est": dep,
            "scheduled_arrival_time_est": arr,
            "dates": {},
        }

    f1 = flight("HAT001", "JFK", "ORD", "08:00:00", "10:00:00")
    f1["dates"] = {"2024-05-20": _day(100), "2024-05-21": {"status": "landed"}}
    f2 = flight("HAT002", "ORD", "SEA", "11:00:00", "14:00:00")
    f2["dates"] = {"2024-05-20": _day(50), "2024-05-21": _day(60)}
    f3 = flight("HAT003", "JFK", "ORD", "22:00:00", "01:00:00+1")
    f3["dates"] = {"2024-05-20": _day(80)}
    return {
        "flights": {"HAT001": f1, "HAT002": f2, "HAT003": f3},
        "users": {
            "raj_roy_1": {
                "user_id": "raj_roy_1",
                "name": {"first_name": "Raj", "last_name": "Roy"},
                "payment_methods": {
                    "credit_card_1": {"source": "credit_card", "id": "credit_card_1"},
                    "gift_card_1": {"source": "gift_card", "id": "gift_card_1", "amount": 100.0},
                    "certificate_1": {
                        "source": "certificate",
                        "id": "certificate_1",
                        "amount": 150.0,
                    },
                },
                "membership": "gold",
                "reservations": ["ABC123"],
            }
        },
        "reservations": {
            "ABC123": {
                "reservation_id": "ABC123",
                "user_id": "raj_roy_1",
                "origin": "JFK",
                "destination": "SEA",
                "flight_type": "one_way",
                "cabin": "economy",
                "flights": [
                    {
                        "origin": "JFK",
                        "destination": "ORD",
                        "flight_number": "HAT001",
                        "date": "2024-05-20",
                        "price": 150,
                    },
                    {
                        "origin": "ORD",
                        "destination": "SEA",
                        "flight_number": "HAT002",
                        "date": "2024-05-20",
                        "price": 90,
                    },
                ],
                "passengers": [
                    {"first_name": "Raj", "last_name": "Roy", "dob": "1980-01-01"},
                    {"first_name": "Mia", "last_name": "Roy", "dob": "1982-02-02"},
                ],
                "payment_history": [{"payment_id": "credit_card_1", "amount": 480}],
                "created_at": "2024-05-10T10:00:00",
                "total_baggages": 1,
                "nonfree_baggages": 0,
                "insurance": "no",
            }
        },
    }


def action(name: str, **arguments: Any) -> dict[str, Any]:
    """A gold action in the tasks.json layout."""
    return {"action_id": name, "name": name, "arguments": arguments}


def task(task_id: str, actions: list[dict[str, Any]], info: list[str] | None = None) -> dict:
    """A task in the tasks.json layout."""
    return {
        "id": task_id,
        "user_scenario": {"instructions": {"reason_for_call": "test"}},
        "evaluation_criteria": {
            "actions": actions,
            "communicate_info": info or [],
            "reward_basis": ["DB", "COMMUNICATE"],
        },
    }


RETAIL_TASKS = [
    task(
        "lookup-then-cancel",
        [
            action("find_user_id_by_email", email="nobody@example.com"),  # fails on purpose
            action("find_user_id_by_email", email="ann.lee@example.com"),
            action("get_order_details", order_id="#W1"),
            action("cancel_pending_order", order_id="#W1", reason="no longer needed"),
            action("calculate", expression="40 - 5"),
        ],
        info=["40.0"],
    ),
    task(
        "return-and-address",
        [
            action("find_user_id_by_name_zip", first_name="ann", last_name="LEE", zip="78701"),
            action(
                "return_delivered_order_items",
                order_id="#W2",
                item_ids=["111", "111"],
                payment_method_id="gift_card_1",
            ),
            action(
                "modify_user_address",
                user_id="ann_lee_1",
                address1="2 Side St",
                address2="Apt 3",
                city="Dallas",
                state="TX",
                country="USA",
                zip="75201",
            ),
        ],
    ),
    task("read-only", [action("get_user_details", user_id="ann_lee_1")]),
    task(
        "to-a-human",
        [
            action("get_order_details", order_id="#W2"),
            action("transfer_to_human_agents", summary="The user wants a refund in cash."),
        ],
    ),
]


def domain_from(tmp_path: Path, name: str, db: dict[str, Any], tasks: list[dict]) -> Domain:
    """A `Domain` over a synthetic database and tasks (no files needed)."""
    parsed = tuple(parse_task(t) for t in tasks)
    return Domain(
        name=name,
        root=tmp_path,
        db_text=json.dumps(db),
        tasks=parsed,
        splits={"base": tuple(t.id for t in parsed)},
        tool_schemas=(),
        policy="Help the user.",
    )


def write_workload(root: Path) -> Path:
    """A tiny workload folder in the published layout: retail (the tasks above) and airline
    (one read-only task)."""
    airline_tasks = [task("look", [action("get_reservation_details", reservation_id="ABC123")])]
    for name, db, tasks in (
        ("retail", retail_db(), RETAIL_TASKS),
        ("airline", airline_db(), airline_tasks),
    ):
        folder = root / name
        folder.mkdir(parents=True)
        (folder / "db.json").write_text(json.dumps(db), encoding="utf-8")
        (folder / "tasks.json").write_text(json.dumps(tasks), encoding="utf-8")
        ids = [t["id"] for t in tasks]
        splits = {"base": ids, "train": ids[:1], "test": ids[1:]}
        (folder / "split_tasks.json").write_text(json.dumps(splits), encoding="utf-8")
        (folder / "tools.json").write_text("[]", encoding="utf-8")
        (folder / "policy.md").write_text("Help the user.", encoding="utf-8")
    return root
