"""`MetricsSink`: after real (scripted) runs, every metric equals what the events say."""

from __future__ import annotations

import importlib
import math
import re
import sys
import urllib.request
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from baton import Agent, Guards, ModelRequest, RunResult, ScriptedModel, Team, tool
from baton.core.events import Event
from baton.observe import MetricsSink, metrics_from_events

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

S = ScriptedModel
DESK_REQUESTS = [
    ("please check the invoice for order ORD-202607-99", "S-1"),
    ("and is it paid?", "S-1"),
    ("服务器 srv-bj-001 宕机了，请重启", "S-2"),
    ("hello there", "S-3"),
]


@pytest.fixture
def desk(monkeypatch: pytest.MonkeyPatch) -> Team:
    """A fresh seed 000 desk (examples/customer_service.py) on its scripted policy."""
    monkeypatch.setenv("BATON_MODEL", "scripted")
    import examples.customer_service as module

    return importlib.reload(module).team


def value(sink: MetricsSink, name: str, **labels: str) -> float:
    """A sample's value; 0 when the series does not exist."""
    got = sink.registry.get_sample_value(name, labels)
    return 0.0 if got is None else got


def events_of(results: Sequence[RunResult]) -> list[Event]:
    return [e for r in results for e in r.events]


def assert_matches_events(sink: MetricsSink, events: Sequence[Event]) -> None:
    """Every metric of `sink` equals the count computed straight from `events`."""
    handoffs = Counter((e.payload.source, e.payload.target) for e in events if e.type == "handoff")
    for (source, target), n in handoffs.items():
        assert value(sink, "baton_handoffs_total", source=source, target=target) == n
    assert sum(s.value for s in samples(sink, "baton_handoffs_total")) == sum(handoffs.values())

    tokens: Counter[tuple[str, str]] = Counter()
    for e in events:
        if e.type == "model_called":
            tokens[(e.agent, "input")] += e.usage.input_tokens
            tokens[(e.agent, "output")] += e.usage.output_tokens
    assert tokens
    for (agent, kind), n in tokens.items():
        assert value(sink, "baton_tokens_total", agent=agent, kind=kind) == n
    assert len(samples(sink, "baton_tokens_total")) == len(tokens)

    guards = Counter(e.guard for e in events if e.type == "guard_tripped")
    assert {s.labels["guard"]: s.value for s in samples(sink, "baton_guard_trips_total")} == guards
    tiers = Counter(e.tier for e in events if e.type == "route_decided")
    assert {
        s.labels["tier"]: s.value for s in samples(sink, "baton_route_decisions_total")
    } == tiers
    statuses = Counter(e.status for e in events if e.type == "run_finished")
    assert {s.labels["status"]: s.value for s in samples(sink, "baton_runs_total")} == statuses
    tools = Counter((e.tool, str(e.ok).lower()) for e in events if e.type == "tool_called")
    assert {
        (s.labels["tool"], s.labels["ok"]): s.value for s in samples(sink, "baton_tool_calls_total")
    } == tools

    # hops: one observation per finished run, summing to the hand-offs
    finished = [e for e in events if e.type == "run_finished"]
    assert value(sink, "baton_hops_count") == len(finished)
    assert value(sink, "baton_hops_sum") == sum(handoffs.values())
    for le in (0, 1, 2):
        assert value(sink, "baton_hops_bucket", le=f"{float(le)}") == sum(
            1 for e in finished if e.hop <= le
        )

    # agent latency: one observation per turn, the turn's model + tool seconds
    turns = Counter(e.agent for e in events if e.type == "agent_started")
    seconds: Counter[str] = Counter()
    for e in events:
        if e.type in ("model_called", "tool_called"):
            seconds[e.agent] += e.latency_ms / 1000
    for agent, n in turns.items():
        assert value(sink, "baton_agent_latency_seconds_count", agent=agent) == n
        assert value(sink, "baton_agent_latency_seconds_sum", agent=agent) == pytest.approx(
            seconds[agent]
        )


def samples(sink: MetricsSink, name: str) -> list[Any]:
    return [s for m in sink.registry.collect() for s in m.samples if s.name == name]


async def test_the_desk_metrics_equal_the_counts_of_its_events(desk: Team) -> None:
    sink = MetricsSink()
    desk.add_sink(sink)
    results = [await desk.run(text, session_id=sid) for text, sid in DESK_REQUESTS]
    assert [r.path for r in results] == [
        ["triage", "billing"],
        ["billing"],
        ["triage", "tech_support"],
        ["triage"],
    ]
    assert_matches_events(sink, events_of(results))
    assert value(sink, "baton_handoffs_total", source="triage", target="billing") == 1
    assert value(sink, "baton_route_decisions_total", tier="session") == 1
    # both hand-offs went to the agent that answered: efficiency 1
    assert value(sink, "baton_handoffs_resolved_total", source="triage", target="billing") == 1
    assert value(sink, "baton_handoff_efficiency") == 1.0
    assert sink.efficiency == 1.0


async def test_handoffs_of_escalated_or_failed_runs_are_not_resolved() -> None:
    # escalated: a -> b, then b -> c trips max_hops=1
    escalating = MetricsSink()
    team = Team(
        [Agent(name="a", handoffs=["b"]), Agent(name="b", handoffs=["c"]), Agent(name="c")],
        entry="a",
        guards=Guards(max_hops=1),
        model=S(
            {
                "a": [S.call("transfer_to_b", reason="b first", objective="help")],
                "b": [S.call("transfer_to_c", reason="c owns it", objective="finish")],
            }
        ),
        sinks=[escalating],
    )
    first = await team.run("help", session_id="E-1")
    assert first.status == "escalated" and first.path == ["a", "b"]
    assert_matches_events(escalating, first.events)
    assert value(escalating, "baton_guard_trips_total", guard="max_hops") == 1
    assert value(escalating, "baton_escalations_total", to="human") == 1
    assert value(escalating, "baton_runs_total", status="escalated") == 1
    assert escalating.efficiency == 0.0

    # failed: a -> b, then b's model fails
    failing = MetricsSink()
    team = Team(
        [Agent(name="a", handoffs=["b"]), Agent(name="b")],
        entry="a",
        model=S(
            {
                "a": [S.call("transfer_to_b", reason="b first", objective="help")],
                "b": [S.fail("provider down")],
            }
        ),
        sinks=[failing],
    )
    second = await team.run("help", session_id="E-2")
    assert second.status == "failed" and second.holder == "b"
    assert_matches_events(failing, second.events)
    assert value(failing, "baton_handoffs_total", source="a", target="b") == 1
    assert value(failing, "baton_handoffs_resolved_total", source="a", target="b") == 0
    assert value(failing, "baton_handoff_efficiency") == 0.0


async def test_efficiency_is_resolved_over_all_handoffs() -> None:
    # run 1: triage -> billing, billing answers (resolved)
    # run 2: triage -> billing -> tech, tech answers (only billing -> tech resolved)
    model = S(
        {
            "triage": [
                S.call("transfer_to_billing", reason="bill", objective="o"),
                S.call("transfer_to_billing", reason="bill?", objective="o2"),
            ],
            "billing": [
                S.say("here is your bill"),
                S.call("transfer_to_tech", reason="it is a server issue", objective="o3"),
            ],
            "tech": [S.say("restarted")],
        }
    )
    sink = MetricsSink()
    team = Team(
        [
            Agent(name="triage", handoffs=["billing"]),
            Agent(name="billing", handoffs=["tech"]),
            Agent(name="tech"),
        ],
        entry="triage",
        model=model,
        sinks=[sink],
    )
    r1 = await team.run("my bill", session_id="R-1")
    r2 = await team.run("my bill and my server", session_id="R-2")
    assert (r1.path, r2.path) == (["triage", "billing"], ["triage", "billing", "tech"])
    assert_matches_events(sink, events_of([r1, r2]))
    assert value(sink, "baton_handoffs_total", source="triage", target="billing") == 2
    assert value(sink, "baton_handoffs_resolved_total", source="triage", target="billing") == 1
    assert value(sink, "baton_handoffs_resolved_total", source="billing", target="tech") == 1
    assert sink.efficiency == pytest.approx(2 / 3)
    assert value(sink, "baton_handoff_efficiency") == pytest.approx(2 / 3)


def test_efficiency_is_nan_before_any_handoff() -> None:
    sink = MetricsSink()
    assert sink.efficiency is None
    assert math.isnan(value(sink, "baton_handoff_efficiency"))


async def test_stored_events_give_the_same_metrics_as_the_live_sink(
    desk: Team, tmp_path: Path
) -> None:
    live = MetricsSink()
    desk.add_sink(live)
    desk.use_store(f"sqlite:///{tmp_path}/m.db")
    for text, sid in DESK_REQUESTS:
        await desk.run(text, session_id=sid)
    stored = await desk.store.get_events()
    await desk.store.close()
    rebuilt = metrics_from_events(stored)
    assert without_created(rebuilt.render()) == without_created(live.render())
    assert_matches_events(rebuilt, stored)


def without_created(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if "_created" not in line)


def test_render_is_prometheus_text_and_sinks_use_their_own_registry() -> None:
    first, second = MetricsSink(), MetricsSink()  # no "duplicated timeseries" error
    assert first.registry is not second.registry
    assert REGISTRY.get_sample_value("baton_runs_total", {"status": "completed"}) is None
    run = Team([Agent(name="a")], entry="a", model=S([S.say("hi")]), sinks=[first])
    result = run.run_sync("hello")
    text = first.render()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["baton_runs"].type == "counter"
    assert families["baton_hops"].type == "histogram"
    assert families["baton_handoff_efficiency"].type == "gauge"
    assert 'baton_runs_total{status="completed"} 1.0' in text
    tokens = result.usage["a"]
    assert f'baton_tokens_total{{agent="a",kind="input"}} {float(tokens.input_tokens)}' in text
    assert second.registry.get_sample_value("baton_runs_total", {"status": "completed"}) is None


def test_a_given_registry_is_used() -> None:
    registry = CollectorRegistry()
    sink = MetricsSink(registry)
    assert sink.registry is registry
    assert registry.get_sample_value("baton_hops_count") == 0.0


def test_serve_exposes_the_metrics_over_http() -> None:
    sink = MetricsSink()
    Team([Agent(name="a")], entry="a", model=S([S.say("hi")]), sinks=[sink]).run_sync("hello")
    server = sink.serve(port=0)
    try:
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        body = urllib.request.urlopen(url, timeout=5).read().decode()
    finally:
        server.shutdown()
        server.server_close()
    assert re.search(r'^baton_runs_total\{status="completed"\} 1\.0$', body, re.M)


def test_a_broken_event_never_raises() -> None:
    sink = MetricsSink()
    sink.emit(object())  # type: ignore[arg-type]
    assert sink.efficiency is None


def test_the_docs_metrics_section_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    text = (ROOT / "docs" / "observability.md").read_text(encoding="utf-8")
    start = text.index("## Metrics (Prometheus)\n")
    end = text.find("\n## ", start + 10)
    section = text[start : end if end != -1 else len(text)]
    blocks = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert blocks
    namespace: dict[str, object] = {"__name__": "doc_metrics"}
    for i, block in enumerate(blocks, 1):
        exec(compile(block, f"observability.md metrics [{i}]", "exec"), namespace)


# ---------------------------------------------------------------- flooding


def handoff(target: str) -> Any:
    return S.call(f"transfer_to_{target}", reason="belongs there", objective="help the user")


def flooding_desk(invented: int, **team: Any) -> Team:
    """triage -> billing (tool `lookup`); billing's first reply calls `invented` tools that do
    not exist and hands off to `invented` agents that do not exist, all in one response."""

    @tool
    async def lookup(order_id: str) -> str:
        """Look an order up."""
        return f"{order_id}: paid"

    def respond(request: ModelRequest) -> Any:
        if request.agent == "triage":
            return handoff("billing")
        if request.messages[-1].role == "tool":
            return S.say("ORD-1 is paid.")
        made_up = [S.call(f"tool_{i}_{id(request)}", x=i) for i in range(invented)]
        made_up += [handoff(f"agent_{i}_{id(request)}") for i in range(invented)]
        return S.calls(S.call("lookup", order_id="ORD-1"), *made_up)

    triage = Agent(name="triage", handoffs=["billing"])
    billing = Agent(name="billing", tools=[lookup])
    return Team([triage, billing], entry="triage", model=S(respond), **team)


def series(registry: CollectorRegistry) -> int:
    return sum(len(m.samples) for m in registry.collect())


@pytest.mark.parametrize("attach", ["constructor", "add_sink"])
async def test_invented_tool_names_and_targets_add_no_series(attach: str) -> None:
    sink = MetricsSink()
    team = flooding_desk(40, sinks=[sink]) if attach == "constructor" else flooding_desk(40)
    if attach == "add_sink":
        team.add_sink(sink)
    first = await team.run("where is ORD-1?", session_id="warm-up")  # "other" exists now
    assert first.status == "completed"
    before = series(sink.registry)

    result = await team.run("where is ORD-1?", session_id="flood")

    assert result.status == "completed"
    assert series(sink.registry) == before
    refused = [e for e in result.events if e.type == "handoff_refused"]
    assert len(refused) == 40
    assert value(sink, "baton_tool_calls_total", tool="other", ok="false") == 80
    assert value(sink, "baton_tool_calls_total", tool="lookup", ok="true") == 2
    assert value(sink, "baton_handoffs_refused_total", source="billing", target="other") == 80
    assert value(sink, "baton_handoffs_total", source="triage", target="billing") == 2
    assert "tool_0_" not in sink.render() and "agent_0_" not in sink.render()


async def test_the_names_come_from_the_attached_team_or_are_given_by_hand() -> None:
    team = flooding_desk(3)
    sink = MetricsSink()
    team.add_sink(sink)
    events = (await team.run("where is ORD-1?")).events
    assert value(sink, "baton_tool_calls_total", tool="other", ok="false") == 3
    assert "tool_0_" not in sink.render()
    team.remove_sink(sink)  # no team any more: names are labels as they come
    for event in events:
        sink.emit(event)
    assert "tool_0_" in sink.render()
    bound = metrics_from_events(events, names=team.declared_names())
    assert value(bound, "baton_tool_calls_total", tool="other", ok="false") == 3
    assert "tool_0_" not in bound.render() and "agent_0_" not in bound.render()
    assert "tool_0_" in metrics_from_events(events).render()  # no names given: as they come


async def test_the_server_metrics_cannot_be_flooded_either() -> None:
    from tests.server.server_kit import client_for

    from baton.server import create_app

    team = flooding_desk(40)
    async with client_for(create_app(team)) as client:  # open mode: every request may run
        await client.post("/runs", json={"message": "where is ORD-1?", "session_id": "A"})
        before = (await client.get("/metrics")).text
        await client.post("/runs", json={"message": "where is ORD-1?", "session_id": "B"})
        after = (await client.get("/metrics")).text
    baton = [
        line for line in after.splitlines() if line.startswith("baton_") and "http" not in line
    ]
    assert len(baton) == len(
        [line for line in before.splitlines() if line.startswith("baton_") and "http" not in line]
    )
    assert "tool_0_" not in after and 'target="other"' in after


async def test_a_graphs_nodes_and_the_tools_they_call_are_declared() -> None:
    from pydantic import BaseModel

    from baton import END, START, Graph, NodeContext

    class State(BaseModel):
        n: int = 0

    def fetch_rate(currency: str) -> float:
        """The rate of a currency."""
        return 7.1

    async def price(state: State, ctx: NodeContext) -> dict[str, Any]:
        return {"n": int(await ctx.call(fetch_rate, currency="CNY"))}

    sink = MetricsSink()
    g = Graph(State).add_node("price", price).add_edge(START, "price").add_edge("price", END)
    graph = g.compile(sinks=[sink])
    assert (await graph.invoke({}, thread_id="T")).status == "completed"
    assert value(sink, "baton_tool_calls_total", tool="price", ok="true") == 1
    assert value(sink, "baton_tool_calls_total", tool="fetch_rate", ok="true") == 1
    assert value(sink, "baton_tool_calls_total", tool="other", ok="true") == 0
