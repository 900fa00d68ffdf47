"""A tiny team for `baton eval`: a front desk that hands invoice questions to billing.

    baton eval examples/eval_quickstart.yaml --model scripted --store memory://

`make_team(model)` is the factory the spec names: `baton eval` calls it for every case, so
each case runs on a fresh team. `scripted_model()` is the rule-based `ScriptedModel` that
`--model scripted` means for this team (fast and deterministic, not a language model).
"""

from __future__ import annotations

import json
import re
from typing import Any

from baton import Agent, ScriptedModel, Team, tool
from baton.models import ModelRequest, Step

INVOICES = {"ORD-1001": {"amount": 42.0, "currency": "EUR", "status": "PAID"}}
ORDER_RE = re.compile(r"\bORD-\d+\b", re.IGNORECASE)


@tool
async def lookup_invoice(order_id: str) -> dict[str, Any]:
    """The invoice of an order (amount, currency, status)."""
    invoice = INVOICES.get(order_id.upper())
    if invoice is None:
        raise ValueError(f"no invoice for order {order_id}")
    return {"order_id": order_id.upper(), **invoice}


def make_team(model: Any = "local") -> Team:
    """A fresh front desk and billing specialist on `model`."""
    desk = Agent(
        name="desk",
        description="Front desk: routes each request.",
        instructions="Hand invoice and payment questions to billing; anything else to a human.",
        handoffs=["billing", "human"],
    )
    billing = Agent(
        name="billing",
        description="Invoices and payments.",
        instructions="Look the invoice up with lookup_invoice, then answer in one sentence.",
        tools=[lookup_invoice],
    )
    return Team([desk, billing], entry="desk", model=model)


def policy(request: ModelRequest) -> Step:
    """The rule-based policy behind `scripted_model`."""
    text = " ".join(m.content or "" for m in request.messages if m.role == "user")
    order = ORDER_RE.search(" ".join(m.content or "" for m in request.messages))
    last = request.messages[-1]
    if request.agent == "desk":
        target = "billing" if "invoice" in text.lower() else "human"
        state = {"order_id": order.group(0)} if order and target == "billing" else {}
        return ScriptedModel.call(
            f"transfer_to_{target}", reason=f"{target} owns this", objective=text[:80], state=state
        )
    if last.role == "tool":
        result = json.loads(last.content or "{}")
        if isinstance(result, dict) and result.get("ok") is False:
            return ScriptedModel.say(f"Sorry, I could not find it: {result.get('error')}")
        return ScriptedModel.say(
            f"Invoice {result['order_id']}: {result['amount']} {result['currency']}, "
            f"{result['status'].lower()}."
        )
    if order is None:
        return ScriptedModel.say("Which order is it about?")
    return ScriptedModel.call("lookup_invoice", order_id=order.group(0))


def scripted_model() -> ScriptedModel:
    """`policy` as a model: what `baton eval ... --model scripted` runs this team on."""
    return ScriptedModel(policy, name="scripted-eval-quickstart", record=False)
