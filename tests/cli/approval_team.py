"""A refunds desk for the CLI tests: `refund` needs a finance sign-off, "human" escalates,
"where is ORD-7" looks the order up (and crashes the process when `BATON_TEST_CRASH` is set).

    baton run approval_team:team "please refund 42.5 for order ORD-1" --store URL

The CLI replaces the team's store by its `--store` (default sqlite:///.baton/baton.db); run
outside the CLI, the team uses `BATON_TEST_STORE` (default memory://). The brain is a
deterministic policy (`ScriptedModel` over a function of the request), so a separate process
that approves the refund continues the run exactly like the one that paused it.
"""

from __future__ import annotations

import json
import os
import re

from baton import Agent, ScriptedModel, Team, tool
from baton.models import ModelRequest, Step

ORDER_RE = re.compile(r"\bORD-\d+\b", re.I)
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
    """Where an order is. With `BATON_TEST_CRASH` set the process dies in here (a crash
    mid-run, for `baton resume`).

    Args:
        order_id: The order, e.g. ORD-7.
    """
    if os.environ.get("BATON_TEST_CRASH"):
        os._exit(3)
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
    if "human" in text.lower():
        return ScriptedModel.call(
            "transfer_to_human", reason="the user asks for a person", objective="Call the user"
        )
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
    handoffs=["human"],
)

team = Team(
    [refunds],
    entry="refunds",
    store=os.environ.get("BATON_TEST_STORE", "memory://"),
    model=ScriptedModel(refunds_policy, name="scripted-refunds", record=False),
    lease_s=1.0,  # a crashed process's lease lapses fast (the resume tests wait for it)
)
