"""A supervisor over SQLite, built the same way in the test process and in the child process
it kills (`python supervisor_child.py <db> <ledger> <block>` runs one child run).

The lead asks two workers at once; each worker calls its own tool, which writes every attempt
to a ledger file, so a test can count side effects across processes. With `block`, the slow
worker's tool hangs after writing `started` (the parent kills the process there).
"""

from __future__ import annotations

import asyncio
import json
import sys

from baton import Agent, ScriptedModel, Supervisor, tool
from baton.models import Step
from baton.models.base import ModelRequest
from baton.tools import ToolContext

S = ScriptedModel


def build(db: str, ledger: str, block: bool, lease_s: float = 1.0) -> Supervisor:
    def write(line: str) -> None:
        with open(ledger, "a", encoding="utf-8") as f:
            f.write(line + "\n")

    @tool
    async def quick_lookup(query: str, ctx: ToolContext) -> str:
        """Look something up quickly."""
        write(f"quick started {ctx.idempotency_key}")
        write(f"quick done {ctx.idempotency_key}")
        return "quick: 5 days"

    @tool
    async def slow_lookup(query: str, ctx: ToolContext) -> str:
        """Look something up slowly."""
        write(f"slow started {ctx.idempotency_key}")
        if block:
            await asyncio.sleep(60)
        write(f"slow done {ctx.idempotency_key}")
        return "slow: approved"

    def respond(request: ModelRequest) -> Step:
        last = request.messages[-1]
        if request.agent == "lead":
            if last.role == "tool":
                answers = sorted(
                    json.loads(m.content or "{}").get("answer", "")
                    for m in request.messages
                    if m.role == "tool"
                )
                return S.say(" | ".join(answers))
            return S.calls(S.call("ask_quick", question="q?"), S.call("ask_slow", question="s?"))
        if last.role == "tool":
            return S.say(last.content or "")
        return S.call(f"{request.agent}_lookup", query="refund")

    return Supervisor(
        Agent(name="lead"),
        workers=[
            Agent(name="quick", tools=[quick_lookup]),
            Agent(name="slow", tools=[slow_lookup]),
        ],
        model=S(respond),
        store=f"sqlite:///{db}",
        lease_s=lease_s,
    )


if __name__ == "__main__":
    db, ledger, block = sys.argv[1], sys.argv[2], sys.argv[3] == "block"
    sup = build(db, ledger, block)
    print(asyncio.run(sup.run("refund?", session_id="S")).status)
