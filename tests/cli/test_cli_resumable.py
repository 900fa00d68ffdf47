"""`baton run` streaming, `baton resume`, `baton approvals` and `baton tickets`.

The approval tests run `approval_team:team` (tests/cli/approval_team.py): a refunds desk whose
`refund` tool needs a finance sign-off; "human" escalates to the queue; "where is ORD-7" looks an
order up (and, with BATON_TEST_CRASH set, kills the process mid-run).
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from baton.cli.app import app
from baton.cli.output import APPROVER, LivePrinter
from baton.core.events import RunFinished, TextDelta

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TEAM = "approval_team:team"
DESK = "examples.customer_service:team"
REFUND = "please refund 42.5 for order ORD-1"
SCRIPT = Path(sys.executable).parent / "baton"


def session_of(output: str) -> str:
    m = re.search(r"^session: (\S+)", output, re.M)
    assert m, output
    return m.group(1)


def approve_command(output: str) -> list[str]:
    """The `baton approvals approve ...` line a paused run printed, as arguments."""
    m = re.search(r"^approve: baton (approvals approve .+)$", output, re.M)
    assert m, output
    return m.group(1).split()


def decide(kind: str, sid: str, apr: str, by: str, url: str, *extra: str) -> list[str]:
    """Arguments of `baton approvals approve|reject` for the approval team."""
    return ["approvals", kind, sid, apr, "--by", by, "--team", TEAM, "--store", url, *extra]


@pytest.fixture
def in_tests(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run from tests/cli, where `approval_team` lives."""
    monkeypatch.chdir(HERE)
    return HERE


def paused(runner: CliRunner, url: str) -> tuple[str, str, str]:
    """Run a refund until it waits for approval: (session, approval id, output)."""
    ran = runner.invoke(app, ["run", TEAM, REFUND, "--store", url])
    assert ran.exit_code == 0, ran.output
    cmd = approve_command(ran.output)
    return cmd[2], cmd[3], ran.output


def escalated(runner: CliRunner, url: str) -> str:
    """Escalate a session to the human queue (ticket 1 in a fresh store); its session id."""
    ran = runner.invoke(app, ["run", TEAM, "get me a human please", "--store", url, "-q"])
    assert ran.exit_code == 0, ran.output
    assert "status: escalated" in ran.output
    return session_of(ran.output)


def assert_clean_error(result, code: int, message: str) -> None:
    assert result.exit_code == code, result.output
    assert message in result.stderr, result.stderr
    assert result.stderr.startswith("error: ")
    assert "Traceback" not in result.output
    assert isinstance(result.exception, SystemExit)


# ------------------------------------------------------------------------ run, streaming
def test_run_streams_the_reply_before_the_summary(runner, in_repo, store_url):
    result = runner.invoke(
        app, ["run", DESK, "please check the invoice for ORD-202607-99", "--store", store_url]
    )
    assert result.exit_code == 0, result.output
    out = result.output
    live = out.index("billing says: The invoice for ORD-202607-99 is ISSUED")
    assert out.index("triage takes the baton") < live < out.index("■ run completed")
    assert out.index("■ run completed") < out.index("reply: The invoice for ORD-202607-99")
    assert "status: completed" in out
    quiet = runner.invoke(
        app, ["run", DESK, "check the invoice ORD-202607-99", "--store", store_url, "-q"]
    )
    assert quiet.exit_code == 0, quiet.output
    assert "says:" not in quiet.output
    assert "reply: The invoice for ORD-202607-99" in quiet.output


def test_live_printer_writes_each_piece_as_it_arrives():
    from rich.console import Console

    buf = io.StringIO()
    printer = LivePrinter(Console(file=buf, width=200, no_color=True, highlight=False))
    base = {"trace_id": "t", "session_id": "s", "run_id": "r", "agent": "billing"}
    printer.feed(TextDelta(**base, text="The invoice "))
    assert buf.getvalue() == "  billing says: The invoice "
    printer.feed(TextDelta(**base, text="is ISSUED."))
    assert buf.getvalue() == "  billing says: The invoice is ISSUED."
    printer.feed(RunFinished(**base, status="completed", path=["billing"]))
    lines = buf.getvalue().splitlines()
    assert lines[0] == "  billing says: The invoice is ISSUED."
    assert lines[1].startswith("■ run completed")


def test_run_that_needs_approval_prints_the_card_and_the_command(runner, in_tests, store_url):
    sid, apr, out = paused(runner, store_url)
    assert "approval needed tool refund" in out  # the live line
    assert "status: awaiting_approval" in out
    assert f"APPROVAL {apr} ({sid})" in out
    assert "refunds wants: tool refund" in out
    assert "Approvers: finance; needs 1; signed: none" in out
    assert (
        f"approve: baton approvals approve {sid} {apr} --by {APPROVER} --role finance "
        f"--team {TEAM} --store {store_url}"
    ) in out
    assert f"reject:  baton approvals reject {sid} {apr} --by {APPROVER} --role finance" in out


def test_run_on_a_session_waiting_for_approval_fails_clearly(runner, in_tests, store_url):
    sid, apr, _ = paused(runner, store_url)
    again = runner.invoke(app, ["run", TEAM, "hello?", "--store", store_url, "-s", sid])
    assert_clean_error(again, 1, f"waits for approval {apr}")


# ----------------------------------------------------------------------------- approvals
def test_approvals_list_shows_what_waits(runner, in_tests, store_url, tmp_path):
    empty = runner.invoke(app, ["approvals", "list", "--store", f"sqlite:///{tmp_path}/no.db"])
    assert empty.exit_code == 0, empty.output
    assert "no approvals waiting" in empty.output
    assert not (tmp_path / "no.db").exists()  # listing does not create a store
    sid, apr, _ = paused(runner, store_url)
    listed = runner.invoke(app, ["approvals", "list", "--store", store_url])
    assert listed.exit_code == 0, listed.output
    row = next(line for line in listed.output.splitlines() if apr in line)
    for text in (sid, "refunds", "tool refund", '"order_id": "ORD-1"', "finance", "0/1", " no"):
        assert text in row, text


def test_approve_resumes_the_run_to_completion(runner, in_tests, store_url):
    sid, apr, _ = paused(runner, store_url)
    done = runner.invoke(
        app,
        decide("approve", sid, apr, "alice", store_url, "--role", "finance"),
    )
    assert done.exit_code == 0, done.output
    out = done.output
    assert f"approval {apr} approved by alice (finance)" in out
    assert "tool refund  ok" in out
    assert "reply: Refunded 42.5 for ORD-1." in out
    assert "status: completed" in out
    assert session_of(out) == sid
    listed = runner.invoke(app, ["approvals", "list", "--store", store_url])
    assert "no approvals waiting" in listed.output
    trace = runner.invoke(app, ["trace", sid, "--store", store_url])
    assert trace.exit_code == 0, trace.output
    assert "Refunded 42.5" in trace.output


def test_approve_with_a_wrong_role_or_id_fails_clearly(runner, in_tests, store_url):
    sid, apr, _ = paused(runner, store_url)
    base = ["--by", "alice", "--team", TEAM, "--store", store_url]
    no_role = runner.invoke(app, ["approvals", "approve", sid, apr, *base])
    assert_clean_error(no_role, 1, "needs one of finance")
    assert len(no_role.stderr.strip().splitlines()) == 1
    wrong_id = runner.invoke(app, ["approvals", "approve", sid, "apr_nope", *base])
    assert_clean_error(wrong_id, 1, "no pending approval 'apr_nope'")
    no_run = runner.invoke(app, ["approvals", "approve", "s_nope", apr, *base])
    assert_clean_error(no_run, 1, "has no run waiting")
    still = runner.invoke(app, ["approvals", "list", "--store", store_url])
    assert apr in still.output  # nothing was decided


def test_reject_resumes_and_the_agent_tells_the_user(runner, in_tests, store_url):
    sid, apr, _ = paused(runner, store_url)
    done = runner.invoke(
        app,
        decide(
            "reject",
            sid,
            apr,
            "bob",
            store_url,
            "--role",
            "finance",
            "--reason",
            "no receipt",
            "-q",
        ),
    )
    assert done.exit_code == 0, done.output
    assert "reply: The refund was not made: not executed: rejected by bob: no receipt" in (
        done.output
    )
    assert "status: completed" in done.output
    assert "tool refund  ok" not in done.output


def test_reject_without_a_store_fails_clearly(runner, in_tests, tmp_path):
    url = f"sqlite:///{tmp_path}/missing.db"
    result = runner.invoke(
        app, ["approvals", "reject", "s_x", "apr_x", "--by", "bob", "--team", TEAM, "--store", url]
    )
    assert_clean_error(result, 1, "no store at")
    assert not (tmp_path / "missing.db").exists()


# -------------------------------------------------------------------------------- resume
def test_resume_list_and_resume_of_a_run_waiting_for_approval(runner, in_tests, store_url):
    sid, apr, _ = paused(runner, store_url)
    listed = runner.invoke(app, ["resume", "--list", "--store", store_url])
    assert listed.exit_code == 0, listed.output
    row = next(line for line in listed.output.splitlines() if sid in line)
    for text in ("run_", "awaiting_approval", "refunds", apr, "ago"):
        assert text in row, text
    again = runner.invoke(app, ["resume", sid, "--team", TEAM, "--store", store_url])
    assert again.exit_code == 0, again.output
    assert "status: awaiting_approval" in again.output  # still waits for a person
    assert f"baton approvals approve {sid} {apr}" in again.output


def test_resume_discard_frees_the_session(runner, in_tests, store_url):
    sid, _, _ = paused(runner, store_url)
    dropped = runner.invoke(app, ["resume", sid, "--discard", "--store", store_url])
    assert dropped.exit_code == 0, dropped.output
    assert "discarded run run_" in dropped.output and "awaiting_approval" in dropped.output
    listed = runner.invoke(app, ["resume", "--list", "--store", store_url])
    assert "no unfinished runs" in listed.output
    again = runner.invoke(app, ["resume", sid, "--discard", "--store", store_url])
    assert_clean_error(again, 1, "has no unfinished run to discard")


def test_resume_errors_are_clear(runner, in_tests, store_url, tmp_path):
    runner.invoke(app, ["run", TEAM, "hello", "--store", store_url, "-q"])
    empty = runner.invoke(app, ["resume", "--list", "--store", store_url])
    assert empty.exit_code == 0
    assert "no unfinished runs" in empty.output
    unknown = runner.invoke(app, ["resume", "s_nope", "--team", TEAM, "--store", store_url])
    assert_clean_error(unknown, 1, "session 's_nope' has no unfinished run")
    no_team = runner.invoke(app, ["resume", "s_nope", "--store", store_url])
    assert_clean_error(no_team, 2, "--team MODULE:ATTRIBUTE")
    missing = runner.invoke(
        app, ["resume", "s_x", "--team", TEAM, "--store", f"sqlite:///{tmp_path}/none.db"]
    )
    assert_clean_error(missing, 1, "no store at")


# ------------------------------------------------------------------------------- tickets
def test_tickets_claim_answer_and_close(runner, in_tests, store_url):
    sid = escalated(runner, store_url)
    listed = runner.invoke(app, ["tickets", "--store", store_url])
    assert listed.exit_code == 0, listed.output
    row = next(line for line in listed.output.splitlines() if sid in line)
    assert row.split()[:2] == ["1", "open"]
    assert "the user asks for a person" in row
    claimed = runner.invoke(app, ["tickets", "claim", "1", "--by", "alice", "--store", store_url])
    assert claimed.exit_code == 0, claimed.output
    assert f"ticket 1 claimed by alice (session {sid})" in claimed.output
    answered = runner.invoke(
        app,
        [
            *("tickets", "answer", "1", "--by", "alice", "--reply", "Refund approved by phone."),
            *("--hand-back-to", "refunds", "--team", TEAM, "--store", store_url),
        ],
    )
    assert answered.exit_code == 0, answered.output
    assert "ticket 1 answered by alice" in answered.output
    assert "the baton goes back to refunds" in answered.output
    shown = runner.invoke(app, ["tickets", "list", "--status", "answered", "--store", store_url])
    assert "Refund approved by phone." in shown.output
    follow = runner.invoke(app, ["run", TEAM, "thanks", "--store", store_url, "-s", sid, "-q"])
    assert "path: refunds" in follow.output  # the agent holds the baton again
    closed = runner.invoke(
        app, ["tickets", "close", "1", "--by", "alice", "--note", "done", "--store", store_url]
    )
    assert closed.exit_code == 0, closed.output
    assert "ticket 1 closed by alice: done" in closed.output
    assert "no open tickets" in runner.invoke(app, ["tickets", "--store", store_url]).output
    every = runner.invoke(app, ["tickets", "--status", "all", "--store", store_url])
    assert re.search(r"^\s*1\s+closed\s", every.output, re.M), every.output


def test_ticket_errors_are_clear(runner, in_tests, store_url):
    escalated(runner, store_url)
    runner.invoke(app, ["tickets", "claim", "1", "--by", "alice", "--store", store_url])
    taken = runner.invoke(app, ["tickets", "claim", "1", "--by", "bob", "--store", store_url])
    assert_clean_error(taken, 1, "ticket 1 is claimed by alice")
    answer = ["tickets", "answer", "1", "--reply", "hi", "--team", TEAM, "--store", store_url]
    not_yours = runner.invoke(app, [*answer, "--by", "bob"])
    assert_clean_error(not_yours, 1, "bob cannot answer it")
    bad_agent = runner.invoke(app, [*answer, "--by", "alice", "--hand-back-to", "nobody"])
    assert_clean_error(bad_agent, 2, "'nobody' is not an agent of the team")
    unknown = runner.invoke(app, ["tickets", "close", "7", "--by", "a", "--store", store_url])
    assert_clean_error(unknown, 1, "no ticket 7")
    runner.invoke(app, ["tickets", "close", "1", "--by", "alice", "--store", store_url])
    twice = runner.invoke(app, ["tickets", "close", "1", "--by", "alice", "--store", store_url])
    assert_clean_error(twice, 1, "ticket 1 is already closed")


def test_the_imported_team_is_left_as_it_was(runner, in_tests, store_url):
    sid, apr, _ = paused(runner, store_url)
    import approval_team

    store, sinks = approval_team.team.store, list(approval_team.team.sinks)
    runner.invoke(
        app,
        decide("approve", sid, apr, "alice", store_url, "--role", "finance"),
    )
    assert approval_team.team.store is store
    assert approval_team.team.sinks == sinks


def test_help_lists_the_new_commands(runner):
    result = runner.invoke(app, ["--help"])
    for name in ("resume", "approvals", "tickets"):
        assert name in result.output


# ---------------------------------------------------------------------------- subprocess
def baton(*args: str, crash: bool = False) -> subprocess.CompletedProcess[str]:
    """The `baton` console script, run from tests/cli (where `approval_team` lives)."""
    cmd = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "baton.cli.app"]
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "PYTHONPATH")}
    env.update(COLUMNS="200", NO_COLOR="1", TERM="dumb", PYTHONIOENCODING="utf-8")
    env.pop("BATON_TEST_CRASH", None)
    if crash:
        env["BATON_TEST_CRASH"] = "1"
    return subprocess.run(
        [*cmd, *args],
        cwd=HERE,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )


def test_a_run_paused_in_one_process_is_approved_in_another(tmp_path):
    url = f"sqlite:///{tmp_path}/b.db"
    ran = baton("run", TEAM, REFUND, "--store", url)
    assert ran.returncode == 0, ran.stderr
    assert "status: awaiting_approval" in ran.stdout
    cmd = [arg if arg != APPROVER else "alice" for arg in approve_command(ran.stdout)]
    done = baton(*cmd)  # the printed command, as the approver types it
    assert done.returncode == 0, done.stderr
    assert "reply: Refunded 42.5 for ORD-1." in done.stdout
    assert "status: completed" in done.stdout
    assert "Traceback" not in done.stderr
    left = baton("approvals", "list", "--store", url)
    assert "no approvals waiting" in left.stdout


def test_a_crashed_run_is_resumed_by_another_process(tmp_path):
    url = f"sqlite:///{tmp_path}/b.db"
    crashed = baton("run", TEAM, "where is ORD-7?", "--store", url, crash=True)
    assert crashed.returncode == 3  # the process died inside the tool
    listed = baton("resume", "--list", "--store", url)
    row = next(line for line in listed.stdout.splitlines() if " running " in line)
    sid = row.split()[0]
    done = baton("resume", sid, "--team", TEAM, "--store", url)
    assert done.returncode == 0, done.stderr
    assert "run resumed from checkpoint" in done.stdout
    assert "reply: Order ORD-7 is SHIPPED." in done.stdout
    assert "status: completed" in done.stdout
    assert "no unfinished runs" in baton("resume", "--list", "--store", url).stdout
