"""`baton run`, `baton trace` (every view and format), approvals, tickets and resume print user
and model text without a raw control, bidi or escape character, and never as rich markup.

The team (written to a temporary folder as `terminal_safety_team`) has a scripted model that
echoes what the user wrote into a tool call, a state slot, a failing tool's error and its reply;
"refund" asks for a refund that needs approval, "human" escalates to the human queue.
"""

from __future__ import annotations

import json
import re
import textwrap
import unicodedata
from pathlib import Path

import pytest
from typer.testing import CliRunner

from baton.cli.app import app

NASTY = "hi \u202etxt.exe \x1b[2J \x1b]0;title\x07 back\x08 cr\rX [bold red]markup[/] 中文 👍🏽"
"""What the user types and the model echoes: bidi override, clear screen, retitle, backspace,
carriage return, rich markup, and text that must pass unchanged."""

RAW = ("\x1b", "\u202e", "\x07", "\x08", "\r")

TEAM = "terminal_safety_team:team"

TEAM_SOURCE = '''
"""A desk whose scripted model echoes the user's words everywhere it can."""

import json

from baton import Agent, ScriptedModel, Team, tool
from baton.core.errors import BatonError
from baton.models import ModelRequest, Step


@tool(records=["note"])
async def remember(note: str) -> dict:
    """Remember a note.

    Args:
        note: The note.
    """
    return {"ok": True}


@tool
async def explode(note: str) -> dict:
    """Fails with the note.

    Args:
        note: The note.
    """
    raise ValueError("cannot: " + note)


@tool(requires_approval=True, approver_roles=["finance"])
async def refund(note: str) -> dict:
    """Refund, with a note.

    Args:
        note: The note.
    """
    return {"refunded": True}


def policy(request: ModelRequest) -> Step:
    users = [m.content or "" for m in request.messages if m.role == "user"]
    text = users[-1] if users else ""
    last = request.messages[-1]
    if last.role == "tool":
        if last.name == "remember":
            return ScriptedModel.call("explode", note=text)
        return ScriptedModel.say("reply: " + text + "\\nsecond line")
    if "human" in text:
        return ScriptedModel.call("transfer_to_human", reason=text, objective=text)
    if "refund" in text:
        return ScriptedModel.call("refund", note=text)
    return ScriptedModel.call("remember", note=text)


desk = Agent(
    name="desk",
    description="The desk.",
    instructions="Echo.",
    tools=[remember, explode, refund],
    handoffs=["human"],
)
team = Team([desk], entry="desk", model=ScriptedModel(policy, record=False))
'''


def unsafe(ch: str) -> bool:
    """A character a terminal could act on (newline and tab aside), or one that reorders or
    hides text; ZWJ and ZWNJ are fine."""
    if ch in "\n\t":
        return False
    cat = unicodedata.category(ch)
    return cat in ("Cc", "Cs", "Zl", "Zp") or (cat == "Cf" and ch not in "\u200c\u200d")


def assert_safe(out: str, *, literal_markup: bool = True) -> None:
    """No raw control or bidi character; the markup and the escapes are shown as text."""
    assert [ch for ch in out if unsafe(ch)] == [], out
    if literal_markup:
        assert "[bold red]markup[/]" in out, out
        assert "\\u202etxt.exe" in out, out
        assert "\\x1b[2J" in out and "\\x1b]0;title\\x07" in out, out
        assert "中文 👍🏽" in out, out


@pytest.fixture
def desk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The echoing team's module in a temporary folder, which the test runs from."""
    folder = tmp_path / "team"
    folder.mkdir()
    (folder / "terminal_safety_team.py").write_text(textwrap.dedent(TEAM_SOURCE))
    monkeypatch.chdir(folder)
    monkeypatch.delitem(__import__("sys").modules, "terminal_safety_team", raising=False)
    return folder


def run(runner: CliRunner, url: str, message: str, *extra: str) -> tuple[str, str]:
    """`baton run` of the echoing team; its output and the session id."""
    result = runner.invoke(app, ["run", TEAM, message, "--store", url, *extra])
    assert result.exit_code == 0, result.output
    m = re.search(r"^session: (\S+)", result.output, re.M)
    assert m, result.output
    return result.output, m.group(1)


def test_baton_run_prints_user_and_model_text_safely(
    runner: CliRunner, desk: Path, store_url: str
) -> None:
    out, _ = run(runner, store_url, NASTY, "-v")
    assert_safe(out)
    assert "reply: reply: hi \\u202etxt.exe" in out  # the final reply, escaped
    assert "second line" in out.split("reply: reply:")[1]  # a reply keeps its newlines
    assert "desk says: reply: hi \\u202etxt.exe" in out  # the streamed reply
    assert "cannot: hi \\u202etxt.exe" in out  # the failing tool's error


def test_baton_trace_prints_every_view_safely(
    runner: CliRunner, desk: Path, store_url: str
) -> None:
    _, sid = run(runner, store_url, NASTY, "-q")
    for extra in ([], ["--view", "tree"], ["--view", "timeline"], ["--view", "table"]):
        result = runner.invoke(app, ["trace", sid, "--store", store_url, *extra])
        assert result.exit_code == 0, result.output
        # the timeline shows timings, not text: the user's words are in its header only
        assert_safe(result.output)
    why = runner.invoke(app, ["trace", sid, "--store", store_url, "--why", "note"])
    assert why.exit_code == 0, why.output
    assert_safe(why.output)
    mermaid = runner.invoke(app, ["trace", sid, "--store", store_url, "-f", "mermaid"])
    assert mermaid.exit_code == 0, mermaid.output
    assert_safe(mermaid.output, literal_markup=False)
    assert "\\u202etxt.exe" in mermaid.output and "\\x1b[2J" in mermaid.output


def test_baton_trace_json_escapes_what_json_leaves_raw(
    runner: CliRunner, desk: Path, store_url: str
) -> None:
    _, sid = run(runner, store_url, NASTY + " \u2028 \x85", "-q")
    events = runner.invoke(app, ["trace", sid, "--store", store_url, "-f", "json"])
    assert events.exit_code == 0, events.output
    assert_safe(events.output, literal_markup=False)
    started = json.loads(events.output.splitlines()[0])
    assert started["message"] == NASTY + " \u2028 \x85"  # the exact text, for programs
    tree = runner.invoke(app, ["trace", sid, "--store", store_url, "-f", "json", "--view", "tree"])
    assert tree.exit_code == 0, tree.output
    assert_safe(tree.output, literal_markup=False)
    assert json.loads(tree.output)["runs"][0]["message"] == NASTY + " \u2028 \x85"
    why = runner.invoke(app, ["trace", sid, "--store", store_url, "--why", "note", "-f", "json"])
    assert why.exit_code == 0, why.output
    assert_safe(why.output, literal_markup=False)
    assert json.loads(why.output)["writes"][0]["value"] == NASTY + " \u2028 \x85"


def test_approval_card_list_and_decision_are_shown_safely(
    runner: CliRunner, desk: Path, store_url: str
) -> None:
    out, sid = run(runner, store_url, "refund " + NASTY)
    assert "awaiting_approval" in out
    assert_safe(out)  # the live lines and the card with the model's arguments
    listed = runner.invoke(app, ["approvals", "list", "--store", store_url])
    assert listed.exit_code == 0, listed.output
    assert_safe(listed.output, literal_markup=False)  # arguments are cut to 48 characters
    assert "\\u202etxt.exe" in listed.output
    unfinished = runner.invoke(app, ["resume", "--list", "--store", store_url])
    assert unfinished.exit_code == 0, unfinished.output
    assert_safe(unfinished.output, literal_markup=False)
    approval = re.search(r"baton approvals approve \S+ (\S+)", out)
    assert approval, out
    decided = runner.invoke(
        app,
        [
            *("approvals", "reject", sid, approval.group(1), "--by", NASTY, "--role", "finance"),
            *("--reason", NASTY, "--team", TEAM, "--store", store_url),
        ],
    )
    assert decided.exit_code == 0, decided.output
    assert_safe(decided.output)  # the decider's name and reason, from the command line


def test_tickets_show_the_users_words_safely(runner: CliRunner, desk: Path, store_url: str) -> None:
    out, _ = run(runner, store_url, "human " + NASTY)
    assert_safe(out)
    listed = runner.invoke(app, ["tickets", "--store", store_url])
    assert listed.exit_code == 0, listed.output
    assert_safe(listed.output, literal_markup=False)  # cut to 60 characters
    assert "human hi \\u202etxt.exe" in listed.output
    ticket = re.search(r"^\s*(\d+)\s", listed.output, re.M)
    assert ticket, listed.output
    claimed = runner.invoke(
        app, ["tickets", "claim", ticket.group(1), "--by", NASTY, "--store", store_url]
    )
    assert claimed.exit_code == 0, claimed.output
    assert_safe(claimed.output)
