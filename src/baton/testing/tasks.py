"""The `Tasks` capability: the tasks of plan-execute-review runs, each saved compare-and-set
on its own version."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from baton.backends import Store, Tasks
from baton.core.errors import ConflictError, StoreError
from baton.core.ids import new_id
from baton.core.tasks import SubTask, Task
from baton.testing.kit import (  # baton_capability: the fixture a star import brings
    baton_capability,  # noqa: F401
    capability,
)


def tasks_of(store: Store) -> Tasks:
    assert isinstance(store, Tasks), f"{type(store).__name__} lacks the Tasks capability"
    return store


def make_task(task_id: str = "t1", **fields: Any) -> Task:
    """A planner's subtask as a new task, with Chinese text in it."""
    return Task.from_subtask(
        SubTask(
            task_id=task_id,
            description=fields.pop("description", "调研某行业近半年的发展趋势"),
            agent_role="executor",
            requires_tool=["web_search"],
            output_format="markdown 表格",
            depends_on=fields.pop("depends_on", []),
        ),
        **fields,
    )


def ids() -> tuple[str, str]:
    return new_id("s_"), new_id("run_")


@capability(Tasks)
async def test_unknown_task_is_none_and_listings_are_empty(store: Store) -> None:
    ts = tasks_of(store)
    sid, run = ids()
    assert await ts.get_task(run, "t1") is None
    assert await ts.list_tasks(session_id=sid) == []
    assert await ts.list_tasks(run_id=run, status="pending") == []


@capability(Tasks)
async def test_a_task_round_trips_with_its_history_and_chinese_text(store: Store) -> None:
    ts = tasks_of(store)
    sid, run = ids()
    task = make_task(depends_on=["t0"])
    task.transition("queued", "依赖 t0 已完成")
    task.transition("dispatching")
    task.transition("processing", "执行者-1 接手")
    task.transition("reviewing", result="| 事件 | 日期 |\n| 发布 | 2026-01 |")
    task.transition("retry", "审核：缺少来源引用", advice="补充来源引用，结论不要情绪化")
    await ts.put_task(sid, run, task, 0)
    assert (task.version, task.session_id, task.run_id) == (1, sid, run)
    got = await ts.get_task(run, "t1")
    assert got is not None
    assert got.model_dump() == task.model_dump()
    assert got.advice == "补充来源引用，结论不要情绪化"
    assert [s.reason for s in got.history][-1] == "审核：缺少来源引用"
    assert got.history[2].attempt == 1 and got.history[-1].at == task.history[-1].at


@capability(Tasks)
async def test_reads_are_copies(store: Store) -> None:
    ts = tasks_of(store)
    sid, run = ids()
    task = make_task()
    await ts.put_task(sid, run, task, 0)
    task.transition("queued")  # changed after the save: the store keeps what was saved
    got = await ts.get_task(run, "t1")
    assert got is not None and got.status == "pending" and got.history == []
    got.transition("queued")
    got.history[0].reason = "changed"
    again = await ts.get_task(run, "t1")
    assert again is not None and again.status == "pending" and again.history == []
    [listed] = await ts.list_tasks(run_id=run)
    listed.transition("cancelled")
    stored = await ts.get_task(run, "t1")
    assert stored is not None and stored.status == "pending"


@capability(Tasks)
async def test_put_is_compare_and_set_on_the_task_version(store: Store) -> None:
    ts = tasks_of(store)
    sid, run = ids()
    await ts.put_task(sid, run, make_task(), 0)
    executor = await ts.get_task(run, "t1")
    reviewer = await ts.get_task(run, "t1")
    assert executor is not None and reviewer is not None
    assert executor.version == reviewer.version == 1

    executor.transition("queued", "executor-1")
    await ts.put_task(sid, run, executor, executor.version)
    assert executor.version == 2
    reviewer.transition("cancelled", "planner dropped it")
    with pytest.raises(ConflictError, match="expected version 1 but the store holds version 2"):
        await ts.put_task(sid, run, reviewer, reviewer.version)
    assert reviewer.version == 1  # unchanged by the refusal
    got = await ts.get_task(run, "t1")
    assert got is not None and (got.status, got.version) == ("queued", 2)
    assert [t.status for t in await ts.list_tasks(run_id=run)] == ["queued"]

    # a second "new" task with the same id is a conflict too
    with pytest.raises(ConflictError, match="holds version 2") as info:
        await ts.put_task(sid, run, make_task(), 0)
    assert info.value.key == f"{run}/t1"
    # and so is an update of a task never saved; nothing is written
    with pytest.raises(ConflictError, match="holds no such task"):
        await ts.put_task(sid, run, make_task("t9"), 3)
    assert await ts.get_task(run, "t9") is None


@capability(Tasks)
async def test_a_task_stays_with_its_session_and_run(store: Store) -> None:
    ts = tasks_of(store)
    sid, run = ids()
    task = make_task()
    await ts.put_task(sid, run, task, 0)
    with pytest.raises(StoreError, match="belongs to run") as info:
        await ts.put_task(sid, new_id("run_"), task, 1)
    assert not isinstance(info.value, ConflictError)
    with pytest.raises(StoreError, match="belongs to session"):
        await ts.put_task(new_id("s_"), run, task, 1)
    stranger = make_task()  # the same (run, task id), from another session
    for version in (0, 1):
        with pytest.raises(StoreError, match="is stored under session") as info:
            await ts.put_task(new_id("s_"), run, stranger, version)
        assert not isinstance(info.value, ConflictError)
    got = await ts.get_task(run, "t1")
    assert got is not None and (got.session_id, got.version) == (sid, 1)


@capability(Tasks)
async def test_list_tasks_filters_and_keeps_the_order_of_first_save(store: Store) -> None:
    ts = tasks_of(store)
    (s1, r1), (s2, r2) = ids(), ids()
    r1b = new_id("run_")
    saved: dict[tuple[str, str], Task] = {}
    for sid, run, tid in [(s1, r1, "t2"), (s1, r1, "t1"), (s1, r1b, "t1"), (s2, r2, "t1")]:
        task = make_task(tid)
        await ts.put_task(sid, run, task, 0)
        saved[run, tid] = task
    t2 = saved[r1, "t2"]
    t2.transition("queued")
    await ts.put_task(s1, r1, t2, t2.version)  # an update keeps its place

    def keys(found: list[Task]) -> list[tuple[str | None, str]]:
        return [(t.run_id, t.task_id) for t in found]

    assert keys(await ts.list_tasks(run_id=r1)) == [(r1, "t2"), (r1, "t1")]
    assert keys(await ts.list_tasks(session_id=s1)) == [(r1, "t2"), (r1, "t1"), (r1b, "t1")]
    assert keys(await ts.list_tasks(session_id=s1, status="pending")) == [(r1, "t1"), (r1b, "t1")]
    assert keys(await ts.list_tasks(run_id=r1, status="queued")) == [(r1, "t2")]
    assert keys(await ts.list_tasks(session_id=s2, run_id=r1)) == []
    everything = keys(await ts.list_tasks())
    assert [k for k in everything if k[0] in (r1, r1b, r2)] == [
        (r1, "t2"),
        (r1, "t1"),
        (r1b, "t1"),
        (r2, "t1"),
    ]
    [other] = await ts.list_tasks(session_id=s2)
    assert (other.session_id, other.run_id, other.version) == (s2, r2, 1)


_writes = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["read", "write"])),
    min_size=1,
    max_size=20,
)


@capability(Tasks)
@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ops=_writes)
async def test_two_writers_in_any_interleaving_never_lose_a_step(
    store: Store, ops: list[tuple[str, str]]
) -> None:
    ts = tasks_of(store)
    sid, run = ids()
    await ts.put_task(sid, run, make_task(), 0)
    copies = {w: await ts.get_task(run, "t1") for w in "ab"}
    stored_version, last_writer = 1, None
    for writer, op in ops:
        mine = copies[writer]
        assert mine is not None
        if op == "read":
            copies[writer] = await ts.get_task(run, "t1")
            continue
        mine.description = f"{writer} 写的第 {mine.version} 版"
        if mine.version == stored_version:
            await ts.put_task(sid, run, mine, mine.version)
            stored_version, last_writer = stored_version + 1, writer
            assert mine.version == stored_version
        else:
            with pytest.raises(ConflictError):
                await ts.put_task(sid, run, mine, mine.version)
    got = await ts.get_task(run, "t1")
    assert got is not None and got.version == stored_version
    if last_writer is not None:
        assert got.description.startswith(last_writer)
