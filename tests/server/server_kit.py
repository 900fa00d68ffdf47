"""A scripted triage -> billing desk for the API server's tests, its tokens, and helpers.

Triage hands invoice and refund questions to billing (with the order id as state) and
anything about lawyers to the human queue; billing looks invoices up, and refunds need the
sign-off of a `finance` approver (`issue_refund` is approval-gated).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

from baton import Agent, MemoryStore, ScriptedModel, Team, tool
from baton.models import ModelRequest, Step
from baton.server import AuthConfig, create_app
from baton.server.guard import LOCAL_TOKEN_HEADER

S = ScriptedModel
ORDER = re.compile(r"ORD-\d+", re.I)

REFUNDED: list[str] = []
"""Orders `issue_refund` really refunded (it runs only once approved)."""


@tool
async def query_invoice(order_id: str) -> dict:
    """Look up an invoice."""
    return {"order_id": order_id, "status": "ISSUED", "amount": 299.0}


@tool(requires_approval=True, approver_roles=["finance"])
async def issue_refund(order_id: str) -> dict:
    """Refund an order."""
    REFUNDED.append(order_id)
    return {"order_id": order_id, "refunded": True}


def _user_text(request: ModelRequest) -> str:
    users = [m.content or "" for m in request.messages if m.role == "user"]
    return users[-1] if users else ""


def policy(request: ModelRequest) -> Step:
    text = _user_text(request).lower()
    last = request.messages[-1]
    order = ORDER.search(" ".join(m.content or "" for m in request.messages))
    if request.agent == "triage":
        if "lawyer" in text:
            return S.call(
                "transfer_to_human", reason="the user asks for a lawyer", objective="call back"
            )
        if "invoice" in text or "refund" in text:
            return S.call(
                "transfer_to_billing",
                reason="billing question",
                objective="answer the billing question",
                state={"order_id": order.group(0).upper()} if order else {},
            )
        return S.say("Hello! Ask me about invoices and refunds.")
    if last.role == "tool":
        result = json.loads(last.content or "{}")
        if last.name == "issue_refund":
            if result.get("refunded"):
                return S.say(f"Refunded {result['order_id']}.")
            return S.say("The refund was not approved, sorry.")
        return S.say(f"Invoice {result.get('order_id')} is {result.get('status')}.")
    if not order:
        return S.say("Which order is it about?")
    if "refund" in text:
        return S.call("issue_refund", order_id=order.group(0).upper())
    return S.call("query_invoice", order_id=order.group(0).upper())


def desk(store: Any = None, **kw: Any) -> Team:
    """The desk on a fresh in-memory store."""
    triage = Agent(name="triage", description="Front desk.", handoffs=["billing", "human"])
    billing = Agent(
        name="billing",
        description="Invoices and refunds.",
        tools=[query_invoice, issue_refund],
        handoffs=["human"],
    )
    return Team(
        [triage, billing],
        entry="triage",
        model=ScriptedModel(policy),
        store=store or MemoryStore(),
        **kw,
    )


VIEWER = "viewer-token-0123456789"
OPERATOR = "operator-token-0123456789"
FINANCE = "finance-token-0123456789"
LEGAL = "legal-token-01234567890"
NOBODY = "nobody-token-0123456789"  # a valid token with no role that reads or writes
GATEWAY = "gateway-token-0123456789"
"""An operator that may run for any end user (a chat front end's backend)."""
WEB_U1 = "web-u1-token-0123456789"
"""An operator whose runs always serve the end user `u1`."""

TOKENS: dict[str, Any] = {
    "tokens": {
        VIEWER: {"name": "vera", "roles": ["viewer"]},
        OPERATOR: {"name": "otto", "roles": ["operator"]},
        FINANCE: {"name": "alice", "roles": ["approver:finance"]},
        LEGAL: {"name": "lena", "roles": ["operator", "approver:legal"]},
        GATEWAY: {"name": "gate", "roles": ["operator", "act_for_users"]},
        WEB_U1: {"name": "web", "roles": ["operator"], "user_id": "u1"},
    }
}


def auth() -> AuthConfig:
    return AuthConfig.from_mapping(TOKENS)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


BASE_URL = "http://127.0.0.1:8000"
"""Where the tests' clients send requests (a loopback address: the open mode answers to it)."""


def local_headers(app: Any) -> dict[str, str]:
    """What a script sends to an open-mode app: its local token (nothing with a token file)."""
    token = app.state.local_token
    return {LOCAL_TOKEN_HEADER: token} if token else {}


@asynccontextmanager
async def client_for(app: Any, *, local_token: bool = True) -> AsyncIterator[httpx.AsyncClient]:
    """A client of `app`; to an open-mode app it sends the local token, as scripts do, unless
    `local_token=False`."""
    transport = httpx.ASGITransport(app=app)
    headers = local_headers(app) if local_token else {}
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL, headers=headers) as client:
        yield client


@asynccontextmanager
async def served(team: Team | None = None, **kw: Any) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the desk's app with the test tokens (`auth=None` for the open mode)."""
    kw.setdefault("auth", auth())
    app = create_app(team or desk(), **kw)
    async with client_for(app) as client:
        yield client


def parse_sse(text: str) -> list[tuple[str, Any]]:
    """(event name, parsed data) of each SSE message; comments skipped."""
    out: list[tuple[str, Any]] = []
    for block in text.split("\n\n"):
        name, data = "message", []
        for line in block.split("\n"):
            if line.startswith(":") or not line:
                continue
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
        if data:
            out.append((name, json.loads("\n".join(data))))
    return out
