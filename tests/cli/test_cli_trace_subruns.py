"""`baton trace` nests sub-runs (a pipeline's stages, a supervisor's workers) under the
`ask_<worker>` call that delegated them, in every view and format."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from examples.ticket_workflow import build_ticket_workflow, ticket_policy
from typer.testing import CliRunner

from baton import Agent, ScriptedModel, Supervisor, tool
from baton.backends import SQLiteStore
from baton.backends.base import SessionRecord
from baton.cli.app import app
from baton.core.events import AgentStarted, Event, ModelCalled, RunFinished, RunStarted
from baton.core.messages import Usage
from baton.models.base import ModelRequest
from baton.observe.tree import build_tree, run_numbers, walk

S = ScriptedModel
TICKET = "When will the invoice for ORD-202608-17 be issued?"


def trace(runner: CliRunner, url: str, session: str, *args: str) -> str:
    result = runner.invoke(app, ["trace", session, "--store", url, *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def indent(line: str) -> int:
    """Where a tree line's text begins (after the guides)."""
    m = re.search(r"[A-Za-z]", line)
    assert m, line
    return m.start()


def line_of(lines: list[str], pattern: str, start: int = 0) -> int:
    """Index of the first line from `start` matching `pattern`."""
    return next(i for i, line in enumerate(lines) if i >= start and re.search(pattern, line))


# ------------------------------------------------------------------- the ticket workflow
@pytest.fixture(scope="module")
def ticket(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, int]:
    """The scripted ticket workflow run into a SQLite store: (url, session, total tokens)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('tickets')}/t.db"

    async def go() -> tuple[str, int]:
        kbs = tmp_path_factory.mktemp("kbs")
        flow = build_ticket_workflow(ScriptedModel(ticket_policy), kb_dir=kbs)
        flow.use_store(SQLiteStore(url))
        try:
            result = await flow.run(TICKET, session_id="T1")
        finally:
            await flow.store.close()
        assert result.status == "completed", result.error
        used = result.total_usage
        return result.session_id, used.input_tokens + used.output_tokens

    session, tokens = asyncio.run(go())
    return url, session, tokens


def test_the_tree_counts_one_run_and_nests_stages_and_workers(runner, ticket):
    url, session, tokens = ticket
    out = trace(runner, url, session, "--view", "tree")
    assert "run 1/1 · " in out and "run 2" not in out
    assert "unfinished" not in out
    assert f"session {session}: 1 run, {tokens} tokens" in out
    lines = out.splitlines()
    # every stage's turn sits under the conductor's call that asked it
    for stage in ("classify", "retrieve", "draft", "review"):
        call = line_of(lines, rf"tool call  ask_{stage} ok")
        turn = line_of(lines, rf"{stage}  hop 0  asked by tickets")
        assert turn == call + 1 and indent(lines[turn]) == indent(lines[call]) + 4, out
    # both knowledge bases under the retrieval stage's calls, one level deeper again
    retrieve = line_of(lines, r"retrieve  hop 0  asked by tickets")
    for kb, tool_name in (
        ("orders_kb", "lookup_order"),
        ("refunds_kb", "search_refunds"),
        ("accounts_kb", "search_accounts"),
    ):
        call = line_of(lines, rf"tool call  ask_{kb} ok", retrieve)
        assert indent(lines[call]) == indent(lines[retrieve]) + 4
        assert re.search(
            rf"{kb}  hop 0  asked by retrieve  · 2 model calls · 1 tool call", lines[call + 1]
        )
        assert indent(lines[call + 1]) == indent(lines[call]) + 4
        step = line_of(lines, rf"tool call  {tool_name} ok", call)
        assert indent(lines[step]) == indent(lines[call + 1]) + 4
    draft = line_of(lines, r"tool call  ask_draft ok")
    assert draft > line_of(lines, r"search_accounts ok")  # the stages in order


def test_the_conductors_turn_shows_as_a_conductor_not_a_model(runner, ticket):
    url, session, _ = ticket
    lines = trace(runner, url, session, "--view", "tree").splitlines()
    lead = lines[line_of(lines, r"tickets  hop 0")]
    assert "· conductor · " in lead and "model call" not in lead and "tokens" not in lead
    stage = lines[line_of(lines, r"classify  hop 0  asked by tickets")]
    assert "conductor" not in stage and "model call" in stage
    doc = json.loads(trace(runner, url, session, "-f", "json", "--view", "tree"))
    [turn] = doc["runs"][0]["turns"]
    assert turn["agent"] == "tickets" and turn["conductor"] is True


def test_the_json_tree_has_subruns_on_the_calls(runner, ticket):
    url, session, tokens = ticket
    doc = json.loads(trace(runner, url, session, "-f", "json", "--view", "tree"))
    [run] = doc["runs"]
    assert run["parent_run_id"] is None and run["status"] == "completed"
    assert run["input_tokens"] + run["output_tokens"] == tokens
    [turn] = run["turns"]
    asks = {s["detail"].split()[0]: s for s in turn["steps"] if s["subruns"]}
    assert list(asks) == ["ask_classify", "ask_retrieve", "ask_draft", "ask_review"]
    for name, step in asks.items():
        [sub] = step["subruns"]
        assert sub["parent_run_id"] == run["run_id"] and sub["parent_call_id"] == step["call_id"]
        assert (sub["status"], sub["index"], sub["error"]) == ("answered", 1, None)
        assert [t["agent"] for t in sub["turns"]] == [name.removeprefix("ask_")]
    assert asks["ask_classify"]["subruns"][0]["message"] == TICKET
    assert '"category":"billing"' in asks["ask_classify"]["subruns"][0]["output"]

    [retrieve] = asks["ask_retrieve"]["subruns"]
    workers = {
        s["detail"].split()[0]: s["subruns"][0]
        for s in retrieve["turns"][0]["steps"]
        if s["subruns"]
    }
    assert sorted(workers) == ["ask_accounts_kb", "ask_orders_kb", "ask_refunds_kb"]
    orders, policy = workers["ask_orders_kb"], workers["ask_accounts_kb"]
    assert orders["message"] == "What is the state of order ORD-202608-17?"
    assert orders["parent_run_id"] == policy["parent_run_id"] == retrieve["run_id"]
    assert orders["start"] < policy["end"] and policy["start"] < orders["end"]  # in parallel
    kinds = [s["kind"] for s in orders["turns"][0]["steps"]]
    assert kinds == ["model_call", "tool_call", "state", "model_call"]
    # a sub-run's tokens include its own sub-runs', as the kernel counts them
    own = sum(s["input_tokens"] or 0 for s in retrieve["turns"][0]["steps"])
    assert retrieve["input_tokens"] == own + sum(w["input_tokens"] for w in workers.values())


def test_the_timeline_and_the_table_indent_the_subruns(runner, ticket):
    url, session, _ = ticket
    timeline = trace(runner, url, session, "--view", "timeline").splitlines()
    rows = {
        agent: line_of(timeline, rf"^\s*[\d.]+\s+{agent}\s+turn ")
        for agent in ("tickets", "retrieve", "orders_kb", "accounts_kb")
    }
    col = {a: timeline[i].index(a) for a, i in rows.items()}
    assert col["tickets"] < col["retrieve"] < col["orders_kb"] == col["accounts_kb"]
    # the workers run in parallel: any may start first
    assert rows["retrieve"] < min(rows["orders_kb"], rows["accounts_kb"])
    assert sum("timeline · " in x for x in timeline) == 1

    table = trace(runner, url, session, "--view", "table").splitlines()
    assert re.search(r"\b1\s+-\s+route", table[line_of(table, r"route")])
    at = {
        agent: table[line_of(table, rf"\s{agent}\s+tool call\s+{tool} ok")].index(f" {agent} ")
        for agent, tool in (
            ("tickets", "ask_retrieve"),
            ("retrieve", "ask_accounts_kb"),
            ("orders_kb", "lookup_order"),
        )
    }
    assert at["tickets"] + 2 == at["retrieve"] == at["orders_kb"] - 2


def test_mermaid_asks_the_workers_and_gets_their_answers(runner, ticket):
    url, session, _ = ticket
    out = trace(runner, url, session, "-f", "mermaid")
    ids = dict(re.findall(r"participant (A\d+) as (\S+)", out))
    pid = {name: p for p, name in ids.items()}
    assert sorted(pid) == [
        "accounts_kb",
        "classify",
        "draft",
        "orders_kb",
        "refunds_kb",
        "retrieve",
        "review",
        "tickets",
    ]
    assert out.count("U->>") == 1  # one run
    r, o = pid["retrieve"], pid["orders_kb"]
    assert f"{pid['tickets']}->>{r}: ask: " in out
    assert f"{r}->>{o}: ask: What is the state of order ORD-202608-17?" in out
    assert re.search(rf"{o}-->>{r}: answer: .*ORD-202608-17", out)
    assert re.search(rf"{pid['accounts_kb']}-->>{r}: answer: .*Invoices are issued", out)
    assert re.search(r"^    par ask_(orders|accounts|refunds)_kb$", out, re.M)
    assert len(re.findall(r"^    and ask_(orders|accounts|refunds)_kb$", out, re.M)) == 2
    assert f"{o}->>{o}: tool lookup_order ok" in out


def test_why_numbers_a_workers_write_by_its_top_level_run(runner, ticket):
    url, session, _ = ticket
    out = trace(runner, url, session, "--why", "order_id")
    assert re.search(r"^1\s+1\s+0\s+orders_kb\s+tool lookup_order", out, re.M), out
    doc = json.loads(trace(runner, url, session, "--why", "order_id", "-f", "json"))
    [write] = doc["writes"]
    assert write["run"] == 1 and write["agent"] == "orders_kb"


# ------------------------------------------------------------ a supervisor, in parallel
def _worker(name: str) -> Agent:
    @tool(name=f"search_{name}")
    async def search(query: str) -> str:
        """Search the knowledge base."""
        await asyncio.sleep(0.05)  # long enough for the other worker to run beside it
        return f"{name} says: refunds take 5 days"

    return Agent(name=name, description=f"the {name} base", tools=[search])


def _respond(request: ModelRequest) -> Any:
    last = request.messages[-1]
    if request.agent == "lead":
        if last.role == "tool":
            return S.say("Refunds take 5 days.")
        asks = (
            S.call(f"ask_{w}", question=f"{w}: refunds?") for w in ("policies", "faq", "broken")
        )
        return S.calls(*asks)
    if request.agent == "broken":
        return S.fail("provider down")
    if last.role == "tool":
        return S.say(last.content or "")
    return S.call(f"search_{request.agent}", query="refund time")


@pytest.fixture
def supervised(store_url: str) -> str:
    """A supervisor asking three workers at once (one of them fails); returns the session."""

    async def go() -> None:
        workers = [_worker("policies"), _worker("faq"), Agent(name="broken", description="x")]
        sup = Supervisor(
            Agent(name="lead"), workers=workers, model=S(_respond), store=SQLiteStore(store_url)
        )
        try:
            result = await sup.run("How long do refunds take?", session_id="SUP")
        finally:
            await sup.store.close()
        assert result.status == "completed", result.error

    asyncio.run(go())
    return "SUP"


def test_parallel_workers_overlap_in_the_timeline(runner, store_url, supervised):
    lines = trace(runner, store_url, supervised, "--view", "timeline").splitlines()
    spans = {}
    for agent in ("policies", "faq"):
        row = lines[line_of(lines, rf"^\s*[\d.]+\s+{agent}\s+turn ")]
        bar = [i for i, ch in enumerate(row) if ch == "█"]
        spans[agent] = (bar[0], bar[-1])
    (a0, a1), (b0, b1) = spans["policies"], spans["faq"]
    assert a0 <= b1 and b0 <= a1, spans


def test_a_failed_worker_shows_its_calls_error(runner, store_url, supervised):
    out = trace(runner, store_url, supervised, "--view", "tree")
    lines = out.splitlines()
    call = line_of(lines, r"tool call  ask_broken error: broken could not answer")
    assert re.search(r"broken  hop 0  asked by lead", lines[call + 1])
    assert "unfinished" not in out and "run 1/1" in out
    doc = json.loads(trace(runner, store_url, supervised, "-f", "json", "--view", "tree"))
    steps = doc["runs"][0]["turns"][0]["steps"]
    status = {s["subruns"][0]["turns"][0]["agent"]: s["subruns"][0] for s in steps if s["subruns"]}
    assert {k: v["status"] for k, v in status.items()} == {
        "policies": "answered",
        "faq": "answered",
        "broken": "failed",
    }
    assert "provider down" in status["broken"]["error"]
    mermaid = trace(runner, store_url, supervised, "-f", "mermaid")
    assert re.search(r"A\d+--xA1: broken could not answer", mermaid)
    assert mermaid.count("    and ask_") == 2 and mermaid.count("    end") == 1


# ------------------------------------------------------------------------- partial data
BASE: dict[str, Any] = {"trace_id": "b" * 32, "session_id": "P1"}


def _store(store_url: str, events: list[Event]) -> None:
    async def write() -> None:
        store = SQLiteStore(store_url)
        try:
            await store.commit_run(SessionRecord("P1"), [], events)
        finally:
            await store.close()

    asyncio.run(write())


def _worker_events(run_id: str, parent: str, call: str, agent: str = "faq") -> list[Event]:
    sub = {**BASE, "run_id": run_id, "parent_run_id": parent, "parent_call_id": call}
    return [
        AgentStarted(**sub, agent=agent, reason="asked by lead"),
        ModelCalled(
            **sub,
            agent=agent,
            model="m",
            usage=Usage(input_tokens=3, output_tokens=4),
            latency_ms=1,
            text="5 days",
        ),
    ]


def test_a_subrun_of_a_missing_run_stays_top_level(runner, store_url):
    lead = {**BASE, "run_id": "run_lead"}
    events: list[Event] = [
        RunStarted(**lead, message="refunds?"),
        AgentStarted(**lead, agent="lead", reason="entry"),
        RunFinished(**lead, agent="lead", status="completed", output="5 days"),
        *_worker_events("run_orphan", "run_gone", "call_gone"),
    ]
    _store(store_url, events)
    out = trace(runner, store_url, "P1")
    assert "run 1/2 · run_lead" in out
    assert "run 2/2 · run_orphan" in out and "sub-run of run_gone, call call_gone" in out
    assert re.search(r"run 2  parent missing", out) and "unfinished" not in out
    assert "P1: 2 runs" in out
    doc = json.loads(trace(runner, store_url, "P1", "-f", "json", "--view", "tree"))
    orphan = doc["runs"][1]
    assert (orphan["status"], orphan["parent_run_id"], orphan["index"]) == (
        "parent missing",
        "run_gone",
        2,
    )
    mermaid = trace(runner, store_url, "P1", "-f", "mermaid")
    assert "Note over A2: run 2: sub-run of run_gone (not among the stored events)" in mermaid
    assert "Note over A2: run 2 parent missing" in mermaid and "A2-->>U" not in mermaid
    trace(runner, store_url, "P1", "--view", "table")


def test_a_call_without_a_result_holds_its_unanswered_subrun(runner, store_url):
    lead = {**BASE, "run_id": "run_lead", "agent": "lead"}
    events: list[Event] = [
        RunStarted(**lead, message="refunds?"),
        AgentStarted(**lead, reason="entry"),
        ModelCalled(
            **lead,
            model="m",
            usage=Usage(input_tokens=1, output_tokens=2),
            latency_ms=1,
            tool_calls=("ask_faq",),
        ),
        *_worker_events("run_w", "run_lead", "call_1"),
        RunFinished(**lead, status="paused"),
    ]
    _store(store_url, events)
    out = trace(runner, store_url, "P1", "--view", "tree")
    lines = out.splitlines()
    call = line_of(lines, r"tool call  ask_faq: no result recorded")
    assert re.search(r"faq  hop 0  asked by lead", lines[call + 1])
    assert "run 1/1" in out and "unfinished" not in out
    [run] = build_tree(events)
    [(depth, _, step)] = [x for x in walk(run) if x[2].subruns]
    assert (depth, step.call_id, step.subruns[0].status) == (0, "call_1", "unanswered")
    assert step.subruns[0].output == "5 days"
    assert "Note over A2: unanswered" in trace(runner, store_url, "P1", "-f", "mermaid")


def test_a_loop_of_parents_does_not_hang():
    events: list[Event] = [
        *_worker_events("run_a", "run_b", "call_b", "faq"),
        *_worker_events("run_b", "run_a", "call_a", "policies"),
    ]
    [top] = build_tree(events)
    assert top.run_id == "run_a" and top.status == "parent missing"
    assert [s.run_id for s in top.subruns()] == ["run_b"]
    assert run_numbers(events) == {"run_a": 1, "run_b": 1}


def test_plain_team_json_keeps_its_keys(runner, in_repo: Path, store_url):
    args = ["run", "examples.customer_service:team", "invoice for ORD-202607-99", "--store"]
    result = runner.invoke(app, [*args, store_url, "-q"])
    assert result.exit_code == 0, result.output
    session = re.search(r"^session: (\S+)", result.output, re.M)
    assert session
    doc = json.loads(trace(runner, store_url, session.group(1), "-f", "json", "--view", "tree"))
    [run] = doc["runs"]
    assert run["parent_run_id"] is None and run["index"] == 1
    for t in run["turns"]:
        for s in t["steps"]:
            assert s["subruns"] == []
            assert {"kind", "detail", "agent", "hop", "event_id", "start", "end"} <= set(s)
