"""The desk's business data: a small in-memory database, fresh for every team built."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

ORDERS: dict[str, dict[str, Any]] = {
    "ORD-202607-99": {
        "item": "Wireless keyboard",
        "status": "DELIVERED",
        "carrier": "SF Express",
        "delivered_on": "2026-07-21",
        "amount": 299.00,
    },
    "ORD-202608-17": {
        "item": "4K monitor",
        "status": "IN_TRANSIT",
        "carrier": "JD Logistics",
        "eta": "2026-12-02",
        "amount": 1280.50,
    },
    "ORD-202609-05": {
        "item": "USB-C dock",
        "status": "PROCESSING",
        "carrier": None,
        "amount": 459.00,
    },
}
INVOICES: dict[str, dict[str, Any]] = {
    "ORD-202607-99": {
        "invoice_no": "INV-88001",
        "status": "ISSUED",
        "amount": 299.00,
        "currency": "CNY",
        "url": "https://invoice.example.com/INV-88001.pdf",
    },
    "ORD-202608-17": {
        "invoice_no": "INV-88017",
        "status": "PENDING",
        "amount": 1280.50,
        "currency": "CNY",
        "url": None,
    },
}
SERVERS: dict[str, dict[str, Any]] = {
    "srv-bj-001": {"region": "cn-north", "status": "ALARM", "cpu": 0.97},
    "srv-sh-002": {"region": "cn-east", "status": "RUNNING", "cpu": 0.31},
}


@dataclass
class DeskDB:
    """Orders, invoices, servers, returns and refunds of one desk instance."""

    orders: dict[str, dict[str, Any]] = field(default_factory=lambda: copy.deepcopy(ORDERS))
    invoices: dict[str, dict[str, Any]] = field(default_factory=lambda: copy.deepcopy(INVOICES))
    servers: dict[str, dict[str, Any]] = field(default_factory=lambda: copy.deepcopy(SERVERS))
    returns: dict[str, dict[str, Any]] = field(default_factory=dict)
    refunds: dict[str, dict[str, Any]] = field(default_factory=dict)
    restarts: list[str] = field(default_factory=list)
