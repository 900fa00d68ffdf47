"""A worker reports a turn a guardrail blocked as `blocked`, with the rule's message."""

from __future__ import annotations

import asyncio

from tests.runtime.guardrails_kit import BLOCKED, INJECTION, JAILBREAK_RULE, S, desk

from baton.bus import MemoryBus
from baton.worker import Worker


async def test_a_blocked_turn_is_reported_blocked() -> None:
    team = desk(S({"triage": [S.say("never sent")]}), guardrails=[JAILBREAK_RULE], bus=MemoryBus())
    worker = Worker(team, block_s=0.05)
    task = asyncio.create_task(worker.run())
    try:
        sent = await team.submit(INJECTION, session_id="W1")
        result = await team.result("W1", request_id=sent.id, wait_s=10)
    finally:
        worker.stop()
        await task
    assert (result.status, result.output) == ("blocked", BLOCKED)
    assert result.error is not None and "guardrail 'no_jailbreak'" in result.error
