"""The desk across three processes: this one runs the desk, whose billing agent's tools come
from an MCP server (a stdio child process) and whose tech support is a remote A2A agent
(`baton a2a serve` of the desk's tech support, a process of its own). The demo's invoice and
restart requests end as on one machine, and each is one trace: the W3C trace context crosses
MCP's `_meta` and A2A's message metadata."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from a2a_kit import free_port, start_server, stop

from baton import Agent, Guards, Team
from baton.a2a import RemoteAgent
from baton.backends.sqlite import SQLiteStore
from baton.desk.data import DeskDB
from baton.desk.policy import scripted_desk_model
from baton.desk.script import DEMO
from baton.desk.team import build_agents
from baton.mcp import MCPServer

HERE = Path(__file__).resolve().parent
INVOICE, RESTART = DEMO[0], DEMO[1]


@pytest.fixture
def tech_url(tmp_path):
    """`baton a2a serve` of the desk's tech support on loopback: its URL and its store."""
    port = free_port()
    store = tmp_path / "tech.db"
    proc = start_server(f"sqlite:///{store}", port, team="desk_tech_team:team")
    try:
        yield f"http://127.0.0.1:{port}", store
    finally:
        stop(proc)


def _desk(tmp_path: Path, url: str, trace_log: Path) -> Team:
    agents = {a.name: a for a in build_agents(DeskDB())}
    billing_tools = MCPServer.stdio(
        sys.executable, [str(HERE / "desk_billing_mcp.py"), str(trace_log)], name="billing"
    )
    old = agents["billing"]
    agents["billing"] = Agent(
        name="billing",
        description=old.description,
        instructions=old.instructions,
        tools=[billing_tools.tools(scopes=["billing:read"])],
        scopes=["billing:read"],
        handoffs=list(old.handoffs),
    )
    agents["tech_support"] = RemoteAgent(
        "tech_support", url, description=agents["tech_support"].description, timeout_s=60
    )
    return Team(
        list(agents.values()),
        entry="triage",
        guards=Guards(max_hops=4, max_visits=2),
        fallback="human",
        model=scripted_desk_model(),
        store=f"sqlite:///{tmp_path / 'desk.db'}",
    )


def _trace_of(traceparent: str) -> str:
    found = re.fullmatch(r"00-([0-9a-f]{32})-[0-9a-f]{16}-01", traceparent)
    assert found, traceparent
    return found.group(1)


async def test_the_invoice_and_restart_requests_cross_three_processes_in_one_trace(
    tmp_path, tech_url
):
    url, tech_store = tech_url
    trace_log = tmp_path / "mcp-traces.log"
    async with _desk(tmp_path, url, trace_log) as desk:
        invoice = await desk.run(INVOICE.text, session_id="A")
        restart = await desk.run(RESTART.text, session_id="B")

    # the invoice: triage -> billing, whose query_invoice ran on the MCP server
    assert invoice.status == "completed", invoice.error
    assert tuple(invoice.path) == INVOICE.expect_path
    assert "INV-88001" in (invoice.output or "")
    calls = trace_log.read_text(encoding="utf-8").split()
    assert calls[0] == "query_invoice"
    assert _trace_of(calls[1]) == invoice.trace_id  # one trace: desk -> MCP server

    # the restart: triage -> tech_support, which ran on the A2A server
    assert restart.status == "completed", restart.error
    assert tuple(restart.path) == RESTART.expect_path
    assert "srv-bj-001" in (restart.output or "")
    remote = SQLiteStore(f"sqlite:///{tech_store}", read_only=True)
    try:
        events = await remote.get_events(trace_id=restart.trace_id)  # one trace: desk -> A2A
    finally:
        await remote.close()
    assert events, "the remote run did not join the desk's trace"
    ran = [e.tool for e in events if e.type == "tool_called"]
    assert ran == ["restart_server"]
    handed = [e for e in restart.events if e.type == "handoff"]
    assert [h.payload.state for h in handed] == [{"server_id": "srv-bj-001"}]
