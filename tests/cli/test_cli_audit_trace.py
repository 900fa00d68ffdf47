"""`baton audit ...` and `baton trace` views (`--why`, tree, timeline, JSON, Mermaid)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from baton.backends.audit import GENESIS, KEY_ENV, chain_hash, message_digest, record_body
from baton.cli.app import app
from baton.core.events import event_from_json

DESK = "examples.customer_service:team"
KEY = "cli-evidence-key"


@pytest.fixture(autouse=True)
def _no_audit_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests choose their audit key; a BATON_AUDIT_KEY in the caller's shell must not leak in."""
    monkeypatch.delenv(KEY_ENV, raising=False)


INVOICE = "please check the invoice for order ORD-202607-99"


def session_of(output: str) -> str:
    m = re.search(r"^session: (\S+)", output, re.M)
    assert m, output
    return m.group(1)


def run(runner: CliRunner, url: str, message: str, session: str | None = None) -> str:
    """`baton run` of the seed 000 desk (scripted policy); returns the session id."""
    args = ["run", DESK, message, "--store", url, "-q"]
    if session:
        args += ["-s", session]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return session_of(result.output)


@pytest.fixture
def asked(runner: CliRunner, in_repo: Path, store_url: str) -> str:
    """A session where billing had to ask for the order number, then looked it up."""
    sid = run(runner, store_url, "I need my invoice please")
    run(runner, store_url, "it is ORD-202607-99", sid)
    return sid


# ------------------------------------------------------------------------------- --why
def test_why_names_the_tool_call_that_set_the_slot(runner, asked, store_url):
    result = runner.invoke(app, ["trace", asked, "--store", store_url, "--why", "order_id"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert f"order_id in session {asked}: written 1 time" in out
    row = next(line for line in out.splitlines() if line.lstrip().startswith("1 "))
    for text in ("billing", "tool query_invoice", '"ORD-202607-99"'):
        assert text in row, row
    assert "tool call query_invoice(order_id='ORD-202607-99')" in row


def test_why_as_json_joins_the_write_to_its_tool_call(runner, asked, store_url):
    result = runner.invoke(
        app, ["trace", asked, "--store", store_url, "--why", "order_id", "-f", "json"]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    (write,) = doc["writes"]
    assert (write["agent"], write["source"], write["tool"]) == ("billing", "tool", "query_invoice")
    assert write["run"] == 2 and write["value"] == "ORD-202607-99"
    assert write["cause"]["type"] == "tool_called"
    assert write["cause"]["arguments"] == {"order_id": "ORD-202607-99"}
    events = runner.invoke(app, ["trace", asked, "--store", store_url, "-f", "json"]).stdout
    by_id = {e.id: e for e in map(event_from_json, events.splitlines())}
    cause = by_id[write["cause"]["event_id"]]
    assert cause.type == "tool_called" and cause.tool == "query_invoice"
    assert by_id[write["event_id"]].type == "state_updated"


def test_why_names_the_handoff_that_carried_the_slot(runner, in_repo, store_url):
    sid = run(runner, store_url, INVOICE)
    result = runner.invoke(app, ["trace", sid, "--store", store_url, "--why", "order_id"])
    assert result.exit_code == 0, result.output
    assert "hand-off triage -> billing: billing question" in result.output
    assert "handoff" in result.output


def test_why_of_a_slot_never_written_lists_the_written_ones(runner, asked, store_url):
    result = runner.invoke(app, ["trace", asked, "--store", store_url, "--why", "server_id"])
    assert result.exit_code == 1
    assert "slot 'server_id' was never written" in result.stderr
    assert "slots written: order_id" in result.stderr


# ------------------------------------------------------------------------ trace views
def test_text_shows_a_tree_and_a_timeline_per_run(runner, asked, store_url):
    result = runner.invoke(app, ["trace", asked, "--store", store_url])
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.count("timeline · ") == 2
    assert re.search(r"├── triage\s+hop 0 .*1 model call .* tokens", out)
    assert re.search(r"└── billing\s+hop 1\s+billing question", out)
    assert re.search(r"model call\s+requests transfer_to_billing\s+· \d+/\d+ tokens · ", out)
    assert re.search(r"tool call\s+query_invoice ok\s+· [\d.]+ ms", out)
    assert "state  order_id set by tool query_invoice" in out
    assert re.search(r"billing\s+turn\s+[\d.]+\s+█", out)  # a turn's bar in the timeline


def test_view_table_keeps_the_step_table(runner, asked, store_url):
    result = runner.invoke(app, ["trace", asked, "--store", store_url, "--view", "table"])
    assert result.exit_code == 0, result.output
    assert "tokens in/out" in result.output
    assert "timeline" not in result.output


def test_json_tree_has_runs_turns_and_steps_with_tokens(runner, asked, store_url):
    result = runner.invoke(
        app, ["trace", asked, "--store", store_url, "-f", "json", "--view", "tree"]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    first, second = doc["runs"]
    assert [t["agent"] for t in first["turns"]] == ["triage", "billing"]
    assert [t["agent"] for t in second["turns"]] == ["billing"]
    assert first["path"] == ["triage", "billing"]
    kinds = [s["kind"] for t in second["turns"] for s in t["steps"]]
    assert kinds == ["model_call", "tool_call", "state", "model_call"]
    for run_ in (first, second):
        steps = [s for t in run_["turns"] for s in t["steps"]]
        assert run_["input_tokens"] == sum(s["input_tokens"] or 0 for s in steps)
        for t in run_["turns"]:
            assert t["input_tokens"] == sum(s["input_tokens"] or 0 for s in t["steps"])
            assert t["latency_ms"] >= 0
    handoff = next(s for s in first["turns"][0]["steps"] if s["kind"] == "handoff")
    assert (handoff["target"], handoff["hop"]) == ("billing", 1)


MERMAID_LINE = re.compile(
    r"^(sequenceDiagram"
    r"|    actor U as user"
    r"|    participant A\d+ as [^\n]+"
    r"|    (U|A\d+)(->>|-->>|-x)(U|A\d+): [^;\n]+"
    r"|    Note (over|right of) A\d+: [^;\n]+)$"
)


def test_mermaid_is_a_sequence_diagram_of_the_hops(runner, in_repo, store_url):
    sid = run(runner, store_url, INVOICE)
    run(runner, store_url, "and is it paid?", sid)
    result = runner.invoke(app, ["trace", sid, "--store", store_url, "-f", "mermaid"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "sequenceDiagram"
    bad = [line for line in lines if not MERMAID_LINE.match(line)]
    assert not bad, bad
    ids = dict(re.findall(r"participant (A\d+) as (\S+)", result.stdout))
    who = {name: pid for pid, name in ids.items()}
    assert set(who) == {"triage", "billing"}
    assert f"    U->>{who['triage']}: run 1: {INVOICE}" in lines
    assert f"    {who['triage']}->>{who['billing']}: hop 1: billing question [order_id]" in lines
    assert any(
        line.startswith(f"    {who['billing']}->>{who['billing']}: tool query_invoice")
        for line in lines
    )
    assert f"    U->>{who['billing']}: run 2: and is it paid?" in lines
    assert sum(line.startswith(f"    {who['billing']}-->>U: ") for line in lines) == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-f", "mermaid", "--view", "tree"], "drop --view and --why"),
        (["-f", "json", "--view", "timeline"], "--view tree"),
        (["--why", "order_id", "--view", "tree"], "drop --view"),
    ],
)
def test_incompatible_options_fail_clearly(runner, asked, store_url, args, message):
    result = runner.invoke(app, ["trace", asked, "--store", store_url, *args])
    assert result.exit_code == 2
    assert message in result.stderr


# ------------------------------------------------------------------------------- audit
def test_audit_verify_counts_every_event(runner, asked, store_url):
    events = runner.invoke(app, ["trace", asked, "--store", store_url, "-f", "json"]).stdout
    n = len(events.splitlines())
    result = runner.invoke(app, ["audit", "verify", "--store", store_url])
    assert result.exit_code == 0, result.output
    (messages,) = _plain(store_url).execute("SELECT COUNT(*) FROM messages").fetchone()
    assert messages > 0
    assert (
        f"chain intact: {n} records; {n} events and {messages} messages agree with it"
        in result.stdout
    )
    assert re.search(rf"head: {n}:[0-9a-f]{{64}}", result.stdout)


def _plain(store_url: str) -> sqlite3.Connection:
    """A raw connection to the store file, triggers in place (events and messages are not
    protected by triggers: anyone with the file can edit them)."""
    return sqlite3.connect(store_url.removeprefix("sqlite:///"), isolation_level=None)


def _raw(store_url: str) -> sqlite3.Connection:
    conn = sqlite3.connect(store_url.removeprefix("sqlite:///"), isolation_level=None)
    conn.execute("DROP TRIGGER audit_no_update")
    conn.execute("DROP TRIGGER audit_no_delete")
    return conn


def test_audit_verify_names_an_edited_record(runner, asked, store_url):
    conn = _raw(store_url)
    (seq,) = conn.execute(
        "SELECT MIN(seq) FROM audit WHERE type = 'tool_called' AND data LIKE '%ORD-202607-99%'"
    ).fetchone()
    conn.execute(
        "UPDATE audit SET data = replace(data, 'ORD-202607-99', 'ORD-1') WHERE seq = ?", (seq,)
    )
    conn.close()
    result = runner.invoke(app, ["audit", "verify", "--store", store_url])
    assert result.exit_code == 1
    assert f"chain broken: record {seq} edited" in result.stderr
    assert "tool_called" in result.stderr


def test_audit_verify_names_a_deleted_record(runner, asked, store_url):
    conn = _raw(store_url)
    conn.execute("DELETE FROM audit WHERE seq = 6")
    conn.close()
    result = runner.invoke(app, ["audit", "verify", "--store", store_url])
    assert result.exit_code == 1
    assert "chain broken: record 6 deleted" in result.stderr


def test_audit_verify_with_an_anchor_catches_a_cut_end(runner, asked, store_url):
    ok = runner.invoke(app, ["audit", "verify", "--store", store_url])
    anchor = re.search(r"head: (\S+)", ok.stdout)
    assert anchor
    conn = _raw(store_url)
    (vouched,) = conn.execute("SELECT messages FROM audit ORDER BY seq DESC LIMIT 1").fetchone()
    conn.execute("DELETE FROM audit WHERE seq = (SELECT MAX(seq) FROM audit)")
    conn.execute("DELETE FROM events WHERE seq = (SELECT MAX(seq) FROM events)")
    for message_id, _ in json.loads(vouched or "[]"):  # and the messages it vouched for
        conn.execute("DELETE FROM messages WHERE id = ?", (message_id,))
    conn.close()
    assert runner.invoke(app, ["audit", "verify", "--store", store_url]).exit_code == 0
    result = runner.invoke(
        app, ["audit", "verify", "--store", store_url, "--anchor", anchor.group(1)]
    )
    assert result.exit_code == 1
    assert "deleted" in result.stderr
    bad = runner.invoke(app, ["audit", "verify", "--store", store_url, "--anchor", "12"])
    assert bad.exit_code == 2 and "bad anchor" in bad.stderr


def test_audit_show_lists_the_last_records_of_a_session(runner, in_repo, store_url):
    first = run(runner, store_url, INVOICE)
    other = run(runner, store_url, "my server srv-bj-001 is down, please restart it")
    result = runner.invoke(
        app, ["audit", "show", "--store", store_url, "--session", first, "--limit", "3"]
    )
    assert result.exit_code == 0, result.output
    rows = [line for line in result.stdout.splitlines() if first in line]
    assert len(rows) == 3
    assert other not in result.stdout
    assert "run_finished" in rows[-1]
    none = runner.invoke(app, ["audit", "show", "--store", store_url, "--session", "s_nope"])
    assert none.exit_code == 0 and "no audit records for session 's_nope'" in none.stdout


def test_audit_needs_a_store_with_a_chain(runner, tmp_path):
    memory = runner.invoke(app, ["audit", "verify", "--store", "memory://"])
    assert memory.exit_code == 2 and "keeps no audit chain" in memory.stderr
    missing = runner.invoke(app, ["audit", "show", "--store", f"sqlite:///{tmp_path}/no.db"])
    assert missing.exit_code == 1 and "no store at" in missing.stderr
    assert not (tmp_path / "no.db").exists()


def test_chinese_requests_render_in_every_view(runner, in_repo, store_url):
    text = "大事不好了，我们的生产服务器 srv-bj-001 发生告警，请帮我紧急重启！"
    sid = run(runner, store_url, text)
    mermaid = runner.invoke(app, ["trace", sid, "--store", store_url, "-f", "mermaid"]).stdout
    assert f": run 1: {text}" in mermaid
    assert re.search(r"A1->>A2: hop 1: server incident \[server_id\]", mermaid)
    why = runner.invoke(app, ["trace", sid, "--store", store_url, "--why", "server_id"])
    assert why.exit_code == 0, why.output
    assert "hand-off triage -> tech_support: server incident" in why.output
    tree = runner.invoke(app, ["trace", sid, "--store", store_url, "--view", "tree"])
    assert text in tree.output and "restart_server ok" in tree.output


# ---------------------------------------------------------- audit: the rows people read
def _verify(runner: CliRunner, store_url: str, key: str | None = None):
    return runner.invoke(
        app, ["audit", "verify", "--store", store_url], env={KEY_ENV: key} if key else None
    )


def _forge_handoff(conn: sqlite3.Connection, to: str = "refunds") -> int:
    seq, data = conn.execute(
        "SELECT seq, data FROM events WHERE type = 'handoff' ORDER BY seq LIMIT 1"
    ).fetchone()
    assert '"target":"billing"' in data
    conn.execute(
        "UPDATE events SET data = ? WHERE seq = ?",
        (data.replace('"target":"billing"', f'"target":"{to}"'), seq),
    )
    return int(seq)


def test_a_forged_handoff_shows_in_trace_and_fails_verify(runner, in_repo, store_url):
    sid = run(runner, store_url, INVOICE)
    conn = _plain(store_url)
    row = _forge_handoff(conn, "tech_support")
    conn.close()
    trace = runner.invoke(app, ["trace", sid, "--store", store_url, "-f", "json"]).stdout
    handoffs = [e for e in map(event_from_json, trace.splitlines()) if e.type == "handoff"]
    assert handoffs[0].payload.target == "tech_support"  # what a reader of the trace sees
    result = _verify(runner, store_url)
    assert result.exit_code == 1
    assert f"chain broken: events row {row} edited: events row {row} (handoff " in result.stderr
    assert "no longer match audit record" in result.stderr


def test_a_forged_message_fails_verify(runner, in_repo, store_url):
    run(runner, store_url, INVOICE)
    conn = _plain(store_url)
    (seq,) = conn.execute("SELECT MAX(seq) FROM messages WHERE role = 'assistant'").fetchone()
    conn.execute(
        "UPDATE messages SET data = json_set(data, '$.content', 'Your refund of 5000 CNY is "
        "approved.') WHERE seq = ?",
        (seq,),
    )
    conn.close()
    result = _verify(runner, store_url)
    assert result.exit_code == 1
    assert f"chain broken: messages row {seq} edited: messages row {seq} (assistant " in (
        result.stderr
    )


def test_a_deleted_message_fails_verify(runner, in_repo, store_url):
    run(runner, store_url, INVOICE)
    conn = _plain(store_url)
    (mid,) = conn.execute("SELECT id FROM messages WHERE seq = 1").fetchone()
    conn.execute("DELETE FROM messages WHERE seq = 1")
    conn.close()
    result = _verify(runner, store_url)
    assert result.exit_code == 1
    assert "deleted" in result.stderr and f"messages row {mid} is gone" in result.stderr


def test_an_inserted_event_row_fails_verify(runner, in_repo, store_url):
    sid = run(runner, store_url, INVOICE)
    conn = _plain(store_url)
    cols = "session_id, trace_id, run_id, type, ts"
    cur = conn.execute(  # a second hand-off, as if triage had also passed the baton on
        f"INSERT INTO events (id, data, {cols}) SELECT 'ev_forged', "
        "json_set(data, '$.id', 'ev_forged'), "
        f"{cols} FROM events WHERE type = 'handoff' ORDER BY seq LIMIT 1"
    )
    conn.close()
    assert (
        "ev_forged" in runner.invoke(app, ["trace", sid, "--store", store_url, "-f", "json"]).stdout
    )
    result = _verify(runner, store_url)
    assert result.exit_code == 1
    assert f"events row {cur.lastrowid} (handoff ev_forged) has no audit record" in result.stderr


def _rehash(store_url: str) -> None:
    """Edit a hand-off, then re-seal the whole chain with plain sha256 (no key)."""
    conn = _raw(store_url)
    _forge_handoff(conn)
    events = dict(conn.execute("SELECT id, data FROM events"))
    digests = {
        r[0]: message_digest(*r)
        for r in conn.execute("SELECT id, session_id, run_id, role, agent, ts, data FROM messages")
    }
    prev = GENESIS
    rows = conn.execute(
        "SELECT seq, event_id, type, session_id, trace_id, ts, data, messages FROM audit "
        "ORDER BY seq"
    ).fetchall()
    for seq, eid, kind, sid, tid, ts, data, messages in rows:
        data = events.get(eid, data)
        if messages:
            messages = json.dumps(
                [[m, digests[m]] for m, _ in json.loads(messages)], separators=(",", ":")
            )
        digest = chain_hash(prev, record_body(eid, kind, sid, tid, ts, data, messages))
        conn.execute(
            "UPDATE audit SET data = ?, messages = ?, prev_hash = ?, hash = ? WHERE seq = ?",
            (data, messages, prev, digest, seq),
        )
        prev = digest
    conn.close()


def test_with_the_key_a_rehashed_chain_fails_verify(runner, in_repo, tmp_path, monkeypatch):
    plain, keyed = f"sqlite:///{tmp_path}/plain.db", f"sqlite:///{tmp_path}/keyed.db"
    run(runner, plain, INVOICE)
    monkeypatch.setenv(KEY_ENV, KEY)  # `baton run` with the key set seals with it
    run(runner, keyed, INVOICE)
    ok = _verify(runner, keyed, KEY)
    assert ok.exit_code == 0, ok.output
    assert re.search(r"keyed: \d+ records sealed with the key", ok.stdout)
    monkeypatch.delenv(KEY_ENV)
    unkeyed = _verify(runner, keyed)
    assert unkeyed.exit_code == 1 and f"set {KEY_ENV} to verify" in unkeyed.stderr
    _rehash(plain)
    _rehash(keyed)
    # without a key a full re-hash is indistinguishable from the original (the documented
    # limit: keep an anchor elsewhere, or use the key)
    assert _verify(runner, plain).exit_code == 0
    caught = _verify(runner, keyed, KEY)
    assert caught.exit_code == 1
    assert "no record is sealed with the audit key" in caught.stderr


def test_verify_opens_a_read_only_copy_and_writes_nothing(runner, asked, store_url, tmp_path):
    db = Path(store_url.removeprefix("sqlite:///"))
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    copy = evidence / "copy.db"
    shutil.copyfile(db, copy)  # `baton run` closed the store: the file holds everything
    os.chmod(copy, 0o444)
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in evidence.iterdir()}
    result = _verify(runner, f"sqlite:///{copy}")
    assert result.exit_code == 0, result.output
    assert "chain intact: " in result.stdout and "messages agree with it" in result.stdout
    shown = runner.invoke(app, ["audit", "show", "--store", f"sqlite:///{copy}", "-n", "2"])
    assert shown.exit_code == 0, shown.output
    after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in evidence.iterdir()}
    assert after == before


def test_verify_of_an_empty_file_says_so_and_leaves_it_empty(runner, tmp_path):
    empty = tmp_path / "empty.db"
    empty.touch()
    for command in ("verify", "show"):
        result = runner.invoke(app, ["audit", command, "--store", f"sqlite:///{empty}"])
        assert result.exit_code == 1
        assert "not a Baton store: the file is empty" in result.stderr
    assert empty.stat().st_size == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]
