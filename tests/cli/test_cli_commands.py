"""`baton run`, `baton trace` and `baton demo` through typer's test runner."""

from __future__ import annotations

import asyncio
import json
import re
import textwrap
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from baton.cli.app import app
from baton.core.events import event_from_json

INVOICE = "please check the invoice for order ORD-202607-99"
REPLY = "The invoice for ORD-202607-99 is ISSUED"
DESK = "examples.customer_service:team"


def session_of(output: str) -> str:
    m = re.search(r"^session: (\S+)", output, re.M)
    assert m, output
    return m.group(1)


def test_run_prints_reply_path_status_and_streams_events(runner, in_repo, store_url, tmp_path):
    result = runner.invoke(app, ["run", DESK, INVOICE, "--store", store_url])
    assert result.exit_code == 0, result.output
    out = result.output
    assert REPLY in out
    assert "path: triage -> billing" in out
    assert "status: completed" in out
    # the live stream
    assert "triage takes the baton" in out
    assert "hand-off triage -> billing" in out
    assert "state keys: order_id" in out
    assert "tool query_invoice" in out
    # the JSONL log sits next to the database
    lines = (tmp_path / "events.jsonl").read_text(encoding="utf-8").splitlines()
    events = [event_from_json(line) for line in lines]
    assert events[0].type == "run_started"
    assert events[-1].type == "run_finished"
    assert {e.session_id for e in events} == {session_of(out)}


def test_run_quiet_and_session_follow_up(runner, in_repo, store_url):
    first = runner.invoke(app, ["run", DESK, INVOICE, "--store", store_url, "--quiet"])
    assert first.exit_code == 0, first.output
    assert "takes the baton" not in first.output
    sid = session_of(first.output)
    again = runner.invoke(
        app, ["run", DESK, "and is it paid?", "--store", store_url, "-s", sid, "-u", "u1", "-q"]
    )
    assert again.exit_code == 0, again.output
    assert "path: billing" in again.output
    assert REPLY in again.output  # the order id was not asked for again
    assert session_of(again.output) == sid


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("examples.customer_service", "expected MODULE:ATTRIBUTE"),
        ("no_such_module_xyz:team", "cannot import module 'no_such_module_xyz'"),
        ("examples.customer_service:nope", "has no attribute 'nope'"),
        ("examples.customer_service:INVOICES", "is a dict, not a baton Team"),
    ],
)
def test_run_with_a_bad_target_fails_clearly(runner, in_repo, store_url, spec, message):
    result = runner.invoke(app, ["run", spec, "hello", "--store", store_url])
    assert result.exit_code == 2
    assert "error:" in result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.output
    assert isinstance(result.exception, SystemExit)


def test_run_with_a_module_that_raises_on_import(runner, tmp_path, monkeypatch, store_url):
    name = f"broken_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text("raise RuntimeError('bad config')\n")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["run", f"{name}:team", "hello", "--store", store_url])
    assert result.exit_code == 2
    assert "RuntimeError: bad config" in result.stderr
    assert "Traceback" not in result.output


def test_run_with_a_bad_store_url_fails_clearly(runner, in_repo):
    result = runner.invoke(app, ["run", DESK, "hello", "--store", "mongodb://nowhere"])
    assert result.exit_code == 2
    assert "unknown store URL" in result.stderr
    assert "Traceback" not in result.output


def test_run_exits_1_when_the_run_fails(runner, tmp_path, monkeypatch, store_url):
    name = f"failing_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            """
            from baton import Agent, ScriptedModel, Team

            team = Team([Agent(name="a")], entry="a",
                        model=ScriptedModel({"a": [ScriptedModel.fail("provider down")]}))
            """
        )
    )
    monkeypatch.chdir(tmp_path)  # the CLI puts the working directory on sys.path
    result = runner.invoke(app, ["run", f"{name}:team", "hello", "--store", store_url])
    assert result.exit_code == 1, result.output
    assert "status: failed" in result.output
    assert "provider down" in result.output


def test_run_default_store_is_sqlite_under_dot_baton(runner, tmp_path, monkeypatch):
    name = f"hello_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            """
            from baton import Agent, ScriptedModel, Team

            team = Team([Agent(name="a")], entry="a",
                        model=ScriptedModel([ScriptedModel.say("hi there")], loop=True))
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["run", f"{name}:team", "hello", "-q"])
    assert result.exit_code == 0, result.output
    assert "reply: hi there" in result.output
    assert (tmp_path / ".baton" / "baton.db").exists()
    assert (tmp_path / ".baton" / "events.jsonl").exists()
    sid = session_of(result.output)
    shown = runner.invoke(app, ["trace", sid])
    assert shown.exit_code == 0, shown.output
    assert "hi there" in shown.output


def test_trace_text_shows_every_step(runner, in_repo, store_url):
    sid = session_of(runner.invoke(app, ["run", DESK, INVOICE, "--store", store_url]).output)
    runner.invoke(app, ["run", DESK, "and is it paid?", "--store", store_url, "-s", sid])
    result = runner.invoke(app, ["trace", sid, "--store", store_url])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "run 1/2" in out and "run 2/2" in out
    assert INVOICE in out
    for text in (
        "billing",
        "query_invoice",
        "hand-off",
        "billing question",
        "order_id",
        "transfer_to_billing",
        "path: triage -> billing",
        "status: completed",
    ):
        assert text in out, text
    assert "ORD-202607-99 is ISSUED" in out  # the reply line, not hand-off state
    assert f"session {sid}: 2 runs" in out


def test_trace_json_prints_event_lines(runner, in_repo, store_url):
    sid = session_of(runner.invoke(app, ["run", DESK, INVOICE, "--store", store_url]).output)
    result = runner.invoke(app, ["trace", sid, "--store", store_url, "--format", "json"])
    assert result.exit_code == 0, result.output
    events = [event_from_json(line) for line in result.stdout.splitlines()]
    types = [e.type for e in events]
    assert types[0] == "run_started" and types[-1] == "run_finished"
    assert "handoff" in types and "tool_called" in types
    assert json.loads(result.stdout.splitlines()[0])["session_id"] == sid


def test_trace_of_an_unknown_session_fails_clearly(runner, in_repo, store_url):
    runner.invoke(app, ["run", DESK, INVOICE, "--store", store_url, "-q"])
    result = runner.invoke(app, ["trace", "s_nope", "--store", store_url])
    assert result.exit_code == 1
    assert "session 's_nope' has no events" in result.stderr
    assert "recent sessions: s_" in result.stderr
    assert "Traceback" not in result.output


def test_trace_without_a_store_file_fails_clearly(runner, tmp_path):
    url = f"sqlite:///{tmp_path}/missing.db"
    result = runner.invoke(app, ["trace", "s_x", "--store", url])
    assert result.exit_code == 1
    assert "no store at" in result.stderr
    assert not (tmp_path / "missing.db").exists()


def test_the_imported_team_is_left_as_it_was(runner, in_repo, store_url):
    from examples.customer_service import team

    store, sinks = team.store, list(team.sinks)
    assert runner.invoke(app, ["run", DESK, INVOICE, "--store", store_url]).exit_code == 0
    assert runner.invoke(app, ["demo"]).exit_code == 0
    assert team.store is store
    assert team.sinks == sinks


def test_a_command_runs_a_binding_and_never_the_imported_team(runner, in_repo, store_url):
    from examples.customer_service import team

    from baton import SQLiteStore

    async def sessions(store):
        return [s.session_id for s in await store.list_sessions(limit=10_000)]

    before = asyncio.run(sessions(team.store))
    args = ["run", DESK, INVOICE, "--store", store_url, "--session", "BIND-1"]
    assert runner.invoke(app, args).exit_code == 0

    async def stored() -> list[str]:
        store = SQLiteStore(store_url)
        try:
            return await sessions(store)
        finally:
            await store.close()

    assert asyncio.run(stored()) == ["BIND-1"]  # the run went to --store
    assert asyncio.run(sessions(team.store)) == before  # the team's own store never saw it
    assert asyncio.run(team.unfinished()) == []


def test_demo_plays_the_desk_and_summarises(runner, in_repo):
    result = runner.invoke(app, ["demo", "--model", "scripted"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "NOT a language model" in " ".join(out.split())
    assert out.index("scripted model") < out.index("takes the baton")
    assert "大事不好了，我们的生产服务器 srv-bj-001 发生告警，请帮我紧急重启！" in out
    assert "hand-off triage -> billing" in out
    assert "hand-off triage -> tech_support" in out
    assert "hand-off after_sales -> billing" in out
    assert "escalated to human" in out
    summary = out[out.index("demo summary") :]
    assert "triage -> orders" in summary
    assert summary.count("✓") == 6
    assert "6/6 as expected" in out
    assert "human queue: 1 ticket(s)" in out


def test_demo_interactive_chats_in_one_session(runner, in_repo):
    result = runner.invoke(
        app,
        ["demo", "--model", "scripted", "--interactive"],
        input="check the invoice ORD-202607-99\n那这张发票的金额是多少？\nexit\n",
    )
    assert result.exit_code == 0, result.output
    out = result.output
    assert "scripted model" in out
    summary = out[out.index("demo summary") :]
    assert "triage -> billing" in summary
    assert "Could you give me the order" not in out  # the follow-up kept the order id


def test_demo_interactive_stops_at_end_of_input(runner, in_repo):
    result = runner.invoke(app, ["demo", "--model", "scripted", "-i"], input="")
    assert result.exit_code == 0, result.output
    assert "demo summary" not in result.output


def test_version(runner: CliRunner) -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.startswith("baton ")


def test_help_lists_the_commands(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for name in ("run", "trace", "demo"):
        assert name in result.output
