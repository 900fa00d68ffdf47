"""The `Sessions` capability: sessions, their transcripts and events, each run committed in one
compare-and-set step."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from baton.backends import Store
from baton.backends.base import Sessions
from baton.core.errors import ConflictError, StoreError
from baton.core.events import (
    Handoff,
    RunFinished,
)
from baton.core.ids import new_id
from baton.core.messages import Message, ToolCall, Usage
from baton.core.payload import HandoffPayload
from baton.testing.kit import (  # baton_capability: the fixture a star import brings
    baton_capability,  # noqa: F401
    capability,
    make_events,
    make_payload,
    new_session,
)


@capability(Sessions)
async def test_unknown_session_is_none(store: Store) -> None:
    assert await store.get_session("s_missing") is None
    assert await store.get_messages("s_missing") == []
    assert await store.get_events(session_id="s_missing") == []


@capability(Sessions)
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


@capability(Sessions)
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


@capability(Sessions)
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


@capability(Sessions)
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


@capability(Sessions)
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


@capability(Sessions)
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


@capability(Sessions)
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


@capability(Sessions)
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


@capability(Sessions)
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


@capability(Sessions)
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


@capability(Sessions)
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


@capability(Sessions)
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


@capability(Sessions)
async def test_events_are_filed_by_their_own_session(store: Store) -> None:
    sid, other = new_id("s_"), new_id("s_")
    mine = make_events(sid, "tr_x", "run_1")
    theirs = make_events(other, "tr_x", "run_1")[:1]
    await store.commit_run(new_session(sid), [], mine[:2] + theirs + mine[2:])
    assert await store.get_events(session_id=sid) == mine
    assert await store.get_events(session_id=other) == theirs
    assert await store.get_events(trace_id="tr_x") == mine[:2] + theirs + mine[2:]


@capability(Sessions)
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


@capability(Sessions)
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
