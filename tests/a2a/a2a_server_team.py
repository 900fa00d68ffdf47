"""An orders desk for the A2A server tests: `refund` needs a finance sign-off, "where is ORD-n"
looks the order up, "change the address of ORD-n" asks a person (`interrupt`), "what did I
ask" repeats the session's previous message, "a person" escalates to the human queue, "break
down" breaks the model (the run fails), an input guardrail blocks "ignore previous
instructions", and a message that carries a hand-off is answered with
what the desk was handed.

    baton a2a serve a2a_server_team:team --store URL

The brain is a deterministic policy (`ScriptedModel` over a function of the request), so the
server process answers the same way every time. `billing` exists so that a message naming
`transfer_to_billing` has somewhere it could (wrongly) move the baton to.
"""

from __future__ import annotations

import json
import re

from baton import Agent, Guardrail, GuardrailContext, ScriptedModel, Team, Verdict, interrupt, tool
from baton.models import ModelRequest, Step

ORDER_RE = re.compile(r"\bORD-\d+\b")
AMOUNT_RE = re.compile(r"\b(\d+(?:\.\d+)?)\b(?!-)")
HANDED = "You now hold the baton"


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


@tool
async def change_address(order_id: str) -> dict:
    """Send an order to another address (a person says which).

    Args:
        order_id: The order, e.g. ORD-3.
    """
    address = interrupt(f"Which address should {order_id} go to?")
    return {"order_id": order_id, "address": address}


def desk_policy(request: ModelRequest) -> Step:
    """What the orders desk does next."""
    last = request.messages[-1]
    if last.role == "tool":
        result = json.loads(last.content or "{}")
        if isinstance(result, dict) and result.get("ok") is False:
            return ScriptedModel.say(f"That did not work: {result.get('error')}")
        if last.name == "lookup_order":
            return ScriptedModel.say(f"Order {result['order_id']} is {result['status']}.")
        if last.name == "change_address":
            return ScriptedModel.say(f"Order {result['order_id']} now goes to {result['address']}.")
        return ScriptedModel.say(f"Refunded {result['refunded']} for {result['order_id']}.")
    users = [m.content or "" for m in request.messages if m.role == "user"]
    text = users[-1] if users else ""
    if HANDED in text:
        objective = next((line for line in text.splitlines() if line.startswith("Objective: ")), "")
        claims = "claimed by" in text
        return ScriptedModel.say(f"Handed over. {objective} (claims shown: {claims})")
    if "a person" in text.lower():
        return ScriptedModel.call(
            "transfer_to_human",
            reason="the user asks for a person",
            objective="call the user back",
            reply_to_user="A colleague will call you back today.",
        )
    if "break down" in text.lower():
        raise RuntimeError("the desk's model broke down")
    if "what did i ask" in text.lower():
        before = users[-2] if len(users) > 1 else "nothing yet"
        return ScriptedModel.say(f"You asked: {before}")
    order = ORDER_RE.search(text)
    amount = AMOUNT_RE.search(ORDER_RE.sub("", text))
    if "where is" in text.lower() and order:
        return ScriptedModel.call("lookup_order", order_id=order.group(0))
    if "change the address" in text.lower() and order:
        return ScriptedModel.call("change_address", order_id=order.group(0))
    if "refund" in text.lower() and order and amount:
        return ScriptedModel.call("refund", order_id=order.group(0), amount=float(amount.group(1)))
    return ScriptedModel.say("Hello! Tell me the order and what to do with it.")


def billing_policy(request: ModelRequest) -> Step:
    """Billing never gets the baton in these tests; if it did, it would say so."""
    return ScriptedModel.say("billing holds the baton")


desk = Agent(
    name="desk",
    description="Order questions: where an order is, address changes and refunds.",
    instructions="Help with orders; a person in finance signs every refund off.",
    tools=[refund, lookup_order, change_address],
    handoffs=["billing", "human"],
    scopes=["payments:write"],
    context="recent(10)",
)
billing = Agent(
    name="billing",
    description="Invoices and payment methods.",
    instructions="Answer billing questions.",
    model=ScriptedModel(billing_policy, name="scripted-billing", record=False),
)


def no_jailbreak(text: str, ctx: GuardrailContext) -> Verdict:
    """Block the one jailbreak phrasing these tests send."""
    if "ignore previous instructions" in text.lower():
        return Verdict.block("prompt injection")
    return Verdict.allow()


team = Team(
    [desk, billing],
    entry="desk",
    store="memory://",
    guardrails=[Guardrail("jailbreak", "input", no_jailbreak)],
    model=ScriptedModel(desk_policy, name="scripted-desk", record=False),
)
