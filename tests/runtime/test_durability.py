"""Durability of resumable runs: processes killed with SIGKILL at chosen points, two processes
on one SQLite session, leases left by dead processes, cancelled runs, what a checkpoint holds,
and checkpoints of unusual content.

The team, its tools (which write every attempt to a ledger file) and its scripted model (a
function of the request) live in `durable_kit`, which is also the script of the child
processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sqlite3
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from durable_kit import (
    AGENT,
    REPO,
    Child,
    Knobs,
    S,
    answer_for,
    build_team,
    child_env,
    ledger_lines,
    make_tools,
    url,
)
from runtime_kit import handoff, of_type

from baton import Agent, Team
from baton.backends.base import Checkpoint, SessionRecord
from baton.backends.memory import MemoryStore
from baton.backends.sqlite import SQLiteStore
from baton.core.errors import ConflictError, NoRunToResume
from baton.core.messages import Message
from baton.models.base import ModelRequest
from baton.runtime.cancel import CALLER
from baton.runtime.state import RunState

SID = "s_durable"
LEASE_KEY = f"session|{SID}"


# ------------------------------------------------------------------ helpers
def spawn(c: Child) -> subprocess.Popen[str]:
    return subprocess.Popen(
        c.argv(),
        cwd=REPO,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str], timeout: float = 30) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out, err


def wait_for_file(path: Path, proc: subprocess.Popen[str], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            _, out, err = finish(proc)
            raise AssertionError(f"child exited {proc.returncode} before {path.name}: {out}{err}")
        if time.monotonic() > deadline:
            proc.kill()
            _, out, err = finish(proc)
            raise AssertionError(f"child never wrote {path.name}: {out}{err}")
        time.sleep(0.005)


def sigkill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    assert finish(proc)[0] == -signal.SIGKILL


def lease_row(db: Path) -> tuple[str, float] | None:
    conn = sqlite3.connect(db)
    try:
        row = conn.execute(
            "SELECT owner, expires_at FROM leases WHERE key = ?", (LEASE_KEY,)
        ).fetchone()
    finally:
        conn.close()
    return None if row is None else (str(row[0]), float(row[1]))


def started_done(lines: list[str]) -> list[tuple[str, str]]:
    """(started|done, key) per ledger line."""
    return [(line.split()[0], line.split()[1]) for line in lines]


def assert_clean_transcript(msgs: list[Message]) -> None:
    ids = [m.id for m in msgs]
    assert len(ids) == len(set(ids)), Counter(ids).most_common(3)
    calls = [c.id for m in msgs for c in m.tool_calls or []]
    answered = [m.tool_call_id or "" for m in msgs if m.role == "tool"]
    assert sorted(calls) == sorted(answered)  # every call answered exactly once


def exchange(message: str, tool: str) -> list[tuple[Any, ...]]:
    """The four messages of one clerk run: user, call, tool result, answer."""
    return [
        ("user", message, None),
        ("assistant", None, tool),
        ("tool", tool, None),
        ("assistant", answer_for(message), None),
    ]


def shape(msgs: list[Message]) -> list[tuple[Any, ...]]:
    """(role, content or tool name, called tool) of each message, comparable to `exchange`."""
    out: list[tuple[Any, ...]] = []
    for m in msgs:
        if m.role == "tool":
            out.append(("tool", m.name, None))
        elif m.tool_calls:
            out.append(("assistant", None, m.tool_calls[0].name))
        else:
            out.append((m.role, m.content, None))
    return out


# ------------------------------------------------------------------ 1. SIGKILL after a tool
async def test_sigkill_after_the_tool_resumes_without_running_it_again(tmp_path: Path) -> None:
    db, ledger = tmp_path / "b.db", tmp_path / "ledger"
    message = "please refund ORD-7"
    child = Child(
        db=str(db),
        session_id=SID,
        message=message,
        knobs=Knobs(ledger=str(ledger), kill_after_tool=True),  # killed reading the result
        lease_s=1.0,
    )
    rc, out, err = finish(spawn(child))
    assert rc == -signal.SIGKILL, out + err
    assert out == ""  # it never finished
    key = started_done(ledger_lines(ledger))[0][1]
    assert started_done(ledger_lines(ledger)) == [("started", key), ("done", key)]

    team = build_team(url(db), Knobs(ledger=str(ledger)), lease_s=1.0)
    try:
        [cp] = await team.unfinished()
        assert (cp.session_id, cp.status, cp.meta["agent"]) == (SID, "running", AGENT)
        assert cp.seq == 2  # after the model call, after the tool call
        run_id = cp.run_id
        assert key.startswith(f"{run_id}:")

        result = await team.resume(SID)

        assert (result.status, result.output) == ("completed", answer_for(message))
        assert result.run_id == run_id
        assert started_done(ledger_lines(ledger)) == [("started", key), ("done", key)]
        assert await team.unfinished() == []
        msgs = await team.store.get_messages(SID)
        assert shape(msgs) == exchange(message, "refund")
        assert_clean_transcript(msgs)
        assert {m.run_id for m in msgs} == {run_id}
        events = await team.store.get_events(SID)
        assert len({e.id for e in events}) == len(events)
        counts = Counter(e.type for e in events)
        assert counts["tool_called"] == 1
        assert counts["run_resumed"] == 1
        assert counts["model_called"] == 2  # the call before the crash, the one after
        assert counts["run_started"] == counts["run_finished"] == counts["agent_started"] == 1
        [resumed] = of_type(events, "run_resumed")
        assert resumed.checkpoint == 2
        session = await team.session(SID)
        assert session is not None
        assert (session.version, session.state) == (1, {"order_id": "ORD-7"})
        with pytest.raises(NoRunToResume):
            await team.resume(SID)
    finally:
        await team.aclose()


# ------------------------------------------------------------------ 2. SIGKILL during a tool
async def test_sigkill_during_the_tool_reruns_it_with_the_same_idempotency_key(
    tmp_path: Path,
) -> None:
    db, ledger, marker = tmp_path / "b.db", tmp_path / "ledger", tmp_path / "in_tool"
    message = "refund ORD-3"
    knobs = Knobs(ledger=str(ledger), marker=str(marker), tool_block_s=60)
    proc = spawn(Child(db=str(db), session_id=SID, message=message, knobs=knobs, lease_s=1.0))
    wait_for_file(marker, proc)
    sigkill(proc)
    key = marker.read_text(encoding="utf-8")
    assert started_done(ledger_lines(ledger)) == [("started", key)]

    team = build_team(url(db), Knobs(ledger=str(ledger)), lease_s=1.0)
    try:
        [cp] = await team.unfinished()
        assert (cp.status, cp.seq) == ("running", 1)  # only the model call was checkpointed
        result = await team.resume(SID)
        assert (result.status, result.output) == ("completed", answer_for(message))
        # the call ran again, with the key of the first attempt; its dedup kept one effect
        assert started_done(ledger_lines(ledger)) == [
            ("started", key),
            ("started", key),
            ("done", key),
        ]
        msgs = await team.store.get_messages(SID)
        assert shape(msgs) == exchange(message, "refund")
        assert_clean_transcript(msgs)
        events = await team.store.get_events(SID)
        counts = Counter(e.type for e in events)
        assert (counts["tool_called"], counts["run_resumed"], counts["model_called"]) == (1, 1, 2)
        assert await team.unfinished() == []
    finally:
        await team.aclose()


# ------------------------------------------------------------------ 3. two processes, one session
def test_two_processes_on_one_session_take_turns(tmp_path: Path) -> None:
    db, ledger, go = tmp_path / "b.db", tmp_path / "ledger", tmp_path / "go"
    asyncio.run(SQLiteStore(url(db)).close())  # the file exists before the race
    messages = {"a": "refund ORD-1", "b": "cancel BK-2"}
    procs = {
        name: spawn(
            Child(
                db=str(db),
                session_id=SID,
                message=message,
                # slow enough that the other process arrives while this one holds the session
                knobs=Knobs(ledger=str(ledger), tool_sleep_s=0.3),
                lease_s=2.0,
                ready=str(tmp_path / f"ready_{name}"),
                go=str(go),
            )
        )
        for name, message in messages.items()
    }
    for name, proc in procs.items():
        wait_for_file(tmp_path / f"ready_{name}", proc)
    go.write_text("go", encoding="utf-8")
    results: dict[str, dict[str, Any]] = {}
    for name, proc in procs.items():
        rc, out, err = finish(proc)
        assert rc == 0, err
        results[name] = json.loads(out)

    for name, message in messages.items():
        got = results[name]
        assert (got.get("status"), got.get("output")) == ("completed", answer_for(message)), got
    # they overlapped in time: each called run before the other had finished
    assert max(r["started"] for r in results.values()) < min(r["ended"] for r in results.values())
    first, second = sorted(results, key=lambda n: results[n]["ended"])
    # ... yet ran one after the other: the second waited on the lease
    lines = started_done(ledger_lines(ledger))
    keys = [key for _, key in lines]
    assert [kind for kind, _ in lines] == ["started", "done", "started", "done"]
    assert keys[0] == keys[1] != keys[2] == keys[3]
    assert keys[0].startswith(results[first]["run_id"] + ":")
    assert keys[2].startswith(results[second]["run_id"] + ":")

    async def check() -> None:
        store = SQLiteStore(url(db))
        try:
            msgs = await store.get_messages(SID)
            tool = {"a": "refund", "b": "cancel"}
            assert shape(msgs) == exchange(messages[first], tool[first]) + exchange(
                messages[second], tool[second]
            )
            assert_clean_transcript(msgs)
            assert [m.run_id for m in msgs] == [results[first]["run_id"]] * 4 + [
                results[second]["run_id"]
            ] * 4
            session = await store.get_session(SID)
            assert session is not None
            assert session.version == 2
            assert session.state == {"order_id": "ORD-1", "booking_id": "BK-2"}
            events = await store.get_events(SID)
            counts = Counter(e.type for e in events)
            assert (counts["run_finished"], counts["run_resumed"], counts["tool_called"]) == (
                2,
                0,
                2,
            )
            assert await store.list_checkpoints() == []
            assert lease_row(db) is None  # both released their lease
        finally:
            await store.close()

    asyncio.run(check())


async def test_two_commits_from_one_read_version_conflict_and_the_loser_writes_nothing(
    tmp_path: Path,
) -> None:
    db = tmp_path / "b.db"
    one, two = SQLiteStore(url(db)), SQLiteStore(url(db))
    try:
        await one.commit_run(
            SessionRecord(SID, holder=AGENT), [Message(role="user", content="0")], []
        )
        a, b = await one.get_session(SID), await two.get_session(SID)
        assert a is not None and b is not None and a.version == b.version == 1
        a.state["winner"] = "one"
        b.state["loser"] = "two"
        await one.commit_run(a, [Message(role="user", content="one")], [])
        with pytest.raises(ConflictError) as caught:
            await two.commit_run(b, [Message(role="user", content="two")], [])
        assert caught.value.key == SID
        assert repr(SID) in str(caught.value)
        assert b.version == 1  # not bumped
        got = await two.get_session(SID)
        assert got is not None and (got.version, got.state) == (2, {"winner": "one"})
        assert [m.content for m in await two.get_messages(SID)] == ["0", "one"]
    finally:
        await one.close()
        await two.close()


# A process frozen past its lease (tool blocking the event loop: no renewal) while another
# process takes the session over: the taker finishes the frozen run from its checkpoint, then
# runs its own message; the frozen process wakes and its commit must lose.
@pytest.fixture(scope="module")
def takeover(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("takeover")
    db, ledger, marker = tmp / "b.db", tmp / "ledger", tmp / "in_tool"
    knobs = Knobs(ledger=str(ledger), marker=str(marker), tool_freeze_s=2.0)
    proc = spawn(
        Child(db=str(db), session_id=SID, message="refund ORD-1", knobs=knobs, lease_s=0.3)
    )
    wait_for_file(marker, proc)

    async def take_over() -> dict[str, Any]:
        team = build_team(url(db), Knobs(ledger=str(ledger)), lease_s=0.3)
        try:
            [cp] = await team.unfinished()
            result = await team.run("cancel BK-2", session_id=SID)
            return {"frozen_run": cp.run_id, "result": result}
        finally:
            await team.aclose()

    out = asyncio.run(take_over())
    rc, stdout, stderr = finish(proc)
    assert rc == 0, stderr
    out.update(db=db, ledger=ledger, child=json.loads(stdout), key=marker.read_text("utf-8"))
    return out


async def test_lease_takeover_the_frozen_process_commit_conflicts_and_writes_nothing(
    takeover: dict[str, Any],
) -> None:
    result, child = takeover["result"], takeover["child"]
    assert (result.status, result.output) == ("completed", answer_for("cancel BK-2"))
    assert child.get("conflict") == SID, child
    assert repr(SID) in child["error"]
    key = takeover["key"]
    # the taker ran the frozen call again with its key; the effect happened once
    lines = started_done(ledger_lines(takeover["ledger"]))
    assert lines[:3] == [("started", key), ("started", key), ("done", key)]
    assert [kind for kind, _ in lines[3:]] == ["started", "done"]
    store = SQLiteStore(url(takeover["db"]))
    try:
        msgs = await store.get_messages(SID)
        assert shape(msgs) == exchange("refund ORD-1", "refund") + exchange("cancel BK-2", "cancel")
        assert_clean_transcript(msgs)
        assert [m.run_id for m in msgs[:4]] == [takeover["frozen_run"]] * 4
        stored = {e.id for e in await store.get_events(SID)}
        frozen = child["event_ids"]
        # what the frozen process emitted before its first checkpoint came over with it;
        # nothing it emitted after it froze (tool_called ... run_finished) is stored
        assert [i for i in frozen if i in stored] == frozen[:4]
        assert len(frozen) > 4
        session = await store.get_session(SID)
        assert session is not None and session.version == 2
    finally:
        await store.close()


async def test_lease_takeover_leaves_no_ghost_checkpoint(
    takeover: dict[str, Any], tmp_path: Path
) -> None:
    """The frozen run's post-wake checkpoint must not survive its failed commit: a ghost run
    that every later `team.run` resumes and fails on (ConflictError, version 0 vs 2)."""
    db = tmp_path / "copy.db"  # the fixture's file stays as the takeover left it
    with (
        contextlib.closing(sqlite3.connect(takeover["db"])) as src,
        contextlib.closing(sqlite3.connect(db)) as dst,
    ):
        src.backup(dst)
    team = build_team(url(db), Knobs(ledger=str(tmp_path / "ledger")), lease_s=0.3)
    try:
        assert await team.unfinished() == []
        result = await team.run("refund ORD-9", session_id=SID)
        assert (result.status, result.output) == ("completed", answer_for("refund ORD-9"))
        session = await team.session(SID)
        assert session is not None and session.version == 3
    finally:
        await team.aclose()


async def test_lease_takeover_the_frozen_process_never_replaces_the_live_checkpoint(
    tmp_path: Path,
) -> None:
    db, ledger, marker = tmp_path / "b.db", tmp_path / "ledger", tmp_path / "in_tool"
    knobs = Knobs(ledger=str(ledger), marker=str(marker), tool_freeze_s=2.0)
    proc = spawn(
        Child(db=str(db), session_id=SID, message="refund ORD-1", knobs=knobs, lease_s=0.3)
    )
    wait_for_file(marker, proc)
    # the taker's own run blocks in its `cancel` call while the frozen process wakes
    live = Knobs(ledger=str(ledger), tool_block_s=30, block_only="cancel")
    team = build_team(url(db), live, lease_s=0.3)
    [frozen] = await team.unfinished()
    task = asyncio.ensure_future(team.run("cancel BK-2", session_id=SID))
    try:
        deadline = time.monotonic() + 20
        while (cp := await team.store.get_checkpoint(SID)) is None or cp.run_id == frozen.run_id:
            assert not task.done() and time.monotonic() < deadline, "the taker never started"
            await asyncio.sleep(0.01)
        own = cp.run_id  # the taker's own run, blocked in `cancel`
        assert proc.poll() is None, "the frozen process woke too early for this test"
        while proc.poll() is None:
            await asyncio.sleep(0.02)
        assert json.loads(finish(proc)[1]).get("conflict") == SID
        cp = await team.store.get_checkpoint(SID)
        assert cp is not None and cp.run_id == own  # the live run's checkpoint is intact
        task.cancel()  # the taker dies too
        with pytest.raises(asyncio.CancelledError):
            await task
        live.tool_block_s = 0
        result = await team.run("anything else?", session_id=SID)
        assert result.status == "completed"
        msgs = await team.store.get_messages(SID)
        assert [m.content for m in msgs if m.role == "user"] == [
            "refund ORD-1",
            "cancel BK-2",
            "anything else?",
        ]
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if proc.poll() is None:
            finish(proc)
        await team.aclose()


# ------------------------------------------------------------------ 4. a dead process's lease
async def test_lease_of_a_killed_process_lapses_then_resume_proceeds(tmp_path: Path) -> None:
    db, ledger, marker = tmp_path / "b.db", tmp_path / "ledger", tmp_path / "in_tool"
    lease_s = 1.5
    knobs = Knobs(ledger=str(ledger), marker=str(marker), tool_block_s=60)
    proc = spawn(
        Child(db=str(db), session_id=SID, message="refund ORD-4", knobs=knobs, lease_s=lease_s)
    )
    wait_for_file(marker, proc)
    sigkill(proc)

    team = build_team(url(db), Knobs(ledger=str(ledger)), lease_s=lease_s)
    try:
        row = lease_row(db)
        assert row is not None, "the killed process's lease is gone"
        _owner, expires_at = row
        remaining = expires_at - time.time()
        assert 0.3 < remaining <= lease_s  # live: renewed every lease_s / 3 until the kill
        assert not await team.store.acquire_lease(LEASE_KEY, "probe", 1.0)  # not before

        started = time.time()
        result = await team.resume(SID)
        waited = time.time() - started

        assert result.status == "completed"
        assert waited >= expires_at - started - 0.02  # it waited for the lease to lapse
        assert waited < expires_at - started + 1.0  # ... and not much longer
        assert lease_row(db) is None  # released after the run
        assert len([x for x in started_done(ledger_lines(ledger)) if x[0] == "done"]) == 1
    finally:
        await team.aclose()


# ------------------------------------------------------------------ 5. cancellation
@pytest.fixture(params=["sqlite", "memory"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return url(tmp_path / "b.db") if request.param == "sqlite" else "memory://"


@pytest.mark.usefixtures("dies_when_cancelled")
@pytest.mark.parametrize("where", ["tool", "model"])
async def test_an_interrupted_run_is_finished_by_the_next_run(
    tmp_path: Path, store_url: str, where: str
) -> None:
    ledger = tmp_path / "ledger"
    knobs = Knobs(ledger=str(ledger))
    if where == "tool":
        knobs.tool_block_s = 30
    else:
        knobs.model_sleep_after_tool_s = 30
    team = build_team(store_url, knobs, lease_s=1.0)
    try:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(team.run("refund ORD-1", session_id=SID), 0.3)
        [cp] = await team.unfinished()
        assert (cp.session_id, cp.status) == (SID, "running")
        assert cp.seq == (1 if where == "tool" else 2)
        first_key = started_done(ledger_lines(ledger))[0][1]
        assert first_key.startswith(cp.run_id + ":")
        assert await team.session(SID) is None  # nothing committed yet
        if team.store.shared:
            assert lease_row(Path(store_url.removeprefix("sqlite:///"))) is None  # released

        knobs.tool_block_s = knobs.model_sleep_after_tool_s = 0
        result = await team.run("cancel BK-2", session_id=SID)

        assert (result.status, result.output) == ("completed", answer_for("cancel BK-2"))
        msgs = await team.store.get_messages(SID)
        assert shape(msgs) == exchange("refund ORD-1", "refund") + exchange("cancel BK-2", "cancel")
        assert_clean_transcript(msgs)
        assert [m.run_id for m in msgs[:4]] == [cp.run_id] * 4
        lines = started_done(ledger_lines(ledger))
        second_key = lines[-1][1]
        again = [("started", first_key)] if where == "tool" else []
        assert lines == [
            ("started", first_key),
            *again,
            ("done", first_key),
            ("started", second_key),
            ("done", second_key),
        ]
        events = await team.store.get_events(SID)
        counts = Counter(e.type for e in events)
        assert (counts["run_finished"], counts["run_resumed"], counts["tool_called"]) == (2, 1, 2)
        session = await team.session(SID)
        assert session is not None and session.version == 2
        assert await team.unfinished() == []
    finally:
        await team.aclose()


async def test_a_run_cancelled_in_its_first_model_call_is_recorded(tmp_path: Path) -> None:
    """Cancelled before anything was checkpointed: the user's message and the cancellation
    are committed all the same; the next message goes on from there."""
    slow = {"on": True}

    def respond(request: ModelRequest) -> Any:
        step = S.say("hi")
        return S.slow(step, 30) if slow["on"] else step

    team = Team([Agent(name=AGENT)], entry=AGENT, model=S(respond), store=url(tmp_path / "b.db"))
    try:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(team.run("first", session_id=SID), 0.3)
        [cp] = await team.unfinished()
        assert cp.status == "cancelled"
        finished = [e for e in await team.store.get_events(SID) if e.type == "run_finished"]
        assert [(e.status, e.error) for e in finished] == [("cancelled", CALLER)]
        slow["on"] = False
        result = await team.run("second", session_id=SID)
        assert result.status == "completed"
        assert [m.content for m in await team.store.get_messages(SID)] == ["first", "second", "hi"]
        assert await team.unfinished() == []  # the new message ended the cancelled run's chance
    finally:
        await team.aclose()


# ------------------------------------------------------------------ 6. checkpoint content
class RecordingStore(MemoryStore):
    """Keeps every checkpoint the kernel saves, with its JSON at the time of the save."""

    def __init__(self) -> None:
        super().__init__()
        self.saved: list[tuple[Checkpoint, str]] = []

    async def put_checkpoint(self, checkpoint: Checkpoint) -> None:
        self.saved.append((checkpoint, checkpoint.state.to_json()))
        await super().put_checkpoint(checkpoint)


async def test_checkpoints_after_each_model_call_tool_call_and_handoff(tmp_path: Path) -> None:
    knobs = Knobs(ledger=str(tmp_path / "ledger"))

    def respond(request: ModelRequest) -> Any:
        if request.agent == "triage":
            return handoff("billing")
        if request.messages[-1].role == "tool":
            return S.say("refunded")
        return S.call("refund", order_id="ORD-5")

    store = RecordingStore()
    team = Team(
        [
            Agent(name="triage", handoffs=["billing"]),
            Agent(name="billing", tools=make_tools(knobs)),
        ],
        entry="triage",
        model=S(respond),
        store=store,
    )
    result = await team.run("refund ORD-5 please", session_id=SID)

    assert (result.status, result.output, result.path) == (
        "completed",
        "refunded",
        ["triage", "billing"],
    )
    rows = []
    for cp, text in store.saved:
        st = RunState.from_json(text)  # the state as it was when saved
        t = st.turn
        assert t is not None
        rows.append(
            (
                cp.seq,
                st.seq,
                cp.status,
                cp.meta,
                st.path,
                t.agent,
                len(t.scratch),
                [c.content is not None for c in t.calls],
                len(st.messages),
                t.iteration,
            )
        )
    triage, billing = {"agent": "triage"}, {"agent": "billing"}
    assert rows == [
        # triage's model call: a hand-off call, not yet answered
        (1, 1, "running", triage, ["triage"], "triage", 1, [False], 2, 1),
        # the baton passed (the accepted hand-off ended triage's turn): billing's turn, not
        # started
        (2, 2, "running", billing, ["triage", "billing"], "billing", 0, [], 3, 0),
        # billing's model call: the refund call
        (3, 3, "running", billing, ["triage", "billing"], "billing", 1, [False], 4, 1),
        # the refund answered
        (4, 4, "running", billing, ["triage", "billing"], "billing", 2, [True], 5, 1),
    ]
    assert {cp.run_id for cp, _ in store.saved} == {result.run_id}
    # in process memory a step's checkpoint is the live state itself: nothing is copied
    assert len({id(cp.state) for cp, _ in store.saved}) == 1
    # the finished run's checkpoint is gone
    assert await store.get_checkpoint(SID) is None
    assert len(await store.get_messages(SID)) == 6


# ------------------------------------------------------------------ 7. unusual content
NESTED = {
    "reason": "包裹损坏",
    "items": [{"sku": "杯子", "qty": 2, "tags": ["易碎", "急"]}, {"sku": "盘", "qty": 1}],
    "meta": {"deep": {"deeper": {"deepest": [1, 2.5, None, True, "末"]}}},
}


@pytest.mark.usefixtures("dies_when_cancelled")
async def test_checkpoint_json_round_trip_with_chinese_nested_args_and_a_1mb_result(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "ledger"
    big = {"note": "退款已受理。" * 10, "blob": "数据" * 500_000}  # about 1 M characters
    knobs = Knobs(ledger=str(ledger), result=big, details=NESTED, model_sleep_after_tool_s=30)
    message = "请为订单 ORD-8 退款"
    team = build_team(url(tmp_path / "b.db"), knobs, lease_s=1.0)
    try:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(team.run(message, session_id=SID), 0.5)
        cp = await team.store.get_checkpoint(SID)
        assert cp is not None and cp.data is not None
        state = RunState.from_json(cp.data)
        assert RunState.from_json(state.to_json()).to_json() == state.to_json() == cp.data
        assert state.message == message
        t = state.turn
        assert t is not None
        [pc] = t.calls
        assert pc.args == {"order_id": "ORD-8", "details": NESTED}
        assert pc.content is not None and json.loads(pc.content) == big
        assert len(pc.content) > 1_000_000
        [tool_msg] = [m for m in state.messages if m.role == "tool"]
        assert tool_msg.content == pc.content
        assert state.session.state == {"order_id": "ORD-8"}

        knobs.model_sleep_after_tool_s = 0
        result = await team.resume(SID)
        assert (result.status, result.output) == ("completed", answer_for(message))
        msgs = await team.store.get_messages(SID)
        assert shape(msgs) == exchange(message, "refund")
        assert json.loads(msgs[2].content or "") == big
        assert json.loads(msgs[1].tool_calls[0].arguments)["details"] == NESTED  # type: ignore[index]
        assert len(ledger_lines(ledger)) == 2
    finally:
        await team.aclose()


async def test_lone_surrogate_in_a_tool_result_does_not_lose_the_run(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    knobs = Knobs(ledger=str(ledger), result="收到 \ud800 ok")
    team = build_team(url(tmp_path / "b.db"), knobs, lease_s=1.0)
    try:
        result = await team.run("refund ORD-2", session_id=SID)
        assert result.status == "completed"
        msgs = await team.store.get_messages(SID)
        assert shape(msgs) == exchange("refund ORD-2", "refund")
        text = msgs[2].content or ""
        assert text.startswith("收到 ") and text.endswith(" ok")
        text.encode("utf-8")  # stored as valid text
        assert await team.unfinished() == []
        assert [k for k, _ in started_done(ledger_lines(ledger))] == ["started", "done"]
    finally:
        await team.aclose()
