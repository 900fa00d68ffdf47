"""Mermaid flowcharts of topologies, and `baton graph`."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from baton import Agent, ScriptedModel, Supervisor, Team, tool
from baton.cli.app import app
from baton.routing.router import Router
from baton.routing.rules import Rules
from baton.topologies.mermaid import label


@tool
def lookup(order_id: str) -> str:
    """Look an order up."""
    return "found"


def test_a_team_draws_its_entry_handoffs_tools_and_fallback() -> None:
    team = Team(
        [
            Agent(name="triage", handoffs=["billing", "human"]),
            Agent(name="billing", tools=[lookup]),
        ],
        entry="triage",
        model=ScriptedModel([]),
    )
    text = team.to_mermaid()
    assert text.startswith("flowchart LR\n")
    assert 'n3["billing<br/>lookup"]' in text
    assert "n1 --> n2" in text  # the user reaches the entry agent
    assert 'n2 -->|"hand-off"| n3' in text
    assert 'n4("human")' in text and 'n2 -->|"hand-off"| n4' in text


def test_a_routed_team_draws_the_router() -> None:
    agents = [Agent(name="a", description="orders"), Agent(name="b", description="refunds")]
    team = Team(agents, entry=Router([Rules({"b": "refund"})]), model=ScriptedModel([]))
    text = team.to_mermaid()
    assert '(["router"])' in text and '-.->|"routes"|' in text


def test_a_supervisor_draws_its_workers() -> None:
    sup = Supervisor(
        Agent(name="lead"),
        workers=[Agent(name="faq", tools=[lookup]), Agent(name="policies")],
        model=ScriptedModel([]),
        max_parallel=2,
    )
    text = sup.to_mermaid()
    assert text.count('-.->|"ask, 2 at a time"|') == 2


def test_labels_cannot_break_the_diagram() -> None:
    assert label('x"]; click n1 evil\n%% x') == "x    click n1 evil %% x"
    assert label("") == "-"


def test_baton_graph_prints_the_flowchart() -> None:
    result = CliRunner().invoke(app, ["graph", "examples.customer_service:team"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("flowchart LR")
    bad = CliRunner().invoke(app, ["graph", "nowhere:team"])
    assert bad.exit_code != 0 and "cannot import" in bad.output


def test_baton_graph_prints_a_graph_with_labelled_conditional_edges(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BATON_MODEL", "scripted")
    result = CliRunner().invoke(app, ["graph", "examples.code_fix_loop:graph"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("flowchart LR")
    assert '-.->|"red"|' in result.output and '-.->|"green"|' in result.output
    bad = CliRunner().invoke(app, ["graph", "examples.code_fix_loop:TASK"])
    assert bad.exit_code != 0 and "not a baton Team or Graph" in bad.output
