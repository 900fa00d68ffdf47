"""One behaviour suite run against every `Store` backend (see the `store` fixture)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from baton.backends import Store
from baton.backends.base import Checkpoint, CheckpointStatus, SessionRecord
from baton.core.errors import ConflictError, StoreError
from baton.core.events import (
    EscalationCard,
    Event,
    Handoff,
    ModelCalled,
    RunFinished,
    RunStarted,
    ToolCalled,
)
from baton.core.ids import new_id
from baton.core.messages import Message, ToolCall, Usage
from baton.core.payload import HandoffPayload


def make_payload(session_id: str, trace_id: str = "tr_1") -> HandoffPayload:
    """A realistic hand-off from triage to billing."""
    return HandoffPayload(
        reason="billing question",
        objective="Answer the invoice question",
        state={"order_id": "ORD-202607-99", "amount": 299.0, "tags": ["vip", "发票"]},
        completed_steps=["greeted the user"],
        constraints=["be formal"],
        reply_to_user="Passing you to billing.",
        priority="high",
        trace_id=trace_id,
        session_id=session_id,
        user_id="u1",
        source="triage",
        target="billing",
        hop=1,
        path=["triage"],
        history_ref=session_id,
    )


def make_events(session_id: str, trace_id: str, run_id: str) -> list[Event]:
    """One run's worth of events of several concrete types."""
    base: dict[str, Any] = {"trace_id": trace_id, "session_id": session_id, "run_id": run_id}
    return [
        RunStarted(**base, message="where is my invoice?", user_id="u1"),
        ModelCalled(
            **base,
            agent="triage",
            model="scripted",
            usage=Usage(input_tokens=12, output_tokens=4),
            latency_ms=1.5,
            tool_calls=("transfer_to_billing",),
        ),
        Handoff(**base, agent="triage", payload=make_payload(session_id, trace_id)),
        ToolCalled(
            **base,
            agent="billing",
            hop=1,
            tool="query_invoice",
            call_id="call_1",
            arguments={"order_id": "ORD-202607-99"},
            ok=True,
            result_chars=42,
        ),
        RunFinished(
            **base,
            agent="billing",
            hop=1,
            status="completed",
            output="Your invoice is ISSUED.",
            path=["triage", "billing"],
            usage={
                "triage": Usage(input_tokens=12, output_tokens=4),
                "billing": Usage(input_tokens=30, output_tokens=9),
            },
            latency_ms=12.25,
        ),
    ]


def make_card(session_id: str, n: int = 0) -> EscalationCard:
    """An escalation card with non-ASCII text and nested state."""
    return EscalationCard(
        session_id=session_id,
        trace_id=f"tr_{n}",
        user_id="u1",
        path=["triage", "billing"],
        reasons=[f"max_hops: reason {n}"],
        state={"order_id": "ORD-1", "nested": {"a": [1, 2.5, None]}},
        last_user_message="我要退款",
        last_reply="Passing you to billing.",
    )


def new_session(session_id: str | None = None, **kw: Any) -> SessionRecord:
    """A session record with a fresh id unless one is given."""
    return SessionRecord(session_id or new_id("s_"), **kw)


async def test_unknown_session_is_none(store: Store) -> None:
    assert await store.get_session("s_missing") is None
    assert await store.get_messages("s_missing") == []
    assert await store.get_events(session_id="s_missing") == []


async def test_commit_then_get_round_trips_the_session(store: Store) -> None:
    sid = new_id("s_")
    rec = new_session(
        sid,
        user_id="u1",
        holder="billing",
        holder_since="msg_abc",
        incoming=make_payload(sid),
        state={"order_id": "ORD-202607-99", "count": 3, "ok": True},
    )
    await store.commit_run(rec, [], [])
    got = await store.get_session(sid)
    assert got is not None
    assert got.session_id == sid
    assert got.user_id == "u1"
    assert got.holder == "billing"
    assert got.holder_since == "msg_abc"
    assert got.incoming == rec.incoming
    assert isinstance(got.incoming, HandoffPayload)
    assert got.state == rec.state
    assert got.created_at == rec.created_at
    assert got.updated_at == rec.updated_at


async def test_commit_overwrites_the_session(store: Store) -> None:
    sid = new_id("s_")
    rec = new_session(sid, holder="triage", state={"a": 1})
    await store.commit_run(rec, [], [])
    rec.holder, rec.incoming, rec.state = "billing", make_payload(sid), {"a": 2, "b": "x"}
    rec.updated_at += 1
    await store.commit_run(rec, [], [])
    got = await store.get_session(sid)
    assert got is not None
    assert (got.holder, got.incoming, got.state) == ("billing", rec.incoming, {"a": 2, "b": "x"})
    assert got.updated_at == rec.updated_at
    rec.incoming = None
    await store.commit_run(rec, [], [])
    got = await store.get_session(sid)
    assert got is not None and got.incoming is None


async def test_state_is_not_aliased(store: Store) -> None:
    sid = new_id("s_")
    rec = new_session(sid, state={"order_id": "ORD-1"})
    await store.commit_run(rec, [], [])
    rec.state["order_id"] = "changed by the caller after commit"
    got = await store.get_session(sid)
    assert got is not None
    got.state["order_id"] = "changed by the reader"
    got.state["extra"] = 1
    again = await store.get_session(sid)
    assert again is not None
    assert again.state == {"order_id": "ORD-1"}


async def test_nested_state_is_not_aliased(store: Store) -> None:
    sid = new_id("s_")
    await store.commit_run(new_session(sid, state={"items": [1], "meta": {"k": "v"}}), [], [])
    got = await store.get_session(sid)
    assert got is not None
    got.state["items"].append(2)
    got.state["meta"]["k"] = "changed"
    again = await store.get_session(sid)
    assert again is not None
    assert again.state == {"items": [1], "meta": {"k": "v"}}


async def test_list_sessions_is_not_aliased(store: Store) -> None:
    sid = new_id("s_")
    await store.commit_run(new_session(sid, state={"order_id": "ORD-1"}), [], [])
    listed = await store.list_sessions()
    listed[0].state["order_id"] = "changed"
    listed[0].holder = "someone"
    got = await store.get_session(sid)
    assert got is not None
    assert got.state == {"order_id": "ORD-1"}
    assert got.holder is None


async def test_messages_append_in_order_and_limit_returns_the_last(store: Store) -> None:
    sid = new_id("s_")
    other = new_id("s_")
    rec = new_session(sid)
    first = [
        Message(role="user", content="hi", run_id="run_1"),
        Message(
            role="assistant",
            content=None,
            agent="triage",
            tool_calls=[ToolCall(name="transfer_to_billing", arguments='{"reason": "x"}')],
            run_id="run_1",
        ),
        Message(
            role="tool",
            content='{"ok": true}',
            agent="triage",
            tool_call_id="call_1",
            name="transfer_to_billing",
            run_id="run_1",
        ),
    ]
    second = [
        Message(role="user", content="还有发票吗?", run_id="run_2"),
        Message(role="assistant", content="Yes.", agent="billing", run_id="run_2"),
    ]
    await store.commit_run(rec, first, [])
    await store.commit_run(new_session(other), [Message(role="user", content="elsewhere")], [])
    await store.commit_run(rec, second, [])
    assert await store.get_messages(sid) == first + second
    assert await store.get_messages(sid, limit=2) == second
    assert await store.get_messages(sid, limit=4) == (first + second)[-4:]
    assert await store.get_messages(sid, limit=100) == first + second
    assert [m.content for m in await store.get_messages(other)] == ["elsewhere"]


async def test_events_round_trip_with_their_types_and_filter(store: Store) -> None:
    sid, sid2 = new_id("s_"), new_id("s_")
    run1 = make_events(sid, "tr_a", "run_1")
    run2 = make_events(sid, "tr_b", "run_2")
    other = make_events(sid2, "tr_c", "run_3")
    rec = new_session(sid)
    await store.commit_run(rec, [], run1)
    await store.commit_run(new_session(sid2), [], other)
    await store.commit_run(rec, [], run2)

    got = await store.get_events(session_id=sid)
    assert got == run1 + run2
    assert [type(e) for e in got] == [type(e) for e in run1 + run2]
    handoff = got[2]
    assert isinstance(handoff, Handoff)
    assert isinstance(handoff.payload, HandoffPayload)
    assert handoff.payload.state["tags"] == ["vip", "发票"]
    finished = got[4]
    assert isinstance(finished, RunFinished)
    assert finished.usage["billing"] == Usage(input_tokens=30, output_tokens=9)

    assert await store.get_events(trace_id="tr_b") == run2
    assert await store.get_events(session_id=sid, trace_id="tr_a") == run1
    assert await store.get_events(session_id=sid2, trace_id="tr_a") == []
    assert await store.get_events() == run1 + other + run2


async def test_list_sessions_orders_by_updated_at_desc(store: Store) -> None:
    ids = [new_id("s_") for _ in range(4)]
    stamps = [100.0, 300.0, 200.0, 400.0]
    for sid, ts in zip(ids, stamps, strict=True):
        await store.commit_run(new_session(sid, created_at=ts, updated_at=ts), [], [])
    # the first session is touched again, last
    again = new_session(ids[0], created_at=100.0, updated_at=500.0, version=1)
    await store.commit_run(again, [], [])
    listed = await store.list_sessions()
    assert [r.session_id for r in listed] == [ids[0], ids[3], ids[1], ids[2]]
    assert [r.session_id for r in await store.list_sessions(limit=2)] == [ids[0], ids[3]]


async def test_human_queue_round_trips_the_card(store: Store) -> None:
    assert await store.list_human() == []
    cards = [make_card("s_1", 1), make_card("s_2", 2)]
    ids = [await store.push_human(c) for c in cards]
    assert ids[0] < ids[1]
    tickets = await store.list_human()
    assert [t.id for t in tickets] == ids
    assert [t.card for t in tickets] == cards
    assert all(t.status == "open" for t in tickets)
    assert [t.card for t in await store.list_human(status=None)] == cards
    assert await store.list_human(status="closed") == []


# JSON-able values as the kernel stores them in session state
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text()
    | st.sampled_from(["订单号", "发票 ORD-202607-99", "服务器告警 ✓", ""]),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(state=st.dictionaries(st.text(max_size=12), _json, max_size=6))
async def test_any_json_state_round_trips(store: Store, state: dict[str, Any]) -> None:
    sid = new_id("s_")
    await store.commit_run(new_session(sid, state=state), [], [])
    got = await store.get_session(sid)
    assert got is not None
    assert got.state == state
    assert repr(got.state) == repr(state)  # also keeps int vs float vs bool apart


# ---------------------------------------------------------------- capabilities of resumable runs


@dataclass
class RunState:
    """A stand-in for the kernel's run state: anything with `to_json() -> str`."""

    step: int
    note: str = "发票 ORD-202607-99"

    def to_json(self) -> str:
        return json.dumps({"step": self.step, "note": self.note}, ensure_ascii=False)


def make_checkpoint(
    session_id: str,
    run_id: str = "run_1",
    seq: int = 1,
    status: CheckpointStatus = "running",
    updated_at: float | None = None,
) -> Checkpoint:
    """A checkpoint whose state records its seq, with a small meta dict."""
    cp = Checkpoint(
        session_id,
        run_id,
        seq,
        status=status,
        state=RunState(seq),
        meta={"agent": "billing", "seq": seq},
    )
    if updated_at is not None:
        cp.updated_at = updated_at
    return cp


def test_store_has_every_capability(store: Store) -> None:
    assert isinstance(store, Store)
    assert isinstance(store.shared, bool)


async def test_commit_increments_the_version(store: Store) -> None:
    sid = new_id("s_")
    rec = new_session(sid)
    assert rec.version == 0
    await store.commit_run(rec, [], [])
    assert rec.version == 1
    got = await store.get_session(sid)
    assert got is not None and got.version == 1
    await store.commit_run(got, [], [])
    assert got.version == 2
    again = await store.get_session(sid)
    assert again is not None and again.version == 2
    assert [r.version for r in await store.list_sessions() if r.session_id == sid] == [2]


async def test_commit_from_a_stale_version_conflicts_and_writes_nothing(store: Store) -> None:
    sid = new_id("s_")
    await store.commit_run(new_session(sid, holder="triage"), [], [])
    first = await store.get_session(sid)
    second = await store.get_session(sid)
    assert first is not None and second is not None and first.version == second.version == 1
    won_msgs = [Message(role="user", content="first")]
    won_events = make_events(sid, "tr_first", "run_first")
    first.holder = "billing"
    await store.commit_run(first, won_msgs, won_events)

    second.holder, second.state = "tech", {"lost": True}
    with pytest.raises(ConflictError) as info:
        await store.commit_run(
            second,
            [Message(role="user", content="second")],
            make_events(sid, "tr_second", "run_second"),
        )
    err = info.value
    assert isinstance(err, StoreError)
    assert err.key == sid
    assert sid in str(err) and "version 1" in str(err) and "version 2" in str(err)
    assert "retry" in str(err)
    assert second.version == 1  # not incremented
    got = await store.get_session(sid)
    assert got is not None
    assert (got.holder, got.state, got.version) == ("billing", {}, 2)
    assert await store.get_messages(sid) == won_msgs
    assert await store.get_events(session_id=sid) == won_events
    assert await store.get_events(trace_id="tr_second") == []


async def test_commit_of_a_new_session_expects_version_0(store: Store) -> None:
    sid = new_id("s_")
    with pytest.raises(ConflictError, match="version 3"):
        await store.commit_run(new_session(sid, version=3), [Message(role="user", content="x")], [])
    assert await store.get_session(sid) is None
    assert await store.get_messages(sid) == []
    # two writers that both found no session: the second one loses
    a, b = new_session(sid, holder="a"), new_session(sid, holder="b")
    await store.commit_run(a, [], [])
    with pytest.raises(ConflictError):
        await store.commit_run(b, [], [])
    got = await store.get_session(sid)
    assert got is not None and got.holder == "a"


async def test_events_are_filed_by_their_own_session(store: Store) -> None:
    sid, other = new_id("s_"), new_id("s_")
    mine = make_events(sid, "tr_x", "run_1")
    theirs = make_events(other, "tr_x", "run_1")[:1]
    await store.commit_run(new_session(sid), [], mine[:2] + theirs + mine[2:])
    assert await store.get_events(session_id=sid) == mine
    assert await store.get_events(session_id=other) == theirs
    assert await store.get_events(trace_id="tr_x") == mine[:2] + theirs + mine[2:]


async def test_commit_deletes_the_finished_runs_checkpoint_only(store: Store) -> None:
    sid, other = new_id("s_"), new_id("s_")
    rec = new_session(sid)
    await store.put_checkpoint(make_checkpoint(sid, "run_1", 3))
    await store.put_checkpoint(make_checkpoint(other, "run_9", 1))
    await store.commit_run(rec, [], [])  # no run named: checkpoints are left alone
    assert await store.get_checkpoint(sid) is not None
    await store.commit_run(rec, [], [], run_id="run_other")  # another run's: kept
    assert await store.get_checkpoint(sid) is not None
    await store.commit_run(rec, [Message(role="user", content="hi")], [], run_id="run_1")
    assert await store.get_checkpoint(sid) is None
    kept = await store.get_checkpoint(other)
    assert kept is not None and kept.run_id == "run_9"
    # a refused commit leaves the checkpoint in place
    await store.put_checkpoint(make_checkpoint(sid, "run_2", 1))
    with pytest.raises(ConflictError):
        await store.commit_run(new_session(sid), [], [])
    assert await store.get_checkpoint(sid) is not None


async def test_checkpoint_round_trips(store: Store) -> None:
    sid = new_id("s_")
    assert await store.get_checkpoint(sid) is None
    cp = make_checkpoint(sid, "run_1", 4, status="awaiting_approval", updated_at=123.5)
    await store.put_checkpoint(cp)
    got = await store.get_checkpoint(sid)
    assert got is not None
    assert (got.session_id, got.run_id, got.seq, got.status) == (
        sid,
        "run_1",
        4,
        "awaiting_approval",
    )
    assert got.meta == {"agent": "billing", "seq": 4}
    assert got.updated_at == 123.5
    assert json.loads(got.state_json()) == {"step": 4, "note": "发票 ORD-202607-99"}


async def test_checkpoint_saves_replace_and_stale_ones_conflict(store: Store) -> None:
    sid = new_id("s_")
    await store.put_checkpoint(make_checkpoint(sid, "run_1", 1))
    await store.put_checkpoint(make_checkpoint(sid, "run_1", 2))
    with pytest.raises(ConflictError, match="seq 2") as info:
        await store.put_checkpoint(make_checkpoint(sid, "run_1", 2))  # same seq: stale
    assert info.value.key == sid
    with pytest.raises(ConflictError):
        await store.put_checkpoint(make_checkpoint(sid, "run_1", 1))  # older seq: stale
    got = await store.get_checkpoint(sid)
    assert got is not None and (got.run_id, got.seq) == ("run_1", 2)
    # another run replaces it whatever its seq
    await store.put_checkpoint(make_checkpoint(sid, "run_2", 1))
    got = await store.get_checkpoint(sid)
    assert got is not None and (got.run_id, got.seq) == ("run_2", 1)
    assert json.loads(got.state_json())["step"] == 1


async def test_list_checkpoints_by_status_oldest_first(store: Store) -> None:
    a, b, c = (new_id("s_") for _ in range(3))
    await store.put_checkpoint(make_checkpoint(b, updated_at=200.0))
    await store.put_checkpoint(make_checkpoint(a, status="awaiting_approval", updated_at=300.0))
    await store.put_checkpoint(make_checkpoint(c, updated_at=100.0))
    every = await store.list_checkpoints()
    assert [cp.session_id for cp in every] == [c, b, a]
    assert [cp.session_id for cp in await store.list_checkpoints("running")] == [c, b]
    waiting = await store.list_checkpoints("awaiting_approval")
    assert [cp.session_id for cp in waiting] == [a]
    assert waiting[0].meta == {"agent": "billing", "seq": 1}
    assert json.loads(waiting[0].state_json())["step"] == 1
    # a newer save moves it to the end
    await store.put_checkpoint(make_checkpoint(c, seq=2, updated_at=400.0))
    assert [cp.session_id for cp in await store.list_checkpoints()] == [b, a, c]


async def test_delete_checkpoint_only_of_its_run(store: Store) -> None:
    sid = new_id("s_")
    await store.delete_checkpoint(sid, "run_1")  # absent: no error
    await store.put_checkpoint(make_checkpoint(sid, "run_2", 5))
    await store.delete_checkpoint(sid, "run_1")  # another run's id: no-op
    got = await store.get_checkpoint(sid)
    assert got is not None and got.run_id == "run_2"
    await store.delete_checkpoint(sid, "run_2")
    assert await store.get_checkpoint(sid) is None
    assert await store.list_checkpoints() == []
    # after a delete, the same run may save again from any seq
    await store.put_checkpoint(make_checkpoint(sid, "run_2", 1))
    assert await store.get_checkpoint(sid) is not None


_runs = st.sampled_from(["run_a", "run_b", "run_c"])
_checkpoint_ops = st.lists(
    st.one_of(
        st.tuples(st.just("put"), _runs, st.integers(min_value=0, max_value=6)),
        st.tuples(st.just("delete"), _runs, st.just(0)),
    ),
    min_size=1,
    max_size=16,
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ops=_checkpoint_ops)
async def test_any_interleaving_of_saves_keeps_the_latest(
    store: Store, ops: list[tuple[str, str, int]]
) -> None:
    sid = new_id("s_")
    held: tuple[str, int] | None = None  # the model: (run, seq) the store should hold
    for op, run, seq in ops:
        if op == "delete":
            await store.delete_checkpoint(sid, run)
            if held is not None and held[0] == run:
                held = None
            continue
        stale = held is not None and held[0] == run and seq <= held[1]
        if stale:
            with pytest.raises(ConflictError):
                await store.put_checkpoint(make_checkpoint(sid, run, seq))
        else:
            await store.put_checkpoint(make_checkpoint(sid, run, seq))
            held = (run, seq)
    got = await store.get_checkpoint(sid)
    if held is None:
        assert got is None
    else:
        assert got is not None and (got.run_id, got.seq) == held
        assert json.loads(got.state_json())["step"] == held[1]


async def test_lease_is_exclusive_and_released_by_its_owner(store: Store) -> None:
    assert await store.acquire_lease("s_1", "worker-a", 30) is True
    assert await store.acquire_lease("s_1", "worker-b", 30) is False
    assert await store.acquire_lease("s_2", "worker-b", 30) is True  # another key
    await store.release_lease("s_1", "worker-b")  # not the owner: no-op
    assert await store.acquire_lease("s_1", "worker-b", 30) is False
    await store.release_lease("s_1", "worker-a")
    assert await store.acquire_lease("s_1", "worker-b", 30) is True
    assert await store.acquire_lease("s_1", "worker-a", 30) is False
    await store.release_lease("s_missing", "worker-a")  # nothing held: no error


async def test_lease_is_renewed_by_its_owner(store: Store) -> None:
    assert await store.acquire_lease("k", "worker-a", 0.05) is True
    assert await store.acquire_lease("k", "worker-a", 30) is True  # renewal, now long
    await asyncio.sleep(0.08)
    assert await store.acquire_lease("k", "worker-b", 30) is False


async def test_expired_lease_is_taken_over(store: Store) -> None:
    assert await store.acquire_lease("k", "worker-a", 0.05) is True
    assert await store.acquire_lease("k", "worker-b", 0.05) is False
    await asyncio.sleep(0.08)
    assert await store.acquire_lease("k", "worker-b", 30) is True
    assert await store.acquire_lease("k", "worker-a", 30) is False
    await store.release_lease("k", "worker-a")  # lost it: releasing does nothing
    assert await store.acquire_lease("k", "worker-c", 30) is False


async def test_ticket_claim_is_compare_and_set(store: Store) -> None:
    card = make_card("s_1", 1)
    ticket_id = await store.push_human(card)
    assert await store.get_human(ticket_id + 1000) is None
    ann = await store.get_human(ticket_id)
    bob = await store.get_human(ticket_id)
    assert ann is not None and bob is not None
    assert (ann.status, ann.claimed_by, ann.answer, ann.note) == ("open", None, None, "")
    assert ann.card == card

    ann.status, ann.claimed_by = "claimed", "ann"
    bob.status, bob.claimed_by = "claimed", "bob"
    stored = await store.get_human(ticket_id)
    assert stored is not None and stored.status == "open"  # reads are copies
    await store.update_human(ann, expect="open")
    with pytest.raises(ConflictError, match="'claimed', not 'open'") as info:
        await store.update_human(bob, expect="open")
    assert info.value.key == str(ticket_id)
    got = await store.get_human(ticket_id)
    assert got is not None and (got.status, got.claimed_by) == ("claimed", "ann")
    assert got.updated_at == ann.updated_at

    got.status, got.answer, got.note = "answered", "Your refund is on its way.", "checked ERP"
    await store.update_human(got, expect="claimed")
    [listed] = await store.list_human(status="answered")
    assert (listed.id, listed.claimed_by, listed.answer, listed.note) == (
        ticket_id,
        "ann",
        "Your refund is on its way.",
        "checked ERP",
    )
    assert await store.list_human() == []  # no longer open


async def test_update_of_an_unknown_or_bad_ticket_raises_store_error(store: Store) -> None:
    ticket_id = await store.push_human(make_card("s_1", 1))
    ticket = await store.get_human(ticket_id)
    assert ticket is not None
    ticket.id = ticket_id + 1000
    with pytest.raises(StoreError, match="no ticket") as info:
        await store.update_human(ticket, expect="open")
    assert not isinstance(info.value, ConflictError)
    ticket.id, ticket.status = ticket_id, "lost"  # type: ignore[assignment]
    with pytest.raises(StoreError, match="use one of"):
        await store.update_human(ticket, expect="open")
    again = await store.get_human(ticket_id)
    assert again is not None and again.status == "open"


async def test_commit_with_a_checkpoint_saves_both_in_one_step(store: Store) -> None:
    sid = new_id("s_")
    rec = new_session(sid)
    paused = make_checkpoint(sid, "run_1", 2, status="awaiting_approval")
    await store.commit_run(rec, [Message(role="user", content="pay")], [], checkpoint=paused)
    got = await store.get_checkpoint(sid)
    assert got is not None and (got.run_id, got.seq, got.status) == (
        "run_1",
        2,
        "awaiting_approval",
    )
    assert [m.content for m in await store.get_messages(sid)] == ["pay"]
    # a refused commit saves no checkpoint either
    stale = new_session(sid)
    with pytest.raises(ConflictError):
        await store.commit_run(stale, [], [], checkpoint=make_checkpoint(sid, "run_1", 9))
    got = await store.get_checkpoint(sid)
    assert got is not None and got.seq == 2


async def test_a_run_waiting_for_approval_is_never_replaced_by_another(store: Store) -> None:
    sid = new_id("s_")
    await store.put_checkpoint(make_checkpoint(sid, "run_1", 1, status="awaiting_approval"))
    with pytest.raises(ConflictError, match="waiting for a person"):
        await store.put_checkpoint(make_checkpoint(sid, "run_2", 1))
    got = await store.get_checkpoint(sid)
    assert got is not None and got.run_id == "run_1"
    # its own run may move on (a decision), and a running one may be replaced
    await store.put_checkpoint(make_checkpoint(sid, "run_1", 2, status="running"))
    await store.put_checkpoint(make_checkpoint(sid, "run_2", 1))
    got = await store.get_checkpoint(sid)
    assert got is not None and got.run_id == "run_2"


async def test_an_interrupted_run_is_never_replaced_by_another(store: Store) -> None:
    sid = new_id("s_")
    await store.put_checkpoint(make_checkpoint(sid, "run_1", 1, status="interrupted"))
    with pytest.raises(ConflictError, match="waiting for a person"):
        await store.put_checkpoint(make_checkpoint(sid, "run_2", 1))
    got = await store.get_checkpoint(sid)
    assert got is not None and (got.run_id, got.status) == ("run_1", "interrupted")
    assert [c.run_id for c in await store.list_checkpoints("interrupted")] == ["run_1"]
    await store.put_checkpoint(make_checkpoint(sid, "run_1", 2, status="running"))
    assert (await store.list_checkpoints("interrupted")) == []


async def test_the_requests_a_session_answered_are_committed_with_it(store: Store) -> None:
    rec = new_session()
    rec.requests = {"msg-1": "run_a", "请求-2": "run_b"}
    await store.commit_run(rec, [], [])
    got = await store.get_session(rec.session_id)
    assert got is not None and got.requests == {"msg-1": "run_a", "请求-2": "run_b"}
    assert list(got.requests) == ["msg-1", "请求-2"]  # in the order they were answered
    got.requests["msg-3"] = "run_c"  # a copy: nothing stored changes
    again = await store.get_session(rec.session_id)
    assert again is not None and "msg-3" not in again.requests
    stale = new_session(rec.session_id, requests={"msg-9": "run_z"})
    with pytest.raises(ConflictError):
        await store.commit_run(stale, [], [])  # compare-and-set covers them too
    listed = [s for s in await store.list_sessions() if s.session_id == rec.session_id]
    assert listed[0].requests == {"msg-1": "run_a", "请求-2": "run_b"}


async def test_the_kernel_control_slots_are_kept_apart_from_the_business_state(
    store: Store,
) -> None:
    rec = new_session()
    rec.state = {"order_id": "ORD-1", "pending_intents": "a business slot of that name"}
    needs = [{"route": "after_sales", "text": "键盘坏了"}]
    rec.control = {"pending_intents": needs, "provenance": {"order_id": "user"}}
    await store.commit_run(rec, [], [])
    got = await store.get_session(rec.session_id)
    assert got is not None
    assert got.control == {"pending_intents": needs, "provenance": {"order_id": "user"}}
    assert got.state == {"order_id": "ORD-1", "pending_intents": "a business slot of that name"}
    got.control["pending_intents"].append({"route": "x", "text": "y"})  # a copy
    again = await store.get_session(rec.session_id)
    assert again is not None and again.control["pending_intents"] == needs
    again.control = {}
    await store.commit_run(again, [], [])
    cleared = await store.get_session(rec.session_id)
    assert cleared is not None and cleared.control == {}
    listed = [s for s in await store.list_sessions() if s.session_id == rec.session_id]
    assert listed[0].control == {}
