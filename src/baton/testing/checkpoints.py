"""The `Checkpoints` capability: the latest checkpoint of each session's unfinished run, saved
alone or with the run's commit."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from baton.backends import Store
from baton.backends.base import (
    Checkpoints,
    Sessions,
)
from baton.core.errors import ConflictError
from baton.core.ids import new_id
from baton.core.messages import Message
from baton.testing.kit import (  # baton_capability: the fixture a star import brings
    baton_capability,  # noqa: F401
    capability,
    make_checkpoint,
    new_session,
)


@capability(Checkpoints)
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


@capability(Checkpoints)
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


@capability(Checkpoints)
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


@capability(Checkpoints)
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


@capability(Checkpoints)
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


@capability(Checkpoints)
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


@capability(Checkpoints)
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


@capability(Sessions, Checkpoints)
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


@capability(Sessions, Checkpoints)
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
