"""The topology examples run as documented, on their scripted policies."""

from __future__ import annotations

from pathlib import Path

from examples.research_report import build_research_desk, report_policy
from examples.ticket_workflow import build_ticket_workflow, ticket_policy

from baton import ScriptedModel


async def test_the_ticket_workflow_answers_from_its_knowledge_bases(tmp_path: Path) -> None:
    flow = build_ticket_workflow(ScriptedModel(ticket_policy), kb_dir=tmp_path)
    result = await flow.run("When will the invoice for ORD-202608-17 be issued?", session_id="T")
    assert result.status == "completed", result.error
    assert "INV-88017" in (result.output or "") and "3 working days" in (result.output or "")
    # the retrieval supervisor asked the orders worker and two policy bases in one response,
    # as sub-runs of its own
    asks = [e for e in result.events if e.type == "tool_called" and e.tool.startswith("ask_")]
    assert sorted(e.tool for e in asks if e.agent == "retrieve") == [
        "ask_accounts_kb",
        "ask_orders_kb",
        "ask_refunds_kb",
    ]
    workers = ("orders_kb", "refunds_kb", "accounts_kb")
    kb_runs = {e.run_id for e in result.events if e.agent in workers}
    assert len(kb_runs) == 3
    assert {"classify", "retrieve", *workers, "draft", "review"} <= set(result.usage)


async def test_a_low_confidence_ticket_goes_to_a_person(tmp_path: Path) -> None:
    flow = build_ticket_workflow(ScriptedModel(ticket_policy), kb_dir=tmp_path)
    result = await flow.run("hello?", session_id="T")
    assert result.status == "escalated"
    [ticket] = await flow.tickets.list()
    assert "confidence 0.30 (< 0.6)" in ticket.card.reasons[0]
    assert not [e for e in result.events if e.agent == "retrieve"]  # nothing ran after it


async def test_the_research_report_sends_the_unsourced_analysis_back_once() -> None:
    desk = build_research_desk(ScriptedModel(report_policy))
    result = await desk.run("Research the EV battery industry over the last six months")
    assert result.status == "completed", result.error
    steps: dict[str, list[str]] = {}
    for e in result.events:
        if e.type == "task_transitioned":
            steps.setdefault(e.task_id, []).append(e.to_status)
    assert set(steps) == {"trend", "events", "analysis", "summary"}
    assert steps["analysis"].count("processing") == 2 and "retry" in steps["analysis"]
    assert all(s[-1] == "completed" for s in steps.values())
    assert "Sources: https://news.example.com/2026/08/lithium-price" in (result.output or "")
    stored = await desk.store.list_tasks(run_id=result.run_id)
    assert [t.status for t in stored] == ["completed"] * 4
