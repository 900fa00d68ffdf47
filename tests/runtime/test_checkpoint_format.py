"""The checkpoint's contract (`baton.runtime.checkpoint_format`): every saved state carries a
format number; a golden checkpoint of each older format, written by the Baton of its day into
a SQLite store (`golden/make_golden.py`), loads and resumes here; a newer format is refused
with an upgrade message and kept."""

from __future__ import annotations

import itertools
import json
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from baton import Agent, ModelRequest, NewerCheckpoint, ScriptedModel, Team, tool
from baton.backends.base import Checkpoint, Fence, KeptSnapshot, SessionRecord
from baton.backends.memory import MemoryStore
from baton.backends.sqlite import SQLiteStore
from baton.core.errors import StoreError
from baton.core.events import Event
from baton.core.messages import Message
from baton.models import Step
from baton.runtime import checkpoint_format
from baton.runtime.state import RunState

GOLDEN = Path(__file__).resolve().parent / "golden"
sys.path.insert(0, str(GOLDEN))

import golden_desk as desk  # noqa: E402


def restore(golden: str, tmp_path: Path) -> str:
    """A SQLite store file holding the golden dump; returns its URL."""
    db = tmp_path / "golden.db"
    con = sqlite3.connect(db)
    con.executescript((GOLDEN / golden).read_text(encoding="utf-8"))
    con.close()
    return f"sqlite:///{db}"


def goldens(kind: str) -> list[str]:
    found = sorted(p.name for p in GOLDEN.glob(f"format*-{kind}.sql"))
    assert found, f"no golden {kind} checkpoint in tests/runtime/golden"
    return found


def approve_on_the_day_asked(monkeypatch: pytest.MonkeyPatch, asked_at: float) -> None:
    """A golden card was asked on the day its file was written, and its approval waits 24 h
    (`Guards.approval_timeout_s`): the approval clock reads a minute after it was asked, so the
    golden resumes on any later day (expiry itself: test_approvals.py)."""
    import baton.core.approval
    import baton.runtime.approval

    for module in (baton.core.approval, baton.runtime.approval):
        monkeypatch.setattr(module, "now", lambda: asked_at + 60)


@pytest.mark.parametrize("golden", goldens("desk"))
async def test_a_golden_checkpoint_loads_and_its_approval_resumes_the_run(
    golden: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SQLiteStore(restore(golden, tmp_path))
    ledger: list[tuple[int, str]] = []
    team = desk.team(store, ledger)
    (card,) = await team.approvals()
    approve_on_the_day_asked(monkeypatch, card.requested_at)
    assert (card.tool, card.agent) == ("pay", "cashier")
    assert card.arguments == {"amount": 20000, "to": "bob"}

    result = await team.approve(desk.SESSION, card.id, by="alice")

    assert result.status == "completed", result.error
    assert result.output == 'Paid: {"paid": 20000, "to": "bob"}'
    assert ledger == [(20000, "bob")]
    assert result.holder == "cashier" and result.state["order_id"] == "ORD-42"
    called = [e.tool for e in result.events if e.type == "tool_called"]
    assert called == ["lookup", "pay"]  # the lookup before the pause ran once, before it
    assert await team.unfinished() == []
    stored = await store.get_events(desk.SESSION)
    assert [e.id for e in stored] == [e.id for e in result.events]
    assert (await store.verify_audit()).ok
    messages = await store.get_messages(desk.SESSION)
    assert [m.role for m in messages][-2:] == ["tool", "assistant"]
    await store.close()


@pytest.mark.parametrize("golden", goldens("graph"))
async def test_a_golden_graph_checkpoint_resumes_without_running_its_steps_again(
    golden: str, tmp_path: Path
) -> None:
    store = SQLiteStore(restore(golden, tmp_path))
    effects: list[str] = []
    graph = desk.graph(store, effects)
    (card,) = await graph.interrupts()
    assert card.value == "ship ORD-42?"

    result = await graph.resume(desk.THREAD, "yes")

    assert result.status == "completed", result.error
    assert result.final.log == ["reserved ORD-42", "charged ORD-42", "person said yes"]
    assert effects == []  # both steps were done before the pause
    assert await graph.interrupts() == []
    await store.close()


async def test_a_checkpoint_of_a_newer_format_is_refused_and_kept(tmp_path: Path) -> None:
    url = restore(goldens("desk")[-1], tmp_path)
    con = sqlite3.connect(url.removeprefix("sqlite:///"))
    (data,) = con.execute("SELECT data FROM checkpoints").fetchone()
    newer = {**json.loads(data), "format": checkpoint_format.FORMAT + 1}
    con.execute("UPDATE checkpoints SET data = ?", (json.dumps(newer),))
    con.commit()
    con.close()
    store = SQLiteStore(url)
    ledger: list[tuple[int, str]] = []
    team = desk.team(store, ledger)
    (card,) = await team.approvals()

    with pytest.raises(NewerCheckpoint, match=r"written by a newer Baton.*Upgrade Baton"):
        await team.approve(desk.SESSION, card.id, by="alice")

    assert ledger == []
    assert [c.run_id for c in await team.unfinished()] == [card.run_id]
    assert [c.id for c in await team.approvals()] == [card.id]
    await store.close()


def test_the_state_is_saved_with_its_format_first() -> None:
    from baton.backends.base import SessionRecord

    text = RunState(SessionRecord(session_id="s"), "hi", None).to_json()
    assert text.startswith(f'{{"format":{checkpoint_format.FORMAT},')
    assert checkpoint_format.format_of(text) == checkpoint_format.FORMAT
    assert RunState.from_json(text).message == "hi"
    legacy = json.dumps({k: v for k, v in json.loads(text).items() if k != "format"})
    assert checkpoint_format.format_of(legacy) == 1
    assert RunState.from_json(legacy).message == "hi"


@pytest.mark.parametrize("bad", ['{"format": "2"}', '{"format": true}', "[1]"])
def test_a_malformed_format_is_a_value_error(bad: str) -> None:
    with pytest.raises(ValueError):
        checkpoint_format.format_of(bad)


def test_upgrades_run_in_order_from_the_format_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoint_format, "FORMAT", 3)
    monkeypatch.setattr(
        checkpoint_format,
        "UPGRADES",
        {1: lambda d: {**d, "steps": ["1to2"]}, 2: lambda d: {**d, "steps": [*d["steps"], "2to3"]}},
    )
    assert checkpoint_format.upgraded('{"x": 1}', 1) == {"x": 1, "steps": ["1to2", "2to3"]}
    assert checkpoint_format.upgraded('{"format": 2, "steps": []}', 2) == {"steps": ["2to3"]}
    with pytest.raises(NewerCheckpoint):
        checkpoint_format.upgraded('{"format": 4}', 4)
    monkeypatch.setattr(checkpoint_format, "UPGRADES", {1: lambda d: d})
    with pytest.raises(ValueError, match="no upgrade from checkpoint format 2 to 3"):
        checkpoint_format.upgraded("{}", 1)


# ---------------------------------------------------------------- what a checkpoint holds

TOOL_CALLS = 6


def six_lookups_then_pay(request: ModelRequest) -> Step:
    done = sum(1 for m in request.messages if m.role == "tool")
    if done < TOOL_CALLS:
        return ScriptedModel.call("lookup", order_id=f"ORD-{done}")
    if done == TOOL_CALLS:
        return ScriptedModel.call("pay", amount=1, to="bob")
    return ScriptedModel.say("done")


async def test_each_tool_result_is_saved_once_and_the_checkpoint_stays_near_the_record(
    tmp_path: Path,
) -> None:
    @tool
    async def lookup(order_id: str) -> dict[str, Any]:
        """Look an order up.

        Args:
            order_id: The order's id.
        """
        return {"order_id": order_id, "marker": f"result-of-{order_id}", "items": ["a"] * 20}

    @tool(requires_approval=True)
    async def pay(amount: int, to: str) -> dict[str, Any]:
        """Pay.

        Args:
            amount: Amount in cents.
            to: Who gets it.
        """
        return {"paid": amount}

    store = Saved(f"sqlite:///{tmp_path / 'b.db'}")
    agent = Agent(name="clerk", instructions="You look orders up.", tools=[lookup, pay])
    team = Team([agent], entry="clerk", model=ScriptedModel(six_lookups_then_pay), store=store)
    orders = " ".join(f"ORD-{n}" for n in range(TOOL_CALLS))
    paused = await team.run(f"look up {orders}", session_id="s")
    assert paused.approval is not None
    text = store.running[-1]  # the last step's, before the pause: nothing committed yet
    cp = await store.get_checkpoint("s")
    assert cp is not None

    for n in range(TOOL_CALLS):
        assert text.count(f"result-of-ORD-{n}") == 1, n
        assert f"result-of-ORD-{n}" not in cp.state_json(), n  # committed at the pause
    record = sum(len(m.model_dump_json()) for m in await store.get_messages("s"))
    record += sum(len(e.model_dump_json()) for e in await store.get_events("s"))
    assert len(text) <= 1.2 * record, (len(text), record)
    resumed = await team.approve("s", paused.approval.id, by="alice")
    assert resumed.status == "completed" and resumed.output == "done"
    await store.close()


class Saved(SQLiteStore):
    """A SQLite store that keeps the text of every checkpoint it is given: of the run's
    steps (`running`) and of its pauses for approval (`paused`)."""

    running: list[str]
    paused: list[str]

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.running, self.paused = [], []

    async def put_checkpoint(self, checkpoint: Checkpoint) -> None:
        self.running.append(checkpoint.state_json())
        await super().put_checkpoint(checkpoint)

    async def put_checkpoint_fenced(
        self, checkpoint: Checkpoint, fence: Fence, snapshots: Sequence[KeptSnapshot] = ()
    ) -> bool:
        self.running.append(checkpoint.state_json())  # a run's steps, under its lease
        return await super().put_checkpoint_fenced(checkpoint, fence, snapshots)

    async def commit_run(
        self,
        session: SessionRecord,
        messages: list[Message],
        events: list[Event],
        *,
        run_id: str | None = None,
        checkpoint: Checkpoint | None = None,
    ) -> None:
        if checkpoint is not None and checkpoint.status == "awaiting_approval":
            self.paused.append(checkpoint.state_json())
        await super().commit_run(session, messages, events, run_id=run_id, checkpoint=checkpoint)


CYCLES = 8


def look_up_then_pay(request: ModelRequest) -> Step:
    """A lookup, then a payment that needs a person's sign-off, `CYCLES` times."""
    done = sum(1 for m in request.messages if m.role == "tool")
    if done >= 2 * CYCLES:
        return ScriptedModel.say("done")
    if done % 2 == 0:
        return ScriptedModel.call("lookup", order_id=f"ORD-{done}")
    return ScriptedModel.call("pay", amount=done, to="bob")


async def test_a_run_paused_and_resumed_again_and_again_never_saves_what_it_committed(
    tmp_path: Path,
) -> None:
    @tool
    async def lookup(order_id: str) -> dict[str, Any]:
        """Look an order up.

        Args:
            order_id: The order's id.
        """
        return {"order_id": order_id, "marker": f"result-of-{order_id}", "items": ["a"] * 20}

    paid: list[int] = []

    @tool(requires_approval=True)
    async def pay(amount: int, to: str) -> dict[str, Any]:
        """Pay.

        Args:
            amount: Amount in cents.
            to: Who gets it.
        """
        paid.append(amount)
        return {"paid": amount}

    store = Saved(f"sqlite:///{tmp_path / 'k.db'}")
    agent = Agent(
        name="clerk",
        instructions="You look orders up.",
        tools=[lookup, pay],
        max_iterations=4 * CYCLES,
    )
    team = Team([agent], entry="clerk", model=ScriptedModel(look_up_then_pay), store=store)
    result = await team.run("look the orders up and pay", session_id="s")
    for _ in range(CYCLES):
        assert result.approval is not None, result.error
        result = await team.approve("s", result.approval.id, by="alice")

    assert result.status == "completed" and result.output == "done", result.error
    assert paid == list(range(1, 2 * CYCLES, 2))
    assert len(store.paused) == CYCLES
    # each cycle commits a lookup and a payment more; a pause's checkpoint holds what followed
    # the last commit and names the rest (the turn's scratch by message ids), so from one
    # pause to the next it grows by a few ids, not by the records committed in between
    record = sum(len(m.model_dump_json()) for m in await store.get_messages("s"))
    record += sum(len(e.model_dump_json()) for e in await store.get_events("s"))
    sizes = [len(t) for t in store.paused]
    growth = [b - a for a, b in itertools.pairwise(sizes)]
    assert max(growth) < 0.05 * record / CYCLES, (sizes, record)
    for n, text in enumerate(store.paused[1:]):
        assert f"result-of-ORD-{2 * n}" not in text  # committed at an earlier pause
    # ... and the resumed runs read back exactly what was committed: every event once
    called = [e.tool for e in result.events if e.type == "tool_called"]
    assert called == ["lookup", "pay"] * CYCLES
    stored = await store.get_events("s")
    assert [e.id for e in stored] == [e.id for e in result.events]
    assert (await store.verify_audit()).ok
    await store.close()


async def test_a_checkpoint_whose_committed_record_is_gone_is_refused_and_kept(
    tmp_path: Path,
) -> None:
    url = restore(goldens("desk")[-1], tmp_path)
    store = SQLiteStore(url)
    ledger: list[tuple[int, str]] = []
    team = desk.team(store, ledger)
    (card,) = await team.approvals()
    await store.close()
    con = sqlite3.connect(url.removeprefix("sqlite:///"))
    con.execute("DELETE FROM messages")
    con.commit()
    con.close()
    store = SQLiteStore(url)
    team = desk.team(store, ledger)

    with pytest.raises(StoreError, match=r"committed messages .* no longer holds"):
        await team.approve(desk.SESSION, card.id, by="alice")

    assert ledger == []
    assert [c.run_id for c in await team.unfinished()] == [card.run_id]
    await store.close()


# ---------------------------------------------------------------- the in-memory shortcut


async def paused_and_resumed(store: MemoryStore) -> tuple[Any, ...]:
    """The golden desk paused for approval and approved, and the golden graph interrupted
    and answered, on `store`: what a caller sees of each."""
    ledger: list[tuple[int, str]] = []
    team = desk.team(store, ledger)
    paused = await team.run(desk.MESSAGE, session_id=desk.SESSION)
    assert paused.approval is not None
    kept = await store.get_checkpoint(desk.SESSION)
    assert kept is not None
    assert (kept.data is not None, kept.state is None) == (store.serialise_checkpoints,) * 2
    done = await team.approve(desk.SESSION, paused.approval.id, by="alice")
    effects: list[str] = []
    graph = desk.graph(store, effects)
    waiting = await graph.invoke({"order_id": "ORD-42"}, thread_id=desk.THREAD)
    answered = await graph.resume(desk.THREAD, "yes")
    return (
        done.status,
        done.output,
        done.state,
        [e.type for e in done.events],
        ledger,
        waiting.status,
        answered.status,
        answered.final.log,
        effects,
        [e.type for e in answered.events],
    )


async def test_the_in_memory_live_state_resumes_like_its_json_text() -> None:
    live = MemoryStore()
    text = MemoryStore(serialise_checkpoints=True)
    assert await paused_and_resumed(live) == await paused_and_resumed(text)
    assert await text.list_checkpoints() == []  # both runs finished: nothing left behind


@pytest.mark.parametrize("damage", ["truncated", "unknown message", "not a list"])
async def test_a_damaged_checkpoint_is_refused_with_discard_advice_and_kept(
    damage: str, tmp_path: Path
) -> None:
    store = SQLiteStore(restore(goldens("desk")[-1], tmp_path))
    ledger: list[tuple[int, str]] = []
    (card,) = await desk.team(store, ledger).approvals()
    # the newest golden, loaded and saved again by this Baton (scratch by reference)
    con = sqlite3.connect(store.url.removeprefix("sqlite:///"))
    (data,) = con.execute("SELECT data FROM checkpoints").fetchone()
    text = RunState.from_json(data).to_json()
    assert '"scratch":["msg_' in text
    if damage == "truncated":
        text = text[: len(text) // 2]
    elif damage == "unknown message":
        text = text.replace('"scratch":["msg_', '"scratch":["msg_gone', 1)
    else:
        broken = json.loads(text)
        broken["turn"]["scratch"] = {"not": "a list"}
        text = json.dumps(broken)
    con.execute("UPDATE checkpoints SET data = ?", (text,))
    con.commit()
    con.close()
    team = desk.team(store, ledger)
    with pytest.raises(StoreError, match=r"(?s)cannot be read.*team\.discard"):
        await team.approve(desk.SESSION, card.id, by="alice")
    assert ledger == []  # nothing ran on a half-read state
    assert [c.run_id for c in await team.unfinished()] == [card.run_id]
    await store.close()
