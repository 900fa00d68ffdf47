"""A refund graph over SQLite, built the same way in the test process and in child processes
(`python graph_child.py <db> <ledger> start|answer|resume [<value>] [hang]` runs one step of
it).

`prepare` reserves the money (a side effect written to the ledger, once per idempotency key),
then asks a person with `interrupt`; `pay` pays only if the person said yes. With `hang`, `pay`
hangs after its payment (a test kills the process there).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Annotated, Any

from pydantic import BaseModel

from baton import END, START, Graph, NodeContext, interrupt
from baton.tools import ToolContext, tool_context
from baton.topologies.graph import CompiledGraph
from baton.topologies.reducers import append


class Refund(BaseModel):
    order_id: str = ""
    amount: float = 0.0
    log: Annotated[list[str], append] = []
    decision: str = ""


def build(db: str, ledger: str, hang: bool = False) -> CompiledGraph:
    def record(action: str, order_id: str) -> str:
        """Write one side effect to the ledger."""
        ctx: ToolContext | None = tool_context()
        key = ctx.idempotency_key if ctx is not None else "?"
        with open(ledger, "a", encoding="utf-8") as f:
            f.write(f"{action} {order_id} {key}\n")
        return f"{action}:{order_id}"

    async def prepare(state: Refund, ctx: NodeContext) -> dict[str, Any]:
        held = await ctx.call(record, action="reserve", order_id=state.order_id)
        question = f"退款 {state.amount} 元，批准吗？"
        answer = interrupt({"question": question, "order": state.order_id})
        return {"log": [held], "decision": str(answer)}

    async def pay(state: Refund, ctx: NodeContext) -> dict[str, Any]:
        done = await ctx.call(record, action="pay", order_id=state.order_id)
        if hang:
            await asyncio.sleep(60)
        return {"log": [done]}

    g = Graph(Refund, name="refund")
    g.add_node("prepare", prepare).add_node("pay", pay)
    g.add_edge(START, "prepare")
    g.add_conditional_edges("prepare", lambda s: s.decision == "yes", {True: "pay", False: END})
    g.add_edge("pay", END)
    return g.compile(store=f"sqlite:///{db}", lease_s=1.0)


async def main(db: str, ledger: str, step: str, value: str, mode: str) -> None:
    graph = build(db, ledger, hang=mode == "hang")
    if step == "start":
        result = await graph.invoke({"order_id": "ORD-7", "amount": 12.5}, thread_id="T")
    elif step == "answer":
        result = await graph.resume("T", value)
    else:
        result = await graph.resume("T")
    final = result.final.model_dump() if result.final is not None else None
    card = result.interrupt.model_dump(mode="json") if result.interrupt else None
    print(json.dumps({"status": result.status, "final": final, "interrupt": card}))
    await graph.aclose()


if __name__ == "__main__":
    args = [*sys.argv[1:], "", ""]
    asyncio.run(main(args[0], args[1], args[2], args[3], args[4]))
