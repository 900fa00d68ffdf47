"""One behaviour suite run against every `Store` backend (see the `store` fixture)."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from baton.backends import Store
from baton.backends.base import SessionRecord
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
    await store.commit_run(new_session(sid), [], run1)
    await store.commit_run(new_session(sid2), [], other)
    await store.commit_run(new_session(sid), [], run2)

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
    await store.commit_run(new_session(ids[0], created_at=100.0, updated_at=500.0), [], [])
    listed = await store.list_sessions()
    assert [r.session_id for r in listed] == [ids[0], ids[3], ids[1], ids[2]]
    assert [r.session_id for r in await store.list_sessions(limit=2)] == [ids[0], ids[3]]


async def test_claim_lock_expires(store: Store) -> None:
    assert await store.claim_lock("k", 0.05) is True
    assert await store.claim_lock("k", 0.05) is False
    assert await store.claim_lock("other", 0.05) is True
    await asyncio.sleep(0.08)
    assert await store.claim_lock("k", 0.05) is True
    assert await store.claim_lock("k", 0.05) is False


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
