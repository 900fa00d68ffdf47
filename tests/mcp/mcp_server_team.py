"""A refunds desk for the MCP server tests: `refund` needs a finance sign-off, "where is
ORD-n" looks the order up, "what did I ask" repeats the session's previous message.

    baton mcp serve mcp_server_team:team --store URL

The brain is a deterministic policy (`ScriptedModel` over a function of the request), so the
server process answers the same way every time.
"""

from __future__ import annotations

import json
import re

from baton import Agent, ScriptedModel, Team, tool
from baton.models import ModelRequest, Step

ORDER_RE = re.compile(r"\bORD-\d+\b")
AMOUNT_RE = re.compile(r"\b(\d+(?:\.\d+)?)\b(?!-)")


@tool(scopes=["payments:write"], requires_approval=True, approver_roles=["finance"])
async def refund(order_id: str, amount: float) -> dict:
    """Refund an order.

    Args:
        order_id: The order, e.g. ORD-1.
        amount: How much to refund.
    """
    return {"order_id": order_id, "refunded": amount, "status": "REFUNDED"}


@tool
async def lookup_order(order_id: str) -> dict:
    """Where an order is.

    Args:
        order_id: The order, e.g. ORD-7.
    """
    return {"order_id": order_id, "status": "SHIPPED"}


def refunds_policy(request: ModelRequest) -> Step:
    """What the refunds desk does next."""
    last = request.messages[-1]
    if last.role == "tool":
        result = json.loads(last.content or "{}")
        if isinstance(result, dict) and result.get("ok") is False:
            return ScriptedModel.say(f"The refund was not made: {result.get('error')}")
        if last.name == "lookup_order":
            return ScriptedModel.say(f"Order {result['order_id']} is {result['status']}.")
        return ScriptedModel.say(f"Refunded {result['refunded']} for {result['order_id']}.")
    users = [m.content or "" for m in request.messages if m.role == "user"]
    text = users[-1] if users else ""
    if "what did i ask" in text.lower():
        before = users[-2] if len(users) > 1 else "nothing yet"
        return ScriptedModel.say(f"You asked: {before}")
    order = ORDER_RE.search(text)
    amount = AMOUNT_RE.search(ORDER_RE.sub("", text))
    if "where is" in text.lower() and order:
        return ScriptedModel.call("lookup_order", order_id=order.group(0))
    if "refund" in text.lower() and order and amount:
        return ScriptedModel.call("refund", order_id=order.group(0), amount=float(amount.group(1)))
    return ScriptedModel.say("Hello! Tell me the order and the amount to refund.")


refunds = Agent(
    name="refunds",
    description="Refunds of orders.",
    instructions="Refund orders when asked; a person in finance signs every refund off.",
    tools=[refund, lookup_order],
    scopes=["payments:write"],
    context="recent(10)",
)

team = Team(
    [refunds],
    entry="refunds",
    store="memory://",
    model=ScriptedModel(refunds_policy, name="scripted-refunds", record=False),
)
