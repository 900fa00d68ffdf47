"""Behaviour only the memory backend has: its bound, and checkpoints kept by reference."""

from __future__ import annotations

import time

import pytest

from baton.backends import MemoryStore
from baton.backends.base import Checkpoint, SessionRecord
from baton.core.errors import ConfigError
from baton.core.events import Event, RunStarted
from baton.core.messages import Message
from baton.core.tasks import SubTask, Task


def run_events(session_id: str) -> list[Event]:
    """One event of a run of `session_id`."""
    return [
        RunStarted(trace_id=f"tr_{session_id}", session_id=session_id, run_id="run_1", message="hi")
    ]


async def commit(
    store: MemoryStore, session_id: str, run_id: str | None = None, **kw: float
) -> None:
    """Commit a run of `session_id` (read first, so that the version matches); `run_id`: the
    run that finishes with it (its checkpoint goes)."""
    rec = await store.get_session(session_id) or SessionRecord(session_id)
    for name, value in kw.items():
        setattr(rec, name, value)
    msg = Message(role="user", content=f"hello from {session_id}")
    await store.commit_run(rec, [msg], run_events(session_id), run_id=run_id)


async def kept(store: MemoryStore) -> set[str]:
    """Ids of the sessions the store holds."""
    return {r.session_id for r in await store.list_sessions(limit=1_000_000)}


def pin(session_id: str) -> Checkpoint:
    """A checkpoint: the session has an unfinished run."""
    return Checkpoint(session_id, "run_open", 1, state=object())


def test_shared_is_false_and_defaults_are_bounded() -> None:
    store = MemoryStore()
    assert store.shared is False
    assert store.max_sessions == 10_000
    assert store.max_age_s is None


@pytest.mark.parametrize("kw", [{"max_sessions": 0}, {"max_age_s": 0}, {"max_age_s": -1.0}])
def test_bad_bounds_raise_config_error(kw: dict[str, float]) -> None:
    with pytest.raises(ConfigError, match="MemoryStore"):
        MemoryStore(**kw)  # type: ignore[arg-type]


async def test_bound_evicts_the_least_recently_committed_with_their_history() -> None:
    store = MemoryStore(max_sessions=3)
    for sid in ("s1", "s2", "s3"):
        await commit(store, sid)
    await commit(store, "s1")  # s1 is now the most recent
    await commit(store, "s4")
    assert await kept(store) == {"s1", "s3", "s4"}
    assert await store.get_session("s2") is None
    assert await store.get_messages("s2") == []
    assert await store.get_events(session_id="s2") == []
    assert await store.get_events(trace_id="tr_s2") == []
    # what stays keeps its order
    assert [e.session_id for e in await store.get_events()] == ["s1", "s3", "s1", "s4"]
    assert len(await store.get_messages("s1")) == 2
    # an evicted session starts afresh at version 0
    await commit(store, "s2")
    got = await store.get_session("s2")
    assert got is not None and got.version == 1
    assert len(await store.get_messages("s2")) == 1


async def test_each_commit_over_the_bound_evicts_one_session() -> None:
    store = MemoryStore(max_sessions=100)
    for i in range(100):
        await commit(store, f"s{i}")
    evicted: list[str] = []
    original = store._evict

    def spy(sid: str) -> None:
        evicted.append(sid)
        original(sid)

    store._evict = spy  # type: ignore[method-assign]
    for i in range(100, 150):
        await commit(store, f"s{i}")
    assert evicted == [f"s{i}" for i in range(50)]
    assert len(await kept(store)) == 100


async def test_a_session_with_a_checkpoint_is_never_evicted() -> None:
    store = MemoryStore(max_sessions=4)
    await commit(store, "s0")
    await store.put_checkpoint(pin("s0"))
    for i in range(1, 21):
        await commit(store, f"s{i}")
    assert await kept(store) == {"s0", "s18", "s19", "s20"}
    assert await store.get_checkpoint("s0") is not None
    assert len(await store.get_messages("s0")) == 1
    # once the run finishes (its commit drops the checkpoint), s0 is evictable again
    await commit(store, "s0", run_id="run_open")
    for i in range(21, 25):
        await commit(store, f"s{i}")
    assert await kept(store) == {"s21", "s22", "s23", "s24"}


async def test_unfinished_runs_alone_may_hold_the_store_over_its_bound() -> None:
    store = MemoryStore(max_sessions=2)
    for sid in ("p1", "p2"):
        await commit(store, sid)
        await store.put_checkpoint(pin(sid))
    await commit(store, "s3")  # the session just committed is never evicted either
    assert await kept(store) == {"p1", "p2", "s3"}
    for i in range(4, 12):
        await commit(store, f"s{i}")
        assert {"p1", "p2"} <= await kept(store)
        assert len(await kept(store)) <= 2 + 2 + 1  # the bound, the pinned, a margin
    for sid in ("p1", "p2"):  # the runs finish
        await commit(store, sid, run_id="run_open")
    for i in range(12, 16):
        await commit(store, f"s{i}")
    assert await kept(store) == {"s14", "s15"}


class FakeClock:
    """Stands in for the `time` module inside `baton.backends.memory`."""

    def __init__(self, t: float) -> None:
        self.t = t

    def time(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t


async def test_sessions_older_than_max_age_are_evicted_on_commit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = FakeClock(1000.0)
    monkeypatch.setattr("baton.backends.memory.time", clock)
    store = MemoryStore(max_sessions=None, max_age_s=60)
    await commit(store, "paused", updated_at=clock.t)
    await store.put_checkpoint(pin("paused"))
    await commit(store, "old", updated_at=clock.t)
    clock.t = 1070.0
    await commit(store, "new", updated_at=clock.t)
    assert await kept(store) == {"paused", "new"}  # an unfinished run is kept however old
    assert await store.get_messages("old") == []
    # once its run is dropped, "paused" goes when it is the oldest committed again
    await store.delete_checkpoint("paused", "run_open")
    await commit(store, "newer", updated_at=clock.t)
    assert await kept(store) == {"paused", "new", "newer"}
    clock.t = 1140.0
    await commit(store, "latest", updated_at=clock.t)
    assert await kept(store) == {"latest"}


async def test_a_session_s_own_commit_keeps_it_however_old() -> None:
    store = MemoryStore(max_sessions=1, max_age_s=60)
    await commit(store, "old", updated_at=time.time() - 120)
    assert await kept(store) == {"old"}
    await commit(store, "new")
    assert await kept(store) == {"new"}


async def test_unbounded_store_keeps_everything() -> None:
    store = MemoryStore(max_sessions=None)
    for i in range(50):
        await commit(store, f"s{i}", updated_at=1.0)
    assert len(await kept(store)) == 50


async def test_checkpoints_are_kept_by_reference() -> None:
    store = MemoryStore()
    state = object()  # no to_json: the memory store never serialises the state
    cp = Checkpoint("s1", "run_1", 1, state=state)
    await store.put_checkpoint(cp)
    got = await store.get_checkpoint("s1")
    assert got is cp and got.state is state
    assert await store.list_checkpoints() == [cp]


async def test_tasks_are_evicted_with_their_session() -> None:
    store = MemoryStore(max_sessions=1)
    for sid in ("s1", "s2"):
        task = Task.from_subtask(SubTask(task_id="t1", description="汇总", agent_role="planner"))
        await store.put_task(sid, f"run_{sid}", task, 0)
    await commit(store, "s1")
    await commit(store, "s2")  # over the bound: s1 goes, with its tasks
    assert await kept(store) == {"s2"}
    assert await store.get_task("run_s1", "t1") is None
    assert [t.session_id for t in await store.list_tasks()] == ["s2"]
