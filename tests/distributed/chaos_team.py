"""The team the distributed tests' workers run (`baton worker tests.distributed.chaos_team:team`).

A two-agent desk on a scripted model with latency: triage hands the request to billing, which
calls `record_payment` once and answers. `record_payment` is the side effect under test: it
writes one row to a PostgreSQL ledger keyed by the call's idempotency key (a replay of the call
after a crash writes nothing new), and logs every execution, with the worker's pid and its
start and end, to `attempts` (no key: every attempt is kept), so a test can check that no two
workers ran one session at the same time.

Configured by the environment: BATON_CHAOS_DSN (PostgreSQL), BATON_CHAOS_SCHEMA (the schema
holding the store's tables and the ledger), BATON_CHAOS_LATENCY_S (the model's latency).
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid

import asyncpg

from baton import Agent, ScriptedModel, Team, tool
from baton.backends.postgres import PostgresStore
from baton.models import ModelRequest, Step
from baton.tools import ToolContext

DSN = os.environ.get("BATON_CHAOS_DSN", "postgresql://postgres@127.0.0.1:5432/test")
SCHEMA = os.environ.get("BATON_CHAOS_SCHEMA", "baton_chaos")
LATENCY_S = float(os.environ.get("BATON_CHAOS_LATENCY_S", "0.05"))

LEDGER_DDL = """
CREATE TABLE IF NOT EXISTS {schema}.ledger (
    key TEXT PRIMARY KEY, session_id TEXT NOT NULL, amount INTEGER NOT NULL, pid INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS {schema}.attempts (
    attempt TEXT PRIMARY KEY, key TEXT NOT NULL, session_id TEXT NOT NULL,
    pid INTEGER NOT NULL, started DOUBLE PRECISION NOT NULL, ended DOUBLE PRECISION NOT NULL
);
"""

_pool: asyncpg.Pool | None = None

CUT = (
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.AdminShutdownError,  # pg_terminate_backend
    asyncpg.InternalClientError,  # a transaction cut under its first statement
    OSError,
)
"""What a connection cut under the call raises."""


async def _ledger() -> asyncpg.Pool:
    global _pool
    if _pool is None:
        _pool = await asyncpg.create_pool(DSN, min_size=1, max_size=4)
    return _pool


@tool
async def record_payment(amount: int, ctx: ToolContext) -> dict:
    """Record the customer's payment in the ledger."""
    attempt, started = uuid.uuid4().hex, time.time()
    for tries in range(50):  # a connection cut under the call: try again (the keys dedup)
        try:
            await _write(ctx, amount, attempt, started)
            return {"recorded": amount}
        except CUT:
            if tries == 49:
                raise
            await (await _ledger()).expire_connections()
            await asyncio.sleep(0.1)
    raise AssertionError("unreachable")


async def _write(ctx: ToolContext, amount: int, attempt: str, started: float) -> None:
    """One transaction: the ledger row (once per idempotency key) and this execution's row
    in `attempts` (once per execution, however often the connection was cut under it)."""
    pool = await _ledger()
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(
            f"INSERT INTO {SCHEMA}.ledger (key, session_id, amount, pid) VALUES ($1, $2, $3, $4) "
            "ON CONFLICT (key) DO NOTHING",
            ctx.idempotency_key,
            ctx.session_id,
            amount,
            os.getpid(),
        )
        await conn.execute(
            f"INSERT INTO {SCHEMA}.attempts (attempt, key, session_id, pid, started, ended) "
            "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (attempt) DO NOTHING",
            attempt,
            ctx.idempotency_key,
            ctx.session_id,
            os.getpid(),
            started,
            time.time(),
        )


HANDOFF = ScriptedModel.call(
    "transfer_to_billing", reason="a payment", objective="Record the customer's payment"
)
PAY = ScriptedModel.call("record_payment", amount=42)
ANSWER = ScriptedModel.say("Your payment of 42 is recorded.")


def policy(request: ModelRequest) -> Step:
    """triage -> transfer_to_billing; billing -> record_payment -> answer (or, when the
    payment failed, an answer that says so: the tests see it)."""
    if request.agent == "triage":
        return HANDOFF
    last = request.messages[-1]
    if last.role != "tool":
        return PAY
    if '"recorded"' in str(last.content):
        return ANSWER
    return ScriptedModel.say(f"PAYMENT FAILED: {last.content}")


def build_team() -> Team:
    model = ScriptedModel(policy, latency_s=LATENCY_S, record=False)
    triage = Agent(name="triage", instructions="Route the user.", handoffs=["billing"])
    billing = Agent(name="billing", instructions="Billing.", tools=[record_payment])
    return Team(
        [triage, billing],
        entry="triage",
        model=model,
        store=PostgresStore(DSN, schema=SCHEMA),
        lease_s=3.0,  # a killed worker's sessions are taken over within seconds
    )


team = build_team()
