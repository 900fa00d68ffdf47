"""The desk the dashboard's browser tests drive, and the server they drive it through.

A scripted triage -> billing desk (`ScriptedModel` with a small latency, its replies streamed
word by word with a short pause so a browser sees them grow): triage hands billing questions
over with a reason (and, for urgent ones, a customer tier nobody stated: the slot-provenance
guard trips); billing looks invoices up, refunds need a `finance` approver's sign-off, and a
user who asks for a person is escalated to the human queue.

`DeskServer` runs the API server and dashboard with uvicorn on a free port in a background
thread, with the test tokens below (or in the open mode, without them).
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

from baton import Agent, MemoryStore, ScriptedModel, Team, tool
from baton.models import ModelRequest, ModelResponse, Step

S = ScriptedModel
ORDER = re.compile(r"\bORD-\d{6}-\d+\b", re.I)
AMOUNT = re.compile(r"\b(\d+(?:\.\d+)?)\s*(?:CNY|yuan|元)", re.I)
PERSON_WORDS = ("person", "human", "manager", "人工")
BILLING_WORDS = ("invoice", "refund", "bill", "发票", "退款")

VIEWER = "viewer-token-browser-0001"
OPERATOR = "operator-token-browser-0001"
"""An operator who is also a finance approver (works the queues)."""
TOKENS: dict[str, Any] = {
    "tokens": {
        VIEWER: {"name": "vera", "roles": ["viewer"]},
        OPERATOR: {"name": "otto", "roles": ["operator", "approver:finance"]},
    }
}

INVOICES = {
    "ORD-202607-99": {"status": "ISSUED", "amount": 299.0, "currency": "CNY"},
    "ORD-202608-17": {"status": "PENDING", "amount": 1280.5, "currency": "CNY"},
}


class StreamingDeskModel(ScriptedModel):
    """`ScriptedModel` whose streamed replies arrive word by word with a pause between."""

    def __init__(self, *args: Any, delta_pause_s: float = 0.04, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.delta_pause_s = delta_pause_s

    async def stream(self, request: ModelRequest) -> AsyncIterator[str | ModelResponse]:
        async for item in super().stream(request):
            if isinstance(item, str):
                await asyncio.sleep(self.delta_pause_s)
            yield item


def _last_user(request: ModelRequest) -> str:
    users = [m.content or "" for m in request.messages if m.role == "user"]
    return users[-1] if users else ""


def _order(request: ModelRequest) -> str | None:
    text = " ".join(m.content or "" for m in request.messages if m.role in ("user", "system"))
    found = ORDER.findall(text)
    return found[-1].upper() if found else None


def policy(request: ModelRequest) -> Step:
    """What the desk's agents do next."""
    text = _last_user(request).lower()
    last = request.messages[-1]
    order = _order(request)
    if last.role == "tool":
        result = json.loads(last.content or "{}")
        if isinstance(result, dict) and result.get("ok") is False:
            return S.say(f"Sorry, that did not go through: {result.get('error')}")
        if last.name == "issue_refund":
            return S.say(
                f"The refund of {result['amount']} CNY for {result['order_id']} has been "
                "issued; you will see it in 3 to 5 days."
            )
        if last.name == "query_invoice":
            return S.say(
                f"The invoice for {result['order_id']} is {result['status']}: "
                f"{result['amount']} {result['currency']}."
            )
        return S.say("Done.")
    if request.agent == "triage":
        if any(w in text for w in BILLING_WORDS):
            state: dict[str, Any] = {"order_id": order} if order else {}
            if "urgent" in text:
                state["customer_tier"] = "gold"  # nobody said so: the guard keeps it out
            return S.call(
                "transfer_to_billing",
                reason="invoice or refund question",
                objective="Answer the user's billing question",
                state=state,
            )
        return S.say("Hello! I can help with invoices and refunds.")
    if request.agent == "billing":
        if any(w in text for w in PERSON_WORDS):
            return S.call(
                "transfer_to_human",
                reason="the user disputes the invoice and asks for a person",
                objective="Review the disputed invoice with the user",
                state={"order_id": order} if order else {},
            )
        if not order:
            return S.say("Which order number is it about?")
        if "refund" in text or "退款" in text:
            amount = AMOUNT.search(_last_user(request))
            return S.call(
                "issue_refund",
                order_id=order,
                amount=float(amount.group(1)) if amount else INVOICES[order]["amount"],
            )
        return S.call("query_invoice", order_id=order)
    return S.say("Let me find a colleague for you.")


class Desk:
    """The team and what its tools did."""

    def __init__(self, latency_s: float = 0.03) -> None:
        self.refunds: list[tuple[str, float]] = []
        refunds = self.refunds

        @tool(scopes=["billing:read"])
        async def query_invoice(order_id: str) -> dict:
            """Look up the e-invoice of an order.

            Args:
                order_id: Order number, e.g. ORD-202607-99.
            """
            invoice = INVOICES.get(order_id.strip().upper())
            if invoice is None:
                raise KeyError(f"no invoice for order {order_id}")
            return {"order_id": order_id, **invoice}

        @tool(
            scopes=["billing:refund"],
            requires_approval=True,
            approver_roles=["finance"],
            approval_timeout_s=3600,
        )
        async def issue_refund(order_id: str, amount: float) -> dict:
            """Refund (part of) an order's payment.

            Args:
                order_id: Order number, e.g. ORD-202607-99.
                amount: Amount in CNY.
            """
            refunds.append((order_id, amount))
            return {"order_id": order_id, "amount": amount, "refunded": True}

        triage = Agent(
            name="triage",
            description="Front desk: routes the request to the right specialist.",
            handoffs=["billing", "human"],
        )
        billing = Agent(
            name="billing",
            description="Invoices, refunds and payments.",
            tools=[query_invoice, issue_refund],
            scopes=["billing:read", "billing:refund"],
            handoffs=["human"],
        )
        self.model = StreamingDeskModel(
            policy, name="scripted-desk", latency_s=latency_s, record=False
        )
        self.team = Team(
            [triage, billing],
            entry="triage",
            fallback="human",
            model=self.model,
            store=MemoryStore(),
        )


def free_socket() -> socket.socket:
    """A listening-ready socket bound to a free loopback port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


class DeskServer:
    """`create_app(desk.team, auth=...)` served by uvicorn in a background thread."""

    def __init__(self, desk: Desk, *, auth: bool = True) -> None:
        import uvicorn

        from baton.server import AuthConfig, create_app

        self.desk = desk
        self._sock = free_socket()
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.app = create_app(
            desk.team,
            auth=AuthConfig.from_mapping(TOKENS) if auth else None,
            host="127.0.0.1",
            port=self.port,
        )
        config = uvicorn.Config(
            self.app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2
        )
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    def start(self, timeout_s: float = 20.0) -> DeskServer:
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the test server did not start on {self.url}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()

    def post(self, path: str, body: dict[str, Any], token: str = OPERATOR) -> Any:
        """A JSON POST to the server (to set a scene up; in the open mode with the local
        token, as a script sends it); the parsed answer."""
        import httpx

        local = self.app.state.local_token
        headers = {"X-Baton-Local-Token": local} if local else {"Authorization": f"Bearer {token}"}
        reply = httpx.post(self.url + path, json=body, headers=headers, timeout=30)
        reply.raise_for_status()
        return reply.json()
