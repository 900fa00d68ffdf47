"""The team `benchmarks/distributed.py` runs in its worker processes
(`baton worker benchmarks.distributed_team:team`): the kernel-overhead conversation of
`benchmarks/overhead.py` (3 model calls, 1 hand-off, 1 tool call) on a scripted model.

Environment: BENCH_LATENCY_S (the model's latency), BENCH_STORE (`memory://` or a PostgreSQL
DSN) and BENCH_PG_SCHEMA (the schema of a PostgreSQL store).
"""

from __future__ import annotations

import os

from baton import Agent, ScriptedModel, Team, tool
from baton.backends import Store
from baton.models import ModelRequest, Step

INVOICE = {"order_id": "ORD-202607-99", "status": "ISSUED", "amount": 299.0}


@tool
async def query_invoice(order_id: str) -> dict:
    """Look up the e-invoice of an order."""
    return INVOICE


HANDOFF = ScriptedModel.call(
    "transfer_to_billing",
    reason="invoice question",
    objective="Send the invoice of the order",
    state={"order_id": "ORD-202607-99"},
)
QUERY = ScriptedModel.call("query_invoice", order_id="ORD-202607-99")
ANSWER = ScriptedModel.say("Your invoice for ORD-202607-99 is issued: 299.00 CNY.")


def policy(request: ModelRequest) -> Step:
    """triage -> transfer_to_billing; billing -> query_invoice -> answer."""
    if request.agent == "triage":
        return HANDOFF
    return ANSWER if request.messages[-1].role == "tool" else QUERY


def open_bench_store(url: str, schema: str) -> Store | str:
    if url.startswith("postgresql://"):
        from baton.backends.postgres import PostgresStore

        return PostgresStore(url, schema=schema)
    return url


def build_team(store: Store | str | None, latency_s: float, bus: object = None) -> Team:
    model = ScriptedModel(policy, latency_s=latency_s, record=False)
    triage = Agent(name="triage", instructions="Route the user.", handoffs=["billing"])
    billing = Agent(name="billing", instructions="Billing.", tools=[query_invoice])
    return Team(
        [triage, billing],
        entry="triage",
        model=model,
        store=store,
        bus=bus,  # type: ignore[arg-type]
    )


team = build_team(
    open_bench_store(
        os.environ.get("BENCH_STORE", "memory://"), os.environ.get("BENCH_PG_SCHEMA", "bench")
    ),
    float(os.environ.get("BENCH_LATENCY_S", "0.1")),
)
