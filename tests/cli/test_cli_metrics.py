"""`baton metrics`: the metrics of the runs in a SQLite store, as a table or Prometheus text."""

from __future__ import annotations

import asyncio
import re
from collections import Counter

from prometheus_client.parser import text_string_to_metric_families

from baton.backends.sqlite import SQLiteStore
from baton.cli.app import app
from baton.core.events import Event

DESK = "examples.customer_service:team"
REQUESTS = [
    "please check the invoice for order ORD-202607-99",
    "服务器 srv-bj-001 宕机了，请重启",
    "hello there",
]


def run_desk(runner, store_url: str) -> list[str]:
    """Run the seed 000 desk once per request (new session each); the session ids."""
    sessions = []
    for text in REQUESTS:
        result = runner.invoke(app, ["run", DESK, text, "--store", store_url, "-q"])
        assert result.exit_code == 0, result.output
        m = re.search(r"^session: (\S+)", result.output, re.M)
        assert m, result.output
        sessions.append(m.group(1))
    return sessions


def stored_events(store_url: str, session: str | None = None) -> list[Event]:
    async def load() -> list[Event]:
        store = SQLiteStore(store_url)
        try:
            return await store.get_events(session_id=session)
        finally:
            await store.close()

    return asyncio.run(load())


def prometheus_values(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if not s.name.endswith("_created")
    }


def test_prometheus_format_matches_the_stored_events(runner, in_repo, store_url):
    run_desk(runner, store_url)
    result = runner.invoke(app, ["metrics", "--store", store_url, "--format", "prometheus"])
    assert result.exit_code == 0, result.output
    values = prometheus_values(result.output)
    events = stored_events(store_url)

    handoffs = Counter((e.payload.source, e.payload.target) for e in events if e.type == "handoff")
    assert handoffs == {("triage", "billing"): 1, ("triage", "tech_support"): 1}
    for (source, target), n in handoffs.items():
        key = ("baton_handoffs_total", (("source", source), ("target", target)))
        assert values[key] == n
    tokens: Counter[tuple[str, str]] = Counter()
    for e in events:
        if e.type == "model_called":
            tokens[(e.agent, "input")] += e.usage.input_tokens
            tokens[(e.agent, "output")] += e.usage.output_tokens
    for (agent, kind), n in tokens.items():
        assert values[("baton_tokens_total", (("agent", agent), ("kind", kind)))] == n
    tiers = Counter(e.tier for e in events if e.type == "route_decided")
    for tier, n in tiers.items():
        assert values[("baton_route_decisions_total", (("tier", tier),))] == n
    assert values[("baton_runs_total", (("status", "completed"),))] == 3
    assert values[("baton_hops_count", ())] == 3
    assert values[("baton_hops_sum", ())] == 2
    assert values[("baton_handoff_efficiency", ())] == 1.0


def test_table_format_and_one_session(runner, in_repo, store_url):
    sessions = run_desk(runner, store_url)
    result = runner.invoke(app, ["metrics", "--store", store_url])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "3 runs" in out
    assert re.search(r"baton_handoffs_total\s+source=triage, target=billing\s+1\b", out)
    assert re.search(r"baton_runs_total\s+status=completed\s+3\b", out)
    assert re.search(r"baton_hops\s+3\s+2\s+0\.6667", out)
    assert "hand-off efficiency: 100.0%" in out

    one = runner.invoke(app, ["metrics", "--store", store_url, "--session", sessions[1]])
    assert one.exit_code == 0, one.output
    assert f"session {sessions[1]}" in one.output
    assert re.search(r"baton_handoffs_total\s+source=triage, target=tech_support\s+1\b", one.output)
    assert "target=billing" not in one.output
    events = stored_events(store_url, sessions[1])
    calls = sum(1 for e in events if e.type == "tool_called" and e.tool == "restart_server")
    assert re.search(
        rf"baton_tool_calls_total\s+ok=true, tool=restart_server\s+{calls}\b", one.output
    )


def test_no_store_or_unknown_session_is_a_clear_error(runner, in_repo, store_url, tmp_path):
    missing = runner.invoke(app, ["metrics", "--store", f"sqlite:///{tmp_path}/none.db"])
    assert missing.exit_code == 1
    assert "no store at" in missing.output
    run_desk(runner, store_url)
    unknown = runner.invoke(app, ["metrics", "--store", store_url, "--session", "nope"])
    assert unknown.exit_code == 1
    assert "session 'nope' has no events" in unknown.output
    assert "recent sessions:" in unknown.output
