"""The desk of the golden checkpoints: written by an older Baton (`make_golden.py`), loaded and
resumed by today's (`tests/runtime/test_checkpoint_format.py`). Keep it as it is: a golden file
only replays against the team that wrote it. It uses only the public API every format knew.

`desk` hands the user to `cashier` with a payload; `cashier` looks the order up (a plain tool)
and then pays (a tool that needs a person's sign-off), so the paused run holds a hand-off, a
finished call and the call that waits. The graph's node records two steps (`ctx.call`) and
then waits for a person's answer (`interrupt`).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel

from baton import END, START, Agent, Graph, NodeContext, ScriptedModel, Team, interrupt, tool
from baton.models import Step
from baton.models.base import ModelRequest
from baton.topologies.reducers import append

S = ScriptedModel
SESSION = "golden-1"
MESSAGE = "pay 20000 to bob for order ORD-42"


def script(request: ModelRequest) -> Step:
    """A function of the request, so a resumed run in another process answers alike."""
    last = request.messages[-1]
    if request.agent == "desk":
        return S.call(
            "transfer_to_cashier", reason="the user wants to pay", objective="pay bob for ORD-42"
        )
    if last.role == "tool" and '"paid"' in (last.content or ""):
        return S.say(f"Paid: {last.content}")
    if last.role == "tool":
        return S.call("pay", amount=20000, to="bob")
    user = next(m for m in reversed(request.messages) if m.role == "user")
    order = re.search(r"ORD-\d+", user.content or "")
    return S.call("lookup", order_id=order.group() if order else "ORD-0")


def team(store: Any, ledger: list[tuple[int, str]]) -> Team:
    @tool
    async def lookup(order_id: str) -> dict[str, Any]:
        """Look an order up.

        Args:
            order_id: The order's id.
        """
        return {"order_id": order_id, "total": 20000, "status": "unpaid"}

    @tool(requires_approval=True)
    async def pay(amount: int, to: str) -> dict[str, Any]:
        """Pay money to someone.

        Args:
            amount: Amount in cents.
            to: Who gets the money.
        """
        ledger.append((amount, to))
        return {"paid": amount, "to": to}

    agents = [
        Agent(name="desk", instructions="You greet users.", handoffs=["cashier"]),
        Agent(name="cashier", instructions="You pay people.", tools=[lookup, pay]),
    ]
    return Team(agents, entry="desk", model=S(script), store=store)


# ---------------------------------------------------------------- a graph node with steps

THREAD = "golden-graph"


class Order(BaseModel):
    log: Annotated[list[str], append] = []
    order_id: str = ""


def graph(store: Any, effects: list[str]) -> Any:
    """One node: it reserves and charges (two recorded steps), then asks a person."""

    def reserve(order_id: str) -> str:
        """Reserve the order's items."""
        effects.append(f"reserve {order_id}")
        return f"reserved {order_id}"

    def charge(order_id: str) -> str:
        """Charge the order."""
        effects.append(f"charge {order_id}")
        return f"charged {order_id}"

    async def checkout(state: Order, ctx: NodeContext) -> dict[str, Any]:
        held = await ctx.call(reserve, order_id=state.order_id)
        paid = await ctx.call(charge, order_id=state.order_id)
        said = interrupt(f"ship {state.order_id}?")
        return {"log": [held, paid, f"person said {said}"]}

    g = Graph(Order).add_node("checkout", checkout)
    g.add_edge(START, "checkout").add_edge("checkout", END)
    return g.compile(store=store)
