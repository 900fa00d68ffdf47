"""The seed 000 customer-service desk: triage hands the baton to billing or tech support.

    baton run examples.customer_service:team "please check the invoice for order ORD-202607-99"

The agents' brain is the embedded local model unless `BATON_MODEL` names another one
(`openai:gpt-4o-mini` with OPENAI_BASE_URL, `local:qwen2.5-coder-0.5b`, ...). The value
`scripted` selects `desk_policy`, a deterministic `ScriptedModel` policy for fast tests and
replays: it exercises the kernel for real (hand-off tools, payload validation, guards, tool
calls, the store) but it is not a language model.
"""

from __future__ import annotations

import json
import os
import re

from baton import Agent, Guards, ScriptedModel, Team, tool
from baton.models import ModelRequest, Step

# --- a tiny business database ------------------------------------------------------------
INVOICES = {
    "ORD-202607-99": {
        "status": "ISSUED",
        "amount": 299.00,
        "currency": "CNY",
        "url": "https://invoice.example.com/pdf/ORD-202607-99",
    },
    "ORD-202608-17": {"status": "PENDING", "amount": 1280.50, "currency": "CNY", "url": None},
}
SERVERS = {
    "srv-bj-001": {"region": "cn-north", "status": "ALARM"},
    "srv-sh-002": {"region": "cn-east", "status": "RUNNING"},
}


@tool(scopes=["billing:read"])
async def query_invoice(order_id: str) -> dict:
    """Look up the e-invoice of an order.

    Args:
        order_id: Order number as the user wrote it, e.g. ORD-202607-99.
    """
    inv = INVOICES.get(order_id.strip().upper())
    if inv is None:
        raise KeyError(f"no invoice for order {order_id}; ask the user to check the number")
    return {"order_id": order_id, **inv}


@tool(scopes=["ops:write"], timeout_s=10)
async def restart_server(server_id: str) -> dict:
    """Safely restart a cloud server instance.

    Args:
        server_id: Instance id, e.g. srv-bj-001.
    """
    srv = SERVERS.get(server_id.strip().lower())
    if srv is None:
        raise KeyError(f"unknown server {server_id}; ask the user for the instance id")
    srv["status"] = "RESTARTED"
    return {"server_id": server_id, "status": "RESTARTED", "uptime": "0 min"}


# --- the desk's rule-based policy (scripted model) ------------------------------------------
ORDER_RE = re.compile(r"\bORD-\d{6}-\d+\b", re.I)
SERVER_RE = re.compile(r"\bsrv-[a-z]{2}-\d{3}\b", re.I)
BILLING_WORDS = ("invoice", "bill", "refund", "payment", "发票", "账单", "退款", "支付")
TECH_WORDS = ("server", "restart", "down", "outage", "error", "服务器", "重启", "宕机", "告警")


def _user_text(request: ModelRequest) -> str:
    return " ".join(m.content or "" for m in request.messages if m.role == "user")


def _known(request: ModelRequest, key: str, pattern: re.Pattern[str]) -> str | None:
    text = " ".join(m.content or "" for m in request.messages if m.role in ("user", "system"))
    m = pattern.search(text)
    return m.group(0) if m else None


def desk_policy(request: ModelRequest) -> Step:
    """What a careful desk does next, decided from the request the kernel built."""
    text = _user_text(request).lower()
    last = request.messages[-1]
    if last.role == "tool":
        result = json.loads(last.content or "{}")
        if isinstance(result, dict) and result.get("ok") is False:
            return ScriptedModel.say(f"Sorry, that did not work: {result.get('error')}")
        if last.name == "query_invoice":
            return ScriptedModel.say(
                f"The invoice for {result['order_id']} is {result['status']}: "
                f"{result['amount']} {result['currency']}"
                + (f", download it at {result['url']}." if result.get("url") else ".")
            )
        if last.name == "restart_server":
            return ScriptedModel.say(f"Server {result['server_id']} was restarted and is back up.")
        return ScriptedModel.say("Done.")
    order = _known(request, "order_id", ORDER_RE)
    server = _known(request, "server_id", SERVER_RE)
    if request.agent == "triage":
        if any(w in text for w in BILLING_WORDS):
            return ScriptedModel.call(
                "transfer_to_billing",
                reason="billing question",
                objective="Answer the invoice question",
                state={"order_id": order} if order else {},
            )
        if any(w in text for w in TECH_WORDS):
            return ScriptedModel.call(
                "transfer_to_tech_support",
                reason="server incident",
                objective="Restore the user's server",
                state={"server_id": server} if server else {},
            )
        return ScriptedModel.say("Hello! I can help with invoices and server incidents.")
    if request.agent == "billing":
        if order:
            return ScriptedModel.call("query_invoice", order_id=order)
        return ScriptedModel.say("Which order number is the invoice for?")
    if request.agent == "tech_support":
        if server:
            return ScriptedModel.call("restart_server", server_id=server)
        return ScriptedModel.say("Which server instance (e.g. srv-bj-001) should I restart?")
    return ScriptedModel.say("Let me pass you to a colleague.")


def desk_model() -> object:
    """The model the desk runs on: `BATON_MODEL` if set (`scripted` = the policy), else local."""
    choice = os.environ.get("BATON_MODEL") or "local"
    if choice == "scripted":
        return ScriptedModel(desk_policy, name="scripted-desk", record=False)
    return choice


triage = Agent(
    name="triage",
    description="Front desk: greets the user and routes the request to the right specialist.",
    not_for="Answering billing or technical questions itself.",
    instructions="You are the front desk. Find out what the user needs and pass the baton to "
    "the right specialist. Never answer specialist questions yourself.",
    handoffs=["billing", "tech_support"],
)
billing = Agent(
    name="billing",
    description="Invoices, refunds, payments and bills.",
    not_for="Server outages, restarts, passwords.",
    examples=["where is my invoice", "我要退款", "check the bill for my order"],
    instructions="You are a senior billing specialist. Be precise and formal.",
    tools=[query_invoice],
    scopes=["billing:read"],
    handoffs=["tech_support"],
)
tech_support = Agent(
    name="tech_support",
    description="Server incidents, outages, restarts and deployment errors.",
    not_for="Invoices, refunds, payments.",
    examples=["my server is down", "请重启服务器 srv-bj-001"],
    instructions="You are a senior cloud operations engineer. Be brief and decisive.",
    tools=[restart_server],
    scopes=["ops:write"],
    handoffs=["billing"],
)

team = Team(
    [triage, billing, tech_support],
    entry="triage",
    guards=Guards(max_hops=5, max_visits=2, lock_window_s=30),
    fallback="human",
    model=desk_model(),  # type: ignore[arg-type]
)
