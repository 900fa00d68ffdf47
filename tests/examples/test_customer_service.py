"""The seed 000 desk (`examples/customer_service.py`): triage passes the baton to billing or
tech support, which use their own tools; both seed scenarios end to end."""

from __future__ import annotations

import importlib
import time
from types import ModuleType
from typing import Any

import pytest

from baton import ScriptedModel, Team


@pytest.fixture
def cs(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """A fresh copy of the example (new store, untouched server table) on its scripted desk."""
    monkeypatch.setenv("BATON_MODEL", "scripted")
    import examples.customer_service as module

    module = importlib.reload(module)
    assert isinstance(module.team, Team)
    return module


def _of(result: Any, kind: str) -> list[Any]:
    return [e for e in result.events if e.type == kind]


def test_the_desk_runs_on_the_scripted_policy_when_asked(cs: ModuleType) -> None:
    assert isinstance(cs.team.default_model, ScriptedModel)
    assert cs.team.entry == "triage" and cs.team.fallback == "human"


def test_the_desk_defaults_to_the_embedded_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BATON_MODEL", raising=False)
    import examples.customer_service as module

    module = importlib.reload(module)
    assert module.team.default_model == "local"
    monkeypatch.setenv("BATON_MODEL", "scripted")
    importlib.reload(module)


async def test_invoice_goes_triage_to_billing_with_query_invoice(cs: ModuleType) -> None:
    t0 = time.time()
    result = await cs.team.run(
        "please check the invoice for order ORD-202607-99", session_id="S-inv", user_id="u-42"
    )

    assert result.status == "completed"
    assert result.path == ["triage", "billing"]
    assert result.output == (
        "The invoice for ORD-202607-99 is ISSUED: 299.0 CNY, download it at "
        "https://invoice.example.com/pdf/ORD-202607-99."
    )

    (tool_ev,) = _of(result, "tool_called")
    assert (tool_ev.tool, tool_ev.agent, tool_ev.ok) == ("query_invoice", "billing", True)
    assert tool_ev.arguments == {"order_id": "ORD-202607-99"}

    (p,) = result.handoffs
    assert _of(result, "handoff")[0].payload == p
    # filled by the kernel
    assert p.trace_id == result.trace_id
    assert p.session_id == "S-inv"
    assert p.user_id == "u-42"
    assert (p.source, p.target, p.hop, p.path) == ("triage", "billing", 1, ["triage"])
    assert p.history_ref == "S-inv"
    assert t0 <= p.created_at <= time.time()
    # written by the model
    assert p.reason == "billing question"
    assert p.objective == "Answer the invoice question"
    assert p.state == {"order_id": "ORD-202607-99"}

    assert result.state["order_id"] == "ORD-202607-99"
    assert set(result.usage) == {"triage", "billing"}
    assert result.events[0].type == "run_started"
    assert result.events[-1].type == "run_finished"


async def test_restart_goes_triage_to_tech_support_with_restart_server_in_chinese(
    cs: ModuleType,
) -> None:
    assert cs.SERVERS["srv-bj-001"]["status"] == "ALARM"

    result = await cs.team.run("服务器 srv-bj-001 告警了，请帮我重启一下", session_id="S-ops")

    assert result.status == "completed"
    assert result.path == ["triage", "tech_support"]
    assert result.output == "Server srv-bj-001 was restarted and is back up."

    (tool_ev,) = _of(result, "tool_called")
    assert (tool_ev.tool, tool_ev.agent, tool_ev.ok) == ("restart_server", "tech_support", True)
    assert tool_ev.arguments == {"server_id": "srv-bj-001"}
    assert cs.SERVERS["srv-bj-001"]["status"] == "RESTARTED"

    (p,) = result.handoffs
    assert (p.source, p.target, p.hop, p.path) == ("triage", "tech_support", 1, ["triage"])
    assert (p.trace_id, p.session_id, p.history_ref) == (result.trace_id, "S-ops", "S-ops")
    assert p.created_at > 0
    assert p.reason == "server incident"
    assert p.objective == "Restore the user's server"
    assert p.state == {"server_id": "srv-bj-001"}

    # the Chinese request is kept intact in the session's transcript
    transcript = await cs.team.store.get_messages("S-ops")
    assert [m.content for m in transcript if m.role == "user"] == [
        "服务器 srv-bj-001 告警了，请帮我重启一下"
    ]
    assert transcript[-1].role == "assistant" and transcript[-1].agent == "tech_support"


async def test_a_follow_up_continues_with_billing_and_remembers_the_order(cs: ModuleType) -> None:
    await cs.team.run("please check the invoice for order ORD-202607-99", session_id="S")

    result = await cs.team.run("can you check that invoice again?", session_id="S")

    assert result.path == ["billing"]
    assert result.status == "completed"
    assert "ORD-202607-99" in (result.output or "")
    (tool_ev,) = _of(result, "tool_called")
    assert tool_ev.arguments == {"order_id": "ORD-202607-99"}


async def test_unknown_order_is_reported_not_invented(cs: ModuleType) -> None:
    result = await cs.team.run("invoice for ORD-209901-1 please", session_id="S")

    assert result.status == "completed"
    assert result.path == ["triage", "billing"]
    (tool_ev,) = _of(result, "tool_called")
    assert tool_ev.ok is False
    assert "no invoice for order ORD-209901-1" in (tool_ev.error or "")
    assert (result.output or "").startswith("Sorry, that did not work")


async def test_a_greeting_stays_with_triage(cs: ModuleType) -> None:
    result = await cs.team.run("hello", session_id="S")
    assert result.path == ["triage"]
    assert result.output == "Hello! I can help with invoices and server incidents."
