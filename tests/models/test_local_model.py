"""Smoke tests with the real embedded model: a real hand-off and a real tool call.

These are the only kernel tests that run inference (tens of seconds each on a 2-core CPU);
everything else uses `ScriptedModel`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from baton import Agent, Team, tool
from baton.models.local import LocalModel
from local_model_kit import require_local_model

pytestmark = pytest.mark.local_model

CALLS: list[tuple[str, dict]] = []


@tool
async def query_invoice(order_id: str) -> dict:
    """Look up the e-invoice of an order.

    Args:
        order_id: Order number as the user wrote it, e.g. ORD-202607-99.
    """
    CALLS.append(("query_invoice", {"order_id": order_id}))
    return {"order_id": order_id, "status": "ISSUED", "amount": 299.0, "currency": "CNY"}


@tool
async def restart_server(server_id: str) -> dict:
    """Safely restart a cloud server instance.

    Args:
        server_id: Instance id, e.g. srv-bj-001.
    """
    CALLS.append(("restart_server", {"server_id": server_id}))
    return {"server_id": server_id, "status": "RESTARTED"}


@pytest.fixture(scope="module")
def team() -> Team:
    require_local_model()
    triage = Agent(
        name="triage",
        instructions="You are the front desk. Hand the user to the right specialist and put "
        "the ids the user gave into `state`. Never answer yourself.",
        handoffs=["billing", "tech_support"],
    )
    billing = Agent(
        name="billing",
        description="Invoices, refunds, payments.",
        instructions="You are a billing specialist. Answer in one sentence.",
        tools=[query_invoice],
    )
    tech = Agent(
        name="tech_support",
        description="Server outages, alarms and restarts.",
        instructions="You are a cloud operations engineer. Answer in one sentence.",
        tools=[restart_server],
    )
    return Team([triage, billing, tech], entry="triage", model=LocalModel())


async def test_local_model_hands_off_and_calls_the_tool_in_english(team: Team) -> None:
    CALLS.clear()
    result = await team.run("please check the invoice for order ORD-202607-99")
    assert result.status == "completed", result.error
    assert result.path == ["triage", "billing"]
    assert CALLS == [("query_invoice", {"order_id": "ORD-202607-99"})]
    assert "299" in (result.output or "")
    usage = result.usage["billing"]
    assert usage.input_tokens > 0 and usage.output_tokens > 0


async def test_local_model_hands_off_and_calls_the_tool_in_chinese(team: Team) -> None:
    CALLS.clear()
    result = await team.run(
        "大事不好了，我们的生产服务器 srv-bj-001 发生告警，请帮我执行紧急重启！"
    )
    assert result.status == "completed", result.error
    assert result.path == ["triage", "tech_support"]
    assert CALLS == [("restart_server", {"server_id": "srv-bj-001"})]


async def test_a_prompt_over_the_context_window_fails_with_a_clear_error() -> None:
    require_local_model()
    small = LocalModel(n_ctx=256)  # a window the instructions alone overflow
    agent = Agent(name="solo", instructions="Answer briefly. " + "Be precise and polite. " * 80)
    result = await Team([agent], entry="solo", model=small).run("hello")
    assert result.status == "failed"
    assert "context window of 256 tokens" in (result.error or "")
    assert "LocalModel(n_ctx=...)" in (result.error or "")
    assert "provider's URL" not in (result.error or "")
